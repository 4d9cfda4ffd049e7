package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Security groups and load balancers on interconnect OVN (issue 22), on
// newZoneEnv's zones: router1 lives in zone gw1, vm-a in zone hv1 (net-a),
// vm-b in zone hv2 (net-b).

// sgWebOut lets sg-web's members start UDP flows to port 7000.
const sgWebOut = `---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-out}
spec: {id: web-out, securityGroupId: sg-web, direction: egress, protocol: udp, portRangeMin: 7000}
`

// TestZonesSecurityGroups: vm-a (zone hv1) in sg-web, vm-b (zone hv2):
// each zone holding a member's port has the group's Port_Group with its
// own member; vm-b's UDP to port 80 reaches vm-a and the reply returns,
// port 81 is dropped; the remote-group rule (UDP 90 from sg-client) drops
// vm-b while it is no member and admits it once it is, although
// sg-client's only member lives in the other zone (the explicit
// Address_Set in zone hv1: a zone's own $<pg>_ip4 knows only its ports);
// sg-client's Port_Group in zone hv2 drops a new flow into vm-b that
// sg-web lets out of vm-a.
func TestZonesSecurityGroups(t *testing.T) {
	e := newZoneEnv(t)
	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, ""))
	e.write("sg.yaml", sgWeb(80)+sgWebOut)
	e.sync()
	e.ready("gw1")

	pgs := e.owned("Port_Group")
	assert.Contains(t, pgs["hv1"], "kv_sg_sg_web.", "sg-web's Port_Group in vm-a's zone")
	for _, z := range []string{"gw1", "gw2", "hv2"} {
		assert.Empty(t, pgs[z], "zone %s holds no member's port, so no Port_Group", z)
	}
	sets := e.owned("Address_Set")
	assert.Contains(t, sets["hv1"], "kv_sgaddr_sg_client.", "sg-client's address set where sg-web's rule uses it")
	assert.Empty(t, sets["hv2"])

	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")
	pass := func(from, to vmRef, at capture, sport, dport uint16, what string) {
		t.Helper()
		skip := count(t, at)
		require.NoError(t, e.z.Inject(from.chassis, from.port, frameBytes(t, routed(from, to, sport, dport))))
		waitFor(t, at, what, skip, arrives(from, sport, dport))
	}
	blocked := func(from, to vmRef, at capture, sport, dport uint16, what string, barrier func()) {
		t.Helper()
		skip := count(t, at)
		require.NoError(t, e.z.Inject(from.chassis, from.port, frameBytes(t, routed(from, to, sport, dport))))
		barrier()
		requireNone(t, at, what, skip, arrives(from, sport, dport))
	}

	pass(vmB, vmA, atA, 5000, 80, "vm-b (zone hv2) -> vm-a (zone hv1) udp/80, allowed by sg-web")
	pass(vmA, vmB, atB, 80, 5000, "vm-a's reply to vm-b across zones")
	blocked(vmB, vmA, atA, 5001, 81, "vm-b -> vm-a udp/81 (no rule)", func() {
		pass(vmB, vmA, atA, 5002, 80, "barrier: vm-b -> vm-a udp/80")
	})
	blocked(vmB, vmA, atA, 5003, 90, "vm-b -> vm-a udp/90, vm-b not in sg-client", func() {
		pass(vmB, vmA, atA, 5004, 80, "barrier: vm-b -> vm-a udp/80")
	})

	// vm-b joins sg-client: its Port_Group appears in zone hv2, and zone
	// hv1's address set learns vm-b's address.
	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, `["sg-client"]`))
	e.sync()
	pgs = e.owned("Port_Group")
	assert.Contains(t, pgs["hv2"], "kv_sg_sg_client.")
	assert.NotContains(t, pgs["hv1"], "kv_sg_sg_client.", "sg-client has no member in zone hv1")
	addrs := nbctl(t, e.z.Zone("hv1"), "--bare", "--columns=addresses", "find", "Address_Set", "external_ids:kubevirt-ovn/security-group=sg-client")
	assert.Equal(t, vmBIP, strings.TrimSpace(addrs), "zone hv1's address set of sg-client holds its member in zone hv2")

	pass(vmB, vmA, atA, 5005, 90, "vm-b -> vm-a udp/90, vm-b (zone hv2) in sg-client")
	pass(vmA, vmB, atB, 90, 5005, "vm-a's reply into sg-client's vm-b")
	// sg-client admits nothing new in: vm-a's flow to 7000, which sg-web
	// lets out, is dropped at vm-b in zone hv2.
	blocked(vmA, vmB, atB, 6000, 7000, "vm-a -> vm-b udp/7000 (sg-client has no ingress rule)", func() {
		pass(vmA, vmB, atB, 90, 5005, "barrier: vm-a's reply")
	})
}

