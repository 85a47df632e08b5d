package profile

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/engine"
)

// writeNode writes the engine's changes to a node: its record, its state
// label and what the transitions' triggers changed. It reports errStale
// when the node changed since it was read in a way the write depends on.
//
// The write is locked on the fields it depends on, not on the whole node:
// a JSON patch tests the record and every label and annotation it changes
// for the values read, then sets them. Writes to other fields in between
// (the NodeMaintenance controller's cordon, the kubelet's status, another
// controller's labels) no longer make it fail and evaluate the node again;
// another writer of the record (a second manager during a leader handover)
// still does. A change the patch cannot lock field by field (finalizers, or
// a node without labels or annotations yet) is written with an optimistic
// lock on the whole node.
func (r *Reconciler) writeNode(ctx context.Context, node, want *corev1.Node) error {
	patch, ok := fieldLockedPatch(node, want)
	if !ok {
		err := r.client.Patch(ctx, want, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			return errStale
		}
		return err
	}
	base := want.DeepCopy()
	err := r.client.Patch(ctx, want, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case apierrors.IsConflict(err):
		return errStale
	case apierrors.IsInvalid(err):
		live := &corev1.Node{}
		if getErr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(node), live); getErr != nil {
			return errors.Join(err, getErr)
		}
		if lockedFieldsChanged(node, base, live) {
			return errStale
		}
	}
	return err
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string  `json:"op"`
	Path  string  `json:"path"`
	Value *string `json:"value,omitempty"`
}

// fieldLockedPatch returns the JSON patch that turns node's labels and
// annotations into want's, each change preceded by a test of the value
// read (null for a key that was absent, which the API server's JSON patch
// takes as "absent"), and the record's value tested even if it does not
// change. ok is false when want differs from node anywhere else, or node
// lacks the labels or annotations map the patch would write into.
func fieldLockedPatch(node, want *corev1.Node) ([]byte, bool) {
	if node.Labels == nil || node.Annotations == nil {
		return nil, false
	}
	rest := node.DeepCopy()
	rest.Labels, rest.Annotations = want.Labels, want.Annotations
	if !equality.Semantic.DeepEqual(rest, want) {
		return nil, false
	}
	var ops []jsonPatchOp
	ops = appendMapChanges(ops, "/metadata/annotations/", node.Annotations, want.Annotations, engine.AnnotationData)
	ops = appendMapChanges(ops, "/metadata/labels/", node.Labels, want.Labels, "")
	patch, err := json.Marshal(ops)
	return patch, err == nil
}

// appendMapChanges appends, for each key whose value differs between from
// and to (and for always), a test of from's value and the operation that
// sets to's, in key order.
func appendMapChanges(ops []jsonPatchOp, prefix string, from, to map[string]string, always string) []jsonPatchOp {
	keys := map[string]bool{}
	for k, v := range from {
		if w, ok := to[k]; !ok || w != v {
			keys[k] = true
		}
	}
	for k, v := range to {
		if w, ok := from[k]; !ok || w != v {
			keys[k] = true
		}
	}
	if always != "" {
		keys[always] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		path := prefix + escapePointer(k)
		old, had := from[k]
		now, has := to[k]
		test := jsonPatchOp{Op: "test", Path: path}
		if had {
			test.Value = &old
		}
		ops = append(ops, test)
		switch {
		case has && (!had || old != now):
			ops = append(ops, jsonPatchOp{Op: "add", Path: path, Value: &now})
		case had && !has:
			ops = append(ops, jsonPatchOp{Op: "remove", Path: path})
		}
	}
	return ops
}

// escapePointer escapes a map key for a JSON pointer (RFC 6901).
func escapePointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// lockedFieldsChanged says whether a field-locked patch from node to want
// was refused because a field it tests changed: whether the API server's
// copy of the node (live) differs from node in one of them. The API server
// answers a failed test with 422 (reason Invalid) and, for that code, leaves
// the patch library's message out of the status (apimachinery's
// NewGenericServerResponse), so only the node itself tells a failed test
// from a node the API server found invalid.
func lockedFieldsChanged(node, want, live *corev1.Node) bool {
	differs := func(from, to, now map[string]string, always string) bool {
		for _, op := range appendMapChanges(nil, "", from, to, always) {
			if op.Op != "test" {
				continue
			}
			key := strings.ReplaceAll(strings.ReplaceAll(op.Path, "~1", "/"), "~0", "~")
			was, had := from[key]
			is, has := now[key]
			if had != has || was != is {
				return true
			}
		}
		return false
	}
	return differs(node.Annotations, want.Annotations, live.Annotations, engine.AnnotationData) ||
		differs(node.Labels, want.Labels, live.Labels, "")
}
