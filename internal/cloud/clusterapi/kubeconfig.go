package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrKubeconfigRefused marks a kubeconfig that pitstop will not use: it
// asks for more than a server, inline credentials and an inline CA.
var ErrKubeconfigRefused = errors.New("refused")

// kubeconfigSecret is the name of Cluster API's kubeconfig Secret of a
// cluster.
func kubeconfigSecret(cluster string) string { return cluster + "-kubeconfig" }

// WorkloadClient is a client of a Machine's workload cluster, from its
// kubeconfig Secret read through reader (pitstop explain and the
// dashboard read a workload cluster's Nodes and profiles with it).
func WorkloadClient(ctx context.Context, reader client.Reader, m *clusterv1.Machine, opts client.Options) (client.Client, error) {
	secret, err := readKubeconfigSecret(ctx, reader, KeyOf(m))
	if err != nil {
		return nil, err
	}
	cfg, err := restConfigOf(secret)
	if err != nil {
		return nil, err
	}
	limitResponses(cfg, nil)
	return client.New(cfg, opts)
}

// readKubeconfigSecret reads Cluster API's kubeconfig Secret of a cluster.
func readKubeconfigSecret(ctx context.Context, reader client.Reader, key clusterKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: kubeconfigSecret(key.Name)}, secret); err != nil {
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s: %w", key.Namespace, kubeconfigSecret(key.Name), err)
	}
	return secret, nil
}

// restConfigOf reads the kubeconfig of Cluster API's Secret, refusing (before
// any client is built, any file read or any connection made) whatever in it
// could make pitstop, or the administrator running pitstop explain, run a
// program or read a local file (see checkKubeconfig). Its errors name the
// Secret and the field and never quote the kubeconfig.
func restConfigOf(secret *corev1.Secret) (*rest.Config, error) {
	name := secret.Namespace + "/" + secret.Name
	data := secret.Data[kubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("the kubeconfig Secret %s has no key %q", name, kubeconfigKey)
	}
	// Load only decodes: it resolves no path and reads no file.
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s, key %q, is not a kubeconfig", name, kubeconfigKey)
	}
	if err := checkKubeconfig(kc); err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s, key %q: %w", name, kubeconfigKey, err)
	}
	// No fallback reader: nothing prompts, nothing falls back to pitstop's
	// own credentials.
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s, key %q, is not a kubeconfig that can be used", name, kubeconfigKey)
	}
	cfg.UserAgent = "pitstop-cluster-api"
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

// checkKubeconfig accepts what Cluster API writes into a cluster's
// kubeconfig Secret and nothing more: an https server, inline CA data,
// and inline credentials (client certificate and key data, a token, or a
// username and password). It refuses, as Cluster API's own cluster cache
// does for exec and auth providers, everything that makes a client run a
// program (exec, auth-provider) or read a file of the machine it runs on
// (tokenFile, client-certificate, client-key, certificate-authority): the
// Secret is written by whoever owns the cluster's namespace, and a
// tokenFile naming pitstop's ServiceAccount token would send that token to
// the server they choose. It also refuses proxy-url (pitstop talks to the
// workload API server directly) and impersonation (as, as-uid, as-groups,
// as-user-extra), which Cluster API never writes. Every entry of the file
// is checked, not only the current context's.
func checkKubeconfig(kc *clientcmdapi.Config) error {
	for _, name := range slices.Sorted(maps.Keys(kc.AuthInfos)) {
		if err := checkUser(kc.AuthInfos[name]); err != nil {
			return fmt.Errorf("users[%q].user.%w", name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kc.Clusters)) {
		if err := checkCluster(kc.Clusters[name]); err != nil {
			return fmt.Errorf("clusters[%q].cluster.%w", name, err)
		}
	}
	return nil
}

func checkUser(u *clientcmdapi.AuthInfo) error {
	if u == nil {
		return nil
	}
	switch {
	case u.Exec != nil:
		return refused("exec", "it would run a program")
	case u.AuthProvider != nil:
		return refused("auth-provider", "it would run an authentication plugin")
	case u.TokenFile != "":
		return refused("tokenFile", "it would read a file where pitstop runs (use token)")
	case u.ClientCertificate != "":
		return refused("client-certificate", "it is a file path (use client-certificate-data)")
	case u.ClientKey != "":
		return refused("client-key", "it is a file path (use client-key-data)")
	case u.Impersonate != "", u.ImpersonateUID != "", len(u.ImpersonateGroups) > 0, len(u.ImpersonateUserExtra) > 0:
		return refused("as", "Cluster API writes no impersonation")
	}
	return nil
}

func checkCluster(c *clientcmdapi.Cluster) error {
	if c == nil {
		return nil
	}
	switch {
	case c.CertificateAuthority != "":
		return refused("certificate-authority", "it is a file path (use certificate-authority-data)")
	case c.ProxyURL != "":
		return refused("proxy-url", "pitstop connects to the workload API server directly")
	}
	// Only https: a plain-http server would also let the Secret's writer
	// point pitstop at http endpoints inside its network.
	if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" {
		return refused("server", "it is not an https URL")
	}
	return nil
}

func refused(field, why string) error {
	return fmt.Errorf("%s is %w: %s", field, ErrKubeconfigRefused, why)
}
