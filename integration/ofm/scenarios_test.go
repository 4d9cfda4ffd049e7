//go:build ofm

package ofm

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// The seed's scenarios, by real traffic: the remote host answers with the
// source address and port it saw, so SNAT is proven by the peer itself.

// snatOut: vm's traffic from a privileged source port (below the SNAT
// range) reaches the remote from the SNAT IP on a port in 1025-65535, and
// the answer comes back to vm (un-SNAT).
func snatOut(t *testing.T, node string, v vmSpec) {
	t.Helper()
	for _, proto := range []struct {
		name string
		send func(string, vmSpec, int) (string, error)
	}{{"TCP", tcp}, {"UDP", udp}} {
		var answer string
		require.NoError(t, sandbox.Poll(60*time.Second, v.vmi+"'s "+proto.name+" answered", func() (bool, error) {
			out, err := proto.send(node, v, 999)
			answer = out
			return err == nil && strings.TrimSpace(out) != "", nil
		}), "%s on %s: no %s answer from the remote (last: %q)", v.vmi, node, proto.name, answer)
		host, port := seenFrom(t, v, answer)
		assert.Equal(t, snatIP, host, "%s %s: the remote sees the SNAT IP", v.vmi, proto.name)
		assert.GreaterOrEqual(t, port, 1025, "%s %s: source port in the SNAT range 1025-65535 (sent from 999)", v.vmi, proto.name)
		assert.LessOrEqual(t, port, 65535)
	}
}

// isTo matches IPv4 packets between the remote and the SNAT IP.
func isToRemote(s wire.Seen) bool { return s.SrcIP == snatIP && s.DstIP == remoteIP }

// Scenario: SNAT with the port range (TCP, UDP and ping), leaving through
// the active gateway's wire only, and the answer un-SNATed to the right VM on the right
// chassis (vm-a on chassis 1, vm-b on net-b on chassis 2), never to the
// other.
func TestSNATAndUnSNATToTheRightVM(t *testing.T) {
	newEnv(t, defaults())
	wires := map[string]int{}
	for _, n := range append(cluster.Gateways(), cluster.Workers()...) {
		wires[n] = wireOf(n).mark(t)
	}
	vmBIn := capture{hv2, vmB.name}
	bMark := vmBIn.mark(t)

	snatOut(t, hv1, vmA)
	// ICMP too: the router answers for its own address, and the remote's
	// echo replies come back un-SNATed
	for _, dst := range []string{vmA.gw, remoteIP} {
		out, err := cluster.InVM(hv1, vmA.name, "ping", "-c", "2", "-W", "3", dst)
		assert.NoError(t, err, "vm-a pings %s:\n%s", dst, out)
	}
	wireOf(gw1).waitSeen(t, "vm-a's traffic SNATed", wires[gw1], isToRemote)
	got := wireOf(gw1).read(t)
	for _, s := range got[wires[gw1]:] {
		if isToRemote(s) {
			assert.Equal(t, peerMAC, s.DstMAC, "SNATed traffic goes to the peer router's MAC")
			assert.Equal(t, -1, s.VLAN, "FLAT: untagged")
		}
	}
	for _, n := range []string{gw2, hv1, hv2} {
		wireOf(n).none(t, "vm-a's SNATed traffic leaving "+n+" (not the active gateway)", wires[n], isToRemote)
	}
	vmBIn.none(t, "vm-a's answer delivered to vm-b", bMark, func(s wire.Seen) bool { return s.SrcIP == remoteIP })

	aIn := capture{hv1, vmA.name}
	aMark := aIn.mark(t)
	snatOut(t, hv2, vmB)
	aIn.none(t, "vm-b's answer delivered to vm-a", aMark, func(s wire.Seen) bool { return s.SrcIP == remoteIP })
}

// isARPReplyForSNAT matches an ARP reply (or announcement) for the SNAT IP.
func isARPForSNAT(s wire.Seen) bool { return s.ARPOp != 0 && s.ARPSPA == snatIP }

