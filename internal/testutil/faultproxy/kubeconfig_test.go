package faultproxy

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestRewriteKubeconfig points every cluster at the proxy and keeps what
// the client needs to trust the API server: scheme, path, CA (a relative
// CA file becomes absolute, as the copy lives elsewhere) and the original
// host name as TLS server name when it is not the proxy's host.
func TestRewriteKubeconfig(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	src, dst := filepath.Join(srcDir, "kubeconfig"), filepath.Join(dstDir, "kubeconfig")
	err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"local":  {Server: "https://127.0.0.1:6443/prefix", CertificateAuthority: "ca.crt"},
			"remote": {Server: "https://api.example.test", CertificateAuthorityData: []byte("ca")},
		},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {Token: "secret"}},
		Contexts:       map[string]*clientcmdapi.Context{"local": {Cluster: "local", AuthInfo: "admin"}},
		CurrentContext: "local",
	}, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := RewriteKubeconfig(src, dst, "127.0.0.1:5555"); err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.LoadFromFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	local, remote := got.Clusters["local"], got.Clusters["remote"]
	if local.Server != "https://127.0.0.1:5555/prefix" || local.TLSServerName != "" || local.CertificateAuthority != filepath.Join(srcDir, "ca.crt") {
		t.Errorf("local cluster: server %q, TLS server name %q, CA %q; want https://127.0.0.1:5555/prefix, none, %s",
			local.Server, local.TLSServerName, local.CertificateAuthority, filepath.Join(srcDir, "ca.crt"))
	}
	if remote.Server != "https://127.0.0.1:5555" || remote.TLSServerName != "api.example.test" || string(remote.CertificateAuthorityData) != "ca" {
		t.Errorf("remote cluster: server %q, TLS server name %q, CA %q; want https://127.0.0.1:5555, api.example.test, ca",
			remote.Server, remote.TLSServerName, remote.CertificateAuthorityData)
	}
	if got.AuthInfos["admin"].Token != "secret" || got.CurrentContext != "local" {
		t.Errorf("credentials or context lost: token %q, context %q", got.AuthInfos["admin"].Token, got.CurrentContext)
	}

	if err := RewriteKubeconfig(src, dst, "no-port"); err == nil {
		t.Error("rewriting to a proxy address without a port succeeded")
	}
	if err := RewriteKubeconfig(filepath.Join(srcDir, "missing"), dst, "127.0.0.1:5555"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rewriting a missing kubeconfig: got %v, want not exist", err)
	}
}

// TestClientGoThroughProxy talks to a real API server through the proxy
// with a kubeconfig RewriteKubeconfig made: TLS verifies and requests
// succeed; during a blackhole a request with a 2 s timeout fails; after it
// ends requests succeed again on the same client.
func TestClientGoThroughProxy(t *testing.T) {
	env, err := testutil.StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	apiserver, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, apiserver.Host)
	direct := filepath.Join(t.TempDir(), "kubeconfig")
	proxied := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(direct); err != nil {
		t.Fatal(err)
	}
	if err := RewriteKubeconfig(direct, proxied, p.Addr()); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", proxied)
	if err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	listNamespaces := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err
	}

	if err := listNamespaces(10 * time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if conns, n := p.Stats(); conns < 1 || n == 0 {
		t.Fatalf("stats: %d connections, %d bytes; the request did not go through the proxy", conns, n)
	}
	p.Blackhole(true)
	started := time.Now()
	if err := listNamespaces(2 * time.Second); err == nil {
		t.Fatal("listing namespaces during a blackhole succeeded")
	} else {
		t.Logf("during the blackhole, after %s: %v", time.Since(started).Round(time.Millisecond), err)
	}
	p.Blackhole(false)
	if err := listNamespaces(10 * time.Second); err != nil {
		t.Fatalf("after the blackhole: %v", err)
	}
}
