package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// zoneEnv is the interconnect OVN of newZones (zones gw1, gw2, hv1, hv2:
// one chassis and one NB+SB+northd each, no central NB) with vm-a plugged
// on hv1 and vm-b on hv2, the examples to edit, and ovn-kubernetes-like
// rows seeded in every zone's NB. After the test a second sync against
// every zone must write nothing and the seeded rows must read the same.
type zoneEnv struct {
	traffic
	t         *testing.T
	z         *sandbox.Zones
	manifests string
	foreign   map[string]string
}

func newZoneEnv(t *testing.T) *zoneEnv {
	t.Helper()
	z := newZones(t)
	e := &zoneEnv{traffic: traffic{t, z}, t: t, z: z, manifests: examples(t), foreign: map[string]string{}}
	require.NoError(t, e.z.AddVMPort("hv1", "vm-a", vmAPort))
	require.NoError(t, e.z.AddVMPort("hv2", "vm-b", vmBPort))
	for _, zdb := range e.z.List() {
		writeForeignRows(t, zdb)
	}
	// ovnkube-controller starting in every zone: from here on, between
	// the steps of every zone test (sync, ready), it runs again.
	e.neighbour()
	for _, zdb := range e.z.List() {
		nbctl(t, zdb, "--wait=sb", "sync")
		e.foreign[zdb.Name] = dumpForeignRows(t, zdb)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		e.neighbour()
		r := kubevirtOVN(t, e.syncArgs()...)
		assert.Equal(t, 0, r.code)
		assert.NotRegexp(t, regexp.MustCompile(`(created|updated|deleted)`), r.stdout, "a second sync after the scenario must write nothing in any zone")
		for _, zdb := range e.z.List() {
			assert.Equal(t, e.foreign[zdb.Name], dumpForeignRows(t, zdb), "zone %s: ovn-kubernetes-like rows must be identical", zdb.Name)
		}
	})
	return e
}

func (e *zoneEnv) syncArgs(extra ...string) []string {
	return append(append([]string{"sync", "--from-file", e.manifests}, e.z.ZoneFlags()...), extra...)
}

// sync runs kubevirt-ovn sync against every zone and waits until every
// zone's chassis have realized it.
func (e *zoneEnv) sync() string {
	e.t.Helper()
	r := kubevirtOVN(e.t, e.syncArgs()...)
	require.Equal(e.t, 0, r.code, "kubevirt-ovn sync failed:\n%s", r.stderr)
	e.neighbour()
	e.realized()
	return r.stdout
}

// neighbour starts ovnkube-controller in every zone, as a restart of
// every ovnkube-node pod would (ovnk_neighbour_test.go: its cleanups, and
// EgressQoS adding its QoS row to every switch), and checks that every row
// of ours in every zone is still there, the same row.
func (e *zoneEnv) neighbour() {
	e.t.Helper()
	for _, zdb := range e.z.List() {
		d := ovnkStart(e.t, zdb.Central, ovnkZone{Nodes: append(zdb.Chassis(), "node1"), Networks: []string{"tenant-blue"}})
		// A running controller may rewrite a row of ours meanwhile (a
		// health check's member gone offline under load): a start that
		// matched nothing is tried again until one sees our rows stand
		// still around it.
		for try := 1; try < 5 && len(d.Matched) == 0 && !assert.ObjectsAreEqual(d.OursBefore, d.OursAfter); try++ {
			e.t.Logf("zone %s: rows of ours changed around an ovn-kubernetes start that matched nothing (a controller's write): starting it again", zdb.Name)
			d = ovnkStart(e.t, zdb.Central, ovnkZone{Nodes: append(zdb.Chassis(), "node1"), Networks: []string{"tenant-blue"}})
		}
		require.Equal(e.t, d.OursBefore, d.OursAfter, "zone %s: rows of ours changed by ovn-kubernetes' start (it matched: %q)", zdb.Name, d.Matched)
		require.Empty(e.t, d.Failed, "zone %s: rows of ours would fail ovn-kubernetes' start", zdb.Name)
		if len(d.Matched) > 0 || len(d.QoSOn) > 0 {
			e.t.Logf("zone %s: ovn-kubernetes' start matched %q, added its EgressQoS row to %q", zdb.Name, d.Matched, d.QoSOn)
		}
	}
}