// Scenario: ARP for the SNAT IP is answered with the gateway port's MAC, by
// the active gateway only: no other node sends an ARP for it on its wire,
// though every node has the external network on br-ex.
func TestARPForSNATIPOnlyFromActiveGateway(t *testing.T) {
	newEnv(t, defaults())
	marks := map[string]int{}
	nodes := append(cluster.Gateways(), cluster.Workers()...)
	for _, n := range nodes {
		marks[n] = wireOf(n).mark(t)
	}
	out, err := cluster.InExternal("arping", "-c", "2", "-w", "10", "-I", sandbox.OFMExternalIf, snatIP)
	require.NoError(t, err, "arping %s from the external peer: %s", snatIP, out)
	mac := gatewayMAC(t)
	assert.Contains(t, strings.ToLower(out), "["+mac+"]", "answered with the router's gateway port MAC")
	reply := wireOf(gw1).waitSeen(t, "ARP reply for the SNAT IP", marks[gw1], func(s wire.Seen) bool { return s.ARPOp == 2 && s.ARPSPA == snatIP })
	assert.Equal(t, mac, reply.ARPSHA)
	for _, n := range nodes {
		if n != gw1 {
			wireOf(n).none(t, "an ARP for the SNAT IP from "+n+" (not the active gateway)", marks[n], isARPForSNAT)
		}
	}
}

// Scenario: the router's gateway changes to the other gateway node: the new
// one announces the SNAT IP by gratuitous ARP, and traffic leaves there.
func TestGatewayChangeAnnouncesAndMovesTraffic(t *testing.T) {
	in := defaults()
	e := newEnv(t, in)
	snatOut(t, hv1, vmA)

	peerMark, gw2Mark := peer.mark(t), wireOf(gw2).mark(t)
	in.gateway = gw2
	e.apply(in)
	garp := peer.waitSeen(t, "gratuitous ARP for the SNAT IP from the new gateway", peerMark, func(s wire.Seen) bool {
		return s.ARPOp != 0 && s.ARPSPA == snatIP && s.ARPTPA == snatIP
	})
	assert.Equal(t, gatewayMAC(t), garp.ARPSHA)
	wireOf(gw2).waitSeen(t, "the GARP leaving "+gw2, gw2Mark, func(s wire.Seen) bool {
		return s.ARPOp != 0 && s.ARPSPA == snatIP && s.ARPTPA == snatIP
	})

	gw1Mark := wireOf(gw1).mark(t)
	snatOut(t, hv1, vmA)
	wireOf(gw2).waitSeen(t, "vm-a's traffic SNATed on "+gw2, gw2Mark, isToRemote)
	wireOf(gw1).none(t, "vm-a's traffic on "+gw1+" after the move", gw1Mark, isToRemote)
}

// Scenario: the external network is a VLAN: the wire carries the tag both
// ways and the peer answers on its VLAN interface.
func TestVLANExternalNetwork(t *testing.T) {
	in := defaults()
	in.vlan = 100
	newEnv(t, in)
	mark := wireOf(gw1).mark(t)
	snatOut(t, hv1, vmA)
	s := wireOf(gw1).waitSeen(t, "vm-a's traffic SNATed", mark, isToRemote)
	assert.Equal(t, 100, s.VLAN, "VLAN external network: the SNATed packet carries tag 100")
}

// Scenario: an internal network detached from the router: its VMs lose the
// way out (no answer), the other network's keep it.
func TestInternalNetworkDetached(t *testing.T) {
	in := defaults()
	e := newEnv(t, in)
	snatOut(t, hv2, vmB)
	in.internal = []string{"net-a"}
	e.apply(in)
	out, err := udp(hv2, vmB, 998)
	assert.Empty(t, strings.TrimSpace(out), "vm-b on the detached net-b got an answer (err %v)", err)
	_, err = tcp(hv2, vmB, 998)
	assert.Error(t, err, "vm-b on the detached net-b connected to the remote")
	snatOut(t, hv1, vmA)
}

