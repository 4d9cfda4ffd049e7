package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// ONOS manifests are accepted as they are (issue 30): ONOS's ipPool was an
// IPAM object nothing in kubevirt-networking allocated from, so a VM's
// address anywhere in its network's CIDR worked, and operators keep
// static addresses outside the dynamic range.

// onosPools are the examples' internal networks' ipPools, moved so that
// neither VM's address is in its network's pool (and net-b, which the
// examples declare without one, given one: ONOS required it).
var onosPools = [][2]string{
	{`"ipPool": {"start": "10.10.0.2", "end": "10.10.0.200"}`, `"ipPool": {"start": "10.10.0.100", "end": "10.10.0.200"}, "defaultRoute": true`},
	{`"gatewayIp": "10.20.0.1"}`, `"gatewayIp": "10.20.0.1", "ipPool": {"start": "10.20.0.100", "end": "10.20.0.200"}}`},
}

// onosVMIs are DHCP's: vm-a's address (10.10.0.5, below net-a's pool)
// reported in its status, vm-b's (10.20.0.6, below net-b's pool) declared
// in the ONOS interfaces annotation before it boots, its MAC in the spec.
var onosVMIs = strings.Join(strings.Split(dhcpVMIs, "---\n")[:2], "---\n")

// TestONOSAddressesOutsideThePool: VMs whose addresses lie outside their
// networks' ipPool, one from status and one from the interfaces
// annotation, get their ports, are offered their own addresses by DHCP,
// and leave SNATed through the gateway; the reply comes back to each.
func TestONOSAddressesOutsideThePool(t *testing.T) {
	e := newEnv(t)
	for _, p := range onosPools {
		e.edit("networks.yaml", p[0], p[1])
	}
	e.write("vmis.yaml", onosVMIs)
	out := e.sync()
	assert.Contains(t, out, "create Logical_Switch_Port "+vmAPort)
	assert.Contains(t, out, "create Logical_Switch_Port "+vmBPort)
	e.ready("gw1", "hv1", "hv2")

	e.exchange(vmA, "net-a", netAGateway, 0x5000)
	e.exchange(vmB, "net-b", netBGateway, 0x5100)

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40501, 5501)
	a := waitFor(t, e.wire("gw1"), "vm-a's UDP leaving SNATed", 0, snated(5501))
	e.unSNATed("gw1", a, vmA, 40501, vmB)
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40502, 5502)
	b := waitFor(t, e.wire("gw1"), "vm-b's UDP leaving SNATed", 0, snated(5502))
	e.unSNATed("gw1", b, vmB, 40502, vmA)
}
