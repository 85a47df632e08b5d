// Package install puts pitstop's CRDs into a cluster and waits until the API
// server serves them. It is used where pitstop installs itself (the demo,
// tests); production installs go through kustomize or Helm.
package install

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CRDs creates each CRD, or updates it if it exists, then waits until every
// one is Established so clients can use it at once.
func CRDs(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, want := range crds {
		crd := want.DeepCopy()
		err := c.Create(ctx, crd)
		if apierrors.IsAlreadyExists(err) {
			existing := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), existing); err != nil {
				return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
			}
			existing.Spec = want.Spec
			err = c.Update(ctx, existing)
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			return isEstablished(got), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	return nil
}

func isEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
