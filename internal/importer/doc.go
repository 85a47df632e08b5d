// Package importer converts the configuration file of
// sapcc/maintenance-controller (its maintenance.yaml) into
// MaintenanceProfiles: one per seed profile, holding the check and trigger
// instances that profile uses, with the seed's state machine mapped onto
// pitstop's. What pitstop cannot express is an error naming the line of the
// input, never dropped quietly; what the import changes on purpose
// (secrets moved into a Secret; Lease names; polling intervals dropped;
// renamed instances) is reported as a Note. Every profile it returns has been compiled by
// pitstop's own engine and plugin constructors, so an import never yields a
// profile pitstop would refuse.
//
// It is pure: it reads bytes and an injected environment lookup, and
// returns typed objects and notes. It must not read files, print, or talk
// to a cluster or a Prometheus; cmd/pitstop's import command does the I/O.
package importer
