package testutil

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// GaugeSeries gathers g and returns every gauge by its series, written as
// in the exposition format: the name alone without labels, else the name
// and the labels in name order (`name{a="x",b="y"}`). A collector that
// fails fails the test.
func GaugeSeries(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if m.GetGauge() == nil {
				continue
			}
			series := f.GetName()
			if len(m.GetLabel()) > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				sort.Strings(labels)
				series += "{" + strings.Join(labels, ",") + "}"
			}
			out[series] = m.GetGauge().GetValue()
		}
	}
	return out
}
