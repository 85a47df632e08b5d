package importer

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// manifest is a MaintenanceProfile without its status, which belongs to
// the controller: what a user applies.
type manifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              pitstopv1alpha1.MaintenanceProfileSpec `json:"spec"`
}

// RenderResult writes the import's Secret, if any, then its profiles, as
// Render does: the Secret first, so that one kubectl apply creates it
// before the profiles that read it.
func RenderResult(r *Result) ([]byte, error) {
	var out bytes.Buffer
	if r.Secret != nil {
		data, err := yaml.Marshal(r.Secret)
		if err != nil {
			return nil, err
		}
		out.Write(data)
		if len(r.Profiles) > 0 {
			out.WriteString("---\n")
		}
	}
	profiles, err := Render(r.Profiles)
	if err != nil {
		return nil, err
	}
	out.Write(profiles)
	return out.Bytes(), nil
}

// Render writes profiles as YAML documents separated by "---", as kubectl
// apply reads them. Fields are written as the API's JSON names them, in
// the order sigs.k8s.io/yaml writes them (sorted).
func Render(profiles []pitstopv1alpha1.MaintenanceProfile) ([]byte, error) {
	var out bytes.Buffer
	for i := range profiles {
		p := &profiles[i]
		m := manifest{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta, Spec: p.Spec}
		if m.APIVersion == "" && m.Kind == "" {
			m.APIVersion, m.Kind = pitstopv1alpha1.GroupVersion.String(), "MaintenanceProfile"
		}
		data, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(data)
	}
	return out.Bytes(), nil
}
