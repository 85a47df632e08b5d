package importer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
)

// CRD bounds that engine.Compile does not check.
const (
	maxInstances          = 64   // spec.checks, spec.triggers
	maxTransitions        = 16   // per state
	maxTransitionTriggers = 16   // per transition
	maxCheckLength        = 4096 // a transition's check expression
	maxNotifications      = 32   // spec.notifications
	maxStateNotify        = 16   // a state's notify
)

// convert builds one MaintenanceProfile per seed profile that converts,
// then notes the instances no profile uses.
// The secret values of the notifications the profiles use are returned
// with them, by Secret key.
func (c *converter) convert(s *seedConfig) ([]pitstopv1alpha1.MaintenanceProfile, map[string]string) {
	out := make([]pitstopv1alpha1.MaintenanceProfile, 0, len(s.profiles))
	secrets := map[string]string{}
	for _, p := range s.profiles {
		if mp, ok := c.profile(p, s); ok {
			out = append(out, mp)
		}
	}
	for _, d := range s.notifies {
		if d.ok && d.used {
			maps.Copy(secrets, d.secrets)
		}
	}
	for _, d := range s.checks {
		if d.ok && !d.used {
			c.notef(d.node, "%s is used by no profile, so it is not imported", d.what())
		}
	}
	for _, d := range s.triggers {
		if d.ok && !d.used {
			c.notef(d.node, "%s is used by no profile, so it is not imported", d.what())
		}
	}
	for _, d := range s.notifies {
		if d.ok && !d.used {
			c.notef(d.node, "%s is used by no profile, so it is not imported", d.what())
		}
	}
	return out, secrets
}

// profileRefs are the instances one profile uses, by seed name.
type profileRefs struct {
	checks   map[string]*checkDef
	triggers map[string]*triggerDef
	notifies map[string]*notifyDef
}

// profile converts one seed profile. The seed's states become pitstop's
// (operational, maintenanceRequired, inMaintenance), each transition's
// check is copied as written (both use &&, || and ! over instance names),
// its trigger chain "a && b" becomes the list [a, b], and next is copied.
//
// Each state's enter chain "a && b" becomes its enter list [a, b]: as in
// the seed, the node's state changes first, then the enter triggers run,
// again until each is done, before the state's transitions are evaluated.
//
// Only the instances the profile uses are included in it, in the order of
// the file.
func (c *converter) profile(p *profileDef, s *seedConfig) (pitstopv1alpha1.MaintenanceProfile, bool) {
	before := len(c.errs)
	mp := pitstopv1alpha1.MaintenanceProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: pitstopv1alpha1.GroupVersion.String(), Kind: "MaintenanceProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
	}
	if errs := validation.IsDNS1123Subdomain(p.name); len(errs) > 0 {
		c.errorf(p.nameNode, "profile %q: not a valid MaintenanceProfile name: %s; rename it (for example %q) in the file and relabel its nodes %s=<new name> (docs/migrating-from-maintenance-controller.md)",
			p.name, strings.Join(errs, "; "), suggestName(p.name), pitstopv1alpha1.LabelSeedProfile)
	}
	if p.name == "default" {
		// The seed gives the profile "default" to every node without the
		// profile label; pitstop picks those through the selector, and the
		// nodes labelled "default" by the label, as any profile's.
		mp.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: pitstopv1alpha1.LabelSeedProfile, Operator: metav1.LabelSelectorOpDoesNotExist},
		}}
		c.notef(p.nameNode, "profile \"default\" selects the nodes without the label %s, as the seed gives them this profile", pitstopv1alpha1.LabelSeedProfile)
	}
	if s.recheck != nil {
		mp.Spec.Recheck = &pitstopv1alpha1.Duration{Duration: s.recheck.Duration}
	}
	refs := profileRefs{checks: map[string]*checkDef{}, triggers: map[string]*triggerDef{}, notifies: map[string]*notifyDef{}}
	for i, st := range engine.States {
		spec := st.Spec(&mp.Spec.States)
		spec.Enter = c.enterTriggers(p, p.states[i], s, refs)
		spec.Transitions = c.transitions(p, p.states[i], s, refs)
		spec.Notify = c.resolveNotify(p.states[i].notify, s, refs, fmt.Sprintf("profile %q: %s: notify", p.name, p.states[i].state))
	}
	for _, d := range s.checks {
		if refs.checks[d.name] != nil {
			mp.Spec.Checks = append(mp.Spec.Checks, c.scopeTo(d, p))
		}
	}
	for _, d := range s.triggers {
		if refs.triggers[d.name] != nil {
			mp.Spec.Triggers = append(mp.Spec.Triggers, d.spec)
		}
	}
	for _, d := range s.notifies {
		if refs.notifies[d.name] != nil {
			mp.Spec.Notifications = append(mp.Spec.Notifications, d.spec)
		}
	}
	c.checkBounds(p, &mp)
	if len(c.errs) > before {
		return mp, false
	}
	if _, err := engine.Compile(&mp); err != nil {
		c.errorf(p.node, "%v", err)
		return mp, false
	}
	return mp, true
}

