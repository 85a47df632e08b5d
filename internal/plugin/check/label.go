package check

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// keyValueScope says where a keyValue check looks.
type keyValueScope int

const (
	// labelOnNode is hasLabel: a label of the node under evaluation.
	labelOnNode keyValueScope = iota
	// annotationOnNode is hasAnnotation: an annotation of that node.
	annotationOnNode
	// labelOnAnyNode is anyLabel: a label of any node in the cluster.
	labelOnAnyNode
)

// keyValue is hasLabel, hasAnnotation and anyLabel: a key is present, with
// the value when one is configured.
type keyValue struct {
	key   string
	value *string
	scope keyValueScope
}

func newKeyValue(cfg *pitstopv1alpha1.KeyValueCheck, scope keyValueScope) (Check, error) {
	if cfg.Key == "" {
		return nil, errors.New("key: must not be empty")
	}
	return &keyValue{key: cfg.Key, value: cfg.Value, scope: scope}, nil
}

// Evaluate implements Check.
func (k *keyValue) Evaluate(_ context.Context, c Context) (Result, error) {
	switch k.scope {
	case labelOnNode:
		return k.onMap("label", c.Node.Labels), nil
	case annotationOnNode:
		return k.onMap("annotation", c.Node.Annotations), nil
	default:
		return k.onAnyNode(c.Cluster.Nodes()), nil
	}
}

func (k *keyValue) onMap(kind string, m map[string]string) Result {
	got, ok := m[k.key]
	switch {
	case !ok:
		return Result{Reason: fmt.Sprintf("%s %s is not set", kind, k.key)}
	case k.value != nil && got != *k.value:
		return Result{Reason: fmt.Sprintf("%s %s is %q, want %q", kind, k.key, got, *k.value)}
	default:
		return Result{Passed: true, Reason: fmt.Sprintf("%s %s is %q", kind, k.key, got)}
	}
}

func (k *keyValue) onAnyNode(nodes []*corev1.Node) Result {
	for i := range nodes {
		if got, ok := nodes[i].Labels[k.key]; ok && (k.value == nil || got == *k.value) {
			return Result{Passed: true, Reason: fmt.Sprintf("node %s has label %s", nodes[i].Name, k.selector())}
		}
	}
	return Result{Reason: fmt.Sprintf("no node has label %s", k.selector())}
}

// selector writes the label as a label selector would: "key" or "key=value".
func (k *keyValue) selector() string {
	if k.value == nil {
		return k.key
	}
	return k.key + "=" + *k.value
}
