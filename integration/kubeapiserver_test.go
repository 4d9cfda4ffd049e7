package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
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
	bin := kubeAPIServerBinary(t)
	etcd := startEtcd(t)
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	saKey := filepath.Join(dir, "sa.key")
	require.NoError(t, os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	secret := make([]byte, 16)
	_, err = rand.Read(secret)
	require.NoError(t, err)
	token := hex.EncodeToString(secret)
	tokens := filepath.Join(dir, "tokens.csv")
	require.NoError(t, os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600))
	port, err := sandbox.FreePort()
	require.NoError(t, err)

	var logs bytes.Buffer
	cmd := exec.Command(bin, "--etcd-servers="+etcd, "--etcd-prefix=/"+strings.ReplaceAll(t.Name(), "/", "_"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey, "--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=AlwaysAllow", "--token-auth-file="+tokens, "--v=1",
		// No controller-manager creates the namespaces' default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("kube-apiserver output (last 4 KiB):\n%s", tail(logs.String(), 4096))
		}
	})
	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	tr, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	ready := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	require.NoError(t, sandbox.Poll(60*time.Second, "kube-apiserver ready", func() (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("kube-apiserver exited")
		default:
		}
		resp, err := ready.Get(cfg.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}))
	k := &kubeAPI{config: cfg, kubeconfig: filepath.Join(dir, "kubeconfig")}
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"test": {Server: cfg.Host, InsecureSkipTLSVerify: true}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"test": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: "test"}},
		CurrentContext: "test",
	}, k.kubeconfig))
	k.dyn, err = dynamic.NewForConfig(cfg)
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
