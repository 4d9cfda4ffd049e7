package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Security groups (issue 22): a VM port in a group drops everything but
// what the group's rules allow, statefully; DHCP still works on it.

// sgVMIs are deploy/examples' VMIs with vm-a and vm-b bound to groups
// (annotation values, "" for none).
func sgVMIs(groupsA, groupsB string) string { return sgVMIsWith(groupsA, groupsB, "") }

// sgVMIsWith is sgVMIs with vmBStatus after vm-b's status ipAddress (more
// fields of its interface's status).
func sgVMIsWith(groupsA, groupsB, vmBStatus string) string {
	ann := func(groups string) string {
		if groups == "" {
			return ""
		}
		return fmt.Sprintf("\n  annotations:\n    securityGroups: '%s'", groups)
	}
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-a
  namespace: default%s
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
  namespace: default%s
spec:
  networks:
    - {name: eth1, multus: {networkName: default/net-b}}
status:
  nodeName: hv2
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:06", ipAddress: 10.20.0.6%s}
`, ann(groupsA), ann(groupsB), vmBStatus)
}

// sgWeb is group sg-web admitting UDP to port from anywhere, and UDP to
// port 90 from the members of sg-client, which lets everything out.
func sgWeb(port int) string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-web}
spec: {id: sg-web, name: web}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-in}
spec: {id: web-in, securityGroupId: sg-web, direction: ingress, etherType: IPv4, protocol: udp, portRangeMin: %d, portRangeMax: %d, remoteIpPrefix: 0.0.0.0/0}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-clients}
spec: {id: web-clients, securityGroupId: sg-web, direction: ingress, protocol: udp, portRangeMin: 90, remoteGroupId: sg-client}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-client}
spec:
  id: sg-client
  name: client
  rules: [{id: client-out, direction: egress}]
`, port, port)
}

// flowPasses sends a UDP flow routed from VM from to VM to and waits for
// it at capture at.
func flowPasses(t *testing.T, e *env, from, to vmRef, at capture, sport, dport uint16, what string) {
	t.Helper()
	skip := count(t, at)
	require.NoError(t, e.l.Inject(from.chassis, from.port, frameBytes(t, routed(from, to, sport, dport))))
	waitFor(t, at, what, skip, arrives(from, sport, dport))
}

// flowBlocked sends a flow that must be dropped, then barrier (a flow
// that passes, on the same path), and watches the first never arrive.
func flowBlocked(t *testing.T, e *env, from, to vmRef, at capture, sport, dport uint16, what string, barrier func()) {
	t.Helper()
	skip := count(t, at)
	require.NoError(t, e.l.Inject(from.chassis, from.port, frameBytes(t, routed(from, to, sport, dport))))
	barrier()
	requireNone(t, at, what, skip, arrives(from, sport, dport))
}

// routed is a UDP frame from VM from to VM to through router1.
func routed(from, to vmRef, sport, dport uint16) frame {
	return frame{SrcMAC: from.mac, DstMAC: routerMAC, SrcIP: from.ip, DstIP: to.ip, TTL: 64, SPort: sport, DPort: dport}
}

// arrives matches the UDP packet of flow sport->dport from VM from.
func arrives(from vmRef, sport, dport uint16) func(seen) bool {
	return func(s seen) bool { return s.IsUDP && s.SrcIP == from.ip && s.SPort == sport && s.DPort == dport }
}