// Scenario: the VM moves to another chassis (its VMI's node changes, the
// interface is plugged there and unplugged where it was), with `run`
// watching the manifests: traffic and answers follow it; then the router's
// gateway is changed in the manifests and run moves it.
func TestVMMovesToAnotherChassisUnderRun(t *testing.T) {
	in := defaults()
	e := newEnv(t, in)
	e.run()
	snatOut(t, hv1, vmA)

	require.NoError(t, cluster.DelVM(hv1, vmA.name))
	in.nodes["vm-a"] = hv2
	e.writeInput(in)
	e.plug(vmA, hv2)
	require.NoError(t, cluster.WaitBound(hv2, vmA.lsp()))
	mark := capture{hv2, vmA.name}.mark(t)
	snatOut(t, hv2, vmA)
	capture{hv2, vmA.name}.waitSeen(t, "the answer delivered to vm-a on "+hv2, mark, func(s wire.Seen) bool { return s.SrcIP == remoteIP })

	// run, not a sync, moves the gateway: traffic leaves through gw2.
	in.gateway = gw2
	e.writeInput(in)
	e.gatewayOn(gw2, hv2)
	gw2Mark := wireOf(gw2).mark(t)
	snatOut(t, hv2, vmA)
	wireOf(gw2).waitSeen(t, "vm-a's traffic SNATed on "+gw2+" after run moved the gateway", gw2Mark, isToRemote)
}

// Scenario: the router is removed: its rows go, nobody answers ARP for the
// SNAT IP and VMs have no way out.
func TestRouterRemoved(t *testing.T) {
	in := defaults()
	e := newEnv(t, in)
	snatOut(t, hv1, vmA)
	in.noRouter = true
	e.apply(in)
	show, err := cluster.NBCtl("show")
	require.NoError(t, err)
	assert.NotContains(t, show, "router1")
	out, err := cluster.InExternal("arping", "-c", "2", "-w", "3", "-I", sandbox.OFMExternalIf, snatIP)
	assert.Error(t, err, "arping for the SNAT IP of a removed router was answered: %s", out)
	_, err = tcp(hv1, vmA, 997)
	assert.Error(t, err, "vm-a reached the remote through a removed router")
}

// Scenario (the primary gateway's daemons are restarted after): router1 has both
// gateways as candidates; the primary's ovs-vswitchd and ovn-controller are
// SIGKILLed. OVN's BFD moves the gateway port to the backup with no
// controller involved; new UDP flows from vm-a (one every 100 ms) get
// answers through the backup. The time from the kill to the start of the
// first flow answered is reported.
func TestGatewayKilledBFDFailover(t *testing.T) {
	newEnv(t, defaults())
	snatOut(t, hv1, vmA)
	mark := wireOf(gw2).mark(t)

	// The probe: inside vm-a, a new UDP flow every 100 ms (one datagram,
	// no retransmission, a new source port), each line of its log the
	// flow's start time and the remote's answer, if any.
	probe := `while :; do ( t=$(date +%s.%N); a=$(echo vm-a | nc -u -w 1 ` + remoteIP + ` ` + udpPort + `); echo "$t $a" ) & sleep 0.1; done`
	stopProbe, probeLog, err := cluster.Background(hv1, vmA.name, "bash", "-c", probe)
	require.NoError(t, err)
	defer stopProbe()
	require.NoError(t, sandbox.Poll(30*time.Second, "the probe answered before the kill", func() (bool, error) {
		return strings.Contains(probeLog(), "vm-a from "+snatIP), nil
	}))

	pids, err := cluster.KillChassis(gw1)
	// KillChassis returns once both are gone (it reads pidfiles first): no
	// flow started after this can pass gw1
	killed := time.Now()
	t.Cleanup(func() {
		assert.NoError(t, cluster.RestartChassis(gw1), "restarting %s", gw1)
		if slices.Contains(cluster.FlowRestoreWaitCleared(), gw1) {
			reportf(t, "%s's killed ovn-controller left other_config:flow-restore-wait=true (OVN 621f85e92, in 24.03.8, 25.03.3, 25.09.3, 26.03.1): cleared before the restart, as 26.03.2 does itself; without that, its ovs-vswitchd forwards nothing and its ovn-controller never reaches the SB", gw1)
		}
	})
	require.NoError(t, err)
	for _, p := range pids {
		require.False(t, sandbox.Alive(p), "pid %d of %s runs", p, gw1)
	}
	// the outage: from the kill to the start of the first flow started
	// after it that was answered
	var first time.Time
	var lost int
	require.NoError(t, sandbox.Poll(120*time.Second, "a probe answered through "+gw2, func() (bool, error) {
		lost = 0
		for _, line := range strings.Split(probeLog(), "\n") {
			ts, answer, _ := strings.Cut(line, " ")
			sec, err := strconv.ParseFloat(ts, 64)
			if err != nil {
				continue
			}
			at := time.Unix(0, int64(sec*1e9))
			if !at.After(killed) {
				continue
			}
			if !strings.HasPrefix(answer, "vm-a from "+snatIP+":") {
				lost++
				continue
			}
			first = at
			return true, nil
		}
		return false, nil
	}))
	wireOf(gw2).waitSeen(t, "vm-a's traffic SNATed on the backup", mark, isToRemote)
	reportf(t, "ovn-fake-multinode: gateway %s killed; the first new UDP flow answered through %s started %s after the kill (%d flows lost, one every 100 ms)",
		gw1, gw2, first.Sub(killed).Round(10*time.Millisecond), lost)
	bound, err := cluster.SBCtl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+crPort)
	require.NoError(t, err)
	name, err := cluster.SBCtl("--bare", "--columns=name", "list", "Chassis", strings.TrimSpace(bound))
	require.NoError(t, err)
	assert.Equal(t, gw2, strings.TrimSpace(name))
}

