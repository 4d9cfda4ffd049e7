package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// Live migration (issue 31), central mode: vm-a moves from hv1 to hv2.
// Its target pod's interface, with the same iface-id, is plugged on hv2
// (as "vm-a-dst") before the migration starts and stays plugged, as
// KubeVirt's target virt-launcher pod is.

const vmADst = "vm-a-dst"

// vmAMigrating is vm-a's VMI with status.nodeName node and a migration
// from hv1 to hv2 whose migrationState has the further lines state
// (KubeVirt's field names), and vm-b as in the examples.
func vmAMigrating(node, state string) string {
	return vmAOn(node, `  migrationState:
    sourceNode: hv1
    targetNode: hv2
    migrationUid: d7c1f0e2-5b7a-4c61-9a3e-0f5e2b8c4a11
`+state)
}

// vmAOn is vm-a's VMI on node with the status lines more, and vm-b.
func vmAOn(node, more string) string {
	if more != "" {
		more += "\n"
	}
	return twoVMIs(node, more, "hv2", "")
}

// sentUntilAt sends toVMA(dport) every poll until one reaches c.
func (p traffic) sentUntilAt(c capture, what string, dport uint16) {
	p.t.Helper()
	skip := count(p.t, c)
	require.NoError(p.t, sandbox.Poll(60*time.Second, what, func() (bool, error) {
		p.toVMA(dport)
		got, err := c.read()
		if err != nil || len(got) < skip {
			return false, err
		}
		return slices.ContainsFunc(got[skip:], toPort(dport)), nil
	}))
}

// toVMA sends UDP from vm-b (on hv2, routed from net-b) to vm-a's address
// with destination port dport.
func (p traffic) toVMA(dport uint16) {
	p.t.Helper()
	f := frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: vmAIP, TTL: 64, SPort: 40700, DPort: dport}
	require.NoError(p.t, p.c.Inject("hv2", "vm-b", frameBytes(p.t, f)))
}

func toPort(dport uint16) func(seen) bool {
	return func(s seen) bool { return s.IsUDP && s.DstIP == vmAIP && s.DPort == dport }
}

// binding is vm-a's SB Port_Binding as chassis names: its chassis, its
// additional chassis and its additional-chassis-activated option.
type binding struct{ chassis, additional, activated string }

// is says whether b is want. A port wanted on one chassis alone may also
// carry options:additional-chassis-activated naming that chassis: the
// chassis' ovn-controller writes the flag from a RARP it queued after
// ovn-northd dropped it with the collapse (TestLiveMigrationStaleActivatedFlag),
// and nothing clears it until the port's next migration.
func (b binding) is(want binding) bool {
	if b == want {
		return true
	}
	alone := want.additional == "" && want.activated == ""
	return alone && b.chassis == want.chassis && b.additional == "" && b.activated == want.chassis
}

func (e *env) vmABinding() binding {
	e.t.Helper()
	return sbBinding(e.t, e.l, vmAPort)
}

// sbBinding is port's Port_Binding in SB sb as chassis names.
func sbBinding(t *testing.T, sb interface {
	SBCtl(...string) (string, error)
}, port string) binding {
	t.Helper()
	out, err := sb.SBCtl("--bare", "--columns=chassis,additional_chassis,options", "find", "Port_Binding", "logical_port="+port)
	require.NoError(t, err)
	lines := strings.Split(out, "\n")
	require.GreaterOrEqual(t, len(lines), 3, "one Port_Binding of %s:\n%s", port, out)
	name := func(uuids string) string {
		var names []string
		for _, u := range strings.Fields(uuids) {
			n, err := sb.SBCtl("--bare", "--columns=name", "list", "Chassis", u)
			require.NoError(t, err)
			names = append(names, strings.TrimSpace(n))
		}
		return strings.Join(names, ",")
	}
	b := binding{chassis: name(lines[0]), additional: name(lines[1])}
	for _, kv := range strings.Fields(lines[2]) {
		if v, ok := strings.CutPrefix(kv, "additional-chassis-activated="); ok {
			b.activated = strings.Trim(v, `"`)
		}
	}
	return b
}

