package integration

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Live migration across interconnect zones (one zone per chassis, as
// ovn-kubernetes deploys): vm-a moves from hv1 (zone hv1) to hv2 (zone
// hv2). vm-b, in zone hv2 on net-b, reaches vm-a through router1, whose
// home is zone gw1: its traffic to vm-a leaves zone gw1 by vm-a's twin
// there.

// vmCOnNetA is vm-c's VMI on net-a, on hv2, with mac and ip.
func vmCOnNetA(mac, ip string) string { return vmiDoc("vm-c", "net-a", "hv2", mac, ip, "") }

// lspOptionsIn is port's options in zone z's NB, "" when z has no such
// port, with its type first when it has one.
func lspOptionsIn(t *testing.T, zdb *sandbox.ZoneDB, port string) string {
	t.Helper()
	out := strings.TrimSpace(nbctl(t, zdb, "--bare", "--columns=type,options", "find", "Logical_Switch_Port", "name="+port))
	return strings.Join(strings.Fields(out), " ")
}

// waitZoneBinding waits until port's Port_Binding in zone z's SB is want.
func waitZoneBinding(t *testing.T, zdb *sandbox.ZoneDB, port, what string, want binding) {
	t.Helper()
	var last binding
	require.NoError(t, sandbox.Poll(60*time.Second, what, func() (bool, error) {
		last = sbBinding(t, zdb, port)
		return last.is(want), nil
	}), "zone %s, last seen: %+v", zdb.Name, last)
}

// TestZonesLiveMigration: while vm-a migrates from zone hv1 to zone hv2,
// zone hv2 has vm-a's port bound to hv1 (a remote chassis there, bound by
// kubevirt-ovn's SB write on OVN before 24.03.6) and to hv2, blocked there
// until the VM's RARP; zone hv1 keeps it on hv1 alone, zone gw1 its twin
// on hv1. vm-c, in zone hv2 on net-a, reaches vm-a on hv1 before and
// during the migration and on hv2 as soon as the RARP activated it there.
// Completed, zone hv2 has it alone and zone gw1's twin is bound to hv2. A
// numbered stream from vm-b (through zone gw1) runs across, its gap
// printed.
func TestZonesLiveMigration(t *testing.T) { zonesLiveMigration(t, "sync") }

// TestZonesLiveMigrationRun: the same under run --zone, which watches
// every zone's SB: the activation seen in zone hv2 moves every zone's port
// to hv2 before the VMI says anything, and the gap of a peer outside the
// target's zone is that move.
func TestZonesLiveMigrationRun(t *testing.T) { zonesLiveMigration(t, "run --zone") }

// TestInterconnectClusterLiveMigration: the same with the cluster roles
// (the allocator and one agent per zone, a real API server, the VMI's
// status as virt-handler writes it): zone hv2's agent publishes the
// activation in its OVNZone, and every other zone's agent moves its twin.
func TestInterconnectClusterLiveMigration(t *testing.T) { zonesLiveMigration(t, "cluster") }

// TestZonesLiveMigrationIntoANewZone: the same with sync, without vm-c:
// zone hv2 has no port of net-a before the migration, so no twin whose
// binding the port would inherit; kubevirt-ovn binds the port to its
// remote main chassis in zone hv2's SB (OVN before 24.03.6 does not).
func TestZonesLiveMigrationIntoANewZone(t *testing.T) { zonesLiveMigration(t, "sync, new zone") }

// zonesLiveMigration is the scenario in mode sync, "run --zone" or
// cluster.
func zonesLiveMigration(t *testing.T, mode string) {
	label, peer := mode, mode != "sync, new zone" // peer: vm-c
	if !peer {
		mode = "sync"
	}
	run := mode != "sync" // something follows the SB's activation
	e := newZoneEnv(t)
	require.NoError(t, e.z.AddVMPort("hv2", vmADst, vmAPort))
	if peer {
		// vm-c, on net-a in zone hv2, reaches vm-a on its own switch: in
		// zone hv2 by vm-a's twin, then by the port bound to both chassis.
		require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
		e.write("vmc.yaml", vmCOnNetA(vmLBCMAC, vmLBCIP))
	}
	e.write("vmis.yaml", twoVMIs("hv1", "", "hv2", ""))
	zHV1, zHV2, zGW1 := e.z.Zone("hv1"), e.z.Zone("hv2"), e.z.Zone("gw1")
	var k *kubeAPI
	// step sets vm-a on node with migrationState state (KubeVirt's field
	// names; nil none) and syncs, or lets run or the agents follow, until
	// zone z's port of vm-a has options want.
	step := func(node string, state map[string]any, z *sandbox.ZoneDB, want string) {
		t.Helper()
		var lines []string
		for _, key := range slices.Sorted(maps.Keys(state)) {
			lines = append(lines, fmt.Sprintf("    %s: %v", key, state[key]))
		}
		more := ""
		if len(lines) > 0 {
			more = "  migrationState:\n" + strings.Join(lines, "\n") + "\n"
		}
		e.write("vmis.yaml", twoVMIs(node, more, "hv2", ""))
		switch mode {
		case "sync":
			e.sync()
		case "cluster":
			k.change(t, vmiGVR, "default", "vm-a", func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedField(u.Object, node, "status", "nodeName"))
				require.NoError(t, unstructured.SetNestedMap(u.Object, state, "status", "migrationState"))
			})
		}
		waitNB(t, "zone "+z.Name+": vm-a's port "+want, func() bool { return strings.HasPrefix(lspOptionsIn(t, z, vmAPort), want) })
	}
	switch mode {
	case "sync":
		e.sync()
	case "run --zone":
		startController(t, "zones", append([]string{"--from-file", e.manifests, "--file-poll", "100ms"}, e.z.ZoneFlags()...)...)
	case "cluster":
		k = startKubeAPI(t)
		startInterconnect(t, e, k)
		for _, f := range []string{"networks.yaml", "vmis.yaml", "vmc.yaml", "router.yaml"} {
			k.apply(t, filepath.Join(e.manifests, f))
		}
	}
	if run {
		waitNB(t, "zone hv1: vm-a's port", func() bool { return strings.HasPrefix(lspOptionsIn(t, zHV1, vmAPort), "requested-chassis=hv1 ") })
		e.converged()
	}
	e.ready("gw1")
	assert.Regexp(t, `^requested-chassis=hv1 requested-tnl-key=\d+$`, lspOptionsIn(t, zHV1, vmAPort))
	key := strings.TrimPrefix(strings.Fields(lspOptionsIn(t, zHV1, vmAPort))[1], "requested-tnl-key=")
	if peer {
		assert.Equal(t, "remote requested-chassis=hv1 requested-tnl-key="+key, lspOptionsIn(t, zHV2, vmAPort), "zone hv2: vm-a's twin")
		assert.Equal(t, binding{chassis: "hv1"}, sbBinding(t, zHV2, vmAPort), "zone hv2: the twin bound to hv1; vm-a's target interface there binds nothing")
		nbctl(t, zHV2, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	} else {
		assert.Empty(t, lspOptionsIn(t, zHV2, vmAPort), "zone hv2 has no port of net-a")
	}
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	st := e.startStream(30000)
	waitFor(t, src, "vm-b's stream at vm-a on hv1", 0, func(s seen) bool { return s.IsUDP && s.SPort == st.sport })
	fromC := func(dport uint16) {
		if !peer {
			return
		}
		f := frame{SrcMAC: vmLBCMAC, DstMAC: vmAMAC, SrcIP: vmLBCIP, DstIP: vmAIP, TTL: 64, SPort: 40990, DPort: dport}
		require.NoError(t, e.z.Inject("hv2", "vm-c", frameBytes(t, f)))
	}
	cTo := func(dport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SPort == 40990 && s.DPort == dport }
	}
	// vm-c's frame reaches vm-a where it should, and not elsewhere.
	fromCTo := func(what string, to, not capture, dport uint16) {
		t.Helper()
		if !peer {
			return
		}
		skip, skipNot := count(t, to), count(t, not)
		fromC(dport)
		waitFor(t, to, "vm-c's frame (zone hv2) at vm-a "+what, skip, cTo(dport))
		requireNone(t, not, "vm-c's frame (zone hv2) elsewhere than "+what, skipNot, cTo(dport))
	}
	fromCTo("on hv1 before the migration", src, dst, 5741)

	// The migration runs.
	step("hv1", map[string]any{"sourceNode": "hv1", "targetNode": "hv2", "migrationUid": "uid-z1", "mode": "PreCopy"}, zHV2, "activation-strategy=rarp")
	assert.Equal(t, "requested-chassis=hv1 requested-tnl-key="+key, lspOptionsIn(t, zHV1, vmAPort), "the source's zone: the source alone")
	assert.Equal(t, "activation-strategy=rarp requested-chassis=hv1,hv2 requested-tnl-key="+key, lspOptionsIn(t, zHV2, vmAPort), "the target's zone: both, its twin made a port")
	assert.Equal(t, "remote requested-chassis=hv1 requested-tnl-key="+key, lspOptionsIn(t, zGW1, vmAPort), "another zone: its twin on the source")
	waitZoneBinding(t, zHV2, vmAPort, "zone hv2: vm-a bound to hv1 and, as additional chassis, hv2", binding{chassis: "hv1", additional: "hv2"})
	nbctl(t, zHV2, "--timeout=90", "--wait=hv", "sync")
	claimed := st.seqs(t, dst)
	at := st.sentCount()
	waitFor(t, src, "vm-b's stream at vm-a on hv1 during the migration", 0, func(s seen) bool {
		return s.IsUDP && s.SPort == st.sport && int(s.DPort-st.base) > at
	})
	require.Equal(t, claimed, st.seqs(t, dst), "vm-b's stream at the target before the VM's RARP there")
	fromCTo("on hv1 during the migration (zone hv2 sends to the remote main chassis), not at its target before the RARP", src, dst, 5742)

	// The VM runs on hv2: its RARP activates it in zone hv2.
	rarp, rarpAt := time.Now(), st.sentCount()
	e.announce()
	// The target's zone reaches the VM at once, before any write (a
	// frame sent while the port moves from additional to main chassis
	// under run may be lost: one is sent every poll until one arrives).
	skipDst := count(t, dst)
	require.NoError(t, sandbox.Poll(30*time.Second, "vm-c's frames (zone hv2) at vm-a on hv2 after its RARP, before the migration completed", func() (bool, error) {
		if !peer {
			return true, nil
		}
		fromC(5743)
		got, err := dst.read()
		if err != nil || len(got) < skipDst {
			return false, err
		}
		return slices.ContainsFunc(got[skipDst:], cTo(5743)), nil
	}))
	var collapsed time.Duration
	if run {
		// run follows the activation into every zone.
		waitNB(t, "zone gw1: vm-a's twin on hv2 after the activation", func() bool {
			return strings.HasPrefix(lspOptionsIn(t, zGW1, vmAPort), "remote requested-chassis=hv2 ")
		})
		collapsed = time.Since(rarp)
		waitZoneBinding(t, zHV2, vmAPort, "zone hv2: vm-a on hv2 alone after the activation", binding{chassis: "hv2"})
	} else {
		waitZoneBinding(t, zHV2, vmAPort, "zone hv2: hv2 activated", binding{chassis: "hv1", additional: "hv2", activated: "hv2"})
	}

	// Completed.
	step("hv2", map[string]any{"sourceNode": "hv1", "targetNode": "hv2", "migrationUid": "uid-z1", "completed": true}, zGW1, "remote requested-chassis=hv2 ")
	if !run {
		collapsed = time.Since(rarp)
	}
	e.realized()
	assert.Equal(t, "requested-chassis=hv2 requested-tnl-key="+key, lspOptionsIn(t, zHV2, vmAPort))
	assert.Equal(t, "remote requested-chassis=hv2 requested-tnl-key="+key, lspOptionsIn(t, zGW1, vmAPort))
	waitZoneBinding(t, zHV2, vmAPort, "zone hv2: vm-a on hv2 alone", binding{chassis: "hv2"})
	afterCollapse := st.sentCount()
	waitFor(t, dst, "vm-b's stream at vm-a on hv2 after the migration", 0, func(s seen) bool {
		return s.IsUDP && s.SPort == st.sport && int(s.DPort-st.base) > afterCollapse+3
	})
	sent := st.end()
	atSrc, atDst := st.seqs(t, src), st.seqs(t, dst)
	for i := afterCollapse + 1; i < len(sent); i++ {
		assert.False(t, atSrc[i], "frame %d, sent after the migration completed, reached the source", i)
	}
	lost, gap, dups := streamReport(sent, atSrc, atDst)
	// The source still captures after the RARP; a VM running on the
	// target would not: those frames are the gap of this peer's zone.
	stale, first, last := 0, -1, -1
	for i := rarpAt; i < len(sent); i++ {
		if atSrc[i] && !atDst[i] {
			stale++
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	staleGap := time.Duration(0)
	if first >= 0 {
		staleGap = sent[last].Sub(sent[first]) + streamInterval
	}
	report(t, fmt.Sprintf("interconnect, %s: vm-a from zone hv1 to zone hv2, vm-b's stream through zone gw1 of %d frames every %s: %d lost, %d received twice, %d at the target at its claim; after the RARP %d reached the source alone (%s: the gap of a peer outside the target's zone; the other zones' twins on the target %s after the RARP)",
		label, len(sent), streamInterval, lost, dups, len(claimed), stale, staleGap.Round(time.Millisecond), collapsed.Round(time.Millisecond)))
	_ = gap
	if run {
		// The migration took vm-a's zone hv1 out of net-a's zones: what
		// run or the agents write there may still be under way.
		e.converged()
	}
}
