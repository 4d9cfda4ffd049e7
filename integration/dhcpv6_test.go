package integration

import (
	byteorder "encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// dhcpv6Option is the data of the first option of code c, nil without one.
func dhcpv6Option(m *layers.DHCPv6, c layers.DHCPv6Opt) []byte {
	for _, o := range m.Options {
		if o.Code == c {
			return o.Data
		}
	}
	return nil
}

// TestDualStackDHCPv6: deploy/examples-dual-stack with net-a turned
// dhcpv6-stateful, on --default-deny ports. net-a's advertisement says
// "managed" (M), net-b's (dhcpv6-stateless) "other configuration" (O).
// vm-a's solicit is answered by an advertise, and its request by a reply,
// from the network's DHCP server MAC, echoing its transaction and IAID,
// with the port's EUI-64 address in the IA_NA and net-a's IPv6 DNS
// server. vm-c, whose interfaces annotation declares its IPv6 address
// (an IPAM's), is offered that address. vm-b's information request gets
// net-b's DNS server and no address. The IPv4 half: vm-a's DHCPv4
// exchange on the same port.
func TestDualStackDHCPv6(t *testing.T) {
	const declaredC = "fd00:10::c0"
	e := newEnv(t)
	e.flags = []string{"--default-deny"}
	useDualStack(t, e, "networks.yaml")
	e.edit("networks.yaml", `"ipv6GatewayIp": "fd00:10::1"}`, `"ipv6GatewayIp": "fd00:10::1", "ipv6AddressMode": "dhcpv6-stateful"}`)
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("vm-c.yaml", strings.Replace(vmCManifest, "  namespace: default\n", "  namespace: default\n  annotations:\n"+
		`    interfaces: '[{"network": "net-a", "ipAddress": "`+vmLBCIP+`", "ipv6Address": "`+declaredC+`"}]'`+"\n", 1))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")

	// The advertisements' flags.
	skip := count(t, atA)
	e.vmSends("hv1", "vm-a", wire.RouterSolicitation(vmAMAC))
	ra := waitFor(t, atA, "router1's advertisement on net-a", skip, func(s seen) bool { return s.RA != nil })
	assert.Equal(t, uint8(0x80), ra.RA.Flags&0xc0, "net-a (dhcpv6-stateful): managed")
	skip = count(t, atB)
	e.vmSends("hv2", "vm-b", wire.RouterSolicitation(vmBMAC))
	ra = waitFor(t, atB, "router1's advertisement on net-b", skip, func(s seen) bool { return s.RA != nil })
	assert.Equal(t, uint8(0x40), ra.RA.Flags&0xc0, "net-b (dhcpv6-stateless): other configuration")

	// reply waits for the answer of type typ to transaction txid at vm.
	reply := func(at capture, what string, skip int, typ layers.DHCPv6MsgType, txid uint32) seen {
		t.Helper()
		got := waitFor(t, at, what, skip, func(s seen) bool {
			return s.DHCPv6 != nil && s.DHCPv6.MsgType == typ && len(s.DHCPv6.TransactionID) == 3 &&
				uint32(s.DHCPv6.TransactionID[0])<<16|uint32(s.DHCPv6.TransactionID[1])<<8|uint32(s.DHCPv6.TransactionID[2]) == txid
		})
		return got
	}
	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	// checkAddress checks the answer got to the VM of MAC mac: it offers
	// addr in an IA_NA of the client's IAID.
	checkAddress := func(what string, got seen, mac, addr string, iaid uint32) {
		t.Helper()
		assert.Equal(t, translator.DHCPServerMAC("net-a"), got.SrcMAC, "%s: from the server MAC", what)
		assert.Equal(t, wire.LinkLocal(mac), got.DstIP, what)
		assert.Equal(t, uint16(547), got.SPort, what)
		assert.NotEmpty(t, dhcpv6Option(got.DHCPv6, layers.DHCPv6OptServerID), "%s: server identifier", what)
		ia := dhcpv6Option(got.DHCPv6, layers.DHCPv6OptIANA)
		require.GreaterOrEqual(t, len(ia), 12+4+24, "%s: an IA_NA holding an address", what)
		assert.Equal(t, iaid, byteorder.BigEndian.Uint32(ia[:4]), "%s: the client's IAID", what)
		assert.Equal(t, uint16(layers.DHCPv6OptIAAddr), byteorder.BigEndian.Uint16(ia[12:14]), what)
		assert.Equal(t, addr, net.IP(ia[16:32]).String(), "%s: the port's address", what)
		assert.Equal(t, "2001:4860:4860::8888", net.IP(dhcpv6Option(got.DHCPv6, layers.DHCPv6OptDNSServers)).String(), "%s: net-a's DNS server", what)
	}

	skip = count(t, atA)
	e.vmSends("hv1", "vm-a", wire.DHCPv6(vmAMAC, layers.DHCPv6MsgTypeSolicit, 0x0a0b0c, 7))
	checkAddress("advertise", reply(atA, "the advertise to vm-a's solicit", skip, layers.DHCPv6MsgTypeAdverstise, 0x0a0b0c), vmAMAC, vmA6, 7)
	skip = count(t, atA)
	e.vmSends("hv1", "vm-a", wire.DHCPv6(vmAMAC, layers.DHCPv6MsgTypeRequest, 0x0a0b0d, 7))
	checkAddress("reply", reply(atA, "the reply to vm-a's request", skip, layers.DHCPv6MsgTypeReply, 0x0a0b0d), vmAMAC, vmA6, 7)

	// vm-c's declared address, not its EUI-64 one.
	atC := e.vm("hv2", "vm-c")
	skip = count(t, atC)
	e.vmSends("hv2", "vm-c", wire.DHCPv6(vmLBCMAC, layers.DHCPv6MsgTypeSolicit, 0x0c0d0e, 9))
	checkAddress("advertise to vm-c", reply(atC, "the advertise to vm-c's solicit", skip, layers.DHCPv6MsgTypeAdverstise, 0x0c0d0e), vmLBCMAC, declaredC, 9)

	skip = count(t, atB)
	e.vmSends("hv2", "vm-b", wire.DHCPv6(vmBMAC, layers.DHCPv6MsgTypeInformationRequest, 0x0b0c0d, 0))
	info := reply(atB, "the reply to vm-b's information request", skip, layers.DHCPv6MsgTypeReply, 0x0b0c0d)
	assert.Equal(t, translator.DHCPServerMAC("net-b"), info.SrcMAC)
	assert.Equal(t, "2001:4860:4860::8844", net.IP(dhcpv6Option(info.DHCPv6, layers.DHCPv6OptDNSServers)).String(), "net-b's DNS server")
	assert.Nil(t, dhcpv6Option(info.DHCPv6, layers.DHCPv6OptIANA), "stateless: no address")

	// The IPv4 half, on the same default-deny port.
	e.exchange(vmA, "net-a", netAGateway, 0x6000)
}
