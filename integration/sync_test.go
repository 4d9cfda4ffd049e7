package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// binary is kubevirt-ovn, built once by TestMain: the tests drive the real
// command, as a user does.
var binary string

// EnvBuildTags are build tags of the binary under test: "soakbug" builds in
// the deliberate bug the soak must catch (make soak SOAK_BUG=1).
const EnvBuildTags = "KUBEVIRT_OVN_BUILD_TAGS"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubevirt-ovn-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "kubevirt-ovn")
	args := []string{"build", "-o", binary}
	if tags := os.Getenv(EnvBuildTags); tags != "" {
		// make soak SOAK_BUG=1: the binary with the soak's deliberate bug.
		fmt.Println("building kubevirt-ovn with -tags", tags)
		args = append(args, "-tags", tags)
	}
	build := exec.Command("go", append(args, "../cmd/kubevirt-ovn")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building kubevirt-ovn:", err)
		os.Exit(1)
	}
	// The OVN every test here runs (sandbox.RootEnv chooses it).
	rel, err := sandbox.CurrentRelease()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("packet suite on", rel)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startCentral starts NB, SB and northd for one test and stops them when it
// ends; on failure it points at the daemons' logs.
func startCentral(t *testing.T) *sandbox.Central {
	t.Helper()
	dir := t.TempDir()
	c, err := sandbox.StartCentral(dir)
	require.NoError(t, err)
	pids := c.Pids()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("OVN logs: %s", strings.Join(c.Logs(), " "))
			keep, _ := os.MkdirTemp("", "kubevirt-ovn-failed-")
			_ = exec.Command("cp", "-r", dir, keep).Run()
			t.Logf("sandbox copied to %s", keep)
		}
		assert.NoError(t, c.Stop())
		for _, pid := range pids {
			assert.False(t, sandbox.Alive(pid), "daemon pid %d left behind", pid)
		}
	})
	return c
}

type result struct {
	code           int
	stdout, stderr string
}

func kubevirtOVN(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	t.Logf("kubevirt-ovn %s\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	return r
}

// examples copies deploy/examples into a directory the test may edit.
func examples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	return dir
}

