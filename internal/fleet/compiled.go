package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/notify"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// compiled is a profile ready to run: its transitions, checks and triggers
// built from one generation of its spec.
type Compiled struct {
	Spec     *pitstopv1alpha1.MaintenanceProfile
	Engine   *engine.Profile
	Checks   map[string]check.Check
	Plugins  map[string]string // check name → plugin name, for metrics
	Triggers map[string]trigger.Trigger
	// Notify are the notifications of each state, in the order listed.
	Notify map[pitstopv1alpha1.MaintenanceState][]*notify.Notification
	// AtRisk are the notifications sent when a scheduled event of a
	// selected node is found at risk (schedule deadlineAtRisk).
	AtRisk []*notify.Notification
}

// Recheck is the profile's spec.recheck; zero when unset.
func (c *Compiled) Recheck() time.Duration {
	if r := c.Spec.Spec.Recheck; r != nil {
		return r.Duration
	}
	return 0
}

// admission is what admission reads of the profile.
func (c *Compiled) Admission() admission.Profile {
	return admission.Profile{Spec: c.Spec, Transitions: c.Engine.Transitions}
}

// compile builds a profile, reporting every problem with its field path.
func Compile(p *pitstopv1alpha1.MaintenanceProfile, deps check.Deps) (*Compiled, error) {
	return CompileContext(context.Background(), p, deps)
}

// CompileContext is Compile that gives up, with an error wrapping ctx's,
// once ctx is done: it looks before each notification, whose templates
// are run on sample data (each within notify's bounds, up to a second).
// The profile webhook compiles with its request's context, so that a
// request given up stops the work it asked for.
func CompileContext(ctx context.Context, p *pitstopv1alpha1.MaintenanceProfile, deps check.Deps) (*Compiled, error) {
	if errs := p.Spec.DurationErrors(); len(errs) > 0 {
		return nil, fmt.Errorf("MaintenanceProfile %s: %w", p.Name, errs.ToAggregate())
	}
	ep, err := engine.Compile(p)
	if err != nil {
		return nil, err
	}
	c := &Compiled{Spec: p.DeepCopy(), Engine: ep, Checks: map[string]check.Check{}, Plugins: map[string]string{}, Triggers: map[string]trigger.Trigger{}}
	for i, inst := range p.Spec.Checks {
		ch, err := check.New(inst, deps)
		if err != nil {
			return nil, fmt.Errorf("MaintenanceProfile %s: spec.checks[%d] (%s): %w", p.Name, i, inst.Name, err)
		}
		c.Checks[inst.Name] = ch
		c.Plugins[inst.Name] = check.PluginName(inst)
	}
	for i, inst := range p.Spec.Triggers {
		tr, err := trigger.New(inst)
		if err != nil {
			return nil, fmt.Errorf("MaintenanceProfile %s: spec.triggers[%d] (%s): %w", p.Name, i, inst.Name, err)
		}
		c.Triggers[inst.Name] = tr
	}
	// Only a process that reads Secrets sends notifications: there the
	// mail servers are checked (pitstop explain sends none).
	var mailServers *profilesecret.Hosts
	if deps.Secrets != nil {
		mailServers = &deps.MailServers
	}
	notifications := map[string]*notify.Notification{}
	for i, inst := range p.Spec.Notifications {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("MaintenanceProfile %s: gave up before spec.notifications[%d] (%s): %w", p.Name, i, inst.Name, err)
		}
		n, err := notify.Compile(inst, mailServers)
		if err != nil {
			return nil, fmt.Errorf("MaintenanceProfile %s: spec.notifications[%d] (%s): %w", p.Name, i, inst.Name, err)
		}
		notifications[inst.Name] = n
		if n.OnDeadlineAtRisk() {
			c.AtRisk = append(c.AtRisk, n)
		}
	}
	c.Notify = map[pitstopv1alpha1.MaintenanceState][]*notify.Notification{}
	for _, st := range []struct {
		state pitstopv1alpha1.MaintenanceState
		field string
		spec  pitstopv1alpha1.StateSpec
	}{
		{pitstopv1alpha1.StateOperational, "operational", p.Spec.States.Operational},
		{pitstopv1alpha1.StateMaintenanceRequired, "maintenanceRequired", p.Spec.States.MaintenanceRequired},
		{pitstopv1alpha1.StateInMaintenance, "inMaintenance", p.Spec.States.InMaintenance},
	} {
		for i, name := range st.spec.Notify {
			n, ok := notifications[name]
			if !ok {
				return nil, fmt.Errorf("MaintenanceProfile %s: spec.states.%s.notify[%d]: unknown notification %q", p.Name, st.field, i, name)
			}
			if n.OnDeadlineAtRisk() {
				return nil, fmt.Errorf("MaintenanceProfile %s: spec.states.%s.notify[%d]: notification %q has schedule deadlineAtRisk: it is sent when an event is at risk, whatever the state; remove it from the state's notify", p.Name, st.field, i, name)
			}
			c.Notify[st.state] = append(c.Notify[st.state], n)
		}
	}
	return c, nil
}

// registry keeps the last profile of each name that compiled. A profile
// that fails to compile never replaces the last valid one.
type Registry struct {
	mu       sync.Mutex
	deps     check.Deps
	profiles map[string]*Compiled
	errors   map[string]error
}

func NewRegistry(deps check.Deps) *Registry {
	return &Registry{deps: deps, profiles: map[string]*Compiled{}, errors: map[string]error{}}
}

// get returns the profile to run for p (its last valid generation) and the
// error of its current generation, if it does not compile. The last valid
// generation is the one this process compiled last or, after a restart,
// the one p's status keeps.
func (r *Registry) Get(p *pitstopv1alpha1.MaintenanceProfile) (*Compiled, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.profiles[p.Name]; ok && c.Spec.Generation == p.Generation && c.Spec.UID == p.UID {
		return c, nil
	}
	if err, ok := r.errors[p.Name]; ok && r.errorGeneration(p) {
		return r.running(p), err
	}
	c, err := Compile(p, r.deps)
	if err != nil {
		r.errors[p.Name] = &generationError{generation: p.Generation, err: err}
		return r.running(p), err
	}
	delete(r.errors, p.Name)
	r.profiles[p.Name] = c
	return c, nil
}

// running returns the last valid generation of p when its current one does
// not compile: the one compiled last, if it is of the same object, or the
// one p's status keeps.
func (r *Registry) running(p *pitstopv1alpha1.MaintenanceProfile) *Compiled {
	if c, ok := r.profiles[p.Name]; ok && c.Spec.UID == p.UID {
		return c
	}
	last := p.Status.LastValid
	if last == nil || last.Generation >= p.Generation {
		return nil
	}
	kept := p.DeepCopy()
	kept.Generation, kept.Spec = last.Generation, *last.Spec.DeepCopy()
	c, err := Compile(kept, r.deps)
	if err != nil {
		return nil
	}
	r.profiles[p.Name] = c
	return c
}

func (r *Registry) errorGeneration(p *pitstopv1alpha1.MaintenanceProfile) bool {
	ge, ok := r.errors[p.Name].(*generationError)
	return ok && ge.generation == p.Generation
}

// last returns the last valid compiled profile of a name, for nodes still
// in maintenance for a profile that was deleted.
func (r *Registry) Last(name string) *Compiled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.profiles[name]
}

type generationError struct {
	generation int64
	err        error
}

func (e *generationError) Error() string { return e.err.Error() }
func (e *generationError) Unwrap() error { return e.err }