// waitBinding waits until vm-a's Port_Binding is want.
func (e *env) waitBinding(what string, want binding) {
	e.t.Helper()
	var last binding
	require.NoError(e.t, sandbox.Poll(60*time.Second, what, func() (bool, error) {
		last = e.vmABinding()
		return last.is(want), nil
	}), "last seen: %+v", last)
}

// lspOptions is vm-a's port's options as ovn-nbctl prints them.
func (e *env) lspOptions() string {
	e.t.Helper()
	return strings.TrimSpace(nbctl(e.t, e.l, "--bare", "--columns=options", "list", "Logical_Switch_Port", vmAPort))
}

// startMigration plugs vm-a's target interface on hv2, checks that it
// binds nothing while vm-a runs on hv1, and starts the migration: the
// port is bound on both chassis, blocked on hv2.
func startMigration(t *testing.T) *env {
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", vmADst, vmAPort))
	e.write("vmis.yaml", vmAOn("hv1", ""))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	assert.Equal(t, "requested-chassis=hv1", e.lspOptions())

	// One chassis outside a migration: the target's interface with the
	// same iface-id takes nothing.
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")
	skip := count(t, dst)
	e.toVMA(5701)
	waitFor(t, src, "vm-a's traffic at hv1", 0, toPort(5701))
	requireNone(t, dst, "vm-a's traffic at its target interface before any migration", skip, toPort(5701))
	assert.Equal(t, binding{chassis: "hv1"}, e.vmABinding(), "hv2 never claimed vm-a's port")

	// The migration runs: hv2 is bound as an additional chassis, blocked
	// until the VM's RARP there.
	e.write("vmis.yaml", vmAMigrating("hv1", "    mode: PreCopy"))
	r := kubevirtOVN(t, e.syncArgs()...)
	require.Equal(t, 0, r.code, r.stderr)
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	assert.Contains(t, r.stdout, "update Logical_Switch_Port "+vmAPort)
	assert.Equal(t, "activation-strategy=rarp requested-chassis=hv1,hv2", e.lspOptions())
	e.monitorConditionBug(r.stderr, "hv2")
	e.waitBinding("hv2 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "hv2"})
	st := kubevirtOVN(t, "status", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint())
	require.Equal(t, 0, st.code, st.stderr)
	assert.Regexp(t, `VM ports on two chassis \(live migrations\):\n +PORT +VMI +SOURCE +TARGET +ON THE TARGET +ACTIVATED ON *\n +`+vmAPort+` +default/vm-a +hv1 +hv2 +blocked until the VM's RARP there +- *\n`, st.stdout)
	js := kubevirtOVN(t, "status", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "-o", "json")
	require.Equal(t, 0, js.code, js.stderr)
	assert.Contains(t, js.stdout, `"migrations": [
    {
      "port": "`+vmAPort+`",
      "vmi": "default/vm-a",
      "source": "hv1",
      "target": "hv2",
      "blockedUntilRARP": true
    }
  ]`)
	skip, skipSrc := count(t, dst), count(t, src)
	e.toVMA(5702)
	waitFor(t, src, "vm-a's traffic at its source during the migration", skipSrc, toPort(5702))
	requireNone(t, dst, "vm-a's traffic at its target before the VM runs there", skip, toPort(5702))
	return e
}

// TestLiveMigration: vm-a's port is on hv1 alone; while it migrates to
// hv2 it is bound on both and nothing reaches hv2 until the VM's RARP
// there, after which hv2 receives; the migration completed, it is on hv2
// alone and hv1 receives nothing more.
func TestLiveMigration(t *testing.T) {
	e := startMigration(t)
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	// The VM resumes on hv2 and announces itself: OVN unblocks the port
	// there by itself, before kubevirt-ovn hears of it.
	// A frame every poll until one arrives: one sent before ovn-controller
	// handled the RARP is dropped at the target (the source has it).
	rarp := time.Now()
	e.announce()
	e.sentUntilAt(dst, "vm-a's traffic at its target after its RARP", 5703)
	report(t, fmt.Sprintf("central: first frame at the target %s after the RARP (control-plane latency on dummy datapaths, one frame every 20 ms)", time.Since(rarp).Round(time.Millisecond)))
	e.waitBinding("hv2 activated", binding{chassis: "hv1", additional: "hv2", activated: "hv2"})
	st := kubevirtOVN(t, "status", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint())
	require.Equal(t, 0, st.code, st.stderr)
	assert.Regexp(t, `\n +`+vmAPort+` +default/vm-a +hv1 +hv2 +blocked until the VM's RARP there +hv2 *\n`, st.stdout, "status: activated on hv2")

	// Completed: hv2 alone.
	e.write("vmis.yaml", vmAMigrating("hv2", "    completed: true"))
	e.sync()
	assert.Equal(t, "requested-chassis=hv2", e.lspOptions())
	e.waitBinding("vm-a's port on hv2 alone", binding{chassis: "hv2"})
	skip, skipSrc := count(t, dst), count(t, src)
	e.toVMA(5704)
	waitFor(t, dst, "vm-a's traffic at hv2 after the migration", skip, toPort(5704))
	requireNone(t, src, "vm-a's traffic at its old chassis after the migration", skipSrc, toPort(5704))
}

// TestLiveMigrationFailed: a migration that failed before the VM ran on
// its target leaves the port on its source alone; the target never
// received anything.
func TestLiveMigrationFailed(t *testing.T) {
	e := startMigration(t)
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	// A numbered stream across the failure: every frame reaches the
	// source, none the target.
	skipSrc := count(t, src)
	st := e.startStream(7000)
	waitFor(t, src, "the stream at vm-a's source", skipSrc, func(s seen) bool { return s.IsUDP && s.SPort == 40800 })
	e.write("vmis.yaml", vmAMigrating("hv1", "    completed: true\n    failed: true"))
	e.sync()
	assert.Equal(t, "requested-chassis=hv1", e.lspOptions())
	e.waitBinding("vm-a's port back on hv1 alone", binding{chassis: "hv1"})
	after := st.sentCount()
	waitFor(t, src, "the stream at the source after the failure", 0, func(s seen) bool {
		return s.IsUDP && s.SPort == 40800 && int(s.DPort-7000) > after+5
	})
	sent := st.end()
	atSrc, atDst := st.seqs(t, src), st.seqs(t, dst)
	lost, _, _ := streamReport(sent, atSrc, atDst)
	// The last frame may still be on its way.
	for i := range len(sent) - 1 {
		assert.True(t, atSrc[i], "stream frame %d lost at the source", i)
	}
	assert.Empty(t, atDst, "stream frames at the failed target")
	report(t, fmt.Sprintf("central: a failed migration: a stream of %d frames every %s, %d lost at the source", len(sent), streamInterval, lost))
	skip, skipSrc := count(t, dst), count(t, src)
	e.toVMA(5705)
	waitFor(t, src, "vm-a's traffic at hv1 after the failed migration", skipSrc, toPort(5705))
	requireNone(t, dst, "vm-a's traffic at the failed target", skip, toPort(5705))
	// A RARP from the abandoned target changes nothing any more.
	require.NoError(t, e.l.Inject("hv2", vmADst, frameBytes(t, wire.RARP(vmAMAC))))
	skip, skipSrc = count(t, dst), count(t, src)
	e.toVMA(5706)
	waitFor(t, src, "vm-a's traffic at hv1 after a stray RARP at the target", skipSrc, toPort(5706))
	requireNone(t, dst, "vm-a's traffic at the failed target after its RARP", skip, toPort(5706))
	assert.Equal(t, binding{chassis: "hv1"}, e.vmABinding())
}

// TestLiveMigrationRunCollapsesOnActivation: under `run`, the SB showing
// the target activated (the VM's RARP seen there) moves the port onto the
// target alone before the VMI says the migration completed, and the
// source receives nothing more; the VMI's completion then changes
// nothing. The time from the RARP to the port on one chassis is reported.
func TestLiveMigrationRunCollapsesOnActivation(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", vmADst, vmAPort))
	e.write("vmis.yaml", vmAOn("hv1", ""))
	ctrl := startController(t, "migration", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--from-file", e.manifests, "--file-poll", "100ms")
	waitNB(t, "vm-a's port on hv1", func() bool { return e.lspOptions() == "requested-chassis=hv1" })
	e.ready("gw1", "hv1", "hv2")
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	e.write("vmis.yaml", vmAMigrating("hv1", "    mode: PreCopy"))
	waitNB(t, "vm-a's port on both chassis", func() bool {
		return e.lspOptions() == "activation-strategy=rarp requested-chassis=hv1,hv2"
	})
	e.waitBinding("hv2 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "hv2"})
	skip, skipSrc := count(t, dst), count(t, src)
	e.toVMA(5711)
	waitFor(t, src, "vm-a's traffic at its source during the migration", skipSrc, toPort(5711))
	requireNone(t, dst, "vm-a's traffic at its target before the VM runs there", skip, toPort(5711))

	// A numbered stream to vm-a every 15 ms across the switch.
	st := e.startStream(6000)
	waitFor(t, src, "the stream at vm-a's source", skipSrc, func(s seen) bool { return s.IsUDP && s.SPort == 40800 })
	// Up to the RARP the target received none of the stream (a frame
	// sent just before it may still be queued in the datapath and
	// delivered once the VM runs there: right, not checked).
	at := st.sentCount()
	waitFor(t, src, "the stream at vm-a's source during the migration", skipSrc, func(s seen) bool {
		return s.IsUDP && s.SPort == 40800 && int(s.DPort-6000) > at
	})
	require.Empty(t, st.seqs(t, dst), "stream frames at the target before the VM's RARP there")
	rarp := time.Now()
	e.announce()
	waitNB(t, "vm-a's port on hv2 alone, the VMI still migrating", func() bool { return e.lspOptions() == "requested-chassis=hv2" })
	e.waitBinding("vm-a's port bound on hv2 alone", binding{chassis: "hv2"})
	collapsed := time.Since(rarp)
	// Every chassis has computed its flows for the collapse: a frame sent
	// from now on goes to the target alone.
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	afterCollapse := st.sentCount()
	waitFor(t, dst, "the stream at the target after the collapse", 0, func(s seen) bool {
		return s.IsUDP && s.SPort == 40800 && int(s.DPort-6000) > afterCollapse+5
	})
	sent := st.end()
	atSrc, atDst := st.seqs(t, src), st.seqs(t, dst)
	for i := afterCollapse + 1; i < len(sent); i++ {
		assert.False(t, atSrc[i], "stream frame %d, sent after the port moved, reached the source", i)
	}
	waitNB(t, "the collapse measured", func() bool {
		return ctrl.metrics("kubevirt_ovn_migration_activation_to_collapse_seconds_count")[0] == 1
	})
	lost, gap, dups := streamReport(sent, atSrc, atDst)
	report(t, fmt.Sprintf("central, run: a stream of %d frames every %s: %d lost (the longest gap %s), %d received twice; RARP to the port on its target alone in the SB: %s",
		len(sent), streamInterval, lost, gap.Round(time.Millisecond), dups, collapsed.Round(time.Millisecond)))
	skip, skipSrc = count(t, dst), count(t, src)
	e.toVMA(5712)
	waitFor(t, dst, "vm-a's traffic at hv2 after the activation", skip, toPort(5712))
	requireNone(t, src, "vm-a's traffic at its source after the activation", skipSrc, toPort(5712))

	// The port stays on hv2, and the completion changes nothing.
	e.write("vmis.yaml", vmAMigrating("hv2", "    completed: true"))
	e.waitBinding("vm-a's port on hv2 alone after the completion", binding{chassis: "hv2"})
	assert.Equal(t, "requested-chassis=hv2", e.lspOptions())
}

// TestLiveMigrationStaleActivatedFlag: the target's ovn-controller lags
// (paused here, as a busy one is): the VM's RARP there is queued, the
// migration completes and the port moves to the target alone, and only
// then does that ovn-controller write the activated flag. Where ovn-northd
// leaves that flag (ovnFacts.staleActivation) the port, bound to hv2
// alone, keeps additional-chassis-activated=hv2, and still has it when
// the VM migrates back to hv1. It names the source, so the migration back
// is not misled: hv1 receives nothing before the VM's RARP there, and the
// port moves to hv1 alone only after that RARP.
func TestLiveMigrationStaleActivatedFlag(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", vmADst, vmAPort))
	e.write("vmis.yaml", vmAOn("hv1", ""))
	startController(t, "stale-flag", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--from-file", e.manifests, "--file-poll", "100ms")
	waitNB(t, "vm-a's port on hv1", func() bool { return e.lspOptions() == "requested-chassis=hv1" })
	e.ready("gw1", "hv1", "hv2")
	onHV2, onHV1 := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	e.write("vmis.yaml", vmAMigrating("hv1", "    mode: PreCopy"))
	e.waitBinding("hv2 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "hv2"})

	// hv2's ovn-controller stops its main loop; its packet-in thread
	// still takes the VM's RARP from the activation flow and queues it.
	_, err := e.l.Exec("hv2", "ovn-appctl", "debug/pause")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.l.Exec("hv2", "ovn-appctl", "debug/resume") })
	require.NoError(t, e.l.Inject("hv2", vmADst, frameBytes(t, wire.RARP(vmAMAC))))
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-a's RARP sent to hv2's ovn-controller by its activation flow", func() (bool, error) {
		out, err := e.l.Exec("hv2", "ovs-ofctl", "dump-flows", "br-int", "table=0,rarp")
		if err != nil {
			return false, err
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "priority=1010") && strings.Contains(l, "controller(") && !strings.Contains(l, "n_packets=0,") {
				return true, nil
			}
		}
		return false, nil
	}))
	// The migration completes before that ovn-controller wrote anything.
	e.write("vmis.yaml", vmAMigrating("hv2", "    completed: true"))
	waitNB(t, "vm-a's port on hv2 alone", func() bool { return e.lspOptions() == "requested-chassis=hv2" })
	nbctl(t, e.l, "--timeout=90", "--wait=sb", "sync")
	_, err = e.l.Exec("hv2", "ovn-appctl", "debug/resume")
	require.NoError(t, err)
	stale := expectFacts(t).staleActivation
	var last binding
	if stale {
		require.NoError(t, sandbox.Poll(60*time.Second, "hv2 claims vm-a's port and writes the flag it queued", func() (bool, error) {
			last = e.vmABinding()
			return last == binding{chassis: "hv2", activated: "hv2"}, nil
		}), "last seen: %+v", last)
	} else {
		e.waitBinding("hv2 claims vm-a's port", binding{chassis: "hv2"})
	}
	skip, skipOld := count(t, onHV2), count(t, onHV1)
	e.toVMA(5713)
	waitFor(t, onHV2, "vm-a's traffic at hv2 after the migration", skip, toPort(5713))
	requireNone(t, onHV1, "vm-a's traffic at hv1 after the migration", skipOld, toPort(5713))

	// Back to hv1: the flag, where ovn-northd left it, stays on the dual
	// binding; it names the source, so hv1 stays blocked and the port on
	// both.
	back := func(state string) string {
		return vmAOn("hv2", "  migrationState:\n    sourceNode: hv2\n    targetNode: hv1\n    migrationUid: uid-back\n"+state)
	}
	e.write("vmis.yaml", back("    mode: PreCopy"))
	waitNB(t, "vm-a's port on hv2 and hv1", func() bool {
		return e.lspOptions() == "activation-strategy=rarp requested-chassis=hv2,hv1"
	})
	dual := binding{chassis: "hv2", additional: "hv1"}
	if stale {
		dual.activated = "hv2"
	}
	e.waitBinding("hv1 bound as vm-a's additional chassis", dual)
	skip, skipOld = count(t, onHV1), count(t, onHV2)
	e.toVMA(5714)
	waitFor(t, onHV2, "vm-a's traffic at hv2, its source, while it migrates back", skipOld, toPort(5714))
	requireNone(t, onHV1, "vm-a's traffic at hv1 before the VM's RARP there", skip, toPort(5714))
	assert.Equal(t, "activation-strategy=rarp requested-chassis=hv2,hv1", e.lspOptions(), "vm-a's port moved to hv1 before its RARP there")

	// The VM's RARP on hv1: the port moves there alone.
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, wire.RARP(vmAMAC))))
	waitNB(t, "vm-a's port on hv1 alone after its RARP there", func() bool { return e.lspOptions() == "requested-chassis=hv1" })
	e.waitBinding("vm-a's port bound on hv1 alone", binding{chassis: "hv1"})
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	skip, skipOld = count(t, onHV1), count(t, onHV2)
	e.toVMA(5715)
	waitFor(t, onHV1, "vm-a's traffic at hv1 after its RARP there", skip, toPort(5715))
	requireNone(t, onHV2, "vm-a's traffic at hv2 after the VM left it", skipOld, toPort(5715))
	// Completed, as the env's last sync reads it.
	e.write("vmis.yaml", back("    completed: true"))
}

