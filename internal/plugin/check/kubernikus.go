package check

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// Kubernikus reads the sizes a Kubernikus cluster's node pools should
// have, through the Kubernikus API.
type Kubernikus interface {
	// PoolSizes returns each node pool's size by name. cloudConfig is the
	// OpenStack account as a cloudprovider.conf; nil means the manager's.
	PoolSizes(ctx context.Context, cloudConfig []byte, cluster string) (map[string]int, error)
}

// kubernikusTTL is how long a kubernikusCount check reuses the pools it
// read: a fleet evaluated at once asks the Kubernikus API once.
const kubernikusTTL = 10 * time.Second

// kubernikusRecheck is when a failing kubernikusCount check is asked
// again: the node pools change outside the cluster.
const kubernikusRecheck = time.Minute

// errNoKubernikus says that a kubernikusCount check was evaluated where
// the Kubernikus API is not reached: by `pitstop explain`.
var errNoKubernikus = errors.New("only pitstop's manager reads the Kubernikus API; the dashboard shows its last result of this check")

// kubernikusCount passes while the cluster has at least as many nodes as
// its Kubernikus node pools should have: a node the pool is still
// replacing holds maintenance back.
type kubernikusCount struct {
	cluster string
	secret  *pitstopv1alpha1.SecretKeyRef
	deps    Deps
	mu      sync.Mutex
	pools   map[string]int
	readAt  time.Time
}

func newKubernikusCount(cfg *pitstopv1alpha1.KubernikusCountCheck, deps Deps) (Check, error) {
	if strings.TrimSpace(cfg.Cluster) == "" {
		return nil, errors.New("cluster: must not be empty")
	}
	return &kubernikusCount{cluster: cfg.Cluster, secret: cfg.CloudProviderSecret, deps: deps}, nil
}

// Evaluate implements Check.
func (k *kubernikusCount) Evaluate(ctx context.Context, c Context) (Result, error) {
	pools, err := k.read(ctx, c.Now)
	if err != nil {
		return Result{}, err
	}
	want := 0
	names := make([]string, 0, len(pools))
	for name, size := range pools {
		want += size
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %d", n, pools[n])
	}
	have := len(c.Cluster.Nodes())
	r := Result{Passed: have >= want, Reason: fmt.Sprintf("%d nodes, Kubernikus cluster %s should have %d (%s)", have, k.cluster, want, strings.Join(parts, ", "))}
	if !r.Passed {
		r.NextChange = c.recheck(kubernikusRecheck)
	}
	return r, nil
}

// read returns the node pools as read at most kubernikusTTL before now.
func (k *kubernikusCount) read(ctx context.Context, now time.Time) (map[string]int, error) {
	if k.deps.Kubernikus == nil {
		return nil, errNoKubernikus
	}
	k.mu.Lock()
	pools, readAt := k.pools, k.readAt
	k.mu.Unlock()
	if pools != nil && !now.Before(readAt) && now.Sub(readAt) < kubernikusTTL {
		return pools, nil
	}
	var conf []byte
	if k.secret != nil {
		if k.deps.Secrets == nil {
			return nil, fmt.Errorf("cloudProviderSecret: Secret %s (key %q) is not read here: %w", k.secret.Name, k.secret.Key, errNoSecrets)
		}
		v, err := profilesecret.Read(ctx, k.deps.Secrets, k.deps.Namespace, *k.secret)
		if err != nil {
			return nil, fmt.Errorf("cloudProviderSecret: %w", err)
		}
		conf = []byte(v)
	}
	pools, err := k.deps.Kubernikus.PoolSizes(ctx, conf, k.cluster)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.pools, k.readAt = pools, now
	k.mu.Unlock()
	return pools, nil
}
