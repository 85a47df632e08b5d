package importer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
)

// seedConfig is what the import reads of a maintenance.yaml, with the
// nodes its lines come from.
type seedConfig struct {
	checks   []*checkDef
	triggers []*triggerDef
	notifies []*notifyDef
	profiles []*profileDef
	// recheck is intervals.requeue, each profile's spec.recheck.
	recheck *pitstopv1alpha1.Duration
}

// instance is what every seed plugin instance has.
type instance struct {
	kind     string // check, trigger or notification
	name     string
	typ      string
	node     *yaml.Node // the list item
	typeNode *yaml.Node
	used     bool
	// unexpanded says a variable it refers to is not set: that is
	// reported, and the instance is not converted, which would only add
	// confusing errors about the unexpanded value.
	unexpanded bool
}

// what names the instance in messages: `check instance "window"`.
func (i *instance) what() string { return fmt.Sprintf("%s instance %q", i.kind, i.name) }

// profileDef is a seed profile: its name and its three states, in the
// order of engine.States.
type profileDef struct {
	name     string
	node     *yaml.Node
	nameNode *yaml.Node
	states   [3]stateDef
}

// stateDef is one state of a seed profile.
type stateDef struct {
	state       pitstopv1alpha1.MaintenanceState
	enter       chain
	notify      chain
	transitions []*transitionDef
}

// chain is a trigger or notification chain: instance names joined by &&.
type chain struct {
	node  *yaml.Node // nil when the chain is not given
	text  string
	names []string
}

// transitionDef is one transition of a seed state.
type transitionDef struct {
	node      *yaml.Node
	what      string
	check     string
	checkNode *yaml.Node
	checks    []string // the check instance names the expression uses
	trigger   chain
	next      pitstopv1alpha1.MaintenanceState
}

// parse reads the file: the instances (converting each check and trigger
// instance) and the profiles.
func (c *converter) parse(data []byte) *seedConfig {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		c.yamlError(err)
		return nil
	}
	if len(doc.Content) == 0 {
		c.errorf(nil, "the file is empty")
		return nil
	}
	top, _ := c.fields(doc.Content[0], "the file", "intervals", "dashboard", "instances", "profiles")
	s := &seedConfig{}
	if f, ok := top["intervals"]; ok {
		s.recheck = c.intervals(f)
	}
	if f, ok := top["dashboard"]; ok {
		c.dashboard(f)
	}
	c.parseInstances(top["instances"].value, s)
	c.parseProfiles(top["profiles"], s)
	return s
}

// minRecheck is the least spec.recheck a profile may set.
const minRecheck = time.Second

// intervals reads the seed's intervals. requeue, how often the seed
// evaluates every node, becomes each profile's spec.recheck: pitstop
// evaluates a node again whenever the cluster changes and when a check's
// answer can next change, and asks the checks whose answer comes from
// outside the cluster (prometheusInstant, the hypervisor checks,
// kubernikusCount) again after spec.recheck; at least 1s.
func (c *converter) intervals(f field) *pitstopv1alpha1.Duration {
	c.expand(f.value)
	fields, _ := c.fields(f.value, "intervals", "requeue", "notify")
	if n, ok := fields["notify"]; ok {
		c.notef(n.key, "intervals.notify is not imported: each notification's schedule says when it is sent again")
	}
	rq, ok := fields["requeue"]
	if !ok {
		return nil
	}
	s, ok := c.text(rq.value, "intervals.requeue")
	if !ok || s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		c.errorf(rq.value, "intervals.requeue: %q is not a duration such as 30s or 5m", s)
		return nil
	}
	if d < minRecheck {
		c.notef(rq.key, "intervals.requeue %s becomes each profile's spec.recheck %s, the least it may be: pitstop evaluates a node again whenever the cluster changes, and asks the checks whose answer comes from outside the cluster (prometheusInstant, checkHypervisor, hypervisorCondition, kubernikusCount) again every spec.recheck", s, minRecheck)
		d = minRecheck
	} else {
		c.notef(rq.key, "intervals.requeue becomes each profile's spec.recheck: pitstop evaluates a node again whenever the cluster changes, and asks the checks whose answer comes from outside the cluster (prometheusInstant, checkHypervisor, hypervisorCondition, kubernikusCount) again every %s", d)
	}
	return &pitstopv1alpha1.Duration{Duration: d}
}

