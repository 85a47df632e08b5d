package clusterapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// A workload API server is run by whoever owns the cluster, and may lie:
// these bound what one connection to it may make the leader hold. A
// connection past a bound is closed with the reason, reported on the
// cluster's Machines, and made again after failedRetry.
const (
	// maxNodes: Kubernetes supports clusters of up to 5,000 nodes.
	maxNodes = 10000
	// maxHeldBytes bounds what the connection keeps of its Nodes: the
	// names, labels and annotations the bridge reads (see keptLabels),
	// which for a legitimate Node are well under 4 KiB.
	maxHeldBytes = 32 << 20
	// maxResponseBytes bounds one response (a page of a list, a patched
	// Node) and one JSON watch event, as read off the wire before it is
	// decoded. Protobuf watch events are bounded by client-go (16 MiB).
	maxResponseBytes = 32 << 20
	// listPageSize: lists are asked for in pages, which keeps a
	// legitimate response far under maxResponseBytes.
	listPageSize = 500
)

// keptLabels and keptAnnotations are all the bridge reads of a workload
// Node; a connection keeps nothing else.
var (
	keptLabels = []string{
		pitstopv1alpha1.LabelState, pitstopv1alpha1.LabelSeedState,
		LabelMachineDeleted, LabelApproveDeletion, LabelMachineMaintenance, LabelApproveMaintenance,
	}
	keptAnnotations = []string{
		clusterv1.MachineAnnotation, clusterv1.ClusterNamespaceAnnotation,
		pitstopv1alpha1.AnnotationMaintenanceData, pitstopv1alpha1.AnnotationSeedData,
	}
)

// errTooLarge: a response passed maxResponseBytes.
type errTooLarge struct{ url string }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("a response of the workload API server (%s) passed %d MiB: pitstop read no more of it", e.url, maxResponseBytes>>20)
}

// limitResponses makes every response read through cfg fail past
// maxResponseBytes (for a JSON watch, per event: the API server ends each
// one with a newline), calling exceeded (when not nil) first.
func limitResponses(cfg *rest.Config, exceeded func(error)) {
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &limitedTransport{next: next, exceeded: exceeded}
	})
}

type limitedTransport struct {
	next     http.RoundTripper
	exceeded func(error)
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	isWatch := req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"
	jsonBody := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
	if isWatch && !jsonBody {
		// Protobuf frames are length-prefixed and client-go reads at
		// most 16 MiB of one; anything else fails to decode.
		return resp, nil
	}
	resp.Body = &limitedBody{body: resp.Body, perLine: isWatch, url: req.URL.Path, exceeded: t.exceeded}
	return resp, nil
}

type limitedBody struct {
	body     io.ReadCloser
	perLine  bool
	url      string
	exceeded func(error)
	// n is what was read (since the last newline, perLine).
	n int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.n >= maxResponseBytes {
		err := errTooLarge{url: b.url}
		if b.exceeded != nil {
			b.exceeded(err)
		}
		return 0, err
	}
	if len(p) > maxResponseBytes-b.n {
		p = p[:maxResponseBytes-b.n]
	}
	n, err := b.body.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); b.perLine && i >= 0 {
		b.n = n - i - 1
	} else {
		b.n += n
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

// boundedNodes lists and watches a workload cluster's Nodes as metadata
// only, keeps of each only what the bridge reads (strip), and counts what
// it keeps: past maxNodes or maxHeldBytes it calls exceeded and stops.
// Its lists are paged; the streaming "watch list" is not used, so that
// every object passes through List or Watch here before it is cached.
type boundedNodes struct {
	client   metadata.ResourceInterface
	exceeded func(error)

	mu sync.Mutex
	// held is the size kept of each Node, by name; total their sum.
	held  map[string]int
	total int
}

var _ cache.ListerWatcherWithContext = &boundedNodes{}

// IsWatchListSemanticsUnSupported turns client-go's watch list off for
// this lister: objects must come through ListWithContext's pages.
func (b *boundedNodes) IsWatchListSemanticsUnSupported() bool { return true }

// List and Watch serve informers that predate contexts.
func (b *boundedNodes) List(opts metav1.ListOptions) (runtime.Object, error) {
	return b.ListWithContext(context.Background(), opts)
}

func (b *boundedNodes) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return b.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists one page. The first page of a list starts the
// count again: the informer replaces its cache with the whole list.
func (b *boundedNodes) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit == 0 || opts.Limit > listPageSize {
		opts.Limit = listPageSize
	}
	list, err := b.client.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if opts.Continue == "" {
		b.held, b.total = map[string]int{}, 0
	}
	b.mu.Unlock()
	for i := range list.Items {
		list.Items[i] = *strip(&list.Items[i])
		if err := b.keep(&list.Items[i]); err != nil {
			b.exceeded(err)
			return nil, err
		}
	}
	return list, nil
}

// WatchWithContext watches from where the list ended, passing on each
// event's stripped Node and stopping past a bound.
func (b *boundedNodes) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := b.client.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		o, ok := e.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			return e, true
		}
		e.Object = strip(o)
		switch e.Type {
		case watch.Added, watch.Modified:
			if err := b.keep(e.Object.(*metav1.PartialObjectMetadata)); err != nil {
				b.exceeded(err)
				w.Stop()
				return e, false
			}
		case watch.Deleted:
			b.forget(o.Name)
		}
		return e, true
	}), nil
}

// keep counts a Node the cache will hold.
func (b *boundedNodes) keep(o *metav1.PartialObjectMetadata) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	size := sizeOf(o)
	b.total += size - b.held[o.Name]
	b.held[o.Name] = size
	switch {
	case len(b.held) > maxNodes:
		return fmt.Errorf("the workload API server sent more than %d Nodes", maxNodes)
	case b.total > maxHeldBytes:
		return fmt.Errorf("the workload API server's Nodes carry more than %d MiB of the labels and annotations pitstop reads", maxHeldBytes>>20)
	}
	return nil
}

func (b *boundedNodes) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= b.held[name]
	delete(b.held, name)
}

// strip keeps of a Node what the bridge reads: its identity, its
// resourceVersion (which the informer resumes from) and the labels and
// annotations of keptLabels and keptAnnotations.
func strip(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	s := &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion, DeletionTimestamp: o.DeletionTimestamp,
	}}
	s.Labels = keep(o.Labels, keptLabels)
	s.Annotations = keep(o.Annotations, keptAnnotations)
	return s
}

func keep(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// sizeOf is about what a stripped Node holds, in bytes.
func sizeOf(o *metav1.PartialObjectMetadata) int {
	n := len(o.Name) + len(o.UID) + len(o.ResourceVersion) + 64
	for k, v := range o.Labels {
		n += len(k) + len(v)
	}
	for k, v := range o.Annotations {
		n += len(k) + len(v)
	}
	return n
}