// TestZonesLoadBalancer: load balancer web on net-a with members vm-a
// (zone hv1) and vm-c (zone hv2), its VIP behind a floating IP on router1
// (home zone gw1): the router's rows are in zone gw1 only, the switch's in
// every zone of net-a's switch; flows from outside through the floating
// IP reach members in both zones; with vm-c the only member, vm-a in zone
// hv1 (not the router's) gets the router's MAC for the VIP by ARP,
// reaches vm-c through the VIP, and vm-c's reply reaches vm-a from the
// VIP.
func TestZonesLoadBalancer(t *testing.T) {
	e := newZoneEnv(t)
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", lbManifests)
	e.sync()
	e.ready("gw1")
	nbctl(t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")

	lbs := e.owned("Load_Balancer")
	for _, z := range []string{"gw1", "hv1", "hv2"} {
		assert.Contains(t, lbs[z], "kv-lb-web_udp_switch", "zone %s holds net-a's switch and its load balancer", z)
	}
	assert.Contains(t, strings.Fields(lbs["gw1"]), "kv-lb-web_udp", "the router's row in its home zone")
	for _, z := range []string{"hv1", "hv2"} {
		assert.NotContains(t, strings.Fields(lbs[z]), "kv-lb-web_udp", "zone %s holds no router row", z)
	}
	assert.Empty(t, lbs["gw2"])

	members := []vmRef{vmA, vmLBC}
	skips := map[string]int{}
	recount := func() {
		for _, m := range members {
			skips[m.port] = count(t, e.vm(m.chassis, m.port))
		}
	}
	recount()
	seenBy := map[string]int{}
	for sport := uint16(7300); sport < 7316; sport++ {
		e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
		in := func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == sport && s.DPort == lbPort }
		var got []vmRef
		waitFor(t, capture{name: "vm-a or vm-c", read: func() ([]seen, error) {
			var all []seen
			got = got[:0]
			for _, m := range members {
				ps, err := e.vm(m.chassis, m.port).read()
				if err != nil {
					return nil, err
				}
				for _, p := range ps[skips[m.port]:] {
					if in(p) {
						got = append(got, m)
						assert.Equal(t, m.ip, p.DstIP, "DNATed to the member's own address")
					}
				}
				all = append(all, ps[skips[m.port]:]...)
			}
			return all, nil
		}}, fmt.Sprintf("flow %d at a member", sport), 0, in)
		require.Len(t, got, 1, "flow %d reached one member", sport)
		seenBy[got[0].port]++
		recount()
	}
	t.Logf("flows per member: %v", seenBy)
	assert.Len(t, seenBy, 2, "members in both zones get flows from outside: %v", seenBy)

	// From inside, in zone hv1 (the router is in gw1): vm-c alone behind
	// the VIP.
	e.edit("lb.yaml", "members: [10.10.0.5, "+vmLBCIP+"]", "members: ["+vmLBCIP+"]")
	e.sync()
	atA, atC := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-c")
	skip := count(t, atA)
	arp := frame{SrcMAC: vmAMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1, ARPSHA: vmAMAC, ARPSPA: vmAIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: lbVIP}
	require.NoError(t, e.z.Inject("hv1", "vm-a", frameBytes(t, arp)))
	reply := waitFor(t, atA, "ARP reply for the VIP", skip, func(s seen) bool { return s.IsARP && s.ARPOp == 2 && s.ARPSPA == lbVIP })
	assert.Equal(t, routerMAC, reply.ARPSHA, "the router answers for the VIP")
	for sport := uint16(7400); sport < 7404; sport++ {
		skipC := count(t, atC)
		f := frame{SrcMAC: vmAMAC, DstMAC: reply.ARPSHA, SrcIP: vmAIP, DstIP: lbVIP, TTL: 64, SPort: sport, DPort: lbPort}
		require.NoError(t, e.z.Inject("hv1", "vm-a", frameBytes(t, f)))
		got := waitFor(t, atC, fmt.Sprintf("vm-a's flow %d to the VIP at vm-c", sport), skipC, func(s seen) bool {
			return s.IsUDP && s.SPort == sport && s.DPort == lbPort
		})
		assert.Equal(t, vmLBCIP, got.DstIP, "DNATed to the member")
		assert.Equal(t, vmAIP, got.SrcIP, "the member sees the client's address")
		// vm-c's reply, straight to vm-a on their switch, reaches vm-a
		// from the VIP: un-DNATed in vm-a's zone.
		skipA := count(t, atA)
		r := frame{SrcMAC: vmLBCMAC, DstMAC: vmAMAC, SrcIP: vmLBCIP, DstIP: vmAIP, TTL: 64, SPort: lbPort, DPort: sport}
		require.NoError(t, e.z.Inject("hv2", "vm-c", frameBytes(t, r)))
		back := waitFor(t, atA, fmt.Sprintf("vm-c's reply to flow %d at vm-a", sport), skipA, func(s seen) bool {
			return s.IsUDP && s.SPort == lbPort && s.DPort == sport
		})
		assert.Equal(t, lbVIP, back.SrcIP, "the reply comes from the VIP")
	}
}