// dashboard reads the seed's dashboard settings: labelFilter names the node
// labels its /api/v1/info shows, which pitstop's shows with
// --dashboard-labels.
func (c *converter) dashboard(f field) {
	c.expand(f.value)
	fields, _ := c.fields(f.value, "dashboard", "labelFilter")
	lf, ok := fields["labelFilter"]
	if !ok {
		return
	}
	items, _ := c.items(lf.value, "dashboard.labelFilter")
	var labels []string
	for i, item := range items {
		if s, ok := c.text(item, fmt.Sprintf("dashboard.labelFilter[%d]", i)); ok && s != "" {
			labels = append(labels, s)
		}
	}
	if len(labels) > 0 {
		c.notef(lf.key, "dashboard.labelFilter: run pitstop with --dashboard-labels=%s (chart: dashboard.labels) so that its /api/v1/info shows these labels", strings.Join(labels, ","))
	}
}

func (c *converter) parseInstances(n *yaml.Node, s *seedConfig) {
	kinds, _ := c.fields(n, "instances", "check", "trigger", "notify")
	items, _ := c.items(kinds["check"].value, "instances.check")
	for _, item := range items {
		if inst, cfg, ok := c.instance(item, "check", true, "name", "type", "config"); ok {
			s.checks = append(s.checks, c.checkInstance(inst, cfg))
		}
	}
	items, _ = c.items(kinds["trigger"].value, "instances.trigger")
	for _, item := range items {
		if inst, cfg, ok := c.instance(item, "trigger", true, "name", "type", "config"); ok {
			s.triggers = append(s.triggers, c.triggerInstance(inst, cfg))
		}
	}
	items, _ = c.items(kinds["notify"].value, "instances.notify")
	for _, item := range items {
		if inst, cfg, ok := c.instance(item, "notification", false, "name", "type", "config", "schedule"); ok {
			s.notifies = append(s.notifies, c.notifyInstance(inst, cfg, valueOf(item, "schedule")))
		}
	}
	checks := make([]*instance, len(s.checks))
	for i, d := range s.checks {
		checks[i] = &d.instance
	}
	triggers := make([]*instance, len(s.triggers))
	for i, d := range s.triggers {
		triggers[i] = &d.instance
	}
	notifies := make([]*instance, len(s.notifies))
	for i, d := range s.notifies {
		notifies[i] = &d.instance
	}
	for _, list := range [][]*instance{checks, triggers, notifies} {
		c.uniqueNames(list)
	}
	c.uniqueMappedNames(triggers)
	c.uniqueMappedNames(notifies)
}

// instance reads the fields every instance has, expanding environment
// variables in all of it when imported is set; otherwise only in its name
// and type (a notification expands the rest itself: its secrets need not
// be set when they come from an existing Secret).
func (c *converter) instance(n *yaml.Node, kind string, imported bool, known ...string) (*instance, *yaml.Node, bool) {
	what := kind + " instance"
	// An unknown field is reported, and the instance read all the same,
	// so that the profiles using it are checked too.
	f, _ := c.fields(n, what, known...)
	if n.Kind != yaml.MappingNode {
		return nil, nil, false
	}
	ok := true
	before := len(c.errs)
	if imported {
		c.expand(n)
	} else {
		c.expand(f["name"].value)
		c.expand(f["type"].value)
	}
	inst := &instance{kind: kind, node: n, typeNode: f["type"].value, unexpanded: len(c.errs) > before}
	inst.name, _ = c.text(f["name"].value, what+": name")
	inst.typ, _ = c.text(f["type"].value, what+": type")
	if inst.name == "" {
		c.errorf(n, "%s: name is missing", what)
		ok = false
	}
	if inst.typ == "" {
		c.errorf(n, "%s %q: type is missing", what, inst.name)
		ok = false
	}
	if inst.typeNode == nil {
		inst.typeNode = n
	}
	return inst, f["config"].value, ok
}

// uniqueNames refuses two instances of a kind with one name: the seed would
// silently keep the last one.
func (c *converter) uniqueNames(list []*instance) {
	seen := map[string]*instance{}
	for _, inst := range list {
		if prev, ok := seen[inst.name]; ok {
			c.errorf(inst.node, "%s is defined twice (first at line %d)", inst.what(), prev.node.Line)
			continue
		}
		seen[inst.name] = inst
	}
}

