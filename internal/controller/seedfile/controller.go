package seedfile

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of Options.
const (
	// DefaultInterval is how often the file is read. A mounted ConfigMap
	// changes a minute or so after its edit (the kubelet's sync period),
	// so a few seconds more cost nothing; reading a few kilobytes costs
	// nothing either.
	DefaultInterval = 3 * time.Second
	// DefaultResync is how often a file applied without change is applied
	// again, so that a profile someone changed or deleted by hand is put
	// back as the file says.
	DefaultResync = 10 * time.Minute
)

// Options configure the seed file.
type Options struct {
	// Path is the maintenance.yaml file.
	Path string
	// Namespace is pitstop's: the notifications' Secret is kept there, and
	// while the file yields no profile, the Events of a refused edit
	// regard this Namespace.
	Namespace string
	// Interval is how often the file is read; DefaultInterval when zero.
	Interval time.Duration
	// Resync is how often an unchanged file is applied again;
	// DefaultResync when zero.
	Resync time.Duration
	// Env looks up the variables ${NAME} in the file refers to;
	// os.LookupEnv when nil.
	Env func(string) (string, bool)
	// Clock is the real clock unless a test sets one.
	Clock clock.WithTicker
}

// Controller follows the file, on the leader only.
type Controller struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	log      logr.Logger
	opts     Options

	// last is what the last sync that finished did; only Start's
	// goroutine touches it.
	last outcome
	// noted is the version whose notes were logged.
	noted string
}

// outcome is what a sync made of one version of the file.
type outcome struct {
	version string
	applied bool
	at      time.Time
}

// Setup checks the file (one that does not import stops pitstop from
// starting) and adds the controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Controller, error) {
	if opts.Path == "" || opts.Namespace == "" {
		return nil, errors.New("the seed file needs its path and pitstop's namespace")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.Env == nil {
		opts.Env = os.LookupEnv
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if _, err := Load(opts.Path, opts.Namespace, opts.Env); err != nil {
		return nil, err
	}
	c := &Controller{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder("pitstop-seed-file"),
		log: mgr.GetLogger().WithName("seed-file").WithValues("file", opts.Path), opts: opts,
	}
	return c, mgr.Add(c)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica applies the file.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start applies the file at once, and then each change of it, until ctx
// ends.
func (c *Controller) Start(ctx context.Context) error {
	ticker := c.opts.Clock.NewTicker(c.opts.Interval)
	defer ticker.Stop()
	for {
		c.poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// poll reads the file and syncs when its content changed since the last
// sync, or when an applied version is due for a resync. A sync that
// failed on the way (the API server did not answer) is tried again at the
// next poll; a refused edit is not, until the file changes.
func (c *Controller) poll(ctx context.Context) {
	data, readErr := os.ReadFile(c.opts.Path)
	v := version(data, readErr)
	now := c.opts.Clock.Now()
	changed := v != c.last.version
	if !changed && (!c.last.applied || now.Sub(c.last.at) < c.opts.Resync) {
		return
	}
	applied, err := c.sync(ctx, v, data, readErr)
	switch {
	case errors.Is(err, errWaiting):
		c.log.V(1).Info("Waiting for deleted profiles to go", "reason", err.Error(), "version", short(v))
		return
	case err != nil:
		if ctx.Err() == nil {
			c.log.Error(err, "Applying the seed configuration file; trying again", "version", short(v))
		}
		return
	}
	c.last = outcome{version: v, applied: applied, at: now}
}