// TestControllerFollowsMigrationState: in a cluster, the VMI's
// status.migrationState as virt-handler reports it moves the port: one
// chassis, both while the migration runs, the target once it completed
// (without --sb the node names are the chassis' hostnames).
func TestControllerFollowsMigrationState(t *testing.T) {
	c := startCentral(t)
	k := startKubeAPI(t)
	startController(t, "a", "--nb", c.NBTCP, "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	options := func() string {
		return strings.TrimSpace(nbctl(t, c, "--bare", "--columns=options", "find", "Logical_Switch_Port", "name="+vmAPort))
	}
	waitNB(t, "vm-a's port on hv1", func() bool { return options() == "requested-chassis=hv1" })
	migrate := func(node string, state map[string]any) {
		k.change(t, vmiGVR, "default", "vm-a", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, node, "status", "nodeName"))
			require.NoError(t, unstructured.SetNestedMap(u.Object, state, "status", "migrationState"))
		})
	}
	migrate("hv1", map[string]any{"sourceNode": "hv1", "targetNode": "hv2", "migrationUid": "d7c1f0e2", "mode": "PreCopy"})
	waitNB(t, "vm-a's port on both chassis", func() bool { return options() == "activation-strategy=rarp requested-chassis=hv1,hv2" })
	migrate("hv2", map[string]any{"sourceNode": "hv1", "targetNode": "hv2", "migrationUid": "d7c1f0e2", "completed": true})
	waitNB(t, "vm-a's port on hv2", func() bool { return options() == "requested-chassis=hv2" })
}

