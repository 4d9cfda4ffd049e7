package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/kubeapi"
)

// Kubernetes' own API server, for the tests that need what the
// apiextensions test server does not serve: pods (a live migration's
// target pod) and Events. It is built from k8s.io/kubernetes at the
// client-go release kubevirt-ovn uses (integration/kube-apiserver, its own
// module), once per test binary, and runs on Debian's etcd.

// EnvKubeAPIServer names a kube-apiserver binary built from
// integration/kube-apiserver (make test builds one); without it the first
// test that needs it builds it.
const EnvKubeAPIServer = "KUBEVIRT_OVN_KUBE_APISERVER"

var kubeAPIServer struct {
	once sync.Once
	path string
	err  error
}

// kubeAPIServerBinary builds kube-apiserver once (minutes on an empty
// build cache, seconds after).
func kubeAPIServerBinary(t *testing.T) string {
	t.Helper()
	kubeAPIServer.once.Do(func() {
		if path := os.Getenv(EnvKubeAPIServer); path != "" {
			kubeAPIServer.path = path // make test built it
			return
		}
		dir, err := os.MkdirTemp("", "kubevirt-ovn-kube-apiserver")
		if err != nil {
			kubeAPIServer.err = err
			return
		}
		kubeAPIServer.path = filepath.Join(dir, "kube-apiserver")
		build := exec.Command("go", "build", "-o", kubeAPIServer.path, ".")
		build.Dir = "kube-apiserver"
		out, err := build.CombinedOutput()
		if err != nil {
			kubeAPIServer.err = fmt.Errorf("building kube-apiserver (integration/kube-apiserver): %v\n%s", err, out)
		}
	})
	require.NoError(t, kubeAPIServer.err)
	return kubeAPIServer.path
}

// startClusterAPI starts kube-apiserver with every CRD of deploy/common
// and the test CRDs (NADs, VMIs, VirtualMachines, migrations; Leases are
// its own), authenticating a bearer token as system:masters, and stops it
// when the test ends.
func startClusterAPI(t *testing.T) *kubeAPI {
	t.Helper()
	srv, err := kubeapi.Start(t.TempDir(), kubeAPIServerBinary(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		srv.Stop()
		if t.Failed() {
			t.Logf("kube-apiserver output (last 4 KiB):\n%s", tail(srv.Output(), 4096))
		}
	})
	k := &kubeAPI{config: srv.Config, kubeconfig: srv.Kubeconfig}
	k.dyn, err = dynamic.NewForConfig(srv.Config)
	require.NoError(t, err)
	crds, err := filepath.Glob(filepath.Join("..", "deploy", "common", "crd-*.yaml"))
	require.NoError(t, err)
	for _, f := range []string{"nad.yaml", "vmi.yaml", "vm.yaml", "vmim.yaml"} {
		crds = append(crds, filepath.Join("testdata", "crds", f))
	}
	k.installCRDs(t, crds)
	return k
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
