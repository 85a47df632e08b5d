package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// EventFailed is the Event on a node whose notification could not be
// delivered.
const EventFailed = "NotificationFailed"

const (
	// queueSize bounds the messages waiting to be sent; more are dropped
	// and counted as failed.
	queueSize = 1024
	// workers send at once, so that one slow mail server does not hold
	// up Slack.
	workers = 4
)

// retryWaits are the waits between a message's delivery attempts.
var retryWaits = []time.Duration{2 * time.Second, 10 * time.Second}

var (
	sentTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_notifications_sent_total",
		Help: "Notifications delivered, by profile and plugin (slack, slackThread, mail, webhook).",
	}, []string{"profile", "plugin"})
	failedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_notifications_failed_total",
		Help: "Notifications given up on after every attempt failed (or dropped because too many were waiting), by profile and plugin.",
	}, []string{"profile", "plugin"})
)

func init() {
	metrics.Registry.MustRegister(sentTotal, failedTotal)
}

// Dispatcher sends messages in the background, retrying each a few times
// (not when it names a Secret that profiles may not use); a message that
// cannot be delivered is reported as a Warning Event on its node and
// counted. It is a manager Runnable.
type Dispatcher struct {
	sender   *Sender
	recorder events.EventRecorder
	log      logr.Logger
	queue    chan job
}

type job struct {
	node *corev1.Node
	msg  Message
}

// NewDispatcher sends through sender and reports what it cannot deliver
// through recorder and log. Messages queue from the start; they are sent
// once the manager starts it.
func NewDispatcher(sender *Sender, recorder events.EventRecorder, log logr.Logger) *Dispatcher {
	return &Dispatcher{sender: sender, recorder: recorder, log: log, queue: make(chan job, queueSize)}
}

// Enqueue hands a message over for sending; it never blocks.
func (d *Dispatcher) Enqueue(node *corev1.Node, m Message) {
	select {
	case d.queue <- job{node: node, msg: m}:
	default:
		d.Failed(node, m, errQueueFull)
	}
}

var errQueueFull = errors.New("too many notifications waiting to be sent; dropped")

// Start sends until ctx ends; what is still queued then is not sent.
func (d *Dispatcher) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-d.queue:
					d.deliver(ctx, j)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection says the dispatcher runs on the leader, like the
// controller that queues its messages.
func (d *Dispatcher) NeedLeaderElection() bool { return true }

func (d *Dispatcher) deliver(ctx context.Context, j job) {
	var err error
	for attempt := 0; ; attempt++ {
		if err = d.sender.Send(ctx, j.msg); err == nil {
			sentTotal.WithLabelValues(j.msg.Profile, j.msg.Plugin).Inc()
			return
		}
		if attempt == len(retryWaits) || errors.Is(err, profilesecret.ErrNotUsable) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryWaits[attempt]):
		}
	}
	d.Failed(j.node, j.msg, err)
}

// Failed reports a message that will not be delivered: a Warning Event on
// the node, a log line and the failure metric.
func (d *Dispatcher) Failed(node *corev1.Node, m Message, err error) {
	failedTotal.WithLabelValues(m.Profile, m.Plugin).Inc()
	d.log.Error(err, "Notification not delivered", "node", m.Node, "profile", m.Profile, "notification", m.Notification)
	if d.recorder != nil {
		d.recorder.Eventf(node, nil, corev1.EventTypeWarning, EventFailed, "Notify",
			"notification %s (%s) of profile %s was not delivered: %v", m.Notification, m.Plugin, m.Profile, err)
	}
}
