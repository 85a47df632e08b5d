package testutil

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// Env is a real kube-apiserver and etcd, started from bin/ by
// controller-runtime's envtest, with pitstop's CRDs and the Machine API's
// (machine.openshift.io) installed. There is no
// controller manager, scheduler or kubelet: nothing happens to objects
// unless the test or the controller under test does it.
type Env struct {
	// Config is an admin client configuration.
	Config *rest.Config
	// Client is a controller-runtime client with pitstop's scheme.
	Client client.Client
	// Clientset is a typed client-go client.
	Clientset kubernetes.Interface

	env *envtest.Environment
}

// StartEnv starts an API server and etcd from localcluster.DefaultBinDir.
// Call it from TestMain and Stop the Env when the tests are done: one API
// server per package keeps suites fast.
func StartEnv() (*Env, error) {
	binDir := localcluster.DefaultBinDir()
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run `make tools`", name, binDir)
		}
	}
	crds, err := config.CRDs()
	if err != nil {
		return nil, err
	}
	machineCRDs, err := config.MachineAPICRDs()
	if err != nil {
		return nil, err
	}
	crds = append(crds, machineCRDs...)
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.New(),
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	e := &Env{Config: cfg, env: env}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	if e.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops the API server and etcd and removes their data.
func (e *Env) Stop() error { return e.env.Stop() }

// WriteKubeconfig writes a kubeconfig for the API server to path, for
// programs under test that take --kubeconfig.
func (e *Env) WriteKubeconfig(path string) error {
	const name = "envtest"
	return clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server:                   e.Config.Host,
			CertificateAuthorityData: e.Config.CAData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{name: {
			ClientCertificateData: e.Config.CertData,
			ClientKeyData:         e.Config.KeyData,
			Token:                 e.Config.BearerToken,
		}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}, path)
}

// Main is a TestMain for packages that share one Env: it starts the Env,
// stores it in *env, runs the tests, stops the Env and exits. A fuzz
// worker (a process `go test -fuzz` starts) runs only the fuzz target's
// inputs, never a test, so it starts no Env: a control plane per worker
// would take the cores the fuzzing needs.
func Main(m *testing.M, env **Env) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	e, err := StartEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
