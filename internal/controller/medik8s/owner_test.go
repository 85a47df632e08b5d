package medik8s

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWithNodeOwner(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-2"}}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-2", BlockOwnerDeletion: ptr.To(false), Controller: ptr.To(false)}
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Upgrade", Name: "u", UID: "uid-9"}
	for name, tc := range map[string]struct {
		refs        []metav1.OwnerReference
		want        []metav1.OwnerReference
		wantChanged bool
	}{
		"adds the Node as an owner that neither controls it nor blocks the Node's deletion": {
			want: []metav1.OwnerReference{owner}, wantChanged: true,
		},
		"leaves a reference to the Node that is there already": {
			refs: []metav1.OwnerReference{other, owner},
			want: []metav1.OwnerReference{other, owner},
		},
		"replaces a reference to an earlier Node of the same name": {
			refs: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-1"}},
			want: []metav1.OwnerReference{owner}, wantChanged: true,
		},
		"keeps the other owners": {
			refs: []metav1.OwnerReference{other, {APIVersion: "v1", Kind: "Node", Name: "n0", UID: "uid-0"}},
			want: []metav1.OwnerReference{other, {APIVersion: "v1", Kind: "Node", Name: "n0", UID: "uid-0"}, owner}, wantChanged: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, changed := withNodeOwner(tc.refs, node)
			if changed != tc.wantChanged || !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("withNodeOwner = %+v (changed %v), want %+v (changed %v)", got, changed, tc.want, tc.wantChanged)
			}
		})
	}
}
