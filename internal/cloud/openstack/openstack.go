package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
)

// serviceKubernikus is the Kubernikus API's type in the service catalog.
const serviceKubernikus = "kubernikus"

// account reaches the APIs of one OpenStack account: a Keystone token
// (renewed when it expires), Nova, and the Kubernikus API.
type account struct {
	cfg CloudConfig

	mu       sync.Mutex
	provider *gophercloud.ProviderClient
}

// Accounts keeps one authenticated client per OpenStack account, so that a
// token serves every call until it expires.
type Accounts struct {
	mu   sync.Mutex
	byID map[CloudConfig]*account
}

// NewAccounts returns an empty set of accounts.
func NewAccounts() *Accounts { return &Accounts{byID: map[CloudConfig]*account{}} }

func (a *Accounts) of(cfg CloudConfig) *account {
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, ok := a.byID[cfg]
	if !ok {
		acc = &account{cfg: cfg}
		a.byID[cfg] = acc
	}
	return acc
}

// client returns the account's provider client, logging in on first use.
// A failed login is not kept: the next call tries again.
func (a *account) client(ctx context.Context) (*gophercloud.ProviderClient, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.provider != nil {
		return a.provider, nil
	}
	p, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: a.cfg.AuthURL, Username: a.cfg.Username, Password: a.cfg.Password,
		DomainName: a.cfg.DomainName, TenantID: a.cfg.TenantID, AllowReauth: true,
	})
	if err != nil {
		return nil, fmt.Errorf("logging in to OpenStack at %s as %q: %w", a.cfg.AuthURL, a.cfg.Username, err)
	}
	a.provider = p
	return p, nil
}

// Server is what pitstop reads of a Nova server before it deletes it.
type Server struct {
	ID, Name string
	// Metadata holds, for a server of a Kubernikus node pool, its cluster
	// (MetadataCluster) and pool.
	Metadata map[string]string
}

// compute is the account's Nova client.
func (a *Accounts) compute(ctx context.Context, cfg CloudConfig) (*gophercloud.ServiceClient, error) {
	p, err := a.of(cfg).client(ctx)
	if err != nil {
		return nil, err
	}
	compute, err := openstack.NewComputeV2(p, gophercloud.EndpointOpts{Region: cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("finding Nova in the service catalog: %w", err)
	}
	return compute, nil
}

// GetServer reads the Nova server with ID id; nil when Nova has none.
func (a *Accounts) GetServer(ctx context.Context, cfg CloudConfig, id string) (*Server, error) {
	compute, err := a.compute(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := servers.Get(ctx, compute, id).Extract()
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading server %s: %w", id, err)
	}
	return &Server{ID: s.ID, Name: s.Name, Metadata: s.Metadata}, nil
}

// DeleteServer deletes the Nova server with ID id; one gone already is no
// error.
func (a *Accounts) DeleteServer(ctx context.Context, cfg CloudConfig, id string) error {
	compute, err := a.compute(ctx, cfg)
	if err != nil {
		return err
	}
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return fmt.Errorf("deleting server %s: %w", id, err)
	}
	return nil
}

// NodePool is a Kubernikus node pool's name and size.
type NodePool struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// NodePools reads the node pools of the Kubernikus cluster named cluster.
// The API is found in the service catalog (type kubernikus), else at
// https://kubernikus.<region>.cloud.sap/ as the maintenance-controller
// assumes.
func (a *Accounts) NodePools(ctx context.Context, cfg CloudConfig, cluster string) ([]NodePool, error) {
	p, err := a.of(cfg).client(ctx)
	if err != nil {
		return nil, err
	}
	endpoint, err := p.EndpointLocator(gophercloud.EndpointOpts{Type: serviceKubernikus, Region: cfg.Region, Availability: gophercloud.AvailabilityPublic})
	if err != nil {
		var notFound *gophercloud.ErrEndpointNotFound
		if !errors.As(err, &notFound) {
			return nil, fmt.Errorf("finding Kubernikus in the service catalog: %w", err)
		}
		endpoint = fmt.Sprintf("https://kubernikus.%s.cloud.sap/", cfg.Region)
	}
	sc := &gophercloud.ServiceClient{ProviderClient: p, Endpoint: gophercloud.NormalizeURL(endpoint), Type: serviceKubernikus}
	var kluster struct {
		Spec struct {
			NodePools []NodePool `json:"nodePools"`
		} `json:"spec"`
	}
	if _, err := sc.Get(ctx, sc.ServiceURL("api", "v1", "clusters", url.PathEscape(cluster)), &kluster, nil); err != nil {
		return nil, fmt.Errorf("reading Kubernikus cluster %s: %w", cluster, err)
	}
	return kluster.Spec.NodePools, nil
}

// Pools serves kubernikusCount checks: the node pools of a Kubernikus
// cluster, read with the account a check gives or the manager's file.
type Pools struct {
	Accounts *Accounts
	// CloudConfigPath is the manager's cloudprovider.conf.
	CloudConfigPath string
}

// PoolSizes implements check.Kubernikus.
func (p Pools) PoolSizes(ctx context.Context, cloudConfig []byte, cluster string) (map[string]int, error) {
	var cc CloudConfig
	var err error
	if cloudConfig != nil {
		if cc, err = ParseCloudConfig(cloudConfig); err != nil {
			return nil, fmt.Errorf("cloudProviderSecret: %w", err)
		}
	} else if cc, err = LoadCloudConfig(p.CloudConfigPath); err != nil {
		return nil, err
	}
	pools, err := p.Accounts.NodePools(ctx, cc, cluster)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(pools))
	for _, np := range pools {
		out[np.Name] += np.Size
	}
	return out, nil
}
