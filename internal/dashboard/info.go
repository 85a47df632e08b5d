package dashboard

import (
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// The maintenance-controller's GET /api/v1/info answers with one NodeInfo
// per node, in the shapes below (its field names and nesting), so that
// tools written against it keep working.

// SeedNodeInfo is one node: its profiles and the labels the dashboard is
// told to show (--dashboard-labels).
type SeedNodeInfo struct {
	Node     string              `json:"node"`
	Profiles []SeedProfileResult `json:"profiles"`
	Labels   map[string]string   `json:"labels"`
	Updated  time.Time           `json:"updated"`
}

// SeedProfileResult is the node in one profile: its state and its last
// evaluation.
type SeedProfileResult struct {
	Applied SeedApplyResult `json:"applied"`
	Name    string          `json:"name"`
	State   string          `json:"state"`
}

// SeedApplyResult is an evaluation: the state the node goes to next (its
// own while it stays), each transition's result, and why the profile
// could not be evaluated.
type SeedApplyResult struct {
	Next        string                 `json:"next"`
	Transitions []SeedTransitionResult `json:"transitions"`
	Error       string                 `json:"error"`
}

// SeedTransitionResult is one transition: whether it passed, where it
// leads, its check chain, and what kept a passing one from being taken.
type SeedTransitionResult struct {
	Passed bool                 `json:"passed"`
	Target string               `json:"target"`
	Chain  SeedCheckChainResult `json:"chain"`
	Error  string               `json:"error"`
}

// SeedCheckChainResult is a transition's check expression and each check's
// result, by check name.
type SeedCheckChainResult struct {
	Passed     bool                       `json:"passed"`
	Info       map[string]SeedCheckResult `json:"info"`
	Expression string                     `json:"expression"`
}

// SeedCheckResult is one check: its plugin (id), whether it passed, and
// why (info.reason, or info.error).
type SeedCheckResult struct {
	ID     string         `json:"id"`
	Passed bool           `json:"passed"`
	Info   map[string]any `json:"info"`
}

// ShowLabels sets the node labels /api/v1/info shows (the
// maintenance-controller's dashboard.labelFilter).
func (h *Handler) ShowLabels(keys []string) { h.labels = keys }

func (h *Handler) info(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	evals, err := h.evaluator.Fleet(r.Context(), now)
	if err != nil {
		writeError(w, err)
		return
	}
	nodes := &corev1.NodeList{}
	if err := h.reader.List(r.Context(), nodes); err != nil {
		writeError(w, err)
		return
	}
	profiles := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := h.reader.List(r.Context(), profiles); err != nil {
		writeError(w, err)
		return
	}
	plugins := map[string]map[string]string{} // profile → check → plugin
	for _, p := range profiles.Items {
		plugins[p.Name] = map[string]string{}
		for _, c := range p.Spec.Checks {
			plugins[p.Name][c.Name] = check.PluginName(c)
		}
	}
	out := make([]SeedNodeInfo, 0, len(nodes.Items))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		info := SeedNodeInfo{Node: n.Name, Profiles: []SeedProfileResult{}, Labels: map[string]string{}, Updated: now}
		for _, k := range h.labels {
			if v, ok := n.Labels[k]; ok {
				info.Labels[k] = v
			}
		}
		for _, ev := range evals[n.Name] {
			info.Profiles = append(info.Profiles, seedProfile(ev, plugins[ev.Profile]))
			if ev.Evaluated != nil && ev.Evaluated.Before(info.Updated) {
				info.Updated = *ev.Evaluated
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	writeJSON(w, http.StatusOK, out)
}

// seedProfile writes one evaluation in the maintenance-controller's shape.
func seedProfile(ev fleet.Evaluation, plugins map[string]string) SeedProfileResult {
	state := string(ev.Record.Current)
	res := SeedProfileResult{Name: ev.Profile, State: state, Applied: SeedApplyResult{Next: state, Transitions: []SeedTransitionResult{}, Error: ev.Error}}
	d := ev.Decision
	if res.Applied.Error == "" {
		// As the maintenance-controller reports a state's enter chain
		// that is not done.
		res.Applied.Error = d.Entering
	}
	if d.Take >= 0 && d.Take < len(d.Evaluations) && d.Evaluations[d.Take].Blocked == "" {
		res.Applied.Next = string(d.Evaluations[d.Take].Next)
	}
	for _, t := range d.Evaluations {
		tr := SeedTransitionResult{Passed: t.Passed, Target: string(t.Next), Error: t.Blocked,
			Chain: SeedCheckChainResult{Passed: t.Passed, Expression: t.Check, Info: map[string]SeedCheckResult{}}}
		for _, c := range t.Checks {
			info := map[string]any{}
			if c.Reason != "" {
				info["reason"] = c.Reason
			}
			if c.Error != "" {
				info["error"] = c.Error
			}
			tr.Chain.Info[c.Name] = SeedCheckResult{ID: plugins[c.Name], Passed: c.Passed, Info: info}
		}
		res.Applied.Transitions = append(res.Applied.Transitions, tr)
	}
	return res
}