func edit(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

func nbctl(t *testing.T, c interface {
	NBCtl(...string) (string, error)
}, args ...string) string {
	t.Helper()
	out, err := c.NBCtl(args...)
	require.NoError(t, err)
	return out
}

// squash folds runs of blanks so that table output can be matched.
func squash(s string) string { return regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ") }

func TestSyncExamplesOnRealNB(t *testing.T) {
	c := startCentral(t)
	ex := examples(t)

	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "Logical_Router               1 created")
	assert.Contains(t, r.stdout, "NAT                          2 created")

	show := nbctl(t, c, "show")
	for _, want := range []string{
		"(kv-router1)", "(kv-net-a)", "(kv-net-b)", "(kv-public)",
		"port kv-rtoe-router1", `networks: ["172.16.0.100/24"]`, "gateway chassis: [gw1]",
		"port kv-rtos-router1_net-a", `mac: "fa:16:3e:00:00:01"`, `networks: ["10.10.0.1/24"]`,
		"port kv-net-a_default_vm-a_eth1", `addresses: ["50:54:00:00:00:05 10.10.0.5"]`,
		"port kv-ln-public", "type: localnet",
		"port kv-etor-router1", "router-port: kv-rtoe-router1",
	} {
		assert.Contains(t, show, want, "ovn-nbctl show")
	}
	nat := squash(nbctl(t, c, "lr-nat-list", "kv-router1"))
	assert.Contains(t, nat, "snat 172.16.0.100 1025-65535 10.10.0.0/24")
	assert.Contains(t, nat, "snat 172.16.0.100 1025-65535 10.20.0.0/24")
	assert.Contains(t, squash(nbctl(t, c, "lr-route-list", "kv-router1")), "0.0.0.0/0 172.16.0.1 dst-ip kv-rtoe-router1")
	assert.Contains(t, nbctl(t, c, "--bare", "--columns=mac", "find", "Static_MAC_Binding", "logical_port=kv-rtoe-router1"), "00:00:00:00:ee:01")
	assert.Equal(t, "router", strings.TrimSpace(nbctl(t, c, "get", "Logical_Switch_Port", "kv-etor-router1", "options:nat-addresses")))

	// ovn-northd accepted the rows: the gateway port became a distributed
	// gateway port with its chassisredirect port.
	_, err := c.NBCtl("--timeout=30", "--wait=sb", "sync")
	require.NoError(t, err)
	sb, err := c.SBCtl("--bare", "--columns=logical_port", "find", "Port_Binding", "type=chassisredirect")
	require.NoError(t, err)
	assert.Contains(t, sb, "cr-kv-rtoe-router1")

	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	require.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout, "a second run changes nothing")

	// A dry run after an edit shows exactly the edit and writes nothing.
	edit(t, filepath.Join(ex, "router.yaml"), "ip: 172.16.0.100", "ip: 172.16.0.101")
	before := nbctl(t, c, "show")
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex, "--dry-run")
	require.Equal(t, 0, r.code)
	assert.Equal(t, `dry run: nothing is written
VirtualRouter router1:
  update Logical_Router_Port kv-rtoe-router1 (mac: "0a:58:ac:10:00:64" -> "0a:58:ac:10:00:65"; networks: ["172.16.0.100/24"] -> ["172.16.0.101/24"])
  update NAT snat 10.10.0.0/24 (external_ip: "172.16.0.100" -> "172.16.0.101")
  update NAT snat 10.20.0.0/24 (external_ip: "172.16.0.100" -> "172.16.0.101")
changes per table:
  Logical_Router_Port          1 to update
  NAT                          2 to update
`, r.stdout)
	assert.Equal(t, before, nbctl(t, c, "show"), "--dry-run wrote nothing")

	r = kubevirtOVN(t, "sync", "--nb", c.NB, "--from-file", ex)
	require.Equal(t, 0, r.code)
	assert.Contains(t, squash(nbctl(t, c, "lr-nat-list", "kv-router1")), "snat 172.16.0.101 1025-65535 10.10.0.0/24")
}

func TestSyncGatewayFromSouthbound(t *testing.T) {
	c := startCentral(t)
	// Chassis rows as ovn-controller registers them (no traffic flows: the
	// encap IPs are only SB data).
	// gw2's bridge mappings are in external_ids, where ovn-controllers
	// before other_config put them.
	for i, ch := range []struct{ name, host, cms, mappings string }{
		{"gw1", "node-gw1", "enable-chassis-as-gw", `other_config:ovn-bridge-mappings="physnet1:br-ex"`},
		{"gw2", "node-gw2", "availability-zones=az1,enable-chassis-as-gw", `external_ids:ovn-bridge-mappings="physnet0:br-x,physnet1:br-ex"`},
		{"hv1", "node-hv1", "", `other_config:ovn-bridge-mappings="physnet1:br-ex"`},
	} {
		_, err := c.SBCtl("chassis-add", ch.name, "geneve", fmt.Sprintf("127.0.0.%d", 10+i))
		require.NoError(t, err)
		args := []string{"set", "Chassis", ch.name, "hostname=" + ch.host, ch.mappings}
		if ch.cms != "" {
			args = append(args, fmt.Sprintf(`other_config:ovn-cms-options="%s"`, ch.cms))
		}
		_, err = c.SBCtl(args...)
		require.NoError(t, err)
	}
	ex := examples(t)
	edit(t, filepath.Join(ex, "router.yaml"), "gateway: gw1", "gateway: node-gw2")
	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--sb", c.SBTCP, "--from-file", ex)
	require.Equal(t, 0, r.code)
	gcs := squash(nbctl(t, c, "lrp-get-gateway-chassis", "kv-rtoe-router1"))
	assert.Equal(t, "kv-rtoe-router1_gw2 2\nkv-rtoe-router1_gw1 1\n", gcs, "the spec's gateway first, the other candidate as failover, no worker")

	// A node that is not a gateway candidate: clear error, rows unchanged.
	edit(t, filepath.Join(ex, "router.yaml"), "gateway: node-gw2", "gateway: node-hv1")
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--sb", c.SBTCP, "--from-file", ex)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "VirtualRouter router1: spec.gateway node node-hv1 is not a gateway candidate (chassis with enable-chassis-as-gw: gw1 (hostname node-gw1), gw2 (hostname node-gw2))")
	assert.Equal(t, gcs, squash(nbctl(t, c, "lrp-get-gateway-chassis", "kv-rtoe-router1")))
}

