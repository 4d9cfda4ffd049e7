// Package wire builds the Ethernet frames the integration tests and the
// demo inject into OVN, and reads back what OVN sent, from pcap files.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Frame is an Ethernet frame to build: IPv4 with UDP (or a TCP SYN when
// TCP is set) when SrcIP is set, else ARP. An IPv6 SrcIP makes it IPv6,
// with UDP, TCP or an ICMPv6 echo as IPv4 has them, or with ND when set
// (TTL is then the hop limit).
type Frame struct {
	SrcMAC, DstMAC string
	VLAN           uint16 // 0: untagged
	// IPv4/UDP or TCP
	SrcIP, DstIP string
	TTL          uint8
	SPort, DPort uint16
	TCP          bool
	// ICMPEcho: an ICMP (ICMPv6 for IPv6) echo request with id SPort,
	// sequence DPort, instead of UDP or TCP.
	ICMPEcho bool
	// SYNACK makes the TCP segment a SYN-ACK acknowledging Ack (a reply
	// to a SYN whose sequence number is Ack-1).
	SYNACK bool
	Ack    uint32
	// ACKOnly makes the TCP segment the client's ACK completing a
	// handshake: no SYN, sequence 2 (its SYN's 1 plus one), acknowledging
	// Ack.
	ACKOnly bool
	// DHCP, when set, is the UDP payload (instead of a fixed one);
	// DHCPv6 the same over IPv6.
	DHCP   *layers.DHCPv4
	DHCPv6 *layers.DHCPv6
	// ARP
	ARPOp          uint16
	ARPSHA, ARPTHA string
	ARPSPA, ARPTPA string
	// RARP makes the ARP frame a RARP one (ethertype 0x8035), as QEMU
	// announces a VM that resumed after a live migration.
	RARP bool
	// ND, with an IPv6 SrcIP, is the ICMPv6 message (a neighbor or router
	// solicitation: NeighborSolicitation, RouterSolicitation) instead of
	// UDP.
	ND *ND
}

// ND is an ICMPv6 neighbor discovery message to send.
type ND struct {
	Type layers.ICMPv6TypeCode
	// Target is a neighbor solicitation's target address.
	Target string
	// SourceMAC is the source link-layer address option.
	SourceMAC string
}

// SolicitedNodeMAC is the Ethernet multicast address of the
// solicited-node multicast group of IPv6 address ip (RFC 4291, RFC 2464).
func SolicitedNodeMAC(ip string) string {
	a := net.ParseIP(ip).To16()
	return fmt.Sprintf("33:33:ff:%02x:%02x:%02x", a[13], a[14], a[15])
}

// SolicitedNode is the solicited-node multicast address of IPv6 address ip.
func SolicitedNode(ip string) string {
	a := net.ParseIP(ip).To16()
	return fmt.Sprintf("ff02::1:ff%02x:%02x%02x", a[13], a[14], a[15])
}

// LinkLocal is the EUI-64 link-local address of MAC mac (RFC 4291).
func LinkLocal(mac string) string {
	hw, _ := net.ParseMAC(mac)
	if len(hw) != 6 {
		return ""
	}
	return net.IP{0xfe, 0x80, 0, 0, 0, 0, 0, 0, hw[0] ^ 2, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]}.String()
}

// RouterSolicitation is the frame a VM of MAC mac sends to find its
// routers: from its link-local address to all-routers.
func RouterSolicitation(mac string) Frame {
	return Frame{SrcMAC: mac, DstMAC: "33:33:00:00:00:02", SrcIP: LinkLocal(mac), DstIP: "ff02::2", TTL: 255,
		ND: &ND{Type: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeRouterSolicitation, 0), SourceMAC: mac}}
}

// NeighborSolicitation is the frame a VM of MAC mac and IPv6 address src
// sends to resolve target.
func NeighborSolicitation(mac, src, target string) Frame {
	return Frame{SrcMAC: mac, DstMAC: SolicitedNodeMAC(target), SrcIP: src, DstIP: SolicitedNode(target), TTL: 255,
		ND: &ND{Type: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0), Target: target, SourceMAC: mac}}
}

