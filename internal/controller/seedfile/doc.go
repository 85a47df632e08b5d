// Package seedfile follows the maintenance-controller's maintenance.yaml
// (--seed-config-file), so that a team can switch to pitstop and keep
// editing that file while it moves to MaintenanceProfiles: on the leader,
// it reads the file every few seconds, imports each edit as
// `pitstop import` does, and applies what the import yields with
// server-side apply under its own field manager, each profile labelled
// pitstop.dev/managed-by=seed-file. A profile it made that an edit no
// longer lists is deleted. An edit that does not import, or that the API
// server refuses (tried first as a dry run), changes nothing: the last
// good profiles keep running, and the refusal is reported as Events and
// as the SeedConfigCurrent condition of each profile the file manages.
//
// It must not touch a profile, or a notifications Secret, without its
// label: those are people's, and an edit that would write over one is
// refused. It owns only its condition type in a profile's status, applied
// as a list-map entry so that the profile controller's conditions stay.
package seedfile

// The seed file applies and deletes the profiles it makes, writes its
// condition in their status, and keeps the notifications' Secret
// (importer.DefaultSecretName) in pitstop's namespace; it may create a
// Secret there, but read, change and delete only that one. Its Events
// regard profiles, or pitstop's Namespace: cluster-scoped objects, whose
// Events live in the default namespace (internal/manager).
//
// +kubebuilder:rbac:groups=pitstop.dev,resources=maintenanceprofiles,verbs=list;create;patch;delete
// +kubebuilder:rbac:groups=pitstop.dev,resources=maintenanceprofiles/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=pitstop-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;patch;delete,resourceNames=pitstop-notifications,namespace=pitstop-system
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch,namespace=default
