package clusterapi

import (
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FuzzKubeconfig reads a workload cluster's kubeconfig Secret as whoever
// owns the cluster's namespace may write it, with any bytes. Either it is
// refused with an error naming the Secret and its key and quoting none of
// its credentials, or the client configuration pitstop would connect with
// runs no program, reads no file, goes through no proxy, impersonates no
// one and talks https to a host.
func FuzzKubeconfig(f *testing.F) {
	kubeconfig := func(cluster func(*clientcmdapi.Cluster), user func(*clientcmdapi.AuthInfo)) []byte {
		c := &clientcmdapi.Cluster{Server: "https://wl.example:6443", CertificateAuthorityData: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")}
		a := &clientcmdapi.AuthInfo{Token: "s3cr3t-token-of-the-workload"}
		if cluster != nil {
			cluster(c)
		}
		if user != nil {
			user(a)
		}
		data, err := clientcmd.Write(clientcmdapi.Config{
			Clusters:       map[string]*clientcmdapi.Cluster{"wl": c},
			AuthInfos:      map[string]*clientcmdapi.AuthInfo{"wl": a},
			Contexts:       map[string]*clientcmdapi.Context{"wl": {Cluster: "wl", AuthInfo: "wl"}},
			CurrentContext: "wl",
		})
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	// What Cluster API writes, and each shape untrusted_test.go shows refused.
	for _, data := range [][]byte{
		kubeconfig(nil, nil),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) {
			a.Token, a.ClientCertificateData, a.ClientKeyData = "", []byte("cert"), []byte("key")
		}),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) { a.Token, a.Username, a.Password = "", "admin", "pw-of-the-workload" }),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) {
			a.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "id"}, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) { a.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"} }),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) { a.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token" }),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) { a.ClientCertificate = "/etc/kubernetes/pki/apiserver.crt" }),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) { a.ClientKey = "/etc/kubernetes/pki/apiserver.key" }),
		kubeconfig(func(c *clientcmdapi.Cluster) {
			c.CertificateAuthority, c.CertificateAuthorityData = "/etc/ssl/ca.crt", nil
		}, nil),
		kubeconfig(func(c *clientcmdapi.Cluster) { c.ProxyURL = "http://proxy.example:3128" }, nil),
		kubeconfig(nil, func(a *clientcmdapi.AuthInfo) {
			a.Impersonate, a.ImpersonateGroups = "system:admin", []string{"system:masters"}
		}),
		kubeconfig(func(c *clientcmdapi.Cluster) { c.Server = "http://wl.example:6443" }, nil),
		kubeconfig(func(c *clientcmdapi.Cluster) { c.Server = "wl.example:6443" }, nil),
		kubeconfig(func(c *clientcmdapi.Cluster) { c.Server = "https://" }, nil),
		kubeconfig(func(c *clientcmdapi.Cluster) { c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil }, nil),
		[]byte(`{"apiVersion":"v1","kind":"Config","clusters":[{"name":"a","cluster":{"server":"https://a"}}],"users":[{"name":"u","user":{"token":"t"}}],` +
			`"contexts":[{"name":"c","context":{"cluster":"a","user":"u"}}],"current-context":"c"}`),
		[]byte(`{"clusters":[{"name":"a","cluster":null}],"users":[{"name":"u","user":null}],"contexts":[{"name":"c","context":null}],"current-context":"c"}`),
		[]byte("current-context: c\ncontexts:\n- name: c\n  context: {cluster: missing, user: missing}\n"),
		[]byte("not: [a kubeconfig"),
		nil,
	} {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "wl-kubeconfig"}, Data: map[string][]byte{kubeconfigKey: data}}
		cfg, err := restConfigOf(secret)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("restConfigOf returned %v and %v: want a configuration or an error", cfg, err)
		}
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "the kubeconfig Secret tenant/wl-kubeconfig") {
				t.Fatalf("the error does not name the Secret: %v", err)
			}
			if !strings.Contains(msg, `"value"`) && !strings.Contains(msg, "has no key") {
				t.Fatalf("the error does not name the Secret's key: %v", err)
			}
			assertQuotesNoCredential(t, data, msg)
			return
		}
		assertSafeToConnect(t, cfg)
	})
}

// assertSafeToConnect: nothing in cfg makes a client run a program, read a
// file, go through a proxy or act as someone else, and it talks https to
// a host.
func assertSafeToConnect(t *testing.T, cfg *rest.Config) {
	t.Helper()
	switch {
	case cfg.ExecProvider != nil:
		t.Fatalf("an accepted kubeconfig runs a program: %+v", cfg.ExecProvider)
	case cfg.AuthProvider != nil:
		t.Fatalf("an accepted kubeconfig runs an authentication plugin: %+v", cfg.AuthProvider)
	case cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "":
		t.Fatalf("an accepted kubeconfig reads files: token %q, certificate %q, key %q, CA %q", cfg.BearerTokenFile, cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	case cfg.Proxy != nil:
		t.Fatal("an accepted kubeconfig goes through a proxy")
	case cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0:
		t.Fatalf("an accepted kubeconfig impersonates %+v", cfg.Impersonate)
	case cfg.Dial != nil || cfg.Transport != nil || cfg.WrapTransport != nil || cfg.ExecProvider != nil:
		t.Fatal("an accepted kubeconfig sets its own transport")
	}
	// The client takes the host as rest.DefaultServerURL reads it.
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		t.Fatalf("an accepted kubeconfig talks to %q, not https to a host", cfg.Host)
	}
}

// assertQuotesNoCredential: a refusal quotes no token, password or key of
// the kubeconfig (only the names of its entries, which it quotes to say
// where the problem is).
func assertQuotesNoCredential(t *testing.T, data []byte, msg string) {
	t.Helper()
	kc, err := clientcmd.Load(data)
	if err != nil {
		return
	}
	var names []string
	for name := range kc.AuthInfos {
		names = append(names, name)
	}
	for name := range kc.Clusters {
		names = append(names, name)
	}
	for _, u := range kc.AuthInfos {
		if u == nil {
			continue
		}
		for _, secret := range []string{u.Token, u.Password, string(u.ClientKeyData)} {
			// pitstop's own words in a refusal have no digit: a secret
			// with one that shows is quoted from the kubeconfig.
			if len(secret) < 8 || !strings.ContainsAny(secret, "0123456789") || !strings.Contains(msg, secret) {
				continue
			}
			quotedAsName := false
			for _, n := range names {
				quotedAsName = quotedAsName || strings.Contains(n, secret)
			}
			if !quotedAsName {
				t.Fatalf("the refusal quotes a credential of the kubeconfig: %v", msg)
			}
		}
	}
}
