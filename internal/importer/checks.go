package importer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/hypervisor"
)

// checkDef is a seed check instance converted to pitstop's form.
type checkDef struct {
	instance
	// ok says the conversion succeeded and check.New accepted the result.
	ok   bool
	spec pitstopv1alpha1.CheckInstance
	// scope is maxMaintenance's profile option: only nodes of that profile
	// count. pitstop can say "this profile" only, so it is resolved per
	// profile (see scopeTo).
	scope     string
	scopeNode *yaml.Node
}

// checkPlugin converts the config of one seed check plugin type.
type checkPlugin struct {
	fields  []string
	convert func(p *pluginConfig, d *checkDef)
}

// checkPlugins are the seed's check plugins pitstop has, by type.
var checkPlugins = map[string]checkPlugin{
	"hasLabel": {[]string{"key", "value"}, func(p *pluginConfig, d *checkDef) { d.spec.HasLabel = keyValue(p) }},
	"hasAnnotation": {[]string{"key", "value"}, func(p *pluginConfig, d *checkDef) {
		d.spec.HasAnnotation = keyValue(p)
	}},
	"anyLabel":          {[]string{"key", "value"}, func(p *pluginConfig, d *checkDef) { d.spec.AnyLabel = keyValue(p) }},
	"condition":         {[]string{"type", "status"}, convertCondition},
	"maxMaintenance":    {[]string{"max", "profile", "groupBy", "groupLabel", "skipAfter"}, convertMaxMaintenance},
	"stagger":           {[]string{"duration", "leaseName", "leaseNamespace", "parallel"}, convertStagger},
	"timeWindow":        {[]string{"start", "end", "weekdays", "exclude"}, convertTimeWindow},
	"wait":              {[]string{"duration"}, convertWait},
	"waitExclude":       {[]string{"duration", "exclude"}, convertWaitExclude},
	"clusterSemver":     {[]string{"key", "profileScoped"}, convertClusterSemver},
	"affinity":          {[]string{"minOperational"}, convertAffinity},
	"nodeCount":         {[]string{"count"}, convertNodeCount},
	"prometheusInstant": {[]string{"url", "query", "expr"}, convertPrometheusInstant},
	"kubernikusCount":   {[]string{"cluster", "cloudProviderSecret"}, convertKubernikusCount},
	"checkHypervisor":   {fieldNames(hypervisor.StatusFields), convertCheckHypervisor},
	"hypervisorCondition": {[]string{"type", "status"}, func(p *pluginConfig, d *checkDef) {
		d.spec.HypervisorCondition = &pitstopv1alpha1.ConditionCheck{Type: p.str("type", true), Status: p.str("status", true)}
	}},
}

// unsupportedChecks are the seed's check plugins pitstop does not have,
// with the reason.
var unsupportedChecks = map[string]string{}

// namePattern is the CRD's pattern for check and trigger names.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxNameLength is the CRD's bound on check and trigger names.
const maxNameLength = 63

// checkInstance converts a seed check instance, whether or not a profile
// uses it: the seed refuses a file with a bad instance, and so does the
// import.
func (c *converter) checkInstance(inst *instance, cfg *yaml.Node) *checkDef {
	d := &checkDef{instance: *inst, spec: pitstopv1alpha1.CheckInstance{Name: inst.name}}
	if inst.unexpanded {
		return d
	}
	plugin, known := checkPlugins[inst.typ]
	if why, unsupported := unsupportedChecks[inst.typ]; unsupported {
		c.errorf(inst.typeNode, "%s: plugin type %q is not supported: %s", inst.what(), inst.typ, why)
		return d
	}
	if !known {
		c.errorf(inst.typeNode, "%s: unknown plugin type %q", inst.what(), inst.typ)
		return d
	}
	if !namePattern.MatchString(inst.name) || len(inst.name) > maxNameLength {
		// The seed's check chains cannot use such a name either: its
		// expression parser would read a-b as a minus b.
		c.errorf(inst.node, "%s: a check name must be letters, digits and _ (at most %d), not starting with a digit", inst.what(), maxNameLength)
		return d
	}
	before := len(c.errs)
	plugin.convert(c.pluginConfig(inst, cfg, plugin.fields...), d)
	if len(c.errs) > before {
		return d
	}
	if _, err := check.New(d.spec, check.Deps{Prometheus: unqueried{}}); err != nil {
		c.errorf(inst.node, "%s: %v", inst.what(), err)
		return d
	}
	d.ok = true
	return d
}

