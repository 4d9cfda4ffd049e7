// Package kubeapi runs Kubernetes' own API server on this machine, for the
// integration tests and the bench: Debian's etcd on free loopback ports and
// a kube-apiserver binary built from integration/kube-apiserver (its own
// module, at the client-go release kubevirt-ovn uses), authenticating one
// bearer token as system:masters. It also installs CRDs and creates the
// objects of manifest files.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Proc is a child process and what it printed.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
	once sync.Once
}

func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Exited says whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop kills the process (by its pid) and waits for it.
func (p *Proc) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

func start(name string, args ...string) (*Proc, error) {
	p := &Proc{done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// healthy polls url until it answers 200, for at most timeout, or until p
// exits.
func healthy(p *Proc, client *http.Client, url, what string, timeout time.Duration) error {
	return sandbox.Poll(timeout, what, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s: the process exited:\n%s", what, p.Output())
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// StartEtcd runs Debian's etcd with its data in dir on free loopback
// ports and returns it once healthy, with its client URL.
func StartEtcd(dir string) (*Proc, string, error) {
	if _, err := exec.LookPath("etcd"); err != nil {
		return nil, "", fmt.Errorf("etcd is not installed (apt-get install etcd-server; 'make deps' does it): %w", err)
	}
	client, err := sandbox.FreePort()
	if err != nil {
		return nil, "", err
	}
	peer, err := sandbox.FreePort()
	if err != nil {
		return nil, "", err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	p, err := start("etcd", "--name=kubeapi", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubeapi="+peerURL, "--log-level=warn")
	if err != nil {
		return nil, "", err
	}
	if err := healthy(p, http.DefaultClient, clientURL+"/health", "etcd healthy", 30*time.Second); err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, clientURL, nil
}

// Server is a running kube-apiserver on its own etcd.
type Server struct {
	// Config reaches it as system:masters (JSON, not protobuf: CRDs).
	Config *rest.Config
	// Kubeconfig is a file that does the same, for kubevirt-ovn.
	Kubeconfig string
	etcd, api  *Proc
}

// Start runs etcd and the kube-apiserver binary bin with their files in
// dir, and returns once the API server is ready. On error, whatever
// started is stopped.
func Start(dir, bin string) (_ *Server, err error) {
	s := &Server{}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	var etcd string
	if s.etcd, etcd, err = StartEtcd(dir); err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(secret)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	port, err := sandbox.FreePort()
	if err != nil {
		return nil, err
	}
	if s.api, err = start(bin, "--etcd-servers="+etcd,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey, "--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=AlwaysAllow", "--token-auth-file="+tokens, "--v=1",
		// No controller-manager creates the namespaces' default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount"); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver %s: %w", bin, err)
	}
	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	if err := healthy(s.api, &http.Client{Transport: tr, Timeout: 5 * time.Second}, cfg.Host+"/readyz", "kube-apiserver ready", 60*time.Second); err != nil {
		return nil, err
	}
	s.Config = cfg
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"kubeapi": {Server: cfg.Host, InsecureSkipTLSVerify: true}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"kubeapi": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"kubeapi": {Cluster: "kubeapi", AuthInfo: "kubeapi"}},
		CurrentContext: "kubeapi",
	}, s.Kubeconfig); err != nil {
		return nil, err
	}
	return s, nil
}

// Output is what the API server printed so far.
func (s *Server) Output() string {
	if s.api == nil {
		return ""
	}
	return s.api.Output()
}

// Stop stops the API server, then etcd.
func (s *Server) Stop() {
	if s.api != nil {
		s.api.Stop()
	}
	if s.etcd != nil {
		s.etcd.Stop()
	}
}

// InstallCRDs creates the CRDs of files (one that exists is kept) and
// waits until each is Established.
func InstallCRDs(cfg *rest.Config, files []string) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := dec.Decode(&crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: creating CRD %s: %w", f, crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	for _, name := range names {
		if err := sandbox.Poll(30*time.Second, "CRD "+name+" established", func() (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}