// pollUntil polls cond every 50 ms until it holds or timeout passes.
func pollUntil(timeout time.Duration, cond func() bool) error {
	return sandbox.Poll(timeout, "condition", func() (bool, error) { return cond(), nil })
}

// TestZonesSecurityGroupsRun: run --zone (one controller per zone) writes
// the zones' security group rows as sync does, and follows a member
// joining the remote group: its Port_Group appears in its zone, and the
// other zone's Address_Set learns its address.
func TestZonesSecurityGroupsRun(t *testing.T) {
	e := newZoneEnv(t)
	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, ""))
	e.write("sg.yaml", sgWeb(80)+sgWebOut)
	startController(t, "zones", append([]string{"--from-file", e.manifests}, e.z.ZoneFlags()...)...)
	e.converged()
	assert.Contains(t, e.owned("Port_Group")["hv1"], "kv_sg_sg_web.")
	assert.Contains(t, e.owned("Address_Set")["hv1"], "kv_sgaddr_sg_client.")

	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, `["sg-client"]`))
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-b's address in zone hv1's set of sg-client", func() (bool, error) {
		out := nbctl(t, e.z.Zone("hv1"), "--bare", "--columns=addresses", "find", "Address_Set", "external_ids:kubevirt-ovn/security-group=sg-client")
		return strings.TrimSpace(out) == vmBIP, nil
	}))
	e.converged()
	assert.Contains(t, e.owned("Port_Group")["hv2"], "kv_sg_sg_client.")
}

// TestZonesSecurityGroupSelf: the common group whose rule admits its own
// members (OpenStack's "default"): vm-a (zone hv1) and vm-b (zone hv2) in
// sg-self reach each other both ways, each zone's rule matching the set of
// both zones' members; vm-c (zone hv2, on vm-a's network, in no group) is
// dropped at vm-a.
func TestZonesSecurityGroupSelf(t *testing.T) {
	e := newZoneEnv(t)
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
	vmc := lbManifests[:strings.Index(lbManifests, "---")]
	e.write("vmis.yaml", sgVMIs(`["sg-self"]`, `["sg-self"]`)+"---\n"+vmc)
	e.write("sg.yaml", `apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-self}
spec:
  id: sg-self
  rules:
  - {id: self-in, direction: ingress, protocol: udp, portRangeMin: 100, remoteGroupId: sg-self}
  - {id: out, direction: egress}
`)
	e.sync()
	e.ready("gw1")
	nbctl(t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	for _, z := range []string{"hv1", "hv2"} {
		addrs := strings.Fields(strings.ReplaceAll(nbctl(t, e.z.Zone(z), "--bare", "--columns=addresses", "find", "Address_Set", "external_ids:kubevirt-ovn/security-group=sg-self"), ",", " "))
		assert.ElementsMatch(t, []string{vmAIP, vmBIP}, addrs, "zone %s: both zones' members", z)
	}

	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")
	pass := func(from, to vmRef, at capture, sport, dport uint16, what string) {
		t.Helper()
		skip := count(t, at)
		f := routed(from, to, sport, dport)
		if from.ip == vmLBCIP { // on vm-a's network: straight to it
			f.DstMAC = to.mac
		}
		require.NoError(t, e.z.Inject(from.chassis, from.port, frameBytes(t, f)))
		waitFor(t, at, what, skip, arrives(from, sport, dport))
	}
	pass(vmB, vmA, atA, 5100, 100, "vm-b (zone hv2) -> vm-a (zone hv1) udp/100, both in sg-self")
	pass(vmA, vmB, atB, 5101, 100, "vm-a (zone hv1) -> vm-b (zone hv2) udp/100, both in sg-self")
	skip := count(t, atA)
	f := frame{SrcMAC: vmLBCMAC, DstMAC: vmAMAC, SrcIP: vmLBCIP, DstIP: vmAIP, TTL: 64, SPort: 5102, DPort: 100}
	require.NoError(t, e.z.Inject("hv2", "vm-c", frameBytes(t, f)))
	pass(vmB, vmA, atA, 5103, 100, "barrier: vm-b -> vm-a udp/100")
	requireNone(t, atA, "vm-c (no group) -> vm-a udp/100", skip, arrives(vmLBC, 5102, 100))
}