// converged waits until running controllers (the cluster roles, run
// --zone) have written every zone as a sync would: a dry-run sync would
// change nothing. A test ends with it, or its end's second sync could
// find their work half done.
func (e *zoneEnv) converged() {
	e.t.Helper()
	changes := regexp.MustCompile(`(create|update|delete)`) // a dry run says "to create"
	var last string
	require.NoError(e.t, sandbox.Poll(90*time.Second, "every zone as a sync would write it", func() (bool, error) {
		r := kubevirtOVN(e.t, e.syncArgs("--dry-run")...)
		last = r.stdout + r.stderr
		return r.code == 0 && !changes.MatchString(r.stdout), nil
	}), "last dry run:\n%s", last)
}

// realized waits until every zone's chassis have what its NB holds.
func (e *zoneEnv) realized() {
	e.t.Helper()
	for _, zdb := range e.z.List() {
		nbctl(e.t, zdb, "--timeout=90", "--wait=hv", "sync")
	}
}

// ready waits until vm-a and vm-b are up in their zones and router1's
// gateway port is active on gw, in gw's zone.
func (e *zoneEnv) ready(gw string) {
	e.t.Helper()
	nbctl(e.t, e.z.Zone("hv1"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmAPort, "up=true")
	nbctl(e.t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmBPort, "up=true")
	zdb := e.z.ZoneOf(gw)
	uuid, err := zdb.ChassisUUID(gw)
	require.NoError(e.t, err)
	sbctl(e.t, zdb, "--timeout=90", "wait-until", "Port_Binding", crPort, "chassis="+uuid)
	e.neighbour()
	e.realized()
}

// owned lists, per zone, the rows of ours a table holds there (names).
func (e *zoneEnv) owned(table string) map[string]string {
	out := map[string]string{}
	for _, zdb := range e.z.List() {
		out[zdb.Name] = strings.Join(strings.Fields(nbctl(e.t, zdb, "--bare", "--columns=name", "find", table, "external_ids:kubevirt-ovn/managed-by=kubevirt-ovn")), " ")
	}
	return out
}

// TestZonesSyncSNATFromAnotherZone: router1 (gateway gw1) lives in zone
// gw1, its networks in the zones of their VMs and in gw1; vm-a in zone hv1
// reaches the outside SNATed on gw1's wire, and the reply comes back to it
// un-SNATed across zones. The rows of each zone are where the plan says,
// with one tunnel key per switch and port in every zone.
func TestZonesSyncSNATFromAnotherZone(t *testing.T) {
	e := newZoneEnv(t)
	out := e.sync()
	assert.Contains(t, out, "zone gw1:")

	assert.Equal(t, map[string]string{"gw1": "kv-router1", "gw2": "", "hv1": "", "hv2": ""}, e.owned("Logical_Router"))
	switches := e.owned("Logical_Switch")
	assert.ElementsMatch(t, []string{"kv-net-a", "kv-net-b", "kv-public"}, strings.Fields(switches["gw1"]))
	assert.Equal(t, "kv-net-a", switches["hv1"])
	assert.Equal(t, "kv-net-b", switches["hv2"])
	assert.Equal(t, "", switches["gw2"])
	key := func(zone, table, name, col string) string {
		return strings.TrimSpace(nbctl(t, e.z.Zone(zone), "--if-exists", "get", table, name, col+":requested-tnl-key"))
	}
	assert.NotEmpty(t, key("hv1", "Logical_Switch", "kv-net-a", "other_config"))
	assert.Equal(t, key("gw1", "Logical_Switch", "kv-net-a", "other_config"), key("hv1", "Logical_Switch", "kv-net-a", "other_config"))
	assert.Equal(t, key("gw1", "Logical_Switch_Port", vmAPort, "options"), key("hv1", "Logical_Switch_Port", vmAPort, "options"))
	assert.Equal(t, "remote", strings.TrimSpace(nbctl(t, e.z.Zone("gw1"), "get", "Logical_Switch_Port", vmAPort, "type")))
	assert.Equal(t, "remote", strings.TrimSpace(nbctl(t, e.z.Zone("hv1"), "get", "Logical_Switch_Port", "kv-stor-net-a_router1", "type")))

	e.ready("gw1")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40001, 5001)
	got := waitFor(t, e.wire("gw1"), "vm-a's UDP (zone hv1) leaving SNATed on gw1", 0, snated(5001))
	assert.Equal(t, gwPortMAC, got.SrcMAC)
	assert.Equal(t, peerMAC, got.DstMAC)
	assert.GreaterOrEqual(t, got.SPort, uint16(1025))

	e.unSNATed("gw1", got, vmA, 40001, vmB)
}

