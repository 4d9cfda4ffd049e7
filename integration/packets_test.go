package integration

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"
)

// frame is an Ethernet frame to build: UDP/IPv4 when IP is set, else ARP.
type frame struct {
	srcMAC, dstMAC string
	vlan           uint16 // 0: untagged
	// IPv4/UDP
	srcIP, dstIP   string
	ttl            uint8
	sport, dport   uint16
	// ARP
	arpOp          uint16
	arpSHA, arpTHA string
	arpSPA, arpTPA string
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	require.NoError(t, err)
	return m
}

func mustIP(t *testing.T, s string) net.IP {
	t.Helper()
	ip := net.ParseIP(s).To4()
	require.NotNil(t, ip, s)
	return ip
}

// bytes serializes f with lengths and checksums filled in.
func (f frame) bytes(t *testing.T) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: mustMAC(t, f.srcMAC), DstMAC: mustMAC(t, f.dstMAC)}
	var ls []gopacket.SerializableLayer
	ls = append(ls, eth)
	inner := layers.EthernetTypeIPv4
	if f.srcIP == "" {
		inner = layers.EthernetTypeARP
	}
	if f.vlan != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: f.vlan, Type: inner})
	} else {
		eth.EthernetType = inner
	}
	if f.srcIP == "" {
		ls = append(ls, &layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: f.arpOp,
			SourceHwAddress: mustMAC(t, f.arpSHA), SourceProtAddress: mustIP(t, f.arpSPA),
			DstHwAddress: mustMAC(t, f.arpTHA), DstProtAddress: mustIP(t, f.arpTPA),
		})
	} else {
		ip := &layers.IPv4{Version: 4, TTL: f.ttl, Protocol: layers.IPProtocolUDP,
			SrcIP: mustIP(t, f.srcIP), DstIP: mustIP(t, f.dstIP)}
		udp := &layers.UDP{SrcPort: layers.UDPPort(f.sport), DstPort: layers.UDPPort(f.dport)}
		require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
		ls = append(ls, ip, udp, gopacket.Payload("kubevirt-ovn"))
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return buf.Bytes()
}

// readPcap reads the packets ovs-vswitchd has written so far; a record it is
// still writing ends the read.
func readPcap(path string) ([]gopacket.Packet, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []gopacket.Packet
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return out, nil
		}
		out = append(out, gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default))
	}
}

// seen is a packet decoded to what the checks look at.
type seen struct {
	srcMAC, dstMAC string
	vlan           int // -1: untagged
	srcIP, dstIP   string
	ttl            uint8
	sport, dport   uint16
	arpOp          uint16
	arpSHA         string
	arpSPA, arpTPA string
	isARP, isUDP   bool
}

func decode(p gopacket.Packet) seen {
	s := seen{vlan: -1}
	if eth, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); ok {
		s.srcMAC, s.dstMAC = eth.SrcMAC.String(), eth.DstMAC.String()
	}
	if q, ok := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q); ok {
		s.vlan = int(q.VLANIdentifier)
	}
	if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		s.srcIP, s.dstIP, s.ttl = ip.SrcIP.String(), ip.DstIP.String(), ip.TTL
	}
	if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		s.isUDP, s.sport, s.dport = true, uint16(u.SrcPort), uint16(u.DstPort)
	}
	if a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		s.isARP, s.arpOp = true, a.Operation
		s.arpSHA = net.HardwareAddr(a.SourceHwAddress).String()
		s.arpSPA, s.arpTPA = net.IP(a.SourceProtAddress).String(), net.IP(a.DstProtAddress).String()
	}
	return s
}

func (s seen) String() string {
	v := ""
	if s.vlan >= 0 {
		v = fmt.Sprintf(" vlan=%d", s.vlan)
	}
	switch {
	case s.isARP:
		return fmt.Sprintf("arp op=%d %s>%s%s sha=%s spa=%s tpa=%s", s.arpOp, s.srcMAC, s.dstMAC, v, s.arpSHA, s.arpSPA, s.arpTPA)
	case s.isUDP:
		return fmt.Sprintf("udp %s>%s%s %s:%d>%s:%d ttl=%d", s.srcMAC, s.dstMAC, v, s.srcIP, s.sport, s.dstIP, s.dport, s.ttl)
	}
	return fmt.Sprintf("other %s>%s%s", s.srcMAC, s.dstMAC, v)
}

func describe(ps []gopacket.Packet) string {
	var b strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&b, "  #%d %s\n", i+1, decode(p))
	}
	if len(ps) == 0 {
		b.WriteString("  (no packets)\n")
	}
	return b.String()
}

// waitFor polls the capture at path until a packet after skip matches, and
// fails the test printing every packet seen when none does in time.
func waitFor(t *testing.T, path, what string, skip int, match func(seen) bool) seen {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ps, err := readPcap(path)
		require.NoError(t, err)
		for i := skip; i < len(ps); i++ {
			if s := decode(ps[i]); match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "packet not seen", "%s: not seen on %s; packets there:\n%s", what, path, describe(ps))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quietWindow is how long a negative check watches a wire after its
// barrier (the same injection seen taking effect elsewhere): a packet that
// would be sent is sent within milliseconds on this datapath.
const quietWindow = 700 * time.Millisecond

// requireNone fails when a packet after skip matches within quietWindow.
func requireNone(t *testing.T, path, what string, skip int, match func(seen) bool) {
	t.Helper()
	deadline := time.Now().Add(quietWindow)
	for {
		ps, err := readPcap(path)
		require.NoError(t, err)
		for i := skip; i < len(ps); i++ {
			if s := decode(ps[i]); match(s) {
				require.FailNowf(t, "unexpected packet", "%s: seen on %s: %s; packets there:\n%s", what, path, s, describe(ps))
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count is how many packets a capture holds now, to look only at later ones.
func count(t *testing.T, path string) int {
	t.Helper()
	ps, err := readPcap(path)
	require.NoError(t, err)
	return len(ps)
}
