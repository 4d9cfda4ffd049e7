package integration

import (
	be "encoding/binary"
	"net"
	"path/filepath"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// DHCP from OVN (issue 20): each network with a gatewayIp has DHCP
// options, which its VM ports refer to; ovn-controller answers a VM's
// DISCOVER and REQUEST on the VM's own chassis.

const (
	netAGateway = "10.10.0.1"
	netBGateway = "10.20.0.1"
	vmCMAC      = "50:54:00:00:00:07"
	vmCPort     = "kv-net-c_default_vm-c_eth1"
)

// dhcpNetA is net-a's network-config with the DHCP options the tests
// check: a default route, a host route and two DNS servers.
const dhcpNetA = `"dnses": ["8.8.8.8", "9.9.9.9"], "defaultRoute": true, "hostRoutes": [{"destination": "192.168.50.0/24", "nexthop": "10.10.0.254"}]}`

// dhcpVMIs are deploy/examples' VMIs with vm-b before it boots (its
// addresses only declared: the interfaces annotation and the spec's MAC,
// no status.interfaces) and vm-c, declared alike, on net-c, a network
// without gatewayIp (no DHCP).
const dhcpVMIs = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-a, namespace: default}
spec:
  networks:
    - {name: eth1, multus: {networkName: net-a}}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.10.0.5}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-b
  namespace: default
  annotations:
    interfaces: '[{"network": "net-b", "ipAddress": "10.20.0.6"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: eth1, bridge: {}, macAddress: "50:54:00:00:00:06"}
  networks:
    - {name: eth1, multus: {networkName: default/net-b}}
status:
  nodeName: hv2
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-c
  namespace: default
  annotations:
    interfaces: '[{"network": "net-c", "ipAddress": "10.30.0.7"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: eth1, bridge: {}, macAddress: "50:54:00:00:00:07"}
  networks:
    - {name: eth1, multus: {networkName: net-c}}
status:
  nodeName: hv2
