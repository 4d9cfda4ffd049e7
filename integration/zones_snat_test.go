package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Issue 11's packet scenarios on interconnect OVN: zones gw1, gw2 (a
// gateway each) and hv1, hv2 (a worker each), each with its own NB, SB and
// northd, no central NB. kubevirt-ovn syncs deploy/examples into every
// zone's NB (sync --zone NAME=NB,SB per zone): router1 lives in zone gw1
// (its gateway's), net-a in zones hv1 (vm-a) and gw1, net-b in zones hv2
// (vm-b) and gw1.

// zenv is the interconnect sandbox with vm-a on hv1 and vm-b on hv2, the
// examples to sync, ovn-kubernetes-like rows seeded in every zone's NB.
// When the test ends it checks that a second sync writes nothing and that
// the seeded rows of every zone are byte-identical, then stops every daemon.
type zenv struct {
	traffic
	t         *testing.T
	z         *sandbox.Zones
	manifests string
}

func newZonesEnv(t *testing.T) *zenv {
	t.Helper()
	z := newZones(t)
	e := &zenv{traffic: traffic{t, z}, t: t, z: z, manifests: examples(t)}
	for _, zdb := range z.List() {
		keepForeign(t, zdb)
	}
	require.NoError(t, z.AddVMPort("hv1", "vm-a", vmAPort))
	require.NoError(t, z.AddVMPort("hv2", "vm-b", vmBPort))
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		r := kubevirtOVN(t, e.syncArgs()...)
		assert.Equal(t, 0, r.code)
		assert.Equal(t, "no changes\n", r.stdout, "a second sync over every zone must write nothing")
	})
	return e
}

func (e *zenv) syncArgs() []string {
	return append([]string{"sync", "--from-file", e.manifests}, e.z.ZoneFlags()...)
}

// sync runs kubevirt-ovn sync over every zone and waits until every
// zone's chassis have realized the result.
func (e *zenv) sync() string {
	e.t.Helper()
	r := kubevirtOVN(e.t, e.syncArgs()...)
	require.Equal(e.t, 0, r.code, "kubevirt-ovn sync failed:\n%s", r.stderr)
	for _, zdb := range e.z.List() {
		nbctl(e.t, zdb, "--timeout=90", "--wait=hv", "sync")
	}
	return r.stdout
}

// ready waits until each VM's port is up in its zone and router1's gateway
// port is active on gw in gw's zone.
func (e *zenv) ready(gw string) {
	e.t.Helper()
	for _, vm := range []struct{ chassis, port string }{{"hv1", vmAPort}, {"hv2", vmBPort}} {
		nbctl(e.t, e.z.ZoneOf(vm.chassis), "--timeout=90", "wait-until", "Logical_Switch_Port", vm.port, "up=true")
	}
	require.NoError(e.t, e.z.WaitGateway(crPort, gw))
}

// TestZonesSNAT: vm-a in zone hv1 sends UDP out; it crosses to zone gw1
// and leaves gw1's external wire with the SNAT IP as source, a source port
// in 1025-65535, the gateway port's MAC, the peer's MAC and TTL-1. The
// reply is un-SNATed on gw1 and delivered to vm-a in its zone, and to no
// other VM. Nothing leaves through gw2, whose zone holds no router.
func TestZonesSNAT(t *testing.T) {
	e := newZonesEnv(t)
	e.sync()
	e.ready("gw1")

	skip2 := count(t, e.wire("gw2"))
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40001, 53)
	out := waitFor(t, e.wire("gw1"), "vm-a's UDP (zone hv1) leaving SNATed via gw1 (zone gw1)", 0, snated(53))
	assert.GreaterOrEqual(t, out.SPort, uint16(1025), "SNAT source port in 1025-65535")
	assert.Equal(t, gwPortMAC, out.SrcMAC, "source MAC: the gateway port")
	assert.Equal(t, peerMAC, out.DstMAC, "destination MAC: the peer router")
	assert.Equal(t, uint8(63), out.TTL, "TTL decremented once by the router")
	assert.Equal(t, -1, out.VLAN, "FLAT external network: untagged")
	e.unSNATed("gw1", out, vmA, 40001, vmB)
	requireNone(t, e.wire("gw2"), "gw2 (zone gw2, no router) sends the VM's traffic", skip2, flow(53))
}

// TestZonesARPForSNATIP: an ARP request for the SNAT IP is answered on
// gw1's wire with the gateway port's MAC; gw2's zone has no router, and
// gw2 stays silent.
func TestZonesARPForSNATIP(t *testing.T) {
	e := newZonesEnv(t)
	e.sync()
	e.ready("gw1")

	e.arpForSNATIP("gw1", "gw2")
}

// TestZonesSecondNetwork: vm-b, on net-b in zone hv2, leaves SNATed via
// gw1 as vm-a does from zone hv1, on another source port for the same
// source port and destination, and its reply comes back to it in zone hv2.
func TestZonesSecondNetwork(t *testing.T) {
	e := newZonesEnv(t)
	e.sync()
	e.ready("gw1")

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40002, 5002)
	a := waitFor(t, e.wire("gw1"), "vm-a's UDP (zone hv1) SNATed", 0, snated(5002))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40002, 5002)
	b := waitFor(t, e.wire("gw1"), "vm-b's UDP (zone hv2) SNATed on another source port", 0, func(s seen) bool {
		return snated(5002)(s) && s.SPort != a.SPort
	})
	assert.GreaterOrEqual(t, b.SPort, uint16(1025))
	assert.Equal(t, uint8(63), b.TTL)
	e.unSNATed("gw1", b, vmB, 40002, vmA)
}