// DHCPv6 is the frame a VM of MAC mac sends to the DHCPv6 servers
// (ff02::1:2, RFC 8415) from its EUI-64 link-local address: a message of
// type typ, transaction id txid, its DUID-LL as client identifier, and
// an IA_NA of iaid unless iaid is 0 (an information request has none).
func DHCPv6(mac string, typ layers.DHCPv6MsgType, txid uint32, iaid uint32) Frame {
	hw, _ := net.ParseMAC(mac)
	duid := append([]byte{0, 3, 0, 1}, hw...)
	opts := layers.DHCPv6Options{layers.NewDHCPv6Option(layers.DHCPv6OptClientID, duid),
		layers.NewDHCPv6Option(layers.DHCPv6OptElapsedTime, []byte{0, 0})}
	if iaid != 0 {
		ia := make([]byte, 12) // IAID, T1 0, T2 0
		binary.BigEndian.PutUint32(ia, iaid)
		opts = append(opts, layers.NewDHCPv6Option(layers.DHCPv6OptIANA, ia))
	}
	msg := &layers.DHCPv6{MsgType: typ, TransactionID: []byte{byte(txid >> 16), byte(txid >> 8), byte(txid)}, Options: opts}
	return Frame{SrcMAC: mac, DstMAC: "33:33:00:01:00:02", SrcIP: LinkLocal(mac), DstIP: "ff02::1:2", TTL: 1,
		SPort: 546, DPort: 547, DHCPv6: msg}
}

// RARP is the frame QEMU sends for a NIC of MAC mac when the VM resumes on
// its migration target: broadcast, ethertype 0x8035, a reverse request
// whose hardware addresses are the NIC's and protocol addresses zero.
func RARP(mac string) Frame {
	return Frame{SrcMAC: mac, DstMAC: "ff:ff:ff:ff:ff:ff", RARP: true, ARPOp: 3,
		ARPSHA: mac, ARPTHA: mac, ARPSPA: "0.0.0.0", ARPTPA: "0.0.0.0"}
}

// Bytes serializes f with lengths and checksums filled in.
func (f Frame) Bytes() ([]byte, error) {
	var errs []error
	mac := func(s string) net.HardwareAddr {
		m, err := net.ParseMAC(s)
		errs = append(errs, err)
		return m
	}
	ip4 := func(s string) net.IP {
		ip := net.ParseIP(s).To4()
		if ip == nil {
			errs = append(errs, fmt.Errorf("%q is not an IPv4 address", s))
		}
		return ip
	}
	eth := &layers.Ethernet{SrcMAC: mac(f.SrcMAC), DstMAC: mac(f.DstMAC)}
	ls := []gopacket.SerializableLayer{eth}
	inner := layers.EthernetTypeIPv4
	v6 := strings.Contains(f.SrcIP, ":")
	switch {
	case v6:
		inner = layers.EthernetTypeIPv6
	case f.SrcIP == "" && f.RARP:
		inner = layers.EthernetType(0x8035)
	case f.SrcIP == "":
		inner = layers.EthernetTypeARP
	}
	eth.EthernetType = inner
	if f.VLAN != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: f.VLAN, Type: inner})
	}
	if v6 {
		ip6 := func(s string) net.IP {
			ip := net.ParseIP(s)
			if ip == nil || ip.To4() != nil {
				errs = append(errs, fmt.Errorf("%q is not an IPv6 address", s))
			}
			return ip
		}
		ip := &layers.IPv6{Version: 6, HopLimit: f.TTL, NextHeader: layers.IPProtocolUDP, SrcIP: ip6(f.SrcIP), DstIP: ip6(f.DstIP)}
		if f.ND != nil {
			ip.NextHeader = layers.IPProtocolICMPv6
			icmp := &layers.ICMPv6{TypeCode: f.ND.Type}
			errs = append(errs, icmp.SetNetworkLayerForChecksum(ip))
			var opts layers.ICMPv6Options
			if f.ND.SourceMAC != "" {
				opts = append(opts, layers.ICMPv6Option{Type: layers.ICMPv6OptSourceAddress, Data: mac(f.ND.SourceMAC)})
			}
			var msg gopacket.SerializableLayer
			switch f.ND.Type.Type() {
			case layers.ICMPv6TypeRouterSolicitation:
				msg = &layers.ICMPv6RouterSolicitation{Options: opts}
			case layers.ICMPv6TypeNeighborSolicitation:
				msg = &layers.ICMPv6NeighborSolicitation{TargetAddress: ip6(f.ND.Target), Options: opts}
			default:
				errs = append(errs, fmt.Errorf("ICMPv6 type %d is not built here", f.ND.Type.Type()))
			}
			ls = append(ls, ip, icmp, msg)
		} else {
			ls = append(ls, ip)
			ls = append(ls, f.transport(ip, ip, &errs)...)
		}
	} else if f.SrcIP == "" {
		ls = append(ls, &layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: f.ARPOp,
			SourceHwAddress: mac(f.ARPSHA), SourceProtAddress: ip4(f.ARPSPA),
			DstHwAddress: mac(f.ARPTHA), DstProtAddress: ip4(f.ARPTPA),
		})
	} else {
		ip := &layers.IPv4{Version: 4, TTL: f.TTL, Protocol: layers.IPProtocolUDP, SrcIP: ip4(f.SrcIP), DstIP: ip4(f.DstIP)}
		ls = append(ls, ip)
		ls = append(ls, f.transport(ip, ip, &errs)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// transport are f's layers above IP (an IPv4 or IPv6 header ip, whose
// protocol or next header it sets; nl is ip for checksums): an ICMP(v6)
// echo request, a TCP segment or a UDP datagram.
func (f Frame) transport(ip gopacket.SerializableLayer, nl gopacket.NetworkLayer, errs *[]error) []gopacket.SerializableLayer {
	proto := func(p layers.IPProtocol) {
		switch h := ip.(type) {
		case *layers.IPv4:
			h.Protocol = p
		case *layers.IPv6:
			h.NextHeader = p
		}
	}
	_, v6 := ip.(*layers.IPv6)
	switch {
	case f.ICMPEcho && v6:
		proto(layers.IPProtocolICMPv6)
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
		*errs = append(*errs, icmp.SetNetworkLayerForChecksum(nl))
		return []gopacket.SerializableLayer{icmp, &layers.ICMPv6Echo{Identifier: f.SPort, SeqNumber: f.DPort}, gopacket.Payload("kubevirt-ovn")}
	case f.ICMPEcho:
		proto(layers.IPProtocolICMPv4)
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: f.SPort, Seq: f.DPort}
		return []gopacket.SerializableLayer{icmp, gopacket.Payload("kubevirt-ovn")}
	case f.TCP:
		proto(layers.IPProtocolTCP)
		tcp := &layers.TCP{SrcPort: layers.TCPPort(f.SPort), DstPort: layers.TCPPort(f.DPort), SYN: true, Seq: 1, Window: 64240}
		if f.SYNACK {
			tcp.ACK, tcp.Ack = true, f.Ack
		}
		if f.ACKOnly {
			tcp.SYN, tcp.ACK, tcp.Seq, tcp.Ack = false, true, 2, f.Ack
		}
		*errs = append(*errs, tcp.SetNetworkLayerForChecksum(nl))
		return []gopacket.SerializableLayer{tcp}
	}
	proto(layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: layers.UDPPort(f.SPort), DstPort: layers.UDPPort(f.DPort)}
	*errs = append(*errs, udp.SetNetworkLayerForChecksum(nl))
	var payload gopacket.SerializableLayer = gopacket.Payload("kubevirt-ovn")
	switch {
	case f.DHCP != nil:
		payload = f.DHCP
	case f.DHCPv6 != nil:
		payload = f.DHCPv6
	}
	return []gopacket.SerializableLayer{udp, payload}
}

// ReadPcap decodes the packets of a pcap stream; a record still being
// written ends the read without error.
func ReadPcap(r io.Reader) ([]Seen, error) {
	pr, err := pcapgo.NewReader(r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Seen
	for {
		data, _, err := pr.ReadPacketData()
		if err != nil {
			return out, nil
		}
		out = append(out, Decode(gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)))
	}
}

// ReadPcapFile is ReadPcap of a file; a file not yet written holds nothing.
func ReadPcapFile(path string) ([]Seen, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadPcap(f)
}

// Parse decodes an Ethernet frame, e.g. one built with Frame.Bytes.
func Parse(frame []byte) Seen {
	return Decode(gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default))
}