`

const netC = `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-c
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "cidr": "10.30.0.0/24"}'
`

// dhcpMsg is a client's DHCP message from mac, broadcast from 0.0.0.0 as
// in the SELECTING state; extra options follow the message type and the
// parameter request list.
func dhcpMsg(mac string, typ layers.DHCPMsgType, xid uint32, extra ...layers.DHCPOption) frame {
	hw, _ := net.ParseMAC(mac)
	opts := []layers.DHCPOption{
		layers.NewDHCPOption(layers.DHCPOptMessageType, []byte{byte(typ)}),
		layers.NewDHCPOption(layers.DHCPOptParamsRequest, []byte{1, 3, 6, 26, 51, 54, 121}),
	}
	d := &layers.DHCPv4{Operation: layers.DHCPOpRequest, HardwareType: layers.LinkTypeEthernet, HardwareLen: 6,
		Xid: xid, ClientHWAddr: hw, Options: append(opts, extra...)}
	return frame{SrcMAC: mac, DstMAC: "ff:ff:ff:ff:ff:ff", SrcIP: "0.0.0.0", DstIP: "255.255.255.255", TTL: 64, SPort: 68, DPort: 67, DHCP: d}
}

// dhcpReply matches the server's reply of type typ to transaction xid.
func dhcpReply(typ layers.DHCPMsgType, xid uint32) func(seen) bool {
	return func(s seen) bool {
		return s.DHCP != nil && s.DHCP.Operation == layers.DHCPOpReply && s.DHCP.Xid == xid && wire.DHCPType(s.DHCP) == typ
	}
}

func ip4(s string) []byte { return net.ParseIP(s).To4() }

// exchange runs DISCOVER then REQUEST from vm on network (whose gateway is
// gw) and returns the OFFER and the ACK, checking what both must carry:
// the VM's address, from the server (gw, the network's server MAC) to the
// VM, and the server identifier.
func (p traffic) exchange(vm vmRef, network, gw string, xid uint32) (offer, ack *layers.DHCPv4) {
	p.t.Helper()
	t := p.t
	c := p.vm(vm.chassis, vm.port)
	skip := count(t, c)
	require.NoError(t, p.c.Inject(vm.chassis, vm.port, frameBytes(t, dhcpMsg(vm.mac, layers.DHCPMsgTypeDiscover, xid))))
	o := waitFor(t, c, "DHCP OFFER to "+vm.port, skip, dhcpReply(layers.DHCPMsgTypeOffer, xid))
	check := func(s seen, what string) {
		assert.Equal(t, vm.ip, s.DHCP.YourClientIP.String(), "%s: yiaddr is the VM's address", what)
		assert.Equal(t, translator.DHCPServerMAC(network), s.SrcMAC, "%s: from the server MAC", what)
		assert.Equal(t, vm.mac, s.DstMAC, what)
		assert.Equal(t, gw, s.SrcIP, "%s: from the server id", what)
		assert.Equal(t, uint16(67), s.SPort, what)
		assert.Equal(t, uint16(68), s.DPort, what)
		assert.Equal(t, ip4(gw), wire.DHCPOption(s.DHCP, layers.DHCPOptServerID), "%s: option 54", what)
	}
	check(o, "OFFER")

	skip = count(t, c)
	req := dhcpMsg(vm.mac, layers.DHCPMsgTypeRequest, xid+1,
		layers.NewDHCPOption(layers.DHCPOptRequestIP, ip4(vm.ip)),
		layers.NewDHCPOption(layers.DHCPOptServerID, ip4(gw)))
	require.NoError(t, p.c.Inject(vm.chassis, vm.port, frameBytes(t, req)))
	a := waitFor(t, c, "DHCP ACK to "+vm.port, skip, dhcpReply(layers.DHCPMsgTypeAck, xid+1))
	check(a, "ACK")
	return o.DHCP, a.DHCP
}

// TestDHCP: a VM's DISCOVER gets an OFFER and its REQUEST an ACK from OVN,
// with the VM's address and its network's options: on net-a (defaultRoute,
// a host route, DNS servers, an MTU) the router, option 121 with the
// default route appended, DNS, MTU, the lease time and the subnet mask; on
// net-b (no defaultRoute) no router and no option 121, to vm-b whose
// address is only declared (before boot); on net-c (no gatewayIp) no
// reply.
func TestDHCP(t *testing.T) {
	e := newEnv(t)
	e.edit("networks.yaml", `"dnses": ["8.8.8.8"]}`, dhcpNetA)
	e.write("vmis.yaml", dhcpVMIs)
	e.write("networks-c.yaml", netC)
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmCPort))
	out := e.sync()
	assert.Contains(t, out, "create DHCP_Options net-a")
	assert.NotContains(t, out, "DHCP_Options net-c")
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmCPort, "up=true")

	offer, ack := e.exchange(vmA, "net-a", netAGateway, 0x1000)
	for what, d := range map[string]*layers.DHCPv4{"OFFER": offer, "ACK": ack} {
		opt := func(o layers.DHCPOpt) []byte { return wire.DHCPOption(d, o) }
		assert.Equal(t, ip4("255.255.255.0"), opt(layers.DHCPOptSubnetMask), "%s: subnet mask from the CIDR", what)
		assert.Equal(t, ip4(netAGateway), opt(layers.DHCPOptRouter), "%s: router (defaultRoute)", what)
		assert.Equal(t, append(ip4("8.8.8.8"), ip4("9.9.9.9")...), opt(layers.DHCPOptDNS), "%s: DNS servers", what)
		assert.Equal(t, be.BigEndian.AppendUint16(nil, 1450), opt(layers.DHCPOptInterfaceMTU), "%s: MTU", what)
		assert.Equal(t, be.BigEndian.AppendUint32(nil, translator.DHCPLeaseTime), opt(layers.DHCPOptLeaseTime), "%s: lease time", what)
		// RFC 3442: 192.168.50.0/24 via 10.10.0.254, then 0.0.0.0/0 via
		// the gateway (a client ignores option 3 beside 121).
		assert.Equal(t, []byte{24, 192, 168, 50, 10, 10, 0, 254, 0, 10, 10, 0, 1}, opt(layers.DHCPOptClasslessStaticRoute), "%s: option 121", what)
	}

	// vm-b, before boot: its declared address; net-b has no defaultRoute,
	// no host routes, no DNS servers.
	offer, ack = e.exchange(vmB, "net-b", netBGateway, 0x2000)
	for _, d := range []*layers.DHCPv4{offer, ack} {
		assert.Nil(t, wire.DHCPOption(d, layers.DHCPOptRouter), "no router without defaultRoute")
		assert.Nil(t, wire.DHCPOption(d, layers.DHCPOptClasslessStaticRoute))
		assert.Nil(t, wire.DHCPOption(d, layers.DHCPOptDNS), "no public DNS injected")
		assert.Equal(t, ip4("255.255.255.0"), wire.DHCPOption(d, layers.DHCPOptSubnetMask))
	}

	// vm-c, on net-c (no gatewayIp): no reply. Barrier: vm-b's DISCOVER,
	// sent after vm-c's on the same chassis, is answered.
	vmC := e.vm("hv2", "vm-c")
	skipC, skipB := count(t, vmC), count(t, e.vm("hv2", "vm-b"))
	require.NoError(t, e.l.Inject("hv2", "vm-c", frameBytes(t, dhcpMsg(vmCMAC, layers.DHCPMsgTypeDiscover, 0x3000))))
	require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, dhcpMsg(vmBMAC, layers.DHCPMsgTypeDiscover, 0x3001))))
	waitFor(t, e.vm("hv2", "vm-b"), "barrier: DHCP OFFER to vm-b", skipB, dhcpReply(layers.DHCPMsgTypeOffer, 0x3001))
	requireNone(t, vmC, "a DHCP reply on a network without gatewayIp", skipC, func(s seen) bool { return s.DHCP != nil })
}

// TestZonesDHCP: in interconnect mode, vm-a in worker zone hv1 gets its
// OFFER and ACK from its own zone's NB's DHCP options.
func TestZonesDHCP(t *testing.T) {
	e := newZoneEnv(t)
	edit(t, filepath.Join(e.manifests, "networks.yaml"), `"dnses": ["8.8.8.8"]}`, dhcpNetA)
	e.sync()
	e.ready("gw1")

	offer, ack := e.exchange(vmA, "net-a", netAGateway, 0x4000)
	for _, d := range []*layers.DHCPv4{offer, ack} {
		assert.Equal(t, ip4(netAGateway), wire.DHCPOption(d, layers.DHCPOptRouter))
		assert.Equal(t, []byte{24, 192, 168, 50, 10, 10, 0, 254, 0, 10, 10, 0, 1}, wire.DHCPOption(d, layers.DHCPOptClasslessStaticRoute))
		assert.Equal(t, be.BigEndian.AppendUint32(nil, translator.DHCPLeaseTime), wire.DHCPOption(d, layers.DHCPOptLeaseTime))
	}
}
