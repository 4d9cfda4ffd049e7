package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/trace"
)

// kubevirt-ovn trace (issue 34) on a real OVN: each path's explanation is
// asserted, and the packets the sandbox's datapath carries (or drops) show
// that the explanation is what OVN does.

// tracePath runs kubevirt-ovn trace -o json with the databases flags dbs
// and the sandbox's ovn-trace, and returns the path it prints.
func tracePath(t *testing.T, dbs []string, args ...string) trace.Path {
	t.Helper()
	bin, err := sandbox.ToolScript(t.TempDir(), "ovn-trace")
	require.NoError(t, err)
	all := append(append([]string{"trace", "-o", "json", "--ovn-trace", bin}, dbs...), args...)
	r := kubevirtOVN(t, all...)
	require.Equal(t, 0, r.code, "kubevirt-ovn trace failed:\n%s", r.stderr)
	var p trace.Path
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
	return p
}

func (e *env) trace(args ...string) trace.Path {
	e.t.Helper()
	return tracePath(e.t, []string{"--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint()}, args...)
}

// hop is p's first hop of kind, failing the test when it has none.
func hop(t *testing.T, p trace.Path, kind string) trace.Hop {
	t.Helper()
	for _, h := range p.Hops {
		if h.Kind == kind {
			return h
		}
	}
	require.Failf(t, "no hop of kind "+kind, "path: %s", pathText(p))
	return trace.Hop{}
}

func pathText(p trace.Path) string { return p.Text() }

// TestTraceSNATAndFloatingIP: vm-a's packet to a remote host is routed by
// router1's default route, leaves by its gateway port on gw1 (active),
// SNATed to router1's SNAT IP, out of the external network; and so it
// leaves gw1's wire. A packet from outside to vm-b's floating IP is
// DNATed to vm-b and delivered to it on hv2; and so it arrives.
func TestTraceSNATAndFloatingIP(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmBIP, "vm-b"))
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	p := e.trace("--from", "default/vm-a", "--to", remoteIP, "--protocol", "udp", "--port", "53")
	t.Log(p.Text())
	assert.Equal(t, trace.Left, p.Verdict.Result)
	assert.Equal(t, "gw1", p.Verdict.Chassis)
	assert.Contains(t, p.Verdict.Detail, "physnet1")
	assert.Contains(t, p.Verdict.Detail, snatIP+":")
	assert.Equal(t, map[string]string{"router": "router1", "prefix": "0.0.0.0/0", "nexthop": peerIP}, hop(t, p, trace.HopRoute).Refs)
	gw := hop(t, p, trace.HopGateway)
	assert.Equal(t, "gw1", gw.Refs["activeChassis"])
	assert.Equal(t, "gw1,gw2", gw.Refs["gatewayChassis"])
	assert.Contains(t, gw.Detail, "active on gw1 now")
	assert.Equal(t, map[string]string{"router": "router1", "snatIP": snatIP, "logicalIP": "10.10.0.0/24"}, hop(t, p, trace.HopNAT).Refs)
	skip := count(t, e.wire("gw1"))
	e.send(vmA.chassis, vmA.port, vmAMAC, vmAIP, 40000, 53)
	waitFor(t, e.wire("gw1"), "vm-a's packet SNATed on gw1's wire", skip, snated(53))

	p = e.trace("--from", remoteIP, "--to", "fip:default/vm-b", "--protocol", "udp", "--port", "8080")
	t.Log(p.Text())
	assert.Equal(t, "floating IP fip-web (172.16.0.150)", p.To)
	assert.Equal(t, trace.Delivered, p.Verdict.Result)
	assert.Equal(t, "hv2", p.Verdict.Chassis)
	assert.Contains(t, p.Verdict.Detail, "VM default/vm-b eth1")
	assert.Contains(t, p.Verdict.Detail, "> "+vmBIP+":8080")
	fip := hop(t, p, trace.HopFloatingIP)
	assert.Equal(t, map[string]string{"floatingIP": "fip-web", "router": "router1", "externalIP": fipIP, "logicalIP": vmBIP}, fip.Refs)
	assert.Contains(t, fip.Detail, "DNATed to VM default/vm-b eth1")
	e.dnatToVM("gw1", vmB, vmA, 33000, 8080)
}

