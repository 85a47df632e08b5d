package nodemaintenance

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// evictionClient is the drain's client for evictions and pod deletes, with
// an HTTP transport of its own, opened when the manager starts and kept
// open while idle.
//
// The API server allows 100 concurrent streams on an HTTP/2 connection.
// Sharing the manager's connection, which its watches hold streams of, a
// node's burst of evictions went past that, and client-go opened a second
// connection in the middle of the burst: a TLS handshake, on both sides,
// while the evictions waited. Client-go also closes a connection idle for
// 90 s, so every drain after a quiet spell paid it again, the first drain
// after a start always.
func evictionClient(mgr ctrl.Manager) (client.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	// client-go shares one transport between configs that have no proxy
	// function of their own; this one gets its own (the default proxy).
	cfg.Proxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if t, ok := rt.(*http.Transport); ok {
			t.IdleConnTimeout = 0 // kept open between drains
		}
		if wrap != nil {
			return wrap(rt)
		}
		return rt
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	// One request once the manager leads opens the connection, before the
	// first drain needs it.
	return c, mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		_ = c.List(ctx, &corev1.PodList{}, client.Limit(1))
		return nil
	}))
}
