package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver"
	testserver "k8s.io/apiextensions-apiserver/pkg/cmd/server/testing"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/kubeapi"
)

// kubeAPI is a real Kubernetes API server for CRDs: apiextensions-apiserver
// in-process on Debian's etcd, with the CRDs of deploy/ and test CRDs for
// NADs, VMIs, VirtualMachines and Leases installed.
type kubeAPI struct {
	config     *rest.Config
	kubeconfig string
	dyn        dynamic.Interface
}

// startEtcd runs Debian's etcd on free loopback ports as a child of the
// test and stops it when the test ends.
func startEtcd(t *testing.T) string {
	t.Helper()
	p, url, err := kubeapi.StartEtcd(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("etcd output:\n%s", p.Output())
		}
	})
	return url
}

// startKubeAPI starts an API server with every CRD of deploy/common and
// the test CRDs (NADs, VMIs, VirtualMachines, Leases).
func startKubeAPI(t *testing.T) *kubeAPI {
	t.Helper()
	crds, err := filepath.Glob(filepath.Join("..", "deploy", "common", "crd-*.yaml"))
	require.NoError(t, err)
	extra, err := filepath.Glob(filepath.Join("testdata", "crds", "*.yaml"))
	require.NoError(t, err)
	return startKubeAPIWith(t, append(crds, extra...))
}

// startKubeAPIWith starts an API server with the CRDs of files only.
func startKubeAPIWith(t *testing.T, crds []string) *kubeAPI {
	t.Helper()
	etcd := startEtcd(t)
	codec := apiserver.Codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion, apiextensionsv1.SchemeGroupVersion)
	storage := storagebackend.NewDefaultConfig("/"+strings.ReplaceAll(t.Name(), "/", "_"), codec)
	storage.Transport.ServerList = []string{etcd}

	// Delegated authn/z would look for an in-cluster config: give them a
	// kubeconfig that leads nowhere and skip the lookup.
	dir := t.TempDir()
	nowhere := filepath.Join(dir, "nowhere.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"x": {Server: "https://127.0.0.1:1"}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "x"}},
		CurrentContext: "x",
	}, nowhere))
	srv, err := testserver.StartTestServer(t, nil, []string{
		"--authentication-skip-lookup",
		"--authentication-kubeconfig=" + nowhere,
		"--authorization-kubeconfig=" + nowhere,
		"--kubeconfig=" + nowhere,
		"--enable-priority-and-fairness=false",
		"--disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy",
	}, storage)
	require.NoError(t, err)
	t.Cleanup(srv.TearDownFn)

	cfg := rest.CopyConfig(srv.ClientConfig)
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	k := &kubeAPI{config: cfg, kubeconfig: filepath.Join(dir, "kubeconfig")}
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"test": {
			Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: len(cfg.CAData) == 0 && cfg.CAFile == "",
			CertificateAuthority: cfg.CAFile, TLSServerName: cfg.ServerName,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"test": {Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: "test"}},
		CurrentContext: "test",
	}, k.kubeconfig))
	k.dyn, err = dynamic.NewForConfig(cfg)
	require.NoError(t, err)

	k.installCRDs(t, crds)
	return k
}

// installCRDs creates the CRDs in files and waits until they are
// Established.
func (k *kubeAPI) installCRDs(t *testing.T, files []string) {
	t.Helper()
	require.NoError(t, kubeapi.InstallCRDs(k.config, files))
}