// TestTraceLoadBalancer: vm-b's packet to load balancer web's VIP goes to
// the member asked for (each of them in turn), named with its VM, and
// lands there; from outside, the load balancer's floating IP leads to a
// member too. vm-b's own flow lands on a member the trace lists.
func TestTraceLoadBalancer(t *testing.T) {
	e := newEnv(t)
	e.withLB(lbManifests)

	vip := fmt.Sprintf("%s:%d", lbVIP, lbPort)
	for _, m := range []vmRef{vmA, vmLBC} {
		member := fmt.Sprintf("%s:%d", m.ip, lbPort)
		p := e.trace("--from", "default/vm-b", "--to", "lb:web", "--member", m.ip)
		t.Log(p.Text())
		assert.Equal(t, "udp "+vmBIP+":40000 > "+vip, p.Packet, "the load balancer's protocol and port")
		lb := hop(t, p, trace.HopLoadBalancer)
		assert.Equal(t, map[string]string{"loadBalancer": "web", "vip": vip, "member": member}, lb.Refs)
		assert.Contains(t, lb.Detail, "member VM default/"+m.port+" eth1 ("+member+")")
		assert.Equal(t, trace.Delivered, p.Verdict.Result)
		assert.Equal(t, m.chassis, p.Verdict.Chassis)
		assert.Contains(t, p.Verdict.Detail, "VM default/"+m.port+" eth1")
	}
	p := e.trace("--from", remoteIP, "--to", "lb:web")
	t.Log(p.Text())
	assert.Equal(t, "floating IP fip-web (172.16.0.160) of load balancer web", p.To)
	assert.Equal(t, map[string]string{"loadBalancer": "web", "vip": fmt.Sprintf("%s:%d", lbFIP, lbPort), "member": fmt.Sprintf("%s:%d", vmAIP, lbPort)},
		hop(t, p, trace.HopLoadBalancer).Refs, "the first member in rotation")
	assert.Equal(t, trace.Delivered, p.Verdict.Result)

	members := []vmRef{vmA, vmLBC}
	sk := skips(t, e, members)
	require.NoError(t, e.l.Inject(vmB.chassis, vmB.port, frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: lbVIP, TTL: 64, SPort: 40000, DPort: lbPort})))
	landing(t, e, members, sk, "vm-b's flow to the VIP", func(s seen) bool { return s.IsUDP && s.SrcIP == vmBIP && s.SPort == 40000 && s.DPort == lbPort })
}

// TestTraceSecurityGroup: vm-a in sg-web (UDP 80 in): vm-b's UDP to port
// 80 is allowed by rule web-in and arrives; to port 81 it is dropped by
// sg-web's base ingress drop, and does not arrive; vm-a's own new flow out
// is dropped by the base egress drop.
func TestTraceSecurityGroup(t *testing.T) {
	e := newEnv(t)
	e.write("vmis.yaml", sgVMIs(`["sg-web"]`, ""))
	e.write("sg.yaml", sgWeb(80))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	e.neighbour()
	atA := e.vm("hv1", "vm-a")

	p := e.trace("--from", "default/vm-b", "--to", "default/vm-a", "--protocol", "udp", "--port", "80")
	t.Log(p.Text())
	assert.Equal(t, trace.Delivered, p.Verdict.Result)
	sg := hop(t, p, trace.HopSecurityGroup)
	assert.Equal(t, map[string]string{"securityGroup": "sg-web", "rule": "rule/web-in", "action": "allow-related"}, sg.Refs)
	assert.Contains(t, sg.Detail, "rule web-in allows it, ingress (to the VM)")
	flowPasses(t, e, vmB, vmA, atA, 5000, 80, "vm-b's UDP to port 80")

	p = e.trace("--from", "default/vm-b", "--to", "default/vm-a", "--protocol", "udp", "--port", "81")
	t.Log(p.Text())
	assert.Equal(t, trace.Dropped, p.Verdict.Result)
	assert.Contains(t, p.Verdict.Detail, "security group sg-web: base rule drop-ingress drops it")
	assert.Equal(t, "base/drop-ingress", hop(t, p, trace.HopSecurityGroup).Refs["rule"])
	flowBlocked(t, e, vmB, vmA, atA, 5001, 81, "vm-b's UDP to port 81", func() { flowPasses(t, e, vmB, vmA, atA, 5002, 80, "the barrier") })

	p = e.trace("--from", "default/vm-a", "--to", remoteIP, "--protocol", "udp", "--port", "53")
	t.Log(p.Text())
	assert.Equal(t, trace.Dropped, p.Verdict.Result)
	assert.Contains(t, p.Verdict.Detail, "security group sg-web: base rule drop-egress drops it, egress (from the VM)")
}

