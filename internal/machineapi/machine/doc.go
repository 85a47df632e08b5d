// Package machine is the Machine controller: it creates each Machine's
// instance through the provider its providerSpec names, keeps the
// Machine's phase, providerID, addresses and conditions, and on deletion
// runs the Machine API's sequence — preDrain hooks, a drain through a
// NodeMaintenance (never a drain of its own), preTerminate hooks, the
// instance's deletion, the Node's — before it lets the Machine go. At most
// one control-plane machine drains at a time. Linking a Machine to its Node
// is nodelink's job, replacing it the MachineSet's; this package does
// neither.
package machine