// stream sends a numbered UDP stream to vm-a (destination ports base,
// base+1, ..., source port sport), one frame every streamInterval, until
// stopped or streamMax frames, and remembers when each was sent.
type stream struct {
	base, sport uint16
	mu          sync.Mutex
	sent        []time.Time
	stop        chan struct{}
	done        chan struct{}
}

const (
	streamInterval = 15 * time.Millisecond
	streamMax      = 2000
)

// startStream streams from vm-b (on hv2, routed from net-b).
func (p traffic) startStream(base uint16) *stream {
	return p.streamFrom(base, 40800, func(dport uint16) error {
		f := frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: vmAIP, TTL: 64, SPort: 40800, DPort: dport}
		b, err := f.Bytes()
		if err != nil {
			return err
		}
		return p.c.Inject("hv2", "vm-b", b)
	})
}

// startFIPStream streams from outside, through the peer router, to the
// floating IP on gw1's wire (bound to vm-a).
func (p traffic) startFIPStream(base uint16) *stream {
	return p.streamFrom(base, 40900, func(dport uint16) error {
		b, err := toFIP(40900, dport).Bytes()
		if err != nil {
			return err
		}
		return p.c.Inject("gw1", sandbox.ExternalPort, b)
	})
}

// streamFrom sends frame i of the stream with send(base+i).
func (p traffic) streamFrom(base, sport uint16, send func(dport uint16) error) *stream {
	s := &stream{base: base, sport: sport, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(streamInterval)
		defer tick.Stop()
		for i := 0; i < streamMax; i++ {
			if err := send(s.base + uint16(i)); err != nil {
				p.t.Errorf("stream frame %d: %v", i, err)
				return
			}
			s.mu.Lock()
			s.sent = append(s.sent, time.Now())
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// sentCount is how many frames the stream has sent so far.
func (s *stream) sentCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// end stops the stream and returns when each frame was sent.
func (s *stream) end() []time.Time {
	close(s.stop)
	<-s.done
	return s.sent
}

// seqs are the stream's frame numbers a capture holds.
func (s *stream) seqs(t *testing.T, c capture) map[int]bool {
	t.Helper()
	ps, err := c.read()
	require.NoError(t, err)
	out := map[int]bool{}
	for _, p := range ps {
		if p.IsUDP && p.DstIP == vmAIP && p.SPort == s.sport && p.DPort >= s.base && p.DPort < s.base+streamMax {
			out[int(p.DPort-s.base)] = true
		}
	}
	return out
}

// streamReport is what became of a stream's frames across a switch from
// src to dst: the frames neither received (lost), the longest run of
// them in time (gap), and the frames both received (duplicates).
func streamReport(sent []time.Time, atSrc, atDst map[int]bool) (lost int, gap time.Duration, dups int) {
	run := -1
	for i := range sent {
		switch {
		case atSrc[i] && atDst[i]:
			dups++
			run = -1
		case atSrc[i] || atDst[i]:
			run = -1
		default:
			lost++
			if run < 0 {
				run = i
			}
			end := i + 1
			if end >= len(sent) {
				end = len(sent) - 1
			}
			if d := sent[end].Sub(sent[max(run-1, 0)]); d > gap {
				gap = d
			}
		}
	}
	return lost, gap, dups
}

// announce sends vm-a's RARP on its target hv2 as QEMU's self-announce
// does when the VM resumes there: five rounds, the first at once, then
// after 50 ms and every 100 ms more (its defaults), without waiting.
func (p traffic) announce() {
	p.t.Helper()
	b := frameBytes(p.t, wire.RARP(vmAMAC))
	require.NoError(p.t, p.c.Inject("hv2", vmADst, b))
	go func() {
		gap := 50 * time.Millisecond
		for range 4 {
			time.Sleep(gap)
			gap += 100 * time.Millisecond
			if err := p.c.Inject("hv2", vmADst, b); err != nil {
				return // the test ended and its sandbox with it
			}
		}
	}()
}

// TestLiveMigrationWithoutRARP: a VM that sends no RARP on its target
// (annotation kubevirt-ovn.io/migration-activation: none) has its port on
// both chassis without the activation strategy while it migrates: the
// target receives at once, so the VM is reachable as soon as it runs
// there; once the migration completed, the target alone.
func TestLiveMigrationWithoutRARP(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", vmADst, vmAPort))
	noRARP := func(vmis string) string {
		return strings.Replace(vmis, "metadata: {name: vm-a, namespace: default}",
			"metadata: {name: vm-a, namespace: default, annotations: {kubevirt-ovn.io/migration-activation: none}}", 1)
	}
	e.write("vmis.yaml", noRARP(vmAMigrating("hv1", "    mode: PreCopy")))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	assert.Equal(t, "requested-chassis=hv1,hv2", e.lspOptions())
	e.waitBinding("hv2 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "hv2"})
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")
	skip, skipSrc := count(t, dst), count(t, src)
	e.toVMA(5721)
	waitFor(t, src, "vm-a's traffic at its source", skipSrc, toPort(5721))
	waitFor(t, dst, "vm-a's traffic at its target, without a RARP", skip, toPort(5721))

	e.write("vmis.yaml", noRARP(vmAMigrating("hv2", "    completed: true")))
	e.sync()
	assert.Equal(t, "requested-chassis=hv2", e.lspOptions())
	e.waitBinding("vm-a's port on hv2 alone", binding{chassis: "hv2"})
	skip, skipSrc = count(t, dst), count(t, src)
	e.toVMA(5722)
	waitFor(t, dst, "vm-a's traffic at hv2 after the migration", skip, toPort(5722))
	requireNone(t, src, "vm-a's traffic at its old chassis after the migration", skipSrc, toPort(5722))
}
