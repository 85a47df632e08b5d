package importer

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/hypervisor"
)

// fieldNames are the names of a Hypervisor part's known fields: those the
// seed's plugins accept too (the fields of the operator's Go types).
func fieldNames(known map[string]hypervisor.Kind) []string {
	return slices.Sorted(maps.Keys(known))
}

// hypervisorFields reads a checkHypervisor or alterHypervisor config: its
// fields, each with the value its kind says.
func hypervisorFields(p *pluginConfig, known map[string]hypervisor.Kind) pitstopv1alpha1.HypervisorFields {
	out := pitstopv1alpha1.HypervisorFields{}
	for _, name := range fieldNames(known) {
		if !p.has(name) {
			continue
		}
		var v any
		switch known[name] {
		case hypervisor.Bool:
			v = p.boolean(name)
		case hypervisor.String:
			v = p.str(name, false)
		case hypervisor.Number:
			s := p.str(name, false)
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				p.errorf(name, "%q is not a number", s)
				continue
			}
			v = f
		default:
			v = p.list(name, false)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			p.errorf(name, "%v", err)
			continue
		}
		out[name] = apiextensionsv1.JSON{Raw: raw}
	}
	if len(out) == 0 {
		p.errorf("config", "name at least one field")
	}
	return out
}

func convertCheckHypervisor(p *pluginConfig, d *checkDef) {
	d.spec.CheckHypervisor = &pitstopv1alpha1.CheckHypervisorCheck{Status: hypervisorFields(p, hypervisor.StatusFields)}
}

func convertAlterHypervisor(p *pluginConfig, d *triggerDef) {
	d.spec.AlterHypervisor = &pitstopv1alpha1.AlterHypervisorTrigger{Spec: hypervisorFields(p, hypervisor.SpecFields)}
}