// TestSecurityGroups: vm-a in sg-web (UDP 80 in): vm-b's UDP to port 80
// reaches vm-a and vm-a's reply reaches vm-b; vm-b's UDP to port 81 and a
// new flow from vm-a are dropped; vm-a's DHCP still works. The rule edited
// to port 81 lets 81 in and 80 no more. A remote-group rule (UDP 90 from
// sg-client) admits vm-b once it is in sg-client, not before. vm-a pings
// its network's gateway, not another. Unbound, both are open again.
func TestSecurityGroups(t *testing.T) {
	e := newEnv(t)
	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, ""))
	e.write("sg.yaml", sgWeb(80))
	out := e.sync()
	assert.Contains(t, out, "create Port_Group kv_sg_sg_web.")
	e.ready("gw1", "hv1", "hv2")
	e.neighbour()

	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")
	pass := func(from, to vmRef, at capture, sport, dport uint16, what string) {
		t.Helper()
		flowPasses(t, e, from, to, at, sport, dport, what)
	}
	blocked := func(from, to vmRef, at capture, sport, dport uint16, what string, barrier func()) {
		t.Helper()
		flowBlocked(t, e, from, to, at, sport, dport, what, barrier)
	}

	// Allowed in, and the reply out (stateful).
	pass(vmB, vmA, atA, 5000, 80, "vm-b -> vm-a udp/80 (allowed by sg-web)")
	pass(vmA, vmB, atB, 80, 5000, "vm-a's reply to vm-b")
	// Not allowed in: port 81; barrier: another allowed flow.
	blocked(vmB, vmA, atA, 5001, 81, "vm-b -> vm-a udp/81 (no rule)", func() {
		pass(vmB, vmA, atA, 5002, 80, "barrier: vm-b -> vm-a udp/80")
	})
	// Not allowed out: a new flow from vm-a; barrier: a reply.
	blocked(vmA, vmB, atB, 6000, 7000, "vm-a -> vm-b new flow (no egress rule)", func() {
		pass(vmA, vmB, atB, 80, 5002, "barrier: vm-a's reply")
	})
	// DHCP passes on the default-deny port.
	e.exchange(vmA, "net-a", netAGateway, 0x5000)
	// Ping to its network's gateway passes, and the router's reply comes
	// back; ping to the router's address on net-b (not vm-a's network's
	// gateway) is dropped on the way out.
	ping := func(dst string, id uint16) func(seen) bool {
		require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, frame{SrcMAC: vmA.mac, DstMAC: routerMAC, SrcIP: vmA.ip, DstIP: dst, TTL: 64, SPort: id, DPort: 1, ICMPEcho: true})))
		return func(s seen) bool { return s.IsICMP && s.ICMPType == 0 && s.SrcIP == dst && s.SPort == id }
	}
	skip := count(t, atA)
	waitFor(t, atA, "echo reply from net-a's gateway", skip, ping(netAGateway, 0x51))
	skip = count(t, atA)
	other := ping(netBGateway, 0x52)
	waitFor(t, atA, "barrier: echo reply from net-a's gateway", skip, ping(netAGateway, 0x53))
	requireNone(t, atA, "echo reply from net-b's gateway (not vm-a's network's)", skip, other)

	// The rule edited: 81 in, 80 no more (new flows).
	e.write("sg.yaml", sgWeb(81))
	assert.Contains(t, e.sync(), "update ACL")
	pass(vmB, vmA, atA, 5003, 81, "vm-b -> vm-a udp/81 (the edited rule)")
	blocked(vmB, vmA, atA, 5004, 80, "vm-b -> vm-a udp/80 after the edit", func() {
		pass(vmB, vmA, atA, 5005, 81, "barrier: vm-b -> vm-a udp/81")
	})

	// Remote group: port 90 admits sg-client's members only. vm-b is in
	// no group: dropped; vm-b joins sg-client (which lets it out): admitted.
	blocked(vmB, vmA, atA, 5007, 90, "vm-b -> vm-a udp/90, vm-b not in sg-client", func() {
		pass(vmB, vmA, atA, 5008, 81, "barrier: vm-b -> vm-a udp/81")
	})
	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, `["sg-client"]`))
	e.sync()
	e.neighbour()
	pass(vmB, vmA, atA, 5009, 90, "vm-b -> vm-a udp/90, vm-b in sg-client")
	pass(vmA, vmB, atB, 90, 5009, "vm-a's reply into sg-client's vm-b")

	// Unbound: both open again, both ways.
	e.write("vmis.yaml", sgVMIs("", ""))
	e.sync()
	pass(vmA, vmB, atB, 6001, 7001, "vm-a -> vm-b new flow, unbound")
	pass(vmB, vmA, atA, 5006, 90, "vm-b -> vm-a udp/90, unbound")
}

// sgTCP is group sg-tcp admitting TCP to port 80 from anywhere, and
// nothing out.
const sgTCP = `apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-tcp}
spec:
  id: sg-tcp
  rules: [{id: tcp-in, direction: ingress, protocol: tcp, portRangeMin: 80, portRangeMax: 80}]
`

// TestSecurityGroupTCP: vm-a in sg-tcp (TCP 80 in). vm-b's SYN to port 80
// reaches vm-a, vm-a's SYN-ACK passes back (allow-related: sg-tcp lets
// nothing out by itself), vm-b's ACK completes the handshake through the
// established connection; a SYN to port 81 and a new SYN from vm-a are
// dropped.
func TestSecurityGroupTCP(t *testing.T) {
	e := newEnv(t)
	e.write("vmis.yaml", sgVMIs(`["sg-tcp"]`, ""))
	e.write("sg.yaml", sgTCP)
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")

	seg := func(from, to vmRef, sport, dport uint16) frame {
		f := routed(from, to, sport, dport)
		f.TCP = true
		return f
	}
	is := func(from vmRef, sport, dport uint16, syn, ack bool) func(seen) bool {
		return func(s seen) bool {
			return s.IsTCP && s.SrcIP == from.ip && s.SPort == sport && s.DPort == dport && s.SYN == syn && s.ACK == ack
		}
	}
	send := func(from vmRef, f frame) {
		t.Helper()
		require.NoError(t, e.l.Inject(from.chassis, from.port, frameBytes(t, f)))
	}
	// handshake runs vm-b -> vm-a:80 from sport to its end.
	handshake := func(sport uint16) {
		t.Helper()
		skip := count(t, atA)
		send(vmB, seg(vmB, vmA, sport, 80))
		syn := waitFor(t, atA, fmt.Sprintf("vm-b's SYN %d to vm-a:80", sport), skip, is(vmB, sport, 80, true, false))
		skip = count(t, atB)
		synack := seg(vmA, vmB, 80, sport)
		synack.SYNACK, synack.Ack = true, syn.Seq+1
		send(vmA, synack)
		sa := waitFor(t, atB, fmt.Sprintf("vm-a's SYN-ACK %d back", sport), skip, is(vmA, 80, sport, true, true))
		skip = count(t, atA)
		ack := seg(vmB, vmA, sport, 80)
		ack.ACKOnly, ack.Ack = true, sa.Seq+1
		send(vmB, ack)
		waitFor(t, atA, fmt.Sprintf("vm-b's ACK %d", sport), skip, is(vmB, sport, 80, false, true))
	}
	handshake(7700)

	// A SYN to another port: dropped (barrier: a handshake on port 80).
	skip := count(t, atA)
	send(vmB, seg(vmB, vmA, 7701, 81))
	handshake(7702)
	requireNone(t, atA, "vm-b's SYN to vm-a:81 (no rule)", skip, is(vmB, 7701, 81, true, false))

	// A new connection from vm-a: dropped (barrier: a handshake, whose
	// SYN-ACK vm-a sends after this SYN).
	skip = count(t, atB)
	send(vmA, seg(vmA, vmB, 7703, 80))
	handshake(7704)
	requireNone(t, atB, "vm-a's new SYN to vm-b (no egress rule)", skip, is(vmA, 7703, 80, true, false))
}