// unqueried lets check.New validate prometheusInstant checks: an import
// never queries Prometheus.
type unqueried struct{}

func (unqueried) Query(context.Context, string, check.Credentials, string, time.Time) (float64, error) {
	return 0, errors.New("an import does not query Prometheus")
}

func keyValue(p *pluginConfig) *pitstopv1alpha1.KeyValueCheck {
	return &pitstopv1alpha1.KeyValueCheck{Key: p.key(), Value: p.optional("value")}
}

func convertCondition(p *pluginConfig, d *checkDef) {
	d.spec.Condition = &pitstopv1alpha1.ConditionCheck{Type: p.str("type", true), Status: p.str("status", true)}
}

// convertMaxMaintenance maps groupBy and the deprecated groupLabel (which
// the seed appends to groupBy) to pitstop's groupBy and groupByLabels.
func convertMaxMaintenance(p *pluginConfig, d *checkDef) {
	m := &pitstopv1alpha1.MaxMaintenanceCheck{Max: p.int32("max", true)}
	groups := p.list("groupBy", false)
	if g := p.str("groupLabel", false); g != "" && !slices.Contains(groups, g) {
		groups = append(groups, g)
	}
	if len(groups) > 0 {
		m.GroupBy = groups[0]
	}
	if len(groups) > 1 {
		m.GroupByLabels = groups[1:]
	}
	if len(groups) > 9 {
		p.errorf("groupBy", "pitstop groups by 9 labels at most, not %d", len(groups))
	}
	if p.has("skipAfter") {
		skip := p.duration("skipAfter", false)
		switch {
		case skip.Duration < time.Second:
			p.errorf("skipAfter", "must be at least 1s, got %s", skip.Duration)
		default:
			m.SkipAfter = &skip
		}
	}
	d.scope, d.scopeNode = p.str("profile", false), p.node("profile")
	d.spec.MaxMaintenance = m
}

func convertStagger(p *pluginConfig, d *checkDef) {
	s := &pitstopv1alpha1.StaggerCheck{Duration: p.duration("duration", true)}
	if p.has("parallel") {
		// The seed's stagger with no Lease never passes; pitstop would
		// default 0 to 1.
		if s.Parallel = p.int32("parallel", false); s.Parallel < 1 {
			p.errorf("parallel", "must be at least 1, got %d", s.Parallel)
		}
	}
	// The seed's stagger checks that name one Lease stagger together,
	// whichever profile uses them: pitstop's that name one group do.
	if lease := p.str("leaseName", false); lease != "" {
		ns := p.str("leaseNamespace", false)
		s.Group = strings.Trim(seedLeaseName.ReplaceAllString(strings.ToLower(ns+"-"+lease), "-"), "-.")
		if len(s.Group) > 63 {
			s.Group = strings.TrimRight(s.Group[:63], "-")
		}
		p.notef("leaseName", "staggers with every stagger check naming the Lease %s/%s, as group %s (pitstop keeps its own slot Leases; the seed's can be deleted)", ns, lease, s.Group)
	}
	d.spec.Stagger = s
}

// convertTimeWindow keeps the seed's rules: weekdays are required, and the
// end must be after the start. pitstop reads an end before (or equal to)
// the start as a window across midnight (or all day), which the seed's
// window never is.
func convertTimeWindow(p *pluginConfig, d *checkDef) {
	w := &pitstopv1alpha1.TimeWindowCheck{TimeZone: "UTC"}
	start, okStart := p.clock("start")
	end, okEnd := p.clock("end")
	if okStart && okEnd {
		w.Start, w.End = start.Format("15:04"), end.Format("15:04")
		switch {
		case end.Before(start):
			p.errorf("end", "%s is before the start %s, which the seed refuses", w.End, w.Start)
		case end.Equal(start):
			p.errorf("end", "equals the start: the seed's window never opens, and pitstop would read it as the whole day")
		}
	}
	w.Weekdays = p.weekdays("weekdays", true)
	w.Exclude = p.list("exclude", false)
	d.spec.TimeWindow = w
}

func convertWait(p *pluginConfig, d *checkDef) {
	d.spec.Wait = &pitstopv1alpha1.WaitCheck{Duration: p.duration("duration", true)}
}

