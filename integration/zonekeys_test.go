package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// The foreign switches are named transit_switch, as ovn-kubernetes' own
// transit switch is in every zone: the neighbour's cleanups (zoneEnv.
// neighbour) keep it, as ovn-kubernetes does, where they would delete any
// other switch requesting a key without its network key.

// TestZonesForeignKeyIsNotTaken: another tool's switch in zone hv1
// requests the key net-a would get (the top of kubevirt-ovn's range):
// net-a gets another one, the same in gw1 and hv1, ovn-northd gives each
// switch the key it requests, and vm-a's traffic still crosses from hv1 to
// gw1. Then another tool's switch in zone hv2 requests net-b's key: net-b
// moves to a free key in every zone (sync says so) and vm-b's traffic
// still crosses.
func TestZonesForeignKeyIsNotTaken(t *testing.T) {
	e := newZoneEnv(t)
	first := strconv.Itoa(translator.MaxDatapathKey) // net-a's, the first network by name
	nbctl(t, e.z.Zone("hv1"), "ls-add", "transit_switch", "--", "set", "Logical_Switch", "transit_switch", "other_config:requested-tnl-key="+first)
	e.sync()

	// requested is what zone's NB asks for switch sw, bound what its SB
	// gives it.
	requested := func(zone, sw string) string {
		return strings.Trim(strings.TrimSpace(nbctl(t, e.z.Zone(zone), "get", "Logical_Switch", sw, "other_config:requested-tnl-key")), `"`)
	}
	bound := func(zone, sw string) string {
		return strings.TrimSpace(sbctl(t, e.z.Zone(zone), "--bare", "--columns=tunnel_key", "find", "Datapath_Binding", "external_ids:name="+sw))
	}
	inRange := func(key string) bool {
		k, err := strconv.Atoi(key)
		return err == nil && k >= translator.MinDatapathKey && k <= translator.MaxDatapathKey
	}
	netA := requested("hv1", "kv-net-a")
	assert.NotEqual(t, first, netA)
	assert.True(t, inRange(netA), "kv-net-a requests %s", netA)
	for _, zone := range []string{"gw1", "hv1"} {
		assert.Equal(t, netA, requested(zone, "kv-net-a"), "zone %s", zone)
		assert.Equal(t, netA, bound(zone, "kv-net-a"), "zone %s: northd gave kv-net-a another key", zone)
	}
	assert.Equal(t, first, bound("hv1", "transit_switch"))

	e.ready("gw1")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40301, 5301)
	waitFor(t, e.wire("gw1"), "vm-a's UDP (zone hv1) leaving SNATed on gw1", 0, snated(5301))

	// A foreign switch in hv2 requests the key net-b holds.
	netB := requested("hv2", "kv-net-b")
	nbctl(t, e.z.Zone("hv2"), "ls-add", "transit_switch", "--", "set", "Logical_Switch", "transit_switch", "other_config:requested-tnl-key="+netB)
	r := kubevirtOVN(t, e.syncArgs()...)
	require.Equal(t, 0, r.code, "kubevirt-ovn sync failed:\n%s", r.stderr)
	assert.Contains(t, r.stderr, "note: Logical_Switch kv-net-b: tunnel key "+netB+" collides with Logical_Switch transit_switch (zone hv2's NB)")
	e.realized()
	moved := requested("hv2", "kv-net-b")
	assert.NotEqual(t, netB, moved)
	assert.True(t, inRange(moved), "kv-net-b requests %s", moved)
	for _, zone := range []string{"gw1", "hv2"} {
		assert.Equal(t, moved, requested(zone, "kv-net-b"), "zone %s", zone)
		assert.Equal(t, moved, bound(zone, "kv-net-b"), "zone %s", zone)
	}
	// The foreign switch gets the key net-b gave up: by itself before OVN
	// 25.09; from 25.09 on ovn-northd leaves it where it was until its row
	// changes or northd recomputes, which sync says (the row is not ours),
	// and the recompute it names does it.
	stuck := "note: zone hv2: Logical_Switch transit_switch requests tunnel key " + netB + ", which no datapath holds, but ovn-northd left it on"
	if expectFacts(t).keepsFreedKeys {
		assert.Contains(t, r.stderr, stuck)
		assert.NotEqual(t, netB, bound("hv2", "transit_switch"))
		_, err := sandbox.Run(e.z.Zone("hv2").Dir, "ovn-appctl", "-t", filepath.Join(e.z.Zone("hv2").Dir, "northd", "ovn-northd.ctl"), "inc-engine/recompute")
		require.NoError(t, err)
		nbctl(t, e.z.Zone("hv2"), "--wait=sb", "sync")
	} else {
		assert.NotContains(t, r.stderr, "which no datapath holds")
	}
	assert.Equal(t, netB, bound("hv2", "transit_switch"))
	assert.Equal(t, netA, requested("hv1", "kv-net-a"), "net-a keeps its key")

	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40302, 5302)
	waitFor(t, e.wire("gw1"), "vm-b's UDP (zone hv2) leaving SNATed on gw1 after its switch moved", 0, snated(5302))
}

