package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// ctrlRouter is router i of ctrlInput: its internal network, SNAT IP and
// internal cidr.
func ctrlRouter(i int) (name, network, snatIP, cidr string) {
	return fmt.Sprintf("ctrl-r%d", i), fmt.Sprintf("ctrl-n%d", i),
		fmt.Sprintf("172.16.%d.%d", 1+i/250, 2+i%250), fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)
}

// ctrlObjects are n routers, each with SNAT from its own internal GENEVE
// network to one FLAT external network `ctrl-public` (172.16.0.0/16),
// gateway gw1: the shape of deploy/examples, n times.
func ctrlObjects(n int) []map[string]any {
	objs := []map[string]any{ctrlNAD("ctrl-public",
		`{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/16", "gatewayIp": "172.16.0.1"}`)}
	for i := 0; i < n; i++ {
		_, network, _, cidr := ctrlRouter(i)
		gw := strings.TrimSuffix(cidr, "0/24") + "1"
		objs = append(objs, ctrlNAD(network, fmt.Sprintf(`{"type": "GENEVE", "cidr": %q, "gatewayIp": %q}`, cidr, gw)))
	}
	for i := 0; i < n; i++ {
		name, network, ip, _ := ctrlRouter(i)
		objs = append(objs, map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"mac":        fmt.Sprintf("fa:16:3e:01:%02x:%02x", i/256, i%256),
				"enableSnat": true,
				"internal":   []any{network},
				"external":   map[string]any{"ip": ip, "network": "ctrl-public"},
				"peerRouter": map[string]any{"ip": "172.16.0.1", "mac": "00:00:00:00:ee:01"},
				"gateway":    "gw1",
			},
		})
	}
	return objs
}

func ctrlNAD(name, config string) map[string]any {
	return map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": "default",
			"annotations": map[string]any{"network-config": config}},
		"spec": map[string]any{"config": fmt.Sprintf(`{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": %q}`, name)},
	}
}

// ctrlInput writes ctrlObjects(n) as one manifest file in a new directory
// and returns the directory.
func ctrlInput(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for _, o := range ctrlObjects(n) {
		y, err := yaml.Marshal(o)
		require.NoError(t, err)
		b.WriteString("---\n")
		b.Write(y)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ctrl.yaml"), []byte(b.String()), 0o644))
	return dir
}

// ctrlCreate creates ctrlObjects(n) in the API server, networks first.
func ctrlCreate(t *testing.T, k *kubeAPI, n int) {
	t.Helper()
	for _, o := range ctrlObjects(n) {
		k.create(t, &unstructured.Unstructured{Object: o})
	}
}

// ctrlNBCfg reads NB_Global.nb_cfg, which every controller commit bumps.
func ctrlNBCfg(t *testing.T, c *sandbox.Central) int {
	t.Helper()
	out := nbctl(t, c, "get", "NB_Global", ".", "nb_cfg")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	return n
}

// ctrlDryRun is `kubevirt-ovn sync --dry-run` of dir against the NB: its
// output says what is missing or extra ("no changes" when converged).
func ctrlDryRun(t *testing.T, c *sandbox.Central, dir string) string {
	t.Helper()
	out, err := exec.Command(binary, "sync", "--nb", c.NBTCP, "--from-file", dir, "--dry-run").CombinedOutput()
	require.NoError(t, err, "sync --dry-run:\n%s", out)
	return string(out)
}

// ctrlExitCode is the exit code of a controller that has exited.
func ctrlExitCode(p *controllerProc) int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}