// TestZonesRouterRemovedLeavesNoRow: removing the router and the VMs'
// manifests removes every row of ours from every zone; the networks stay
// where they still have a reason to be.
func TestZonesRouterRemovedLeavesNoRow(t *testing.T) {
	e := newZoneEnv(t)
	e.sync()
	require.NoError(t, os.Remove(e.manifests+"/router.yaml"))
	out := e.sync()
	assert.Contains(t, out, "VirtualRouter router1")
	for table, want := range map[string]map[string]string{
		"Logical_Router":      {"gw1": "", "gw2": "", "hv1": "", "hv2": ""},
		"Logical_Router_Port": {"gw1": "", "gw2": "", "hv1": "", "hv2": ""},
		"Logical_Switch":      {"gw1": "", "gw2": "", "hv1": "kv-net-a", "hv2": "kv-net-b"},
	} {
		assert.Equal(t, want, e.owned(table), table)
	}
	for _, zdb := range e.z.List() {
		assert.Empty(t, strings.TrimSpace(nbctl(t, zdb, "--bare", "--columns=name", "find", "Logical_Switch_Port", "type=remote")), "zone %s: remote ports left", zdb.Name)
	}
}

// TestZonesBadInputTouchesNothingElse: one router's bad SNAT IP fails that
// router alone, in every zone: its rows stay as they were, the other
// router and the networks are synced.
func TestZonesBadInputTouchesNothingElse(t *testing.T) {
	e := newZoneEnv(t)
	e.sync()
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, zdb := range e.z.List() {
			out[zdb.Name] = nbctl(t, zdb, "--bare", "--columns=_uuid,name,options,external_ids", "list", "Logical_Router_Port")
		}
		return out
	}
	before := snapshot()
	e.edit("router.yaml", "ip: 172.16.0.100", "ip: 172.16.9.300")
	e.write("second.yaml", `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: router2
spec:
  enableSnat: true
  gateway: gw2
  external:
    ip: 172.16.0.101
    network: public
`)
	r := kubevirtOVN(t, e.syncArgs()...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "VirtualRouter router1: spec.external.ip")
	after := snapshot()
	for _, zone := range []string{"gw1", "hv1", "hv2"} {
		assert.Equal(t, before[zone], after[zone], "zone %s: router1's ports must stay as they were", zone)
	}
	assert.Equal(t, map[string]string{"gw1": "kv-router1", "gw2": "kv-router2", "hv1": "", "hv2": ""}, e.owned("Logical_Router"))

	// Fixed: synced again as it was. The external network, in gw1 and gw2
	// now, holds no remote port: its zones meet on the physical network.
	e.edit("router.yaml", "ip: 172.16.9.300", "ip: 172.16.0.100")
	e.sync()
	assert.NotContains(t, nbctl(t, e.z.Zone("gw2"), "--columns=type", "list", "Logical_Switch_Port"), "remote")
	assert.NotContains(t, nbctl(t, e.z.Zone("gw1"), "--columns=name", "list", "Logical_Switch_Port"), "kv-etor-router2")
}

func (e *zoneEnv) edit(file, old, new string) {
	e.t.Helper()
	edit(e.t, e.manifests+"/"+file, old, new)
}

func (e *zoneEnv) write(file, content string) {
	e.t.Helper()
	require.NoError(e.t, os.WriteFile(e.manifests+"/"+file, []byte(content), 0o644))
}

