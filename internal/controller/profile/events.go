package profile

import (
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// latestWarnings records Warning Events so that the latest message of a
// repeated one shows. client-go's events.k8s.io broadcaster folds Events
// with the same type, reason, action, regarding and related object into one
// series, and a series keeps the note of its first Event (for up to 30
// minutes, while it repeats): the message is not in the key. A ChangeFailed
// or ProfileNotRunnable Event whose cause changed would show the old cause.
// So a Warning's action carries a short hash of its message: a new message
// is an Event of its own, and the same message repeated is still folded
// into a series (no write per evaluation). Normal Events pass as they are.
type latestWarnings struct{ events.EventRecorder }

// Eventf records the Event, a Warning under an action of its message.
func (r latestWarnings) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype != corev1.EventTypeWarning {
		r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
		return
	}
	message := fmt.Sprintf(note, args...)
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, messageAction(action, message), "%s", message)
}

// messageAction is action with a short hash of message: distinct for
// distinct messages, within the 128 characters an action may have.
func messageAction(action, message string) string {
	h := fnv.New32a()
	h.Write([]byte(message))
	return fmt.Sprintf("%s-%08x", action, h.Sum32())
}
