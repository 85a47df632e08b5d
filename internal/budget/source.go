package budget

import "strings"

// sourcePrefix starts the name of the budget of a source of maintenance
// that is not a profile. A profile's name cannot hold a colon, so no
// profile's budget shares these slots.
const sourcePrefix = "source:"

// SourceKey names the budget of one source of maintenance that is not a
// profile (the ESX and Kubernikus integrations): its own slots, held from
// before the source creates a node's NodeMaintenance until it is done with
// the node. Only the source knows when that is, so the profiles' sweep
// leaves these slots alone; the source gives them back itself, and its
// staleness rule frees the slot of a holder it no longer has in hand.
func SourceKey(source string) Key {
	return Key{Name: sourcePrefix + source}
}

// IsSource says whether k is a SourceKey.
func (k Key) IsSource() bool {
	return strings.HasPrefix(k.Name, sourcePrefix)
}