// Scenario: vm-a live-migrates from chassis 1 to chassis 2 under `run`
// (which follows the SB's activation), with real kernel stacks: its
// target, a namespace with the same MAC and address plugged on chassis 2
// with the same iface-id before the migration (as KubeVirt's target pod),
// binds nothing before it and receives nothing while the migration runs;
// at the switch vm-a's source goes down, the target comes up and sends
// the RARP QEMU sends when the guest resumes there. vm-b pings vm-a every
// 10 ms throughout (through router1, from chassis 2); the replies lost and
// the longest gap are reported, and the replies come back after the
// switch.
func TestLiveMigrationKernelStacks(t *testing.T) {
	in := defaults()
	e := newEnv(t, in)
	e.run()
	const target = "vmat"
	require.NoError(t, cluster.AddVM(hv2, sandbox.VM{Name: target, IfaceID: vmA.lsp(), MAC: vmA.mac, CIDR: vmA.ip + "/24", Gateway: vmA.gw}))
	t.Cleanup(func() { _ = cluster.DelVM(hv2, target) })
	require.NoError(t, cluster.WaitBound(hv1, vmA.lsp()))
	at := capture{hv2, target}
	mark := at.mark(t)
	echo := func(s wire.Seen) bool { return s.DstIP == vmA.ip && s.SrcIP == vmB.ip }

	stopPing, pings, err := cluster.Background(hv2, vmB.name, "ping", "-D", "-i", "0.01", vmA.ip)
	require.NoError(t, err)
	defer stopPing()
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-b's pings answered", func() (bool, error) {
		return strings.Count(pings(), "bytes from") >= 20, nil
	}))
	at.none(t, "vm-b's pings at vm-a's target before the migration", mark, echo)

	// The migration runs: both chassis, the target blocked.
	in.migration = map[string]string{"vm-a": "    sourceNode: " + hv1 + "\n    targetNode: " + hv2 + "\n    migrationUid: ofm-1\n"}
	e.writeInput(in)
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-a bound on chassis 2 as additional chassis", func() (bool, error) {
		out, err := cluster.SBCtl("--bare", "--columns=additional_chassis", "find", "Port_Binding", "logical_port="+vmA.lsp())
		if err != nil || strings.TrimSpace(out) == "" {
			return false, err
		}
		name, err := cluster.SBCtl("--bare", "--columns=name", "list", "Chassis", strings.TrimSpace(out))
		return strings.TrimSpace(name) == hv2, err
	}))
	_, err = cluster.NBCtl("--wait=hv", "sync")
	require.NoError(t, err)
	// OVN blocks the target once its claim is in the SB, not at the claim:
	// an echo request sent before every chassis caught up may reach it
	// (and tcpdump may write it late). None sent after may.
	mark = at.mark(t)
	claimed := lastSeq(pings()) + 3
	before := strings.Count(pings(), "bytes from")
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-b's pings answered during the migration", func() (bool, error) {
		return strings.Count(pings(), "bytes from") >= before+20, nil
	}))
	at.none(t, "vm-b's pings at vm-a's target while the migration runs", mark, func(s wire.Seen) bool {
		return echo(s) && int(s.DPort) > claimed
	})

	// The switch: the source stops, the target resumes and announces.
	_, err = cluster.InVM(hv1, vmA.name, "ip", "link", "set", sandbox.VMIf, "down")
	require.NoError(t, err)
	rarp, err := wire.RARP(vmA.mac).Bytes()
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, cluster.Inject(hv2, target, rarp))
	}
	require.NoError(t, sandbox.Poll(60*time.Second, "run collapses vm-a's port onto chassis 2", func() (bool, error) {
		out, err := cluster.NBCtl("--bare", "--columns=options", "find", "Logical_Switch_Port", "name="+vmA.lsp())
		return strings.TrimSpace(out) == "requested-chassis="+hv2, err
	}))
	in.nodes["vm-a"] = hv2
	in.migration = map[string]string{"vm-a": "    sourceNode: " + hv1 + "\n    targetNode: " + hv2 + "\n    migrationUid: ofm-1\n    completed: true\n"}
	e.writeInput(in)
	mark = at.mark(t)
	after := strings.Count(pings(), "bytes from")
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-b's pings answered by vm-a on chassis 2", func() (bool, error) {
		return strings.Count(pings(), "bytes from") >= after+50, nil
	}))
	at.waitSeen(t, "vm-b's pings at vm-a on chassis 2", mark, echo)
	stopPing()
	sent, lost, gap := pingReport(pings())
	reportf(t, "ofm (kernel stacks, OVS userspace datapath), run: vm-a's live migration from chassis 1 to 2 under vm-b's ping every 10 ms: %d sent, %d lost, the longest gap %s", sent, lost, gap)
	_, err = cluster.InVM(hv1, vmA.name, "ip", "link", "set", sandbox.VMIf, "up")
	require.NoError(t, err)
}

