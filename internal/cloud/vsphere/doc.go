// Package vsphere is pitstop's one vSphere client (govmomi): a session
// with one vCenter, logged in with credentials that go into the login
// call only, which reads the ESX hosts' maintenance state and triggered
// alarms and the virtual machines registered on them, and shuts down,
// powers off and powers on a VM. The ESX integration
// (internal/controller/esx) uses it.
package vsphere
