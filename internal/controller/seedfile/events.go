package seedfile

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// maxNote is the most an Event's note may hold: the API server refuses an
// events.k8s.io Event with a longer one.
const maxNote = 1024

// Actions of the Events. Each carries the content's version: client-go's
// broadcaster folds Events of the same type, reason, action and object
// into a series that keeps its first note, so a second refused edit
// would otherwise show the first one's error.
const (
	actionApply  = "Apply"
	actionDelete = "Delete"
)

func (c *Controller) eventApplied(p runtime.Object, v, message string) {
	c.recorder.Eventf(p, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventSeedConfigApplied, actionApply+"-"+short(v), "%s", bounded(message))
}

func (c *Controller) eventRefused(regarding runtime.Object, v, message string) {
	c.recorder.Eventf(regarding, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventSeedConfigRefused, actionApply+"-"+short(v), "%s", bounded(message))
}

func (c *Controller) eventDeleted(p runtime.Object, v string) {
	c.recorder.Eventf(p, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventSeedConfigProfileDeleted, actionDelete+"-"+short(v),
		"%s no longer lists the profile: deleted", c.opts.Path)
}

// bounded cuts a message to maxNote bytes.
func bounded(message string) string { return cut(message, maxNote) }

// cut cuts s to n bytes at most, at a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("…")
	for end > 0 && (s[end]&0xC0) == 0x80 {
		end--
	}
	return s[:end] + "…"
}