// lastSeq is the sequence number of the last answer in `ping` output, 0
// for none.
func lastSeq(out string) int {
	i := strings.LastIndex(out, "icmp_seq=")
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(strings.Fields(out[i+len("icmp_seq="):])[0])
	return n
}

// pingReport reads `ping -D` output: the echo requests answered up to
// the last answer, those not answered, and the longest time between two
// answers.
func pingReport(out string) (sent, lost int, gap time.Duration) {
	var seqs []int
	var stamps []float64
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "icmp_seq=")
		if i < 0 || !strings.HasPrefix(line, "[") || strings.Contains(line, "DUP!") {
			continue
		}
		ts, err := strconv.ParseFloat(strings.TrimSuffix(strings.Fields(line)[0][1:], "]"), 64)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.Fields(line[i+len("icmp_seq="):])[0])
		if err != nil {
			continue
		}
		seqs, stamps = append(seqs, n), append(stamps, ts)
	}
	if len(seqs) == 0 {
		return 0, 0, 0
	}
	sent = seqs[len(seqs)-1] - seqs[0] + 1
	lost = sent - len(seqs)
	for i := 1; i < len(stamps); i++ {
		if d := time.Duration((stamps[i] - stamps[i-1]) * float64(time.Second)); d > gap {
			gap = d
		}
	}
	return sent, lost, gap.Round(time.Millisecond)
}

// run starts `kubevirt-ovn run` on e's manifests until the test ends; its
// log is printed when the test failed.
func (e *env) run() {
	e.t.Helper()
	stop, logs, err := cluster.Background("", "", bin, "run", "--nb", cluster.NBEndpoint(), "--sb", cluster.SBEndpoint(),
		"--from-file", e.dir, "--http-addr", "", "--file-poll", "200ms")
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		stop()
		if e.t.Failed() {
			e.t.Logf("kubevirt-ovn run:\n%s", logs())
		}
	})
}