func convertWaitExclude(p *pluginConfig, d *checkDef) {
	d.spec.WaitExclude = &pitstopv1alpha1.WaitExcludeCheck{
		Duration: p.duration("duration", true),
		Exclude:  p.weekdays("exclude", true),
		TimeZone: "UTC",
	}
}

func convertClusterSemver(p *pluginConfig, d *checkDef) {
	d.spec.ClusterSemver = &pitstopv1alpha1.ClusterSemverCheck{Key: p.str("key", true), ProfileScoped: p.boolean("profileScoped")}
}

func convertAffinity(p *pluginConfig, d *checkDef) {
	d.spec.Affinity = &pitstopv1alpha1.AffinityCheck{MinOperational: p.int32("minOperational", false)}
}

func convertNodeCount(p *pluginConfig, d *checkDef) {
	d.spec.NodeCount = &pitstopv1alpha1.NodeCountCheck{Count: p.int32("count", true)}
}

// convertKubernikusCount keeps the cluster; the account comes from the
// Secret named, which pitstop reads in its own namespace only, or from
// pitstop's --openstack-cloud-config as the seed's from its own file.
func convertKubernikusCount(p *pluginConfig, d *checkDef) {
	k := &pitstopv1alpha1.KubernikusCountCheck{Cluster: p.str("cluster", true)}
	if n := p.node("cloudProviderSecret"); n != nil {
		what := p.what + ": cloudProviderSecret"
		f, ok := p.c.fields(n, what, "name", "namespace")
		if !ok {
			return
		}
		name, _ := p.c.text(f["name"].value, what+": name")
		ns, _ := p.c.text(f["namespace"].value, what+": namespace")
		if name == "" {
			p.errorf("cloudProviderSecret", "name: is required")
			return
		}
		k.CloudProviderSecret = &pitstopv1alpha1.SecretKeyRef{Name: name, Key: openstack.KeyCloudConfig}
		p.notef("cloudProviderSecret", "reads key %s of Secret %s in pitstop's namespace, which must be labelled %s: \"true\" (copy %s/%s there)",
			openstack.KeyCloudConfig, name, pitstopv1alpha1.LabelUsableByProfiles, ns, name)
	} else {
		p.notef("cluster", "reads the Kubernikus API with the OpenStack account of pitstop's --openstack-cloud-config (chart kubernikus.secretName), as the maintenance-controller with its provider/cloudprovider.conf")
	}
	d.spec.KubernikusCount = k
}

func convertPrometheusInstant(p *pluginConfig, d *checkDef) {
	pi := &pitstopv1alpha1.PrometheusInstantCheck{URL: p.str("url", true), Query: p.str("query", true)}
	if expr := p.str("expr", true); expr != "" {
		var err error
		if pi.Operator, pi.Threshold, err = parseExpr(expr); err != nil {
			// Anything else is kept as written: pitstop reads it as CEL,
			// whose syntax for comparisons, &&, ||, !, arithmetic,
			// parentheses and ?: is gval's, every number a double as in
			// gval. What CEL does not read is an error.
			pi.Operator, pi.Threshold, pi.Expr = "", "", expr
			if _, err := check.CompileValueExpr(expr); err != nil {
				p.errorf("expr", "%q: %v", expr, err)
			}
		}
	}
	d.spec.PrometheusInstant = pi
}

// exprPattern is a comparison of two operands without spaces inside them.
var exprPattern = regexp.MustCompile(`^\s*(\S+?)\s*(<=|>=|==|!=|<|>)\s*(\S+?)\s*$`)

// flipped is the operator with its operands swapped: 1 < value is
// value > 1.
var flipped = map[string]string{"<": ">", "<=": ">=", "==": "==", "!=": "!=", ">=": "<=", ">": "<"}

// parseExpr reads the seed's prometheusInstant expression, a gval
// expression over the query's value, when it compares the value with a
// number ("value <= 1", or "1 >= value"): pitstop's operator and
// threshold. Anything else has no equivalent.
func parseExpr(expr string) (operator, threshold string, err error) {
	m := exprPattern.FindStringSubmatch(expr)
	if m != nil {
		left, op, right := m[1], m[2], m[3]
		if right == "value" && left != "value" {
			left, op, right = right, flipped[op], left
		}
		if left == "value" && isNumber(right) {
			return op, right, nil
		}
	}
	return "", "", fmt.Errorf("%q is not a comparison of value with a number, such as \"value <= 1\" (operators: <, <=, ==, !=, >=, >)", expr)
}

func isNumber(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}
