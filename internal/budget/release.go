package budget

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Release gives up every slot of the budget node holds; slots beyond max
// (left from a larger budget) are released too.
func (s *Slots) Release(ctx context.Context, key Key, node string) error {
	if !s.releaseCached(ctx, key, node) {
		if err := s.releaseLive(ctx, key, node); err != nil {
			return err
		}
	}
	s.remember(key, node, "", time.Time{})
	return nil
}

// releaseCached gives back the node's slots as the cache shows them, each
// deleted only if unchanged since (its resourceVersion as cached), so that
// a slot that changed hands meanwhile is never freed. It reports false when
// the API server must be asked: the cache shows no slot of the node, or not
// the one this process gave it a moment ago, or one had changed.
func (s *Slots) releaseCached(ctx context.Context, key Key, node string) bool {
	if s.Cache == nil {
		return false
	}
	recent := s.recentSlot(key, node, s.now())
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return false
	}
	released, sawRecent := false, recent == ""
	for i := range list.Items {
		lease := list.Items[i].DeepCopy()
		if HolderOf(lease) != node {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return false
		}
		s.wrote(lease.Name, lease.ResourceVersion, nil, s.now())
		released, sawRecent = true, sawRecent || lease.Name == recent
	}
	return released && sawRecent
}

// releaseLive gives back the node's slots as the API server lists them.
func (s *Slots) releaseLive(ctx context.Context, key Key, node string) error {
	list := &coordinationv1.LeaseList{}
	if err := s.live(ctx, key, list); err != nil {
		return fmt.Errorf("listing slots of %s: %w", key.Name, err)
	}
	for i := range list.Items {
		lease := &list.Items[i]
		if HolderOf(lease) != node {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			s.wrote(lease.Name, lease.ResourceVersion, nil, s.now())
		case !apierrors.IsConflict(err):
			return fmt.Errorf("releasing slot %s: %w", lease.Name, err)
		}
	}
	return nil
}

// Sweep gives back every held slot, of any budget, that stale says its
// holder no longer needs: slots left by a manager stopped between writing
// a node out of maintenance and giving its slot back.
func (s *Slots) Sweep(ctx context.Context, stale func(key Key, holder string, lease *coordinationv1.Lease) bool) error {
	list := &coordinationv1.LeaseList{}
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.HasLabels{pitstopv1alpha1.LabelBudget}); err != nil {
		return fmt.Errorf("listing budget slots: %w", err)
	}
	s.forgetUnseen(list)
	for i := range list.Items {
		lease := &list.Items[i]
		holder := HolderOf(lease)
		key, _ := KeyOf(lease)
		if holder == "" || !stale(key, holder, lease) {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			s.wrote(lease.Name, lease.ResourceVersion, nil, s.now())
		case !apierrors.IsConflict(err):
			return fmt.Errorf("giving back slot %s: %w", lease.Name, err)
		}
	}
	return nil
}
