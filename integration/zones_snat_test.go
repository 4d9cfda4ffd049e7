package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 11's packet scenarios on interconnect OVN beside those of
// zonesync_test.go (SNAT from zone hv1 and its reply): kubevirt-ovn syncs
// deploy/examples into every zone's NB, router1 lives in zone gw1 (its
// gateway's), net-a in zones hv1 (vm-a) and gw1, net-b in zones hv2 (vm-b)
// and gw1.

// TestZonesARPForSNATIP: an ARP request for the SNAT IP is answered on
// gw1's wire with the gateway port's MAC; gw2's zone has no router, and
// gw2 stays silent.
func TestZonesARPForSNATIP(t *testing.T) {
	e := newZoneEnv(t)
	e.sync()
	e.ready("gw1")

	e.arpForSNATIP("gw1", "gw2")
}

// TestZonesSecondNetwork: vm-b, on net-b in zone hv2, leaves SNATed via
// gw1 as vm-a does from zone hv1, on another source port for the same
// source port and destination, and its reply comes back to it in zone hv2.
func TestZonesSecondNetwork(t *testing.T) {
	e := newZoneEnv(t)
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