// enterTriggers resolves a state's enter chain to pitstop trigger names.
func (c *converter) enterTriggers(p *profileDef, st stateDef, s *seedConfig, refs profileRefs) []string {
	if len(st.enter.names) == 0 {
		return nil
	}
	what := fmt.Sprintf("profile %q: %s: enter", p.name, st.state)
	names := c.resolveTriggers(st.enter, s, &refs, what)
	if len(names) > maxTransitionTriggers {
		c.errorf(st.enter.node, "%s: %d triggers, pitstop allows %d", what, len(names), maxTransitionTriggers)
	}
	return names
}

// transitions converts the transitions of one state.
func (c *converter) transitions(p *profileDef, st stateDef, s *seedConfig, refs profileRefs) []pitstopv1alpha1.Transition {
	var out []pitstopv1alpha1.Transition
	for _, t := range st.transitions {
		c.resolveChecks(t, st.state, s, refs)
		triggers := c.resolveTriggers(t.trigger, s, &refs, t.what+": trigger")
		if t.next == st.state {
			c.warnf(t.node, "%s: leads back into %s: the seed does nothing when it passes, pitstop takes it (runs its triggers and restarts the state's clock)", t.what, st.state)
		}
		if len(triggers) > maxTransitionTriggers {
			c.errorf(t.node, "%s: %d triggers, pitstop allows %d", t.what, len(triggers), maxTransitionTriggers)
		}
		out = append(out, pitstopv1alpha1.Transition{Check: t.check, Triggers: triggers, Next: t.next})
	}
	if len(out) > maxTransitions {
		c.errorf(st.transitions[maxTransitions].node, "profile %q: %s: %d transitions, pitstop allows %d", p.name, st.state, len(out), maxTransitions)
	}
	return out
}

// resolveChecks finds the check instances a transition's expression uses
// and compiles the expression as pitstop will.
func (c *converter) resolveChecks(t *transitionDef, from pitstopv1alpha1.MaintenanceState, s *seedConfig, refs profileRefs) {
	at := t.checkNode
	if at == nil {
		at = t.node
	}
	what := fmt.Sprintf("%s: check %q", t.what, t.check)
	var undefined []string
	for _, name := range t.checks {
		i := slices.IndexFunc(s.checks, func(d *checkDef) bool { return d.name == name })
		if i < 0 {
			undefined = append(undefined, name)
			continue
		}
		d := s.checks[i]
		d.used = true
		refs.checks[name] = d
		c.checkUse(d, t, from)
	}
	if len(undefined) > 0 {
		c.errorf(at, "%s: undefined check instance%s %s", what, plural(len(undefined), "s", ""), strings.Join(undefined, ", "))
		return
	}
	if len(t.check) > maxCheckLength {
		c.errorf(at, "%s: longer than the %d characters pitstop allows", what, maxCheckLength)
		return
	}
	if _, err := engine.CompileExpression(t.check, t.checks); err != nil {
		c.errorf(at, "%s: %v", what, err)
	}
}

