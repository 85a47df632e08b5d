package check

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// clusterSemver passes when the node's version label (a semantic version,
// "v" prefix allowed, "1.31.2-rc.1") is lower than the highest among the
// other nodes of the cluster, or of the profile when profileScoped: the
// node lags behind and should be updated. Other nodes without the label or
// with a value that does not parse are ignored; the node itself without a
// usable value fails, since it cannot be compared.
type clusterSemver struct {
	key           string
	profileScoped bool
}

func newClusterSemver(cfg *pitstopv1alpha1.ClusterSemverCheck) (Check, error) {
	if cfg.Key == "" {
		return nil, errors.New("key: must not be empty")
	}
	return &clusterSemver{key: cfg.Key, profileScoped: cfg.ProfileScoped}, nil
}

// Evaluate implements Check.
func (s *clusterSemver) Evaluate(_ context.Context, c Context) (Result, error) {
	raw, ok := c.Node.Labels[s.key]
	if !ok {
		return Result{Reason: fmt.Sprintf("node has no label %s to compare", s.key)}, nil
	}
	own, err := version.ParseSemantic(raw)
	if err != nil {
		return Result{Reason: fmt.Sprintf("label %s=%s is not a semantic version: %v", s.key, raw, err)}, nil
	}
	nodes := scopedNodes(c.Cluster, c.Profile, s.profileScoped)
	var newest *version.Version
	var newestOn string
	for _, n := range nodes {
		if n.Name == c.Node.Name {
			continue
		}
		if v := s.versionOf(n); v != nil && (newest == nil || v.GreaterThan(newest)) {
			newest, newestOn = v, n.Name
		}
	}
	switch {
	case newest == nil:
		return Result{Reason: fmt.Sprintf("label %s=%s: no other node has a version to compare with", s.key, raw)}, nil
	case own.LessThan(newest):
		return Result{Passed: true, Reason: fmt.Sprintf("label %s=%s is older than %s on node %s", s.key, raw, newest, newestOn)}, nil
	default:
		return Result{Reason: fmt.Sprintf("label %s=%s is not older than the newest, %s on node %s", s.key, raw, newest, newestOn)}, nil
	}
}

func (s *clusterSemver) versionOf(n *corev1.Node) *version.Version {
	raw, ok := n.Labels[s.key]
	if !ok {
		return nil
	}
	v, err := version.ParseSemantic(raw)
	if err != nil {
		return nil
	}
	return v
}
