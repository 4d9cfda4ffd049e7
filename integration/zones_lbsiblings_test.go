package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Load balancer web (on net-a, members vm-a in zone hv1 and vm-c in zone
// hv2) reached from net-b, router1's other internal network, on
// interconnect OVN: vm-b in zone hv2 (which holds net-a's switch too),
// vm-d in zone gw2 (which holds no net-a switch: only net-b's, for vm-d)
// and vm-e in zone gw1, the router's home.

const (
	vmDPort = "kv-net-b_default_vm-d_eth1"
	vmEPort = "kv-net-b_default_vm-e_eth1"
)

var (
	vmD = vmRef{"gw2", "vm-d", "50:54:00:00:00:18", "10.20.0.8"}
	vmE = vmRef{"gw1", "vm-e", "50:54:00:00:00:19", "10.20.0.9"}
)

// siblingClients are vm-d and vm-e's VMIs on net-b.
func siblingClients() string {
	var b strings.Builder
	for _, v := range []vmRef{vmD, vmE} {
		fmt.Fprintf(&b, `---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: default
spec:
  networks:
    - name: eth1
      multus:
        networkName: net-b
status:
  nodeName: %s
  interfaces:
    - name: eth1
      mac: "%s"
      ipAddress: %s
`, v.port, v.chassis, v.mac, v.ip)
	}
	return b.String()
}

// siblingSetup plugs vm-d and vm-e in, writes their VMIs (lb.yaml and
// vm-c's port are the caller's), syncs and waits until vm-c's, vm-d's and
// vm-e's ports are up.
func siblingSetup(t *testing.T, e *zoneEnv) {
	require.NoError(t, e.z.AddVMPort(vmD.chassis, vmD.port, vmDPort))
	require.NoError(t, e.z.AddVMPort(vmE.chassis, vmE.port, vmEPort))
	e.write("clients.yaml", siblingClients())
	e.sync()
	e.ready("gw1")
	for zone, port := range map[string]string{"hv2": vmLBCPort, vmD.chassis: vmDPort, vmE.chassis: vmEPort} {
		nbctl(t, e.z.Zone(zone), "--timeout=90", "wait-until", "Logical_Switch_Port", port, "up=true")
	}
}

// TestZonesLoadBalancerFromOtherNetwork: net-b's rows for web
// (kv-lb-web_udp_from_net-b) are in every zone of net-b's switch (gw1,
// gw2, hv2) and no other; from each of vm-b (hv2), vm-d (gw2, no net-a
// there) and vm-e (gw1, the router's home) flows to the VIP spread over
// both members, each member sees the client's own address, and a
// member's reply reaches the client from the VIP's address and port.
// (Without net-b's rows the flows still reach the members, balanced by
// the router's own rows on its home chassis in gw1, but the replies come
// from the member's address: the router un-DNATs only what leaves by its
// gateway port.)
func TestZonesLoadBalancerFromOtherNetwork(t *testing.T) {
	e := newZoneEnv(t)
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", lbManifests)
	siblingSetup(t, e)

	lbs := e.owned("Load_Balancer")
	for _, z := range []string{"gw1", "gw2", "hv2"} {
		assert.Contains(t, strings.Fields(lbs[z]), "kv-lb-web_udp_from_net-b", "zone %s holds net-b's switch and its row for web", z)
	}
	assert.NotContains(t, lbs["hv1"], "_from_net-b", "zone hv1 holds no net-b switch")
	assert.NotContains(t, lbs["gw2"], "kv-lb-web_udp_switch", "zone gw2 holds no net-a switch")

	members := []vmRef{vmA, vmLBC}
	for i, client := range []vmRef{vmB, vmD, vmE} {
		by := map[string]int{}
		first := uint16(7900 + 100*i)
		for sport := first; sport < first+16; sport++ {
			sk := skips(t, e, members)
			require.NoError(t, e.z.Inject(client.chassis, client.port, frameBytes(t, frame{SrcMAC: client.mac, DstMAC: routerMAC, SrcIP: client.ip, DstIP: lbVIP, TTL: 64, SPort: sport, DPort: lbPort})))
			m, p := landing(t, e, members, sk, fmt.Sprintf("%s's (zone %s) flow %d to the VIP", client.port, client.chassis, sport), func(s seen) bool {
				return s.IsUDP && s.SPort == sport && s.DPort == lbPort
			})
			by[m.port]++
			assert.Equal(t, client.ip, p.SrcIP, "the member sees the client's address")
			assert.Equal(t, m.ip, p.DstIP, "DNATed to the member")
			if sport%4 != 0 {
				continue
			}
			at := e.vm(client.chassis, client.port)
			sc := count(t, at)
			require.NoError(t, e.z.Inject(m.chassis, m.port, frameBytes(t, frame{SrcMAC: m.mac, DstMAC: routerMAC, SrcIP: m.ip, DstIP: client.ip, TTL: 64, SPort: lbPort, DPort: sport})))
			r := waitFor(t, at, fmt.Sprintf("%s's reply to flow %d at %s", m.port, sport, client.port), sc, func(s seen) bool { return s.IsUDP && s.DPort == sport })
			assert.Equal(t, lbVIP, r.SrcIP, "the reply comes from the VIP")
			assert.Equal(t, uint16(lbPort), r.SPort)
		}
		t.Logf("%s (zone %s): flows per member: %v", client.port, client.chassis, by)
		assert.Len(t, by, 2, "%s's flows reach every member: %v", client.port, by)
	}
}

// TestZonesLoadBalancerFromOtherNetworkHealthCheck: web with a TCP health
// check. Zone gw2 holds net-b's row but no member's port, local or
// remote (no net-a switch there): ovn-northd would leave every member
// out of a health-checked VIP there, so gw2's row has no health check
// and vm-d's flows reach both members. vm-c (zone hv2) stops answering
// its probes: offline in hv2, where OVN takes it out of hv2's rows
// itself; a sync carries that to gw2's row, and new flows from vm-d
// (gw2) and vm-b (hv2) all reach vm-a. vm-c answers again: back in both.
func TestZonesLoadBalancerFromOtherNetworkHealthCheck(t *testing.T) {
	e := newZoneEnv(t)
	probes := zonesHealthSetup(t, e)
	siblingSetup(t, e)

	const row = "kv-lb-web_tcp_from_net-b"
	assert.Equal(t, "{}", strings.TrimSpace(nbctl(t, e.z.Zone("gw2"), "get", "Load_Balancer", row, "ip_port_mappings")), "no member's port in zone gw2: no mappings there")
	assert.Empty(t, strings.TrimSpace(nbctl(t, e.z.Zone("gw2"), "--bare", "--columns=_uuid", "find", "Load_Balancer_Health_Check", "external_ids:kubevirt-ovn/owner=net-b")))
	assert.Contains(t, nbctl(t, e.z.Zone("hv2"), "get", "Load_Balancer", row, "ip_port_mappings"), vmLBCPort, "vm-c's own zone checks it")

	online := func(ip string) bool {
		s := strings.Fields(sbctl(t, e.z.Zone(map[string]string{vmAIP: "hv1", vmLBCIP: "hv2"}[ip]), "--bare", "--columns=status", "find", "Service_Monitor", "ip="+ip))
		return len(s) > 0 && !slices.ContainsFunc(s, func(x string) bool { return x != "online" })
	}
	offline := func(ip string) bool {
		s := strings.Fields(sbctl(t, e.z.Zone("hv2"), "--bare", "--columns=status", "find", "Service_Monitor", "ip="+ip))
		return slices.Contains(s, "offline")
	}
	require.NoError(t, pollUntil(60*time.Second, func() bool { return online(vmAIP) && online(vmLBCIP) }), "both members online in their zones")

	members := []vmRef{vmA, vmLBC}
	// flows sends n TCP SYNs from client to the VIP and counts where
	// they land.
	flows := func(client vmRef, first uint16, n int) map[string]int {
		t.Helper()
		by := map[string]int{}
		for sport := first; sport < first+uint16(n); sport++ {
			sk := skips(t, e, members)
			require.NoError(t, e.z.Inject(client.chassis, client.port, frameBytes(t, frame{SrcMAC: client.mac, DstMAC: routerMAC, SrcIP: client.ip, DstIP: lbVIP, TTL: 64, SPort: sport, DPort: lbPort, TCP: true})))
			m, _ := landing(t, e, members, sk, fmt.Sprintf("%s's flow %d to the VIP", client.port, sport), func(s seen) bool {
				return s.IsTCP && s.SYN && s.SrcIP == client.ip && s.SPort == sport && s.DPort == lbPort
			})
			by[m.port]++
		}
		return by
	}
	by := flows(vmD, 8300, 16)
	assert.Len(t, by, 2, "vm-d (zone gw2) reaches both members: %v", by)

	probes.set(vmLBC, false)
	require.NoError(t, pollUntil(60*time.Second, func() bool { return offline(vmLBCIP) }), "vm-c offline in zone hv2")
	e.sync()
	assert.NotContains(t, nbctl(t, e.z.Zone("gw2"), "get", "Load_Balancer", row, "vips"), vmLBCIP, "gw2's row leaves vm-c out")
	assert.Equal(t, map[string]int{"vm-a": 16}, flows(vmD, 8400, 16), "vm-d (zone gw2): vm-c offline in its zone")
	assert.Equal(t, map[string]int{"vm-a": 16}, flows(vmB, 8500, 16), "vm-b (zone hv2): vm-c offline in its zone")

	probes.set(vmLBC, true)
	require.NoError(t, pollUntil(60*time.Second, func() bool { return online(vmLBCIP) }), "vm-c online again")
	e.sync()
	by = flows(vmD, 8600, 16)
	assert.Len(t, by, 2, "vm-d reaches vm-c again: %v", by)
}