// checkUse refuses or warns about a check used where it does not mean in
// pitstop what it meant in the seed.
func (c *converter) checkUse(d *checkDef, t *transitionDef, from pitstopv1alpha1.MaintenanceState) {
	switch {
	case d.spec.Affinity != nil && from != pitstopv1alpha1.StateMaintenanceRequired:
		c.errorf(t.node, "%s: %s is an affinity check, which orders nodes in maintenance-required only, not in %s", t.what, d.what(), from)
	case d.spec.Stagger != nil && t.next != pitstopv1alpha1.StateInMaintenance:
		c.warnf(t.node, "%s: %s staggers this transition into %s in the seed; pitstop's stagger spaces out entries into in-maintenance, whatever transition uses it", t.what, d.what(), t.next)
	}
}

// resolveTriggers maps a trigger chain to pitstop trigger names, and
// records them as used by the profile unless refs is nil.
func (c *converter) resolveTriggers(ch chain, s *seedConfig, refs *profileRefs, what string) []string {
	var names, undefined []string
	for _, name := range ch.names {
		i := slices.IndexFunc(s.triggers, func(d *triggerDef) bool { return d.name == name })
		if i < 0 {
			undefined = append(undefined, name)
			continue
		}
		d := s.triggers[i]
		if refs != nil {
			d.used = true
			refs.triggers[name] = d
		}
		names = append(names, d.spec.Name)
	}
	if len(undefined) > 0 {
		c.errorf(ch.node, "%s %q: undefined trigger instance%s %s", what, ch.text, plural(len(undefined), "s", ""), strings.Join(undefined, ", "))
	}
	return names
}

// resolveNotify maps a notification chain to pitstop notification names,
// recording them as used by the profile.
func (c *converter) resolveNotify(ch chain, s *seedConfig, refs profileRefs, what string) []string {
	var names, undefined []string
	for _, name := range ch.names {
		i := slices.IndexFunc(s.notifies, func(d *notifyDef) bool { return d.name == name })
		if i < 0 {
			undefined = append(undefined, name)
			continue
		}
		d := s.notifies[i]
		d.used = true
		refs.notifies[name] = d
		if !slices.Contains(names, d.spec.Name) {
			names = append(names, d.spec.Name)
		}
	}
	if len(undefined) > 0 {
		c.errorf(ch.node, "%s %q: undefined notification instance%s %s", what, ch.text, plural(len(undefined), "s", ""), strings.Join(undefined, ", "))
	}
	return names
}

// scopeTo returns the check as the profile uses it: a maxMaintenance whose
// profile option names a profile counts only that profile's nodes
// (profileScoped, and profile when it is another one).
func (c *converter) scopeTo(d *checkDef, p *profileDef) pitstopv1alpha1.CheckInstance {
	spec := *d.spec.DeepCopy()
	switch d.scope {
	case "":
	case p.name:
		spec.MaxMaintenance.ProfileScoped = true
	default:
		spec.MaxMaintenance.ProfileScoped = true
		spec.MaxMaintenance.Profile = d.scope
	}
	return spec
}

// checkBounds applies the CRD's list bounds.
func (c *converter) checkBounds(p *profileDef, mp *pitstopv1alpha1.MaintenanceProfile) {
	if n := len(mp.Spec.Checks); n > maxInstances {
		c.errorf(p.node, "profile %q uses %d check instances, pitstop allows %d", p.name, n, maxInstances)
	}
	if n := len(mp.Spec.Triggers); n > maxInstances {
		c.errorf(p.node, "profile %q uses %d trigger instances, pitstop allows %d", p.name, n, maxInstances)
	}
	if n := len(mp.Spec.Notifications); n > maxNotifications {
		c.errorf(p.node, "profile %q uses %d notification instances, pitstop allows %d", p.name, n, maxNotifications)
	}
	for i, st := range engine.States {
		if n := len(st.Spec(&mp.Spec.States).Notify); n > maxStateNotify {
			c.errorf(p.states[i].notify.node, "profile %q: %s: notify: %d notifications, pitstop allows %d", p.name, st.State, n, maxStateNotify)
		}
	}
}

func plural(n int, many, one string) string {
	if n == 1 {
		return one
	}
	return many
}

// suggestName is a MaintenanceProfile name close to a seed profile's name
// that cannot be one: lower case, '-' for anything else.
func suggestName(name string) string {
	out := []rune(strings.ToLower(name))
	for i, r := range out {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '-' {
			out[i] = '-'
		}
	}
	return strings.Trim(string(out), "-.")
}
