//go:build linux

package bench

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

var starts = flag.Int("starts", 5, "how many times each local-cluster size is started; the median is reported")

// BenchmarkLocalClusterStart measures how long Start takes, from nothing to
// a healthy API server with every node Ready (and, for the demo size, the
// sample workloads Running), with the binaries already built. It reports
// the median of -starts runs as s/start.
func BenchmarkLocalClusterStart(b *testing.B) {
	for _, size := range []struct {
		name          string
		controlPlanes int
		workers       int
		workloads     bool
	}{
		{"test-5-workers", 0, 5, false},
		{"demo-20-nodes-with-workloads", 3, 17, true},
		{"fleet-100-nodes", 3, 97, false},
	} {
		b.Run(size.name, func(b *testing.B) {
			opts := localcluster.DefaultOptions()
			opts.ControlPlaneNodes = size.controlPlanes
			opts.Workers = size.workers
			opts.SampleWorkloads = size.workloads
			var runs []time.Duration
			for range b.N {
				for range *starts {
					began := time.Now()
					c, err := localcluster.Start(b.Context(), opts)
					took := time.Since(began)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Stop(); err != nil {
						b.Fatal(err)
					}
					runs = append(runs, took)
				}
			}
			b.ReportMetric(median(runs).Seconds(), "s/start")
			b.ReportMetric(0, "ns/op") // the wall time of the loop says nothing
			b.Logf("runs: %s", formatRuns(runs))
		})
	}
}

func median(runs []time.Duration) time.Duration {
	s := slices.Clone(runs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func formatRuns(runs []time.Duration) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%.2fs", r.Seconds())
	}
	return strings.Join(parts, " ")
}