func TestSyncBadInputListsEveryFailureAndSyncsTheRest(t *testing.T) {
	c := startCentral(t)
	ex := examples(t)
	require.NoError(t, os.WriteFile(filepath.Join(ex, "bad.yaml"), []byte(`apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: bad-router
spec:
  enableSnat: true
  internal: [no-such-net]
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: vlan-net
  namespace: default
  annotations:
    network-config: '{"type": "VLAN", "cidr": "192.0.2.0/24"}'
---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: misnamed
spec:
  name: other-name
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: unrelated
`), 0o644))
	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	assert.Equal(t, 1, r.code)
	for _, want := range []string{
		"VirtualRouter bad-router: spec.internal[0] network no-such-net is unknown",
		"NetworkAttachmentDefinition default/vlan-net: network-config.segmentId is required for a VLAN network",
		"VirtualRouter misnamed: spec.name other-name differs from metadata.name misnamed",
		"note: ", "ignored apps/v1 Deployment unrelated",
	} {
		assert.Contains(t, r.stderr, want)
	}
	show := nbctl(t, c, "show")
	assert.Contains(t, show, "(kv-router1)", "the valid router is synced")
	assert.NotContains(t, show, "bad-router")
	assert.NotContains(t, show, "vlan-net")

	// Malformed YAML: nothing is written at all.
	require.NoError(t, os.WriteFile(filepath.Join(ex, "broken.yaml"), []byte("kind: [unclosed\n"), 0o644))
	before := nbctl(t, c, "show")
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "broken.yaml")
	assert.Contains(t, r.stderr, "nothing written")
	assert.Equal(t, before, nbctl(t, c, "show"))
}

// A sync too big for one transaction (--batch-ops) commits in as many as
// it needs: the table-wide wait of each transaction after the first
// expects the routers and switches the earlier ones inserted, which a
// one-shot sync's cache never sees. It used to fail, and the sync split
// its batches down to units: 1,536 transactions and 174 s instead of a few
// at 10,000 routers (make bench N=10000).
func TestSyncInSeveralTransactions(t *testing.T) {
	c := startCentral(t)
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: public
  annotations:
    network-config: '{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/16", "gatewayIp": "172.16.0.1"}'
`)
	for i := range 60 {
		fmt.Fprintf(&b, `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-%d
  annotations:
    network-config: '{"type": "GENEVE", "cidr": "10.%d.0.0/24", "gatewayIp": "10.%d.0.1"}'
---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: r%d
spec:
  name: r%d
  enableSnat: true
  internal: [net-%d]
  external: {ip: 172.16.1.%d, network: public}
  gateway: gw1
`, i, i, i, i, i, i, i+2)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "routers.yaml"), []byte(b.String()), 0o644))
	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", dir, "--batch-ops", "300")
	require.Equal(t, 0, r.code)
	m := regexp.MustCompile(`NB: (\d+) transactions, (\d+) operations`).FindStringSubmatch(r.stderr)
	require.NotNil(t, m, "the sync reports its transactions")
	txns, _ := strconv.Atoi(m[1])
	ops, _ := strconv.Atoi(m[2])
	assert.Greater(t, txns, 1, "--batch-ops splits the sync")
	assert.LessOrEqual(t, txns, (ops+299)/300+1, "no transaction was refused and split")
	assert.Len(t, strings.Fields(nbctl(t, c, "--bare", "--columns=name", "list", "Logical_Router")), 60)
	assert.Contains(t, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", dir, "--dry-run").stdout, "no changes")
}
