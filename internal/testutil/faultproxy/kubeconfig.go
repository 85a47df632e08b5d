package faultproxy

import (
	"fmt"
	"net"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
)

// RewriteKubeconfig copies the kubeconfig at src to dst with the host:port
// of every cluster's server replaced by proxyAddr; the scheme, path,
// credentials and CA stay. The client then verifies the API server's own
// certificate through the proxy: against the original host, which is kept as
// the TLS server name when it differs from the proxy's host (an API server
// on 127.0.0.1 and a proxy on 127.0.0.1 need nothing). Relative file paths
// in src are made absolute, so dst may live elsewhere.
func RewriteKubeconfig(src, dst, proxyAddr string) error {
	proxyHost, _, err := net.SplitHostPort(proxyAddr)
	if err != nil {
		return fmt.Errorf("proxy address %q: %w", proxyAddr, err)
	}
	config, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %s: %w", src, err)
	}
	if err := clientcmd.ResolveLocalPaths(config); err != nil {
		return fmt.Errorf("resolving the paths in kubeconfig %s: %w", src, err)
	}
	for name, cluster := range config.Clusters {
		server, err := url.Parse(cluster.Server)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: server of cluster %s: %w", src, name, err)
		}
		if server.Host == "" {
			return fmt.Errorf("kubeconfig %s: server %q of cluster %s has no host", src, cluster.Server, name)
		}
		if host := server.Hostname(); host != proxyHost && cluster.TLSServerName == "" && !cluster.InsecureSkipTLSVerify {
			cluster.TLSServerName = host
		}
		server.Host = proxyAddr
		cluster.Server = server.String()
	}
	if err := clientcmd.WriteToFile(*config, dst); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", dst, err)
	}
	return nil
}