// TestTraceUnreachable: router1 without its external network has no
// route off its networks: the trace says so, and vm-a's packet leaves no
// gateway. A VM on a network without a router reaches nothing off it.
func TestTraceUnreachable(t *testing.T) {
	e := newEnv(t)
	e.write("router.yaml", `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: router1}
spec: {name: router1, mac: "fa:16:3e:00:00:01", internal: [net-a, net-b]}
`)
	e.sync()
	for _, p := range []string{vmAPort, vmBPort} {
		nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", p, "up=true")
	}
	p := e.trace("--from", "default/vm-a", "--to", remoteIP, "--protocol", "udp", "--port", "53")
	t.Log(p.Text())
	assert.Equal(t, trace.Unreachable, p.Verdict.Result)
	assert.Equal(t, "router router1 has no route to "+remoteIP, p.Verdict.Detail)
	skip := count(t, e.wire("gw1"))
	e.send(vmA.chassis, vmA.port, vmAMAC, vmAIP, 40001, 53)
	// vm-b still gets vm-a's routed packets: the barrier.
	flowPasses(t, e, vmA, vmB, e.vm("hv2", "vm-b"), 5003, 53, "vm-a's UDP to vm-b")
	requireNone(t, e.wire("gw1"), "vm-a's packet to the remote host", skip, flow(53))

	e.write("router.yaml", "")
	e.sync()
	p = e.trace("--from", "default/vm-a", "--to", remoteIP)
	assert.Equal(t, trace.Unreachable, p.Verdict.Result)
	assert.Equal(t, "network net-a has no router, and no port on it has "+remoteIP, p.Verdict.Detail)
	assert.Empty(t, p.Traces, "nothing for ovn-trace to run")
}

// TestZonesTrace: in interconnect mode vm-a's packet to a remote host
// starts in zone hv1, tunnels to zone gw1 (router1's) and leaves gw1's
// wire SNATed; and a packet from outside to vm-b's floating IP goes the
// other way, from gw1 into zone hv2. The packets do the same.
func TestZonesTrace(t *testing.T) {
	e := newZoneEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmBIP, "vm-b"))
	e.sync()
	e.ready("gw1")
	dbs := e.z.ZoneFlags()

	p := tracePath(t, dbs, "--from", "default/vm-a", "--to", remoteIP, "--protocol", "udp", "--port", "53")
	t.Log(p.Text())
	require.Len(t, p.Traces, 2, "one ovn-trace run per zone")
	assert.Equal(t, "hv1", p.Traces[0].Zone)
	assert.Equal(t, "gw1", p.Traces[1].Zone)
	assert.Equal(t, trace.Left, p.Verdict.Result)
	assert.Equal(t, "gw1", p.Verdict.Chassis)
	z := hop(t, p, trace.HopZone)
	assert.Equal(t, "zone gw1", z.Object)
	assert.Contains(t, z.Detail, "router router1")
	nat := hop(t, p, trace.HopNAT)
	assert.Equal(t, "gw1", nat.Zone)
	assert.Equal(t, snatIP, nat.Refs["snatIP"])
	assert.Equal(t, "gw1", hop(t, p, trace.HopGateway).Refs["activeChassis"])
	skip := count(t, e.wire("gw1"))
	e.send(vmA.chassis, vmA.port, vmAMAC, vmAIP, 40000, 53)
	waitFor(t, e.wire("gw1"), "vm-a's packet SNATed on gw1's wire", skip, snated(53))

	p = tracePath(t, dbs, "--from", remoteIP, "--to", "fip:fip-web", "--protocol", "udp", "--port", "8080")
	t.Log(p.Text())
	require.Len(t, p.Traces, 2)
	assert.Equal(t, []string{"gw1", "hv2"}, []string{p.Traces[0].Zone, p.Traces[1].Zone})
	assert.Equal(t, trace.Delivered, p.Verdict.Result)
	assert.Equal(t, "hv2", p.Verdict.Chassis)
	assert.Equal(t, vmBIP, hop(t, p, trace.HopFloatingIP).Refs["logicalIP"])
	e.dnatToVM("gw1", vmB, vmA, 33000, 8080)

	// A node's sockets reach its own zone only. With hv1's alone the
	// trace ends where the packet leaves hv1, naming the chassis; with
	// gw1's alone it starts where vm-a's packets come into gw1.
	zone := func(name string) []string {
		for i := 0; i+1 < len(dbs); i += 2 {
			if strings.HasPrefix(dbs[i+1], name+"=") {
				return dbs[i : i+2]
			}
		}
		require.FailNow(t, "no zone "+name)
		return nil
	}
	p = tracePath(t, zone("hv1"), "--from", "default/vm-a", "--to", remoteIP)
	assert.Equal(t, trace.Continues, p.Verdict.Result)
	assert.Equal(t, "gw1", p.Verdict.Chassis)
	assert.Contains(t, p.Verdict.Detail, "router router1 on chassis gw1, in a zone this trace was not given")
	p = tracePath(t, zone("gw1"), "--from", "default/vm-a", "--to", remoteIP)
	t.Log(p.Text())
	assert.Equal(t, "VM default/vm-a eth1 is on chassis hv1, in a zone this trace was not given: traced from where its packets come into zone gw1", p.Hops[0].Detail)
	assert.Equal(t, trace.Left, p.Verdict.Result)
	assert.Equal(t, snatIP, hop(t, p, trace.HopNAT).Refs["snatIP"])
}
