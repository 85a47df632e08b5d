package medik8s

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// isRefusal says whether the API server, or pitstop's webhook, refused a
// request for what it asked (invalid, forbidden), as opposed to failing
// for a while.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}