// Seen is a packet decoded to what the checks look at.
type Seen struct {
	SrcMAC, DstMAC string
	VLAN           int // -1: untagged
	SrcIP, DstIP   string
	TTL            uint8
	SPort, DPort   uint16
	ARPOp          uint16
	ARPSHA         string
	ARPSPA, ARPTPA string
	IsARP, IsUDP   bool
	IsTCP, SYN     bool
	// ICMP: an ICMPv4 packet of ICMPType, its echo id in SPort and
	// sequence in DPort.
	IsICMP   bool
	ICMPType uint8
	// ACK, RST and Seq of a TCP segment.
	ACK, RST bool
	Seq      uint32
	// DHCP is the decoded DHCPv4 message of a UDP packet on port 67 or
	// 68, nil otherwise; DHCPv6 the DHCPv6 one on port 546 or 547.
	DHCP   *layers.DHCPv4
	DHCPv6 *layers.DHCPv6
	// ICMPv6Type is an ICMPv6 packet's type (IsICMPv6); RA and NA its
	// router or neighbor advertisement, nil for others. An echo's id and
	// sequence are in SPort and DPort.
	IsICMPv6   bool
	ICMPv6Type uint8
	RA         *layers.ICMPv6RouterAdvertisement
	NA         *layers.ICMPv6NeighborAdvertisement
}

