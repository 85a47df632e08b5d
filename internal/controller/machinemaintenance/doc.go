// Package machinemaintenance follows the events cloud providers schedule
// for the cluster's instances (retirements, reboots, system maintenance)
// and carries out what profiles decide about them.
//
// The Poller reads the provider's scheduled events for every instance that
// backs a Machine or a Node, every interval, in as few calls as the
// provider allows, and keeps one MachineMaintenance per event: created when
// the event appears, ended (Completed, Canceled, Missed) when the provider
// no longer lists it. An error is reported on the objects it leaves
// unsynced and retried; it never ends an object.
//
// The Reconciler puts each open event on its node as a signal the profile
// engine understands (the pitstop.dev/scheduled-event label, the
// not-before and start-by annotations the deadline check reads, a
// ScheduledEvent condition), computes the latest safe start, raises
// DeadlineAtRisk when nothing will act in time, and runs the action a
// profile's replaceMachine or rebootInstance trigger asked for, one
// step at a time, each step recorded in the object's status so that a
// restart resumes it. Finished objects are removed after a retention
// period. One decision engine: profiles decide when, this package does.
//
// A surge ends with its MachineSet at its size and at most one Machine
// removed for it, whatever happens meanwhile (surge.go): an old Machine
// removed by someone else leaves the new one in its place, and a new
// Machine not Ready in time, an old one whose links stop agreeing, or the
// object's deletion (held by a finalizer until then) has the new Machine
// marked and removed as the set shrinks back.
//
// It never lets what a node writes pick what it deletes or reboots: an
// instance reaches a Node through the Machine whose instance it is and
// that Machine's status.nodeRef, a Machine is re-read from the API server
// and checked against its node before it is deleted, marked or rebooted,
// and a node without a Machine is taken at its spec.providerID only when
// the provider's own record of the instance names the node. When these
// links disagree, the action fails and says which (target.go).
package machinemaintenance
