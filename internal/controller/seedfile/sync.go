package seedfile

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/importer"
)

// refusal is an edit that cannot be applied as it is: retrying without a
// change of the file would be refused again.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// sync applies version v of the file, read as data (or readErr). It
// returns whether it applied it; false with no error is a refused edit,
// reported. An error is a failure on the way, to try again.
func (c *Controller) sync(ctx context.Context, v string, data []byte, readErr error) (bool, error) {
	var list pitstopv1alpha1.MaintenanceProfileList
	if err := c.reader.List(ctx, &list); err != nil {
		return false, fmt.Errorf("listing MaintenanceProfiles: %w", err)
	}
	mine := managed(list.Items)
	err := c.apply(ctx, v, data, readErr, list.Items)
	var refused refusal
	switch {
	case errors.As(err, &refused):
		return false, c.refuse(ctx, v, mine, refused.error)
	case err != nil:
		return false, err
	}
	return true, nil
}

// apply imports the file and, when every object it yields passes a dry
// run, applies them, deletes what the file made and no longer lists, and
// marks the file's profiles current. A refusal comes back as one.
func (c *Controller) apply(ctx context.Context, v string, data []byte, readErr error, existing []pitstopv1alpha1.MaintenanceProfile) error {
	r, err := load(c.opts.Path, c.opts.Namespace, c.opts.Env, data, readErr)
	if err != nil {
		return refusal{err}
	}
	c.logNotes(v, r.Notes)
	secret, err := c.secret(ctx)
	if err != nil {
		return err
	}
	p, err := newPlan(r, existing, secret)
	if err != nil {
		return refusal{fmt.Errorf("%s: %w", c.opts.Path, err)}
	}
	// Every object first as a dry run, which the API server validates and
	// admits as it would the write: one it refuses refuses the edit before
	// anything has changed.
	for _, obj := range p.objects() {
		if _, err := c.applyObject(ctx, obj, client.DryRunAll); err != nil {
			return err
		}
	}
	if err := c.write(ctx, v, p, existing); err != nil {
		return err
	}
	if len(p.waiting) > 0 {
		return fmt.Errorf("%w: %s", errWaiting, strings.Join(p.waiting, ", "))
	}
	return nil
}

// write carries out a plan that passed its dry run: the objects applied,
// the stale ones deleted, and each applied profile marked current.
func (c *Controller) write(ctx context.Context, v string, p *plan, existing []pitstopv1alpha1.MaintenanceProfile) error {
	var applied []*unstructured.Unstructured
	for _, obj := range p.objects() {
		got, err := c.applyObject(ctx, obj)
		if err != nil {
			return err
		}
		if obj != p.secret {
			applied = append(applied, got)
		}
	}
	for i := range p.stale {
		if err := c.deleteStale(ctx, v, &p.stale[i]); err != nil {
			return err
		}
	}
	if p.staleSecret != nil {
		err := c.client.Delete(ctx, p.staleSecret, client.Preconditions{UID: &p.staleSecret.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Secret %s: %w", klog.KObj(p.staleSecret), err)
		}
	}
	before := map[string]*pitstopv1alpha1.MaintenanceProfile{}
	for i := range existing {
		before[existing[i].Name] = &existing[i]
	}
	for _, obj := range applied {
		if err := c.markApplied(ctx, v, obj, before[obj.GetName()]); err != nil {
			return err
		}
	}
	return nil
}

// errWaiting says the file lists profiles still being deleted (their
// nodes leaving them): the rest is applied, and they are made again at a
// later read, once they are gone.
var errWaiting = errors.New("profiles the file lists are still being deleted; they are applied again once they are gone")

// objects are what the plan applies, the Secret first.
func (p *plan) objects() []*unstructured.Unstructured {
	if p.secret == nil {
		return p.profiles
	}
	return append([]*unstructured.Unstructured{p.secret}, p.profiles...)
}

// secret is the notifications' Secret, nil when there is none.
func (c *Controller) secret(ctx context.Context) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: c.opts.Namespace, Name: importer.DefaultSecretName}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the notifications' Secret: %w", err)
	}
	return s, nil
}

