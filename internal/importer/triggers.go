package importer

import (
	"strings"

	"go.yaml.in/yaml/v3"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/hypervisor"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

// triggerDef is a seed trigger instance converted to pitstop's form.
type triggerDef struct {
	instance
	ok   bool
	spec pitstopv1alpha1.TriggerInstance
}

// triggerPlugin converts the config of one seed trigger plugin type.
type triggerPlugin struct {
	fields  []string
	convert func(p *pluginConfig, d *triggerDef)
}

// triggerPlugins are the seed's trigger plugins pitstop has, by type.
var triggerPlugins = map[string]triggerPlugin{
	"alterLabel":      {[]string{"key", "value", "remove"}, func(p *pluginConfig, d *triggerDef) { d.spec.AlterLabel = alter(p) }},
	"alterAnnotation": {[]string{"key", "value", "remove"}, func(p *pluginConfig, d *triggerDef) { d.spec.AlterAnnotation = alter(p) }},
	"alterFinalizer": {[]string{"key", "remove"}, func(p *pluginConfig, d *triggerDef) {
		d.spec.AlterFinalizer = &pitstopv1alpha1.AlterFinalizerTrigger{Key: p.key(), Remove: p.boolean("remove")}
	}},
	"eviction":        {[]string{"action", "deletionTimeout", "evictionTimeout", "forceEviction"}, convertEviction},
	"alterHypervisor": {fieldNames(hypervisor.SpecFields), convertAlterHypervisor},
}

// unsupportedTriggers are the seed's trigger plugins pitstop does not
// have, with the reason.
var unsupportedTriggers = map[string]string{}

// triggerInstance converts a seed trigger instance. The seed splits
// trigger chains at && only, so its trigger names may hold any character
// (the flatcar example has reboot-ok); pitstop's are letters, digits and
// _, so other characters become _ with a note.
func (c *converter) triggerInstance(inst *instance, cfg *yaml.Node) *triggerDef {
	d := &triggerDef{instance: *inst, spec: pitstopv1alpha1.TriggerInstance{Name: triggerName(inst.name)}}
	if inst.unexpanded {
		return d
	}
	plugin, known := triggerPlugins[inst.typ]
	if why, unsupported := unsupportedTriggers[inst.typ]; unsupported {
		c.errorf(inst.typeNode, "%s: plugin type %q is not supported: %s", inst.what(), inst.typ, why)
		return d
	}
	if !known {
		c.errorf(inst.typeNode, "%s: unknown plugin type %q", inst.what(), inst.typ)
		return d
	}
	if len(d.spec.Name) > maxNameLength {
		c.errorf(inst.node, "%s: a trigger name must be at most %d characters", inst.what(), maxNameLength)
		return d
	}
	if d.spec.Name != inst.name {
		c.notef(inst.node, "%s is named %s: pitstop's trigger names are letters, digits and _", inst.what(), d.spec.Name)
	}
	before := len(c.errs)
	plugin.convert(c.pluginConfig(inst, cfg, plugin.fields...), d)
	if len(c.errs) > before {
		return d
	}
	if _, err := trigger.New(d.spec); err != nil {
		c.errorf(inst.node, "%s: %v", inst.what(), err)
		return d
	}
	d.ok = true
	return d
}

// triggerName is a seed trigger name made a pitstop one: every character
// other than letters, digits and _ becomes _, and a leading digit gets a _
// in front.
func triggerName(seed string) string {
	name := strings.Map(func(r rune) rune {
		if r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, seed)
	if name == "" || ('0' <= name[0] && name[0] <= '9') {
		name = "_" + name
	}
	return name
}

// uniqueMappedNames refuses two seed triggers, or two notifications, that
// triggerName maps to one pitstop name (reboot-ok and reboot_ok).
func (c *converter) uniqueMappedNames(list []*instance) {
	seen := map[string]*instance{}
	for _, inst := range list {
		mapped := triggerName(inst.name)
		prev, dup := seen[mapped]
		switch {
		case !dup:
			seen[mapped] = inst
		case prev.name != inst.name: // the same name twice is reported by uniqueNames
			c.errorf(inst.node, "%s and %q (line %d) would both be named %s in pitstop: rename one", inst.what(), prev.name, prev.node.Line, mapped)
		}
	}
}

// alter converts alterLabel and alterAnnotation. The seed sets the key to
// its value, "" when none is given, unless remove is set; pitstop wants
// the value spelled out.
func alter(p *pluginConfig) *pitstopv1alpha1.AlterTrigger {
	a := &pitstopv1alpha1.AlterTrigger{Key: p.key(), Remove: p.boolean("remove")}
	if !a.Remove {
		v := p.str("value", false)
		a.Value = &v
	}
	return a
}

// convertEviction maps the seed's eviction actions onto pitstop's
// NodeMaintenance triggers: cordon creates the node's NodeMaintenance with
// the drain skipped, drain creates it or drains the cordoned node (it
// cordons, then evicts every pod but DaemonSet and mirror pods, as the
// seed's does: pods no controller owns too), uncordon deletes it (which
// uncordons) or uncordons a node no NodeMaintenance holds.
func convertEviction(p *pluginConfig, d *triggerDef) {
	switch action := p.str("action", true); action {
	case "drain":
		d.spec.Drain = &pitstopv1alpha1.DrainTrigger{Drain: pitstopv1alpha1.DrainSpec{UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete}}
	case "uncordon":
		d.spec.Restore = &pitstopv1alpha1.RestoreTrigger{Uncordon: true}
		p.c.notef(p.node("action"), "%s: uncordon becomes restore with uncordon: it deletes the node's NodeMaintenance, which uncordons the node, and uncordons a node no NodeMaintenance holds (one the maintenance-controller cordoned)", p.what)
	case "cordon":
		d.spec.Cordon = &pitstopv1alpha1.CordonTrigger{}
	case "":
	default:
		p.errorf("action", "%q is not one of drain, cordon or uncordon", action)
	}
	for _, key := range []string{"deletionTimeout", "evictionTimeout"} {
		if p.has(key) {
			p.duration(key, false)
			p.notef(key, "%s is dropped: the seed's drain no longer uses it, and pitstop's waits as long as it takes unless drain.timeout is set", key)
		}
	}
	if p.boolean("forceEviction") {
		if d.spec.Drain == nil {
			p.notef("forceEviction", "forceEviction is dropped: only a drain evicts pods")
		} else {
			// The seed force-deletes pods still terminating after their
			// grace period.
			d.spec.Drain.Drain.ForceDeleteTerminating = true
		}
	}
}