// TestZonesGatewayGoneRouterMoves: under `run --from-file` with every
// zone, router1 (scheduled, not pinned) lives in its primary's zone. That
// gateway's node goes (its chassis leaves every SB): the router moves to
// the other gateway's zone — its rows leave one NB and appear in the other,
// the remote ports in hv1 and hv2 follow — and vm-a's traffic leaves
// SNATed on the new gateway's wire. The time from the chassis going to
// that packet is printed.
func TestZonesGatewayGoneRouterMoves(t *testing.T) {
	e := newZoneEnv(t)
	e.edit("router.yaml", "  gateway: gw1\n", "")
	startController(t, "zones", append([]string{"--from-file", e.manifests}, e.z.ZoneFlags()...)...)

	var home string
	require.NoError(t, sandbox.Poll(60*time.Second, "router1 in a gateway's zone", func() (bool, error) {
		for zone, lr := range e.owned("Logical_Router") {
			if lr == "kv-router1" {
				home = zone
			}
		}
		return home != "", nil
	}))
	other := map[string]string{"gw1": "gw2", "gw2": "gw1"}[home]
	require.NotEmpty(t, other, "router1 lives in zone %s", home)
	e.ready(home)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40040, 5040)
	waitFor(t, e.wire(home), "vm-a's UDP leaving SNATed via "+home, 0, snated(5040))

	_, err := e.z.KillChassis(home)
	require.NoError(t, err)
	gone := time.Now()
	require.NoError(t, e.z.RemoveChassis(home))
	// Send until a packet leaves SNATed on the new gateway: the outage
	// is from the chassis going to the first one.
	var moved time.Duration
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-a's UDP leaving SNATed via "+other, func() (bool, error) {
		e.send("hv1", "vm-a", vmAMAC, vmAIP, 40041, 5041)
		ps, err := e.z.Capture(other, sandbox.ExternalPort)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if snated(5041)(p) {
				moved = time.Since(gone)
				return true, nil
			}
		}
		return false, nil
	}))
	report(t, fmt.Sprintf("interconnect: gateway %s's chassis gone -> router1 moved to zone %s, first SNATed packet there after %s", home, other, moved.Round(time.Millisecond)))
	assert.Equal(t, "", e.owned("Logical_Router")[home], "router1 left zone %s", home)
	assert.Equal(t, "kv-router1", e.owned("Logical_Router")[other])
	assert.Equal(t, "remote", strings.TrimSpace(nbctl(t, e.z.Zone("hv1"), "get", "Logical_Switch_Port", "kv-stor-net-a_router1", "type")))
	assert.Equal(t, other, strings.Trim(strings.TrimSpace(nbctl(t, e.z.Zone("hv1"), "get", "Logical_Switch_Port", "kv-stor-net-a_router1", "options:requested-chassis")), `"`))
}

// TestZonesVMAddedAndRemoved: a VM on net-a appears on hv2, a zone net-a
// was not in: net-a's switch is created there with the VM's port, the
// router's remote port and vm-a's remote port; the VM's port is remote in
// net-a's other zones. Its traffic leaves SNATed on gw1. When it goes,
// its port goes from every zone and net-a leaves hv2.
func TestZonesVMAddedAndRemoved(t *testing.T) {
	e := newZoneEnv(t)
	const vmCPort, vmCMAC, vmCIP = "kv-net-a_default_vm-c_eth1", "50:54:00:00:00:07", "10.10.0.7"
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmCPort))
	e.sync()
	assert.Equal(t, "kv-net-b", e.owned("Logical_Switch")["hv2"])

	e.write("vm-c.yaml", `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-c
  namespace: default
spec:
  networks:
    - name: eth1
      multus:
        networkName: net-a
status:
  nodeName: hv2
  interfaces:
    - name: eth1
      mac: "`+vmCMAC+`"
      ipAddress: `+vmCIP+`
`)
	out := e.sync()
	assert.Contains(t, out, "create Logical_Switch kv-net-a")
	assert.ElementsMatch(t, []string{"kv-net-a", "kv-net-b"}, strings.Fields(e.owned("Logical_Switch")["hv2"]))
	portType := func(zone, port string) string {
		return strings.Trim(strings.TrimSpace(nbctl(t, e.z.Zone(zone), "--if-exists", "get", "Logical_Switch_Port", port, "type")), `"`)
	}
	assert.Equal(t, "", portType("hv2", vmCPort), "local in its zone")
	assert.Contains(t, nbctl(t, e.z.Zone("hv2"), "--columns=name", "list", "Logical_Switch_Port"), vmCPort)
	assert.Equal(t, "remote", portType("hv1", vmCPort))
	assert.Equal(t, "remote", portType("gw1", vmCPort))
	assert.Equal(t, "remote", portType("hv2", vmAPort))
	assert.Equal(t, "remote", portType("hv2", "kv-stor-net-a_router1"))

	e.ready("gw1")
	nbctl(t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmCPort, "up=true")
	e.send("hv2", "vm-c", vmCMAC, vmCIP, 40201, 5201)
	got := waitFor(t, e.wire("gw1"), "vm-c's UDP (zone hv2) leaving SNATed on gw1", 0, snated(5201))
	assert.GreaterOrEqual(t, got.SPort, uint16(1025))

	require.NoError(t, os.Remove(filepath.Join(e.manifests, "vm-c.yaml")))
	out = e.sync()
	assert.Contains(t, out, "delete Logical_Switch kv-net-a")
	for _, zdb := range e.z.List() {
		assert.NotContains(t, nbctl(t, zdb, "--columns=name", "list", "Logical_Switch_Port"), vmCPort, "zone %s: vm-c's port", zdb.Name)
	}
	assert.Equal(t, "kv-net-b", e.owned("Logical_Switch")["hv2"], "net-a has no reason to be in hv2 any more")
}
