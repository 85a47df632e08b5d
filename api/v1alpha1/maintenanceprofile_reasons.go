package v1alpha1

// Condition types of a MaintenanceProfile. Its Ready is ConditionReady,
// as for a NodeMaintenance.
const (
	// ConditionValid says whether the profile's current generation
	// compiles: every check, trigger and transition is valid.
	ConditionValid = "Valid"
	// ConditionSeedConfigCurrent, on a profile applied from the
	// maintenance.yaml pitstop follows (--seed-config-file), says whether
	// the profile is what the file says now: False when the file's last
	// edit was refused, and the profile keeps the last version applied.
	ConditionSeedConfigCurrent = "SeedConfigCurrent"
)

// Condition reasons of a MaintenanceProfile.
const (
	// ReasonCompiled: Valid is true.
	ReasonCompiled = "Compiled"
	// ReasonInvalid: Valid is false; the message says what does not compile.
	ReasonInvalid = "Invalid"
	// ReasonRunning: Ready is true; the engine runs this generation.
	ReasonRunning = "Running"
	// ReasonRunningPreviousGeneration: this generation does not compile, and
	// the engine runs the last one that did (status.lastValid).
	ReasonRunningPreviousGeneration = "RunningPreviousGeneration"
	// ReasonNotRunning: no generation of the profile has ever compiled.
	ReasonNotRunning = "NotRunning"
	// ReasonReleasing: the profile is deleted and waits for the nodes it
	// has out of operational to leave it; the message names them.
	ReasonReleasing = "Releasing"
	// ReasonApplied: SeedConfigCurrent is true; the profile is as the file
	// says.
	ReasonApplied = "Applied"
	// ReasonRefused: SeedConfigCurrent is false; the file's last edit does
	// not import or the API server refused what it yields, and the
	// message says why, with the file's line.
	ReasonRefused = "Refused"
)

// Event reasons on nodes, from the profile engine.
const (
	// EventChangedState: the node moved to another state of a profile.
	EventChangedState = "ChangedMaintenanceState"
	// EventChangeFailed: a move failed (a trigger or a budget slot); the
	// node stays and the move is retried.
	EventChangeFailed = "ChangeMaintenanceStateFailed"
	// EventInvalidRecord: the node's pitstop.dev/maintenance-data annotation
	// cannot be read; pitstop leaves the node alone until someone fixes or
	// removes it.
	EventInvalidRecord = "InvalidMaintenanceRecord"
	// EventLeavingProfile: the node, out of operational, is no longer
	// selected by a profile; it is being restored.
	EventLeavingProfile = "LeavingProfile"
	// EventLeftProfile: the node has left the profile, restored, its budget
	// slots given back.
	EventLeftProfile = "LeftProfile"
	// EventProfileNotRunnable: a profile selects the node but no generation
	// of it compiles; the node stays where it is.
	EventProfileNotRunnable = "ProfileNotRunnable"
)

// Event reasons on NodeMaintenances, from the profile engine.
const (
	// EventOrphanDeleted: this NodeMaintenance, labelled as a profile's, was
	// deleted because no profile needs it any more.
	EventOrphanDeleted = "OrphanDeleted"
)

// Event reasons on MaintenanceProfiles (and, while the file yields none,
// on pitstop's Namespace), from the maintenance.yaml pitstop follows
// (--seed-config-file).
const (
	// EventSeedConfigApplied: an edit of the file changed the profile, or
	// made it current again after a refused edit.
	EventSeedConfigApplied = "SeedConfigApplied"
	// EventSeedConfigRefused: an edit of the file was refused; nothing
	// changed, and the message names the file, the line and the problem.
	EventSeedConfigRefused = "SeedConfigRefused"
	// EventSeedConfigProfileDeleted: the file no longer lists the profile,
	// so pitstop deleted it.
	EventSeedConfigProfileDeleted = "SeedConfigProfileDeleted"
)
