package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// assets are the pages, the script and the style sheet: plain files, no
// build step.
//
//go:embed static
var assets embed.FS

// Handler serves the pages under / and the JSON API under /api/v1/.
type Handler struct {
	reader    client.Reader
	events    client.Reader
	evaluator *fleet.Evaluator
	mux       *http.ServeMux
	// clusters lists the Cluster API bridge's workload clusters; nil
	// without --cluster-api.
	clusters func(context.Context) ([]clusterapi.ClusterView, error)
	// labels are the node labels /api/v1/info shows.
	labels []string
}

// Clusters is the answer of GET /api/v1/clusters.
type Clusters struct {
	Generated time.Time                `json:"generated"`
	Clusters  []clusterapi.ClusterView `json:"clusters"`
}

// Fleet is the answer of GET /api/v1/fleet.
type Fleet struct {
	Generated time.Time `json:"generated"`
	*fleet.Overview
	// Maintenances are the NodeMaintenances that exist: drains under way,
	// done, or restoring their node; by node.
	Maintenances []NodeMaintenance `json:"maintenances"`
	// ClusterAPI: the Cluster API bridge runs; /clusters shows its
	// workload clusters.
	ClusterAPI bool `json:"clusterAPI,omitempty"`
}

// NodeMaintenance is a NodeMaintenance with its node.
type NodeMaintenance struct {
	Node string `json:"node"`
	explain.Maintenance
}

// apiError is the body of every API answer that is not a success.
type apiError struct {
	Error string `json:"error"`
}

// NewHandler reads objects from reader (the manager's cache), Events from
// events (the API server), and each node's evaluations from evaluator:
// in the manager, the profile engine's last decisions
// (fleet.ServedEvaluator), so that no request runs a check.
func NewHandler(reader, events client.Reader, evaluator *fleet.Evaluator) *Handler {
	h := &Handler{reader: reader, events: events, evaluator: evaluator, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /api/v1/fleet", h.fleet)
	h.mux.HandleFunc("GET /api/v1/nodes/{name}", h.node)
	h.mux.HandleFunc("GET /api/v1/profiles/{name}", h.profile)
	h.mux.HandleFunc("GET /api/v1/clusters", h.clusterList)
	h.mux.HandleFunc("GET /api/v1/info", h.info)
	h.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{fmt.Sprintf("no API at %s: the API is GET /api/v1/fleet, /api/v1/nodes/NAME, /api/v1/profiles/NAME and /api/v1/clusters", r.URL.Path)})
	})
	h.mux.Handle("GET /static/", http.FileServerFS(assets))
	h.mux.HandleFunc("GET /{$}", page("static/fleet.html"))
	h.mux.HandleFunc("GET /nodes/{name}", page("static/node.html"))
	h.mux.HandleFunc("GET /clusters", page("static/clusters.html"))
	return h
}

// ServeClusters shows the Cluster API bridge's workload clusters, listed
// by view.
func (h *Handler) ServeClusters(view func(context.Context) ([]clusterapi.ClusterView, error)) {
	h.clusters = view
}

func (h *Handler) clusterList(w http.ResponseWriter, r *http.Request) {
	if h.clusters == nil {
		writeJSON(w, http.StatusNotFound, apiError{"the Cluster API bridge is not running (pitstop run --cluster-api)"})
		return
	}
	now := time.Now()
	list, err := h.clusters(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Clusters{Generated: now, Clusters: list})
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The pages load only their own script and style sheet, and the script
	// only talks to this server.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

func page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, assets, name)
	}
}

func (h *Handler) fleet(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	view, err := h.evaluator.Overview(r.Context(), now)
	if err != nil {
		writeError(w, err)
		return
	}
	nms := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := h.reader.List(r.Context(), nms); err != nil {
		writeError(w, err)
		return
	}
	f := Fleet{Generated: now, Overview: view, Maintenances: make([]NodeMaintenance, 0, len(nms.Items)), ClusterAPI: h.clusters != nil}
	for i := range nms.Items {
		f.Maintenances = append(f.Maintenances, NodeMaintenance{Node: nms.Items[i].Spec.NodeName, Maintenance: explain.MaintenanceOf(&nms.Items[i])})
	}
	sort.Slice(f.Maintenances, func(i, j int) bool {
		a, b := f.Maintenances[i], f.Maintenances[j]
		return a.Node < b.Node || (a.Node == b.Node && a.Name < b.Name)
	})
	writeJSON(w, http.StatusOK, f)
}

func (h *Handler) node(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	report, err := explain.Node(r.Context(), h.reader, h.events, h.evaluator, name, time.Now())
	writeReport(w, "node "+name, report, err)
}

func (h *Handler) profile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	report, err := explain.Profile(r.Context(), h.reader, h.evaluator, name, time.Now())
	writeReport(w, "MaintenanceProfile "+name, report, err)
}

// writeReport answers with the report of what, a 404 naming it when it
// does not exist, or the error that kept it from being read.
func writeReport(w http.ResponseWriter, what string, report any, err error) {
	switch {
	case apierrors.IsNotFound(err):
		writeJSON(w, http.StatusNotFound, apiError{what + " not found"})
	case err != nil:
		writeError(w, err)
	default:
		writeJSON(w, http.StatusOK, report)
	}
}

// writeError answers a failed read: the cluster could not be read, which
// the client can only retry.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusServiceUnavailable, apiError{"reading the cluster: " + err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "a && b" stays readable; nothing here is parsed as HTML
	// The status is sent: an encoding error can only be a client gone.
	_ = enc.Encode(v)
}
