package check

import (
	"testing"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestClusterSemver(t *testing.T) {
	const key = "example.com/os-version"
	cl := cluster(
		node("old", key, "1.2.3"),
		node("v-prefixed", key, "v1.3.0"),
		node("rc", key, "1.4.0-rc.1"),
		node("newest-in-os", key, "1.3.1"),
		node("unlabelled"),
		node("garbage", key, "latest"),
		node("short", key, "1.9"),
	).with("os", required, "old", "v-prefixed", "newest-in-os", "unlabelled", "garbage", "short")
	semver := func(profileScoped bool) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{ClusterSemver: &pitstopv1alpha1.ClusterSemverCheck{Key: key, ProfileScoped: profileScoped}}
	}
	on := func(name string) Context {
		return Context{Node: cl.nodeOf(name), Profile: "os", State: required, Cluster: cl, Now: noon}
	}
	runCases(t, map[string]evalCase{
		"passes for a node older than the newest in the cluster": {
			inst: semver(false), ctx: on("old"),
			want: Result{Passed: true, Reason: "label example.com/os-version=1.2.3 is older than 1.4.0-rc.1 on node rc"},
		},
		"fails for the newest node": {
			inst: semver(false), ctx: on("rc"),
			want: Result{Reason: "label example.com/os-version=1.4.0-rc.1 is not older than the newest, 1.3.1 on node newest-in-os"},
		},
		"reads a leading v": {
			inst: semver(true), ctx: on("v-prefixed"),
			want: Result{Passed: true, Reason: "label example.com/os-version=v1.3.0 is older than 1.3.1 on node newest-in-os"},
		},
		"compares only with the profile's nodes when profile scoped": {
			inst: semver(true), ctx: on("newest-in-os"),
			want: Result{Reason: "label example.com/os-version=1.3.1 is not older than the newest, 1.3.0 on node v-prefixed"},
		},
		"fails for a node without the label": {
			inst: semver(false), ctx: on("unlabelled"),
			want: Result{Reason: "node has no label example.com/os-version to compare"},
		},
		"fails for a node whose label is not a semantic version": {
			inst: semver(false), ctx: on("short"),
			want: Result{Reason: `label example.com/os-version=1.9 is not a semantic version: illegal version string "1.9"`},
		},
		"fails when no other node has a version": {
			inst: semver(false),
			ctx:  Context{Node: cl.nodeOf("old"), Cluster: cluster(node("old", key, "1.2.3"), node("garbage", key, "latest")), Now: noon},
			want: Result{Reason: "label example.com/os-version=1.2.3: no other node has a version to compare with"},
		},
	})
}
