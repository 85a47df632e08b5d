//go:build linux

package bench

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// apiRequests counts the requests the API server answered, by verb,
// resource, subresource and code (apiserver_request_total), as read from
// its /metrics. The counts are every client's; the benchmark reads them
// for the resources pitstop writes, where its requests are most of them.
type apiRequests map[string]float64

// readAPIRequests reads the API server's request counters.
func readAPIRequests(ctx context.Context, cs kubernetes.Interface) (apiRequests, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	out := apiRequests{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := labelsOf(m)
		out[requestKey(l)+" "+l["code"]] += m.GetCounter().GetValue()
	}
	// The time the API server took to answer, whatever the code: its
	// sum and count, under keys no request key has.
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		key := requestKey(labelsOf(m))
		out[secondsKey+key] += m.GetHistogram().GetSampleSum()
		out[countKey+key] += float64(m.GetHistogram().GetSampleCount())
	}
	return out, nil
}

// secondsKey and countKey prefix the sum and the count of the API
// server's answering times of a request key without its code.
const secondsKey, countKey = "seconds: ", "count: "

// requestKey names a request by verb and resource ("PATCH nodes", "POST
// pods/eviction").
func requestKey(l map[string]string) string {
	key := l["verb"] + " " + l["resource"]
	if l["subresource"] != "" {
		key += "/" + l["subresource"]
	}
	return key
}

// latencies gives the API server's mean time to answer each of keys (a
// verb and a resource: "PATCH nodes") since before: "PATCH nodes 41 ms, …".
func (after apiRequests) latencies(before apiRequests, keys ...string) string {
	parts := make([]string, 0, len(keys))
	for _, key := range keys {
		n := after.since(before, countKey+key)
		if n == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f ms", key, 1000*after.since(before, secondsKey+key)/n))
	}
	return strings.Join(parts, ", ")
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// since gives how many requests of key (as perNode names them, "POST
// pods/eviction 201") were answered since before.
func (after apiRequests) since(before apiRequests, key string) float64 {
	return after[key] - before[key]
}

// perNode gives the requests answered since before, for the resources
// pitstop writes, divided by nodes, largest first: "PATCH nodes 200 4.1,
// PATCH nodes 409 1.2, …".
func (after apiRequests) perNode(before apiRequests, nodes int) string {
	type count struct {
		key string
		n   float64
	}
	var counts []count
	for key, v := range after {
		if !writtenByPitstop(key) {
			continue
		}
		if d := (v - before[key]) / float64(nodes); d >= 0.05 {
			counts = append(counts, count{key, d})
		}
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i].n > counts[j].n })
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%s %.2f", c.key, c.n)
	}
	return strings.Join(parts, ", ")
}

// writtenByPitstop says whether a request key is about what pitstop does
// during a maintenance: its nodes' writes and rereads, its
// NodeMaintenances, its budget slots (created, listed and deleted; the
// simulated kubelets update their own Leases) and the evictions. Events
// are left out: the scheduler and the controller manager write most.
func writtenByPitstop(key string) bool {
	verb, rest, _ := strings.Cut(key, " ")
	resource, _, _ := strings.Cut(rest, " ")
	switch resource {
	case "nodes", "nodemaintenances", "nodemaintenances/status", "maintenanceprofiles/status":
		return verb != "WATCH" && verb != "LIST"
	case "leases":
		return verb == "POST" || verb == "DELETE" || verb == "LIST"
	case "pods/eviction":
		return true
	}
	return false
}