// Decode extracts a Seen from a packet.
func Decode(p gopacket.Packet) Seen {
	s := Seen{VLAN: -1}
	if eth, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); ok {
		s.SrcMAC, s.DstMAC = eth.SrcMAC.String(), eth.DstMAC.String()
	}
	if q, ok := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q); ok {
		s.VLAN = int(q.VLANIdentifier)
	}
	if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		s.SrcIP, s.DstIP, s.TTL = ip.SrcIP.String(), ip.DstIP.String(), ip.TTL
	}
	if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		s.SrcIP, s.DstIP, s.TTL = ip.SrcIP.String(), ip.DstIP.String(), ip.HopLimit
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		s.IsICMPv6, s.ICMPv6Type = true, ic.TypeCode.Type()
	}
	if echo, ok := p.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo); ok {
		s.SPort, s.DPort = echo.Identifier, echo.SeqNumber
	}
	if ra, ok := p.Layer(layers.LayerTypeICMPv6RouterAdvertisement).(*layers.ICMPv6RouterAdvertisement); ok {
		s.RA = ra
	}
	if na, ok := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok {
		s.NA = na
	}
	if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		s.IsUDP, s.SPort, s.DPort = true, uint16(u.SrcPort), uint16(u.DstPort)
	}
	if tc, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		s.IsTCP, s.SPort, s.DPort, s.SYN = true, uint16(tc.SrcPort), uint16(tc.DstPort), tc.SYN
		s.ACK, s.RST, s.Seq = tc.ACK, tc.RST, tc.Seq
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		s.IsICMP, s.ICMPType, s.SPort, s.DPort = true, ic.TypeCode.Type(), ic.Id, ic.Seq
	}
	if d, ok := p.Layer(layers.LayerTypeDHCPv4).(*layers.DHCPv4); ok {
		s.DHCP = d
	}
	if d, ok := p.Layer(layers.LayerTypeDHCPv6).(*layers.DHCPv6); ok {
		s.DHCPv6 = d
	}
	if a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		s.IsARP, s.ARPOp = true, a.Operation
		s.ARPSHA = net.HardwareAddr(a.SourceHwAddress).String()
		s.ARPSPA, s.ARPTPA = net.IP(a.SourceProtAddress).String(), net.IP(a.DstProtAddress).String()
	}
	return s
}

func (s Seen) String() string {
	v := ""
	if s.VLAN >= 0 {
		v = fmt.Sprintf(" vlan=%d", s.VLAN)
	}
	switch {
	case s.IsARP:
		return fmt.Sprintf("arp op=%d %s > %s%s sha=%s spa=%s tpa=%s", s.ARPOp, s.SrcMAC, s.DstMAC, v, s.ARPSHA, s.ARPSPA, s.ARPTPA)
	case s.DHCP != nil:
		return fmt.Sprintf("dhcp %s %s > %s%s %s:%d > %s:%d yiaddr=%s", dhcpType(s.DHCP), s.SrcMAC, s.DstMAC, v, s.SrcIP, s.SPort, s.DstIP, s.DPort, s.DHCP.YourClientIP)
	case s.IsUDP:
		return fmt.Sprintf("udp %s > %s%s %s:%d > %s:%d ttl=%d", s.SrcMAC, s.DstMAC, v, s.SrcIP, s.SPort, s.DstIP, s.DPort, s.TTL)
	case s.IsICMP:
		return fmt.Sprintf("icmp type=%d %s > %s%s %s > %s id=%d seq=%d", s.ICMPType, s.SrcMAC, s.DstMAC, v, s.SrcIP, s.DstIP, s.SPort, s.DPort)
	case s.IsTCP:
		return fmt.Sprintf("tcp %s > %s%s %s:%d > %s:%d ttl=%d syn=%t ack=%t", s.SrcMAC, s.DstMAC, v, s.SrcIP, s.SPort, s.DstIP, s.DPort, s.TTL, s.SYN, s.ACK)
	case s.IsICMPv6:
		return fmt.Sprintf("icmp6 type=%d %s > %s%s %s > %s", s.ICMPv6Type, s.SrcMAC, s.DstMAC, v, s.SrcIP, s.DstIP)
	}
	return fmt.Sprintf("other %s > %s%s", s.SrcMAC, s.DstMAC, v)
}

// DHCPType is the message type (option 53) of d, 0 when it has none.
func DHCPType(d *layers.DHCPv4) layers.DHCPMsgType {
	for _, o := range d.Options {
		if o.Type == layers.DHCPOptMessageType && len(o.Data) == 1 {
			return layers.DHCPMsgType(o.Data[0])
		}
	}
	return 0
}

func dhcpType(d *layers.DHCPv4) string { return DHCPType(d).String() }

// DHCPOption is the data of option opt of d, nil when it has none.
func DHCPOption(d *layers.DHCPv4, opt layers.DHCPOpt) []byte {
	for _, o := range d.Options {
		if o.Type == opt {
			return o.Data
		}
	}
	return nil
}

// Describe lists packets one a line, for failure messages.
func Describe(ps []Seen) string {
	var b strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&b, "  #%d %s\n", i+1, p)
	}
	if len(ps) == 0 {
		b.WriteString("  (no packets)\n")
	}
	return b.String()
}