// TestZonesVXLANRefused: a zone whose NB_Global says max_tunid=4095 (what
// ovn-northd writes when a chassis has a VXLAN encap) makes sync fail,
// naming the zone and the value, and write nothing in any zone; run
// and a zone agent refuse to start. The NBs
// and SBs are bare ovsdb-servers: no northd rewrites max_tunid.
func TestZonesVXLANRefused(t *testing.T) {
	type zone struct{ name, nb, sb string }
	zones := []zone{{name: "z1"}, {name: "z2"}}
	var flags []string
	for i := range zones {
		z := &zones[i]
		z.nb, z.sb = nbtest.Real(t), nbtest.RealSB(t)
		ctl(t, "ovn-nbctl", z.nb, "init")
		ctl(t, "ovn-sbctl", z.sb, "init")
		ctl(t, "ovn-sbctl", z.sb, "chassis-add", "hv-"+z.name, "geneve", "192.0.2."+strconv.Itoa(i+1))
		ctl(t, "ovn-nbctl", z.nb, "set", "NB_Global", ".", "options:max_tunid=16711680")
		flags = append(flags, "--zone", z.name+"=unix:"+z.nb+",unix:"+z.sb)
	}
	ctl(t, "ovn-nbctl", zones[1].nb, "set", "NB_Global", ".", "options:max_tunid=4095")
	r := kubevirtOVN(t, append([]string{"sync", "--from-file", examples(t)}, flags...)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "zone z2: NB_Global options:max_tunid=4095 (VXLAN): kubevirt-ovn's interconnect tunnel keys need Geneve (max_tunid 16711680) (nothing written)")
	// run refuses to start.
	r = kubevirtOVN(t, append([]string{"run", "--from-file", examples(t), "--http-addr", ""}, flags...)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "kubevirt-ovn run: zone z2: NB_Global options:max_tunid=4095 (VXLAN)")
	// So does a zone agent: it refuses before it reads the cluster (the
	// kubeconfig names an API server that is never contacted).
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: x}}]
current-context: c
`), 0o600))
	r = kubevirtOVN(t, "run", "--zone-nb", "unix:"+zones[1].nb, "--zone-sb", "unix:"+zones[1].sb, "--zone-name", "z2",
		"--kubeconfig", kubeconfig, "--leader-elect=false", "--http-addr", "")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "kubevirt-ovn run: zone z2: NB_Global options:max_tunid=4095 (VXLAN)")
	for _, z := range zones {
		for _, table := range []string{"Logical_Switch", "Logical_Router", "Logical_Switch_Port"} {
			assert.Empty(t, strings.TrimSpace(ctl(t, "ovn-nbctl", z.nb, "--bare", "--columns=name", "list", table)), "zone %s: %s", z.name, table)
		}
	}
}

// ctl runs ovn-nbctl or ovn-sbctl against the database at socket sock.
func ctl(t *testing.T, tool, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command(tool, append([]string{"--db=unix:" + sock}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", tool, strings.Join(args, " "), out)
	return string(out)
}

// TestInterconnectClusterForeignKeyIsNotTaken: the cluster roles, with
// another tool's switch in zone hv1 requesting the key net-a would get.
// hv1's agent publishes it in its OVNZone, the allocator gives net-a
// another key (moving it if it allocated before the agent published), and
// zones gw1 and hv1 request and bind that key.
func TestInterconnectClusterForeignKeyIsNotTaken(t *testing.T) {
	e := newZoneEnv(t)
	first := strconv.Itoa(translator.MaxDatapathKey)
	nbctl(t, e.z.Zone("hv1"), "ls-add", "transit_switch", "--", "set", "Logical_Switch", "transit_switch", "other_config:requested-tnl-key="+first)
	k := startKubeAPI(t)
	startInterconnect(t, e, k)
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(e.manifests, f))
	}
	requested := func(zone string) string {
		return strings.Trim(strings.TrimSpace(nbctl(t, e.z.Zone(zone), "--if-exists", "get", "Logical_Switch", "kv-net-a", "other_config:requested-tnl-key")), `"`)
	}
	bound := func(zone string) string {
		return strings.TrimSpace(sbctl(t, e.z.Zone(zone), "--bare", "--columns=tunnel_key", "find", "Datapath_Binding", "external_ids:name=kv-net-a"))
	}
	waitNB(t, "kv-net-a bound to one key, not "+first+", in zones gw1 and hv1", func() bool {
		key := requested("hv1")
		return key != "" && key != first && requested("gw1") == key && bound("hv1") == key && bound("gw1") == key
	})
	zone, err := k.dyn.Resource(kube.ZoneGVR).Namespace(icNamespace).Get(context.Background(), "zone-hv1", metav1.GetOptions{})
	require.NoError(t, err)
	keys, _, _ := unstructured.NestedSlice(zone.Object, "spec", "foreignKeys")
	assert.Equal(t, []any{map[string]any{"key": int64(translator.MaxDatapathKey), "holder": "Logical_Switch transit_switch"}}, keys)
	assert.Equal(t, first, strings.TrimSpace(sbctl(t, e.z.Zone("hv1"), "--bare", "--columns=tunnel_key", "find", "Datapath_Binding", "external_ids:name=transit_switch")))
	e.converged()
}