func (c *converter) parseProfiles(f field, s *seedConfig) {
	items, _ := c.items(f.value, "profiles")
	seen := map[string]*profileDef{}
	for _, item := range items {
		before := len(c.errs)
		c.expand(item)
		if len(c.errs) > before {
			continue // as for instances: the unset variables are reported
		}
		p, ok := c.parseProfile(item)
		if !ok {
			continue
		}
		if prev, dup := seen[p.name]; dup {
			c.errorf(p.node, "profile %q is defined twice (first at line %d)", p.name, prev.node.Line)
			continue
		}
		seen[p.name] = p
		s.profiles = append(s.profiles, p)
	}
	if f.key != nil && len(items) == 0 {
		c.warnf(f.key, "there are no profiles to import")
	}
}

func (c *converter) parseProfile(n *yaml.Node) (*profileDef, bool) {
	f, ok := c.fields(n, "profile", "name", "operational", "maintenance-required", "in-maintenance")
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	p := &profileDef{node: n, nameNode: f["name"].value}
	p.name, _ = c.text(p.nameNode, "profile: name")
	if p.name == "" {
		c.errorf(n, "profile: name is missing")
		return nil, false
	}
	for i, st := range engine.States {
		p.states[i] = c.parseState(f[string(st.State)], st.State, fmt.Sprintf("profile %q: %s", p.name, st.State))
	}
	return p, ok
}

func (c *converter) parseState(f field, state pitstopv1alpha1.MaintenanceState, what string) stateDef {
	s := stateDef{state: state}
	if f.key == nil {
		return s
	}
	sf, _ := c.fields(f.value, what, "enter", "notify", "transitions")
	s.enter = c.chain(sf["enter"].value, what+": enter")
	s.notify = c.chain(sf["notify"].value, what+": notify")
	items, _ := c.items(sf["transitions"].value, what+": transitions")
	for i, item := range items {
		// A transition with a problem is kept, so that the names it uses
		// are checked too; the profile is not imported anyway.
		if t := c.parseTransition(item, fmt.Sprintf("%s: transitions[%d]", what, i)); t != nil {
			s.transitions = append(s.transitions, t)
		}
	}
	return s
}

// chain reads a trigger or notification chain as the seed does: names
// separated by &&, spaces around them trimmed.
func (c *converter) chain(n *yaml.Node, what string) chain {
	text, ok := c.text(n, what)
	ch := chain{node: n, text: text}
	if !ok || strings.TrimSpace(text) == "" {
		return ch
	}
	for name := range strings.SplitSeq(text, "&&") {
		name = strings.TrimSpace(name)
		if name == "" {
			c.errorf(n, "%s: %q has an empty instance name", what, text)
			continue
		}
		ch.names = append(ch.names, name)
	}
	return ch
}

func (c *converter) parseTransition(n *yaml.Node, what string) *transitionDef {
	f, _ := c.fields(n, what, "check", "trigger", "next")
	if n.Kind != yaml.MappingNode {
		return nil
	}
	t := &transitionDef{node: n, what: what, checkNode: f["check"].value}
	t.check, _ = c.text(t.checkNode, what+": check")
	t.checks = checkNames(t.check)
	t.trigger = c.chain(f["trigger"].value, what+": trigger")
	next, _ := c.text(f["next"].value, what+": next")
	switch st := pitstopv1alpha1.MaintenanceState(next); st {
	case pitstopv1alpha1.StateOperational, pitstopv1alpha1.StateMaintenanceRequired, pitstopv1alpha1.StateInMaintenance:
		t.next = st
	case "":
		c.errorf(n, "%s: next is missing", what)
	default:
		c.errorf(f["next"].value, "%s: next: %q is not a state (operational, maintenance-required or in-maintenance)", what, next)
	}
	return t
}

// checkNames lists the instance names a check chain uses, as the seed
// finds them: it removes the operators and parentheses and splits the rest
// at spaces. The expression itself is compiled by pitstop later.
func checkNames(expr string) []string {
	for _, op := range []string{"&&", "||", "(", ")", "!"} {
		expr = strings.ReplaceAll(expr, op, " ")
	}
	var names []string
	for _, name := range strings.Fields(expr) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}