// applyObject applies obj under the seed file's field manager, taking
// over fields someone else set since: the file says what they are. It
// returns the object as the API server answered it. An object the API
// server refuses is a refusal naming it.
func (c *Controller) applyObject(ctx context.Context, obj *unstructured.Unstructured, opts ...client.ApplyOption) (*unstructured.Unstructured, error) {
	opts = append(opts, client.FieldOwner(FieldManager), client.ForceOwnership)
	got := obj.DeepCopy() // the answer is written into it
	err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(got), opts...)
	switch {
	case err == nil:
		return got, nil
	case isRefused(err):
		return nil, refusal{fmt.Errorf("%s: the API server refuses %s %s: %w", c.opts.Path, obj.GetKind(), obj.GetName(), err)}
	}
	return nil, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
}

// isRefused says the API server refused a write for what it holds (its
// schema, its CEL rules, the admission webhook, RBAC), not for a failure
// on the way that a retry can pass.
func isRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err)
}

// deleteStale deletes a profile the file made and no longer lists: the
// profile controller's finalizer holds it until its nodes have left it.
func (c *Controller) deleteStale(ctx context.Context, v string, p *pitstopv1alpha1.MaintenanceProfile) error {
	err := c.client.Delete(ctx, p, client.Preconditions{UID: &p.UID})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // gone, or made again under the name since
	case err != nil:
		return fmt.Errorf("deleting MaintenanceProfile %s: %w", p.Name, err)
	}
	c.log.Info("Deleted a profile the file no longer lists", "profile", p.Name)
	c.eventDeleted(p, v)
	return nil
}

// markApplied sets the SeedConfigCurrent condition of a profile just
// applied (obj, as the API server returned it; had, as it was before, or
// nil) and records an Event when the apply changed the profile or made it
// current again.
func (c *Controller) markApplied(ctx context.Context, v string, obj *unstructured.Unstructured, had *pitstopv1alpha1.MaintenanceProfile) error {
	p := had
	if p == nil {
		p = &pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName()}}
	}
	message := fmt.Sprintf("as %s says (version %s)", c.opts.Path, short(v))
	if err := c.writeCondition(ctx, p, metav1.ConditionTrue, pitstopv1alpha1.ReasonApplied, message, obj.GetGeneration()); err != nil {
		return err
	}
	if had != nil && had.Generation == obj.GetGeneration() && isCurrent(had) {
		return nil
	}
	what := "updated"
	if had == nil {
		what = "created"
	}
	c.log.Info("Applied a profile from the file", "profile", obj.GetName(), "change", what, "version", short(v))
	c.eventApplied(obj, v, what+" "+message)
	return nil
}

// refuse reports a refused edit: an Event and the SeedConfigCurrent
// condition False on each profile the file made, which keep the version
// last applied; while there is none, an Event on pitstop's Namespace.
func (c *Controller) refuse(ctx context.Context, v string, mine []pitstopv1alpha1.MaintenanceProfile, cause error) error {
	c.log.Error(cause, "Refused an edit of the seed configuration file; the profiles keep the last version applied", "version", short(v))
	message := fmt.Sprintf("edit refused, the profiles keep the version last applied: %v", cause)
	if len(mine) == 0 {
		c.eventRefused(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.opts.Namespace}}, v, message)
		return nil
	}
	var errs []error
	for i := range mine {
		p := &mine[i]
		c.eventRefused(p, v, message)
		errs = append(errs, c.writeCondition(ctx, p, metav1.ConditionFalse, pitstopv1alpha1.ReasonRefused, message, p.Generation))
	}
	return errors.Join(errs...)
}

// logNotes logs the importer's notes, once per version of the file.
func (c *Controller) logNotes(v string, notes []importer.Note) {
	if v == c.noted {
		return
	}
	c.noted = v
	for _, n := range notes {
		c.log.Info("Import note", "note", n.String(), "warning", n.Warning)
	}
}
