package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Annotations of a Slack thread's Lease: where the thread is. The Lease's
// acquireTime is when the thread was opened, its duration the period.
const ()

// ErrForeignLease says that a slackThread notification's Lease name belongs
// to a Lease the sender did not create, which it leaves alone.
var ErrForeignLease = errors.New("refusing to take over a Lease")

// isThreadLease says whether a slackThread notification created the Lease:
// it carries pitstopv1alpha1.LabelSlackThread, or, made before that label, the thread's
// annotations.
func isThreadLease(lease *coordinationv1.Lease) bool {
	if lease.Labels[pitstopv1alpha1.LabelSlackThread] == "true" {
		return true
	}
	_, channel := lease.Annotations[pitstopv1alpha1.AnnotationSlackChannel]
	_, thread := lease.Annotations[pitstopv1alpha1.AnnotationSlackThread]
	return channel && thread
}

// ThreadLeaseName is the Lease that holds a slackThread notification's
// thread: the instance's leaseName, else pitstop-slack-<profile>-<name>.
func ThreadLeaseName(profile string, inst pitstopv1alpha1.NotificationInstance) string {
	if inst.SlackThread != nil && inst.SlackThread.LeaseName != "" {
		return inst.SlackThread.LeaseName
	}
	return strings.ToLower(strings.ReplaceAll("pitstop-slack-"+profile+"-"+inst.Name, "_", "-"))
}

// slackThread replies in the period's thread, opening one with the title
// first when there is none or the last one is older than the period.
func (s *Sender) slackThread(ctx context.Context, m Message, spec *pitstopv1alpha1.SlackThreadNotification) error {
	token, err := s.secret(ctx, spec.Token)
	if err != nil {
		return err
	}
	opts := []slack.Option{slack.OptionHTTPClient(s.HTTP)}
	if s.SlackAPIURL != "" {
		opts = append(opts, slack.OptionAPIURL(s.SlackAPIURL))
	}
	api := slack.New(token, opts...)

	name := ThreadLeaseName(m.Profile, m.spec)
	lease := &coordinationv1.Lease{}
	err = s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading Lease %s/%s: %w", s.Namespace, name, err)
	}
	exists := err == nil
	if exists && !isThreadLease(lease) {
		return fmt.Errorf("%w: Lease %s/%s was not made by a slackThread notification (spec.notifications[].slackThread.leaseName names another Lease)", ErrForeignLease, s.Namespace, name)
	}
	now := time.Now()
	ts := lease.Annotations[pitstopv1alpha1.AnnotationSlackThread]
	open := exists && ts != "" && lease.Annotations[pitstopv1alpha1.AnnotationSlackChannel] == spec.Channel &&
		lease.Spec.AcquireTime != nil && now.Before(lease.Spec.AcquireTime.Add(spec.Period.Duration))
	if !open {
		_, ts, err = api.PostMessageContext(ctx, spec.Channel, slack.MsgOptionText(m.Texts["title"], false))
		if err != nil {
			return fmt.Errorf("opening a Slack thread in %s: %w", spec.Channel, err)
		}
		lease.Name, lease.Namespace = name, s.Namespace
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		lease.Labels[pitstopv1alpha1.LabelSlackThread] = "true"
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[pitstopv1alpha1.AnnotationSlackChannel] = spec.Channel
		lease.Annotations[pitstopv1alpha1.AnnotationSlackThread] = ts
		lease.Spec.HolderIdentity = ptr.To("pitstop")
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: now}
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(spec.Period.Seconds()))
		if exists {
			err = s.Client.Update(ctx, lease)
		} else {
			err = s.Client.Create(ctx, lease)
		}
		if err != nil {
			// The thread is open; the next message opens another one.
			return fmt.Errorf("recording the Slack thread in Lease %s/%s: %w", s.Namespace, name, err)
		}
	}
	if _, _, err := api.PostMessageContext(ctx, spec.Channel, slack.MsgOptionText(m.Texts["message"], false), slack.MsgOptionTS(ts)); err != nil {
		return fmt.Errorf("replying in the Slack thread in %s: %w", spec.Channel, err)
	}
	return nil
}
