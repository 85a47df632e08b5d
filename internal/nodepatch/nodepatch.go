package nodepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrStale says the node changed since it was read in a field the write
// depends on; nothing was written.
var ErrStale = errors.New("the node changed since it was read")

// staleError is ErrStale with the API server's copy of the node that Write
// read to tell a failed test from an invalid node.
type staleError struct{ live *corev1.Node }

func (e *staleError) Error() string        { return ErrStale.Error() }
func (e *staleError) Is(target error) bool { return target == ErrStale }

// LiveNode returns the API server's copy of the node that Write read after
// a stale write, or nil when it read none (a conflict of a write locked on
// the whole node). A caller that goes on from the API server's copy takes
// it from here instead of reading the node again.
func LiveNode(err error) *corev1.Node {
	var stale *staleError
	if errors.As(err, &stale) {
		return stale.live
	}
	return nil
}

// Lock names the fields a change read beyond those it changes: the write
// fails if any of them, or any field it changes, is no longer what the
// writer read.
type Lock struct {
	// Annotations and Labels are keys whose values (or absence) the change
	// depends on.
	Annotations, Labels []string
	// Unschedulable and Taints lock spec.unschedulable and the whole of
	// spec.taints.
	Unschedulable, Taints bool
}

// Write writes want over node, locked on what lock names and on every
// field the change touches. Writes to other fields since node was read do
// not make it fail; a change of a locked field returns ErrStale. A change
// the patch cannot lock field by field (anything but labels, annotations,
// spec.unschedulable and spec.taints, or a node without labels or
// annotations yet) is written with an optimistic lock on the whole node,
// and a conflict is ErrStale too. reader reads the API server's copy when
// the API server refuses the patch, to tell a failed test from an invalid
// node; the stale error then carries that copy (LiveNode). want holds the
// written node on success.
func Write(ctx context.Context, c client.Client, reader client.Reader, node, want *corev1.Node, lock Lock) error {
	ops, ok := lockedOps(node, want, lock)
	if !ok {
		err := c.Patch(ctx, want, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			return ErrStale
		}
		return err
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encoding the patch of node %s: %w", node.Name, err)
	}
	base := want.DeepCopy()
	err = c.Patch(ctx, want, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case apierrors.IsConflict(err):
		return ErrStale
	case apierrors.IsInvalid(err):
		// The API server answers a failed test with 422 (reason Invalid)
		// and, for that code, leaves the patch library's message out of
		// the status (apimachinery's NewGenericServerResponse): only the
		// node itself tells a failed test from a node it found invalid.
		live := &corev1.Node{}
		if getErr := reader.Get(ctx, client.ObjectKeyFromObject(node), live); getErr != nil {
			return errors.Join(err, getErr)
		}
		if changed(ops, live) {
			*want = *base
			return &staleError{live: live}
		}
	}
	return err
}

// op is one operation of a JSON patch (RFC 6902).
type op struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Value is, for a test, the value read; nil (left out) for a field
	// that was absent, which the API server's JSON patch library
	// (gopkg.in/evanphx/json-patch.v4) takes as "absent".
	Value any `json:"value,omitempty"`
}

// lockedOps returns the operations that turn node into want, each field
// tested before it is set, and the fields lock names tested too; ok is
// false when the change cannot be locked field by field.
func lockedOps(node, want *corev1.Node, lock Lock) ([]op, bool) {
	if node.Labels == nil || node.Annotations == nil {
		return nil, false
	}
	rest := node.DeepCopy()
	rest.Labels, rest.Annotations = want.Labels, want.Annotations
	rest.Spec.Unschedulable, rest.Spec.Taints = want.Spec.Unschedulable, want.Spec.Taints
	if !equality.Semantic.DeepEqual(rest, want) {
		return nil, false
	}
	var ops []op
	ops = mapOps(ops, "/metadata/annotations/", node.Annotations, want.Annotations, lock.Annotations)
	ops = mapOps(ops, "/metadata/labels/", node.Labels, want.Labels, lock.Labels)
	if lock.Unschedulable || node.Spec.Unschedulable != want.Spec.Unschedulable {
		var was, is any
		if node.Spec.Unschedulable {
			was = true
		}
		if want.Spec.Unschedulable {
			is = true
		}
		ops = fieldOps(ops, "/spec/unschedulable", was, is)
	}
	if lock.Taints || !equality.Semantic.DeepEqual(node.Spec.Taints, want.Spec.Taints) {
		var was, is any
		if len(node.Spec.Taints) > 0 {
			was = node.Spec.Taints
		}
		if len(want.Spec.Taints) > 0 {
			is = want.Spec.Taints
		}
		ops = fieldOps(ops, "/spec/taints", was, is)
	}
	return ops, true
}

// mapOps appends, in key order, a test and a set for each key whose value
// differs between from and to, and a test for each key of locked.
func mapOps(ops []op, prefix string, from, to map[string]string, locked []string) []op {
	keys := map[string]bool{}
	for _, k := range locked {
		keys[k] = true
	}
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
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		old, had := from[k]
		now, has := to[k]
		var was, is any
		if had {
			was = old
		}
		if has {
			is = now
		}
		ops = fieldOps(ops, prefix+escape(k), was, is)
	}
	return ops
}

// fieldOps appends a test of the value read (was; nil for an absent
// field) and, if it changes, the operation that sets is (nil: removes it).
func fieldOps(ops []op, path string, was, is any) []op {
	ops = append(ops, op{Op: "test", Path: path, Value: was})
	switch {
	case is != nil && (was == nil || !equality.Semantic.DeepEqual(was, is)):
		ops = append(ops, op{Op: "add", Path: path, Value: is})
	case was != nil && is == nil:
		ops = append(ops, op{Op: "remove", Path: path})
	}
	return ops
}

// changed says whether a test of ops no longer holds for live.
func changed(ops []op, live *corev1.Node) bool {
	for _, o := range ops {
		if o.Op != "test" {
			continue
		}
		now, present := valueAt(live, o.Path)
		if present != (o.Value != nil) || present && !equality.Semantic.DeepEqual(now, o.Value) {
			return true
		}
	}
	return false
}

// valueAt reads the field a test's path names, as lockedOps represents it.
func valueAt(node *corev1.Node, path string) (any, bool) {
	switch {
	case path == "/spec/unschedulable":
		return true, node.Spec.Unschedulable
	case path == "/spec/taints":
		return node.Spec.Taints, len(node.Spec.Taints) > 0
	case strings.HasPrefix(path, "/metadata/annotations/"):
		v, ok := node.Annotations[unescape(strings.TrimPrefix(path, "/metadata/annotations/"))]
		return v, ok
	case strings.HasPrefix(path, "/metadata/labels/"):
		v, ok := node.Labels[unescape(strings.TrimPrefix(path, "/metadata/labels/"))]
		return v, ok
	}
	return nil, false
}

// escape escapes a map key for a JSON pointer (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func unescape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
}

// Meta merges keys into the node's metadata.labels or
// metadata.annotations (field); a nil value removes its key. It touches
// nothing else, so it needs no fresh copy of the node.
func Meta(ctx context.Context, c client.Client, node *corev1.Node, field string, keys map[string]any) error {
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{field: keys}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, node, client.RawPatch(types.MergePatchType, raw))
}
