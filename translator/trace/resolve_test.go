package trace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// testZone is one NB with net-a (vm-a, vm-x's eth1, router1's port),
// net-b (vm-x's eth2) and load balancer web on net-a.
func testZone() *Zone {
	ids := func(kind translator.OwnerKind, owner string, kv ...string) map[string]string {
		m := translator.OwnerIDs(translator.DefaultInstance, translator.Unit{Kind: kind, Name: owner})
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	vm := func(uuid, network, vmi, iface, addr string) *nbmodel.LogicalSwitchPort {
		ns, name := "default", vmi
		return &nbmodel.LogicalSwitchPort{UUID: uuid, Name: translator.VMPortName(network, ns, name, iface), Addresses: []string{addr},
			ExternalIDs: ids(translator.KindNetwork, network, translator.KeyVMI, ns+"/"+name)}
	}
	proto := "udp"
	return &Zone{
		Rows: Rows{
			Switches: []*nbmodel.LogicalSwitch{
				{UUID: "s1", Name: "kv-net-a", Ports: []string{"p1", "p2", "p3"}, ExternalIDs: ids(translator.KindNetwork, "net-a")},
				{UUID: "s2", Name: "kv-net-b", Ports: []string{"p4"}, ExternalIDs: ids(translator.KindNetwork, "net-b")},
			},
			SwitchPorts: []*nbmodel.LogicalSwitchPort{
				vm("p1", "net-a", "vm-a", "eth1", "50:54:00:00:00:05 10.10.0.5"),
				vm("p2", "net-a", "vm-x", "eth1", "50:54:00:00:00:09 10.10.0.9 fd00:10::9"),
				{UUID: "p3", Name: "kv-stor-net-a_router1", Type: "router", Options: map[string]string{"router-port": "kv-rtos-router1_net-a"}, ExternalIDs: ids(translator.KindRouter, "router1")},
				vm("p4", "net-b", "vm-x", "eth2", "50:54:00:00:00:0a 10.20.0.9"),
			},
			Routers:     []*nbmodel.LogicalRouter{{UUID: "r1", Name: "kv-router1", Ports: []string{"rp1"}, ExternalIDs: ids(translator.KindRouter, "router1")}},
			RouterPorts: []*nbmodel.LogicalRouterPort{{UUID: "rp1", Name: "kv-rtos-router1_net-a", MAC: "fa:16:3e:00:00:01", Networks: []string{"10.10.0.1/24"}}},
			LoadBalancers: []*nbmodel.LoadBalancer{{UUID: "lb1", Name: "kv-lb-web_udp_switch", Protocol: &proto,
				Vips:        map[string]string{"10.10.0.100:8080": "10.10.0.5:8080,10.10.0.9:8080"},
				ExternalIDs: ids(translator.KindNetwork, "net-a", translator.KeyLoadBalancer, "web")}},
		},
		Bound:   map[string]string{"kv-net-a_default_vm-a_eth1": "hv1"},
		Offline: map[string]bool{"10.10.0.5:8080": true},
	}
}

// fakeRunner answers every trace with a delivery to out, and records what
// it was asked.
type fakeRunner struct {
	datapath, microflow, lbDst string
	out                        string
}

func (f *fakeRunner) Trace(_ context.Context, _, datapath, microflow, lbDst string) (string, error) {
	f.datapath, f.microflow, f.lbDst = datapath, microflow, lbDst
	return `ingress(dp="kv-net-a", inport="x")
-----------------------------------
 0. ls_in_check_port_sec: 1, priority 50, uuid 99dbf978
    next;

egress(dp="kv-net-a", inport="x", outport="` + f.out + `")
-----------------------------------
 9. ls_out_apply_port_sec: 1, priority 0, uuid 175b495d
    output;
    /* output to "` + f.out + `", type "" */
`, nil
}

func (f *fakeRunner) StageHints(context.Context, string, []Event) (map[string]string, error) {
	return map[string]string{}, nil
}

// The microflow of a VM's packet: to a VM of its network, its MAC; to a
// load balancer, the router's MAC, the VIP's protocol and port, and the
// first member in rotation (vm-a's fails its health check).
func TestTraceMicroflow(t *testing.T) {
	r := &fakeRunner{out: "kv-net-a_default_vm-a_eth1"}
	p, err := Trace(context.Background(), []*Zone{testZone()}, Request{From: "default/vm-x/eth1", To: "default/vm-a", Protocol: "tcp", Port: 22}, r)
	require.NoError(t, err)
	assert.Equal(t, "kv-net-a", r.datapath)
	assert.Equal(t, `inport == "kv-net-a_default_vm-x_eth1" && eth.src == 50:54:00:00:00:09 && eth.dst == 50:54:00:00:00:05 && ip4.src == 10.10.0.9 && ip4.dst == 10.10.0.5 && ip.ttl == 64 && tcp && tcp.src == 40000 && tcp.dst == 22`, r.microflow)
	assert.Equal(t, Verdict{Result: Delivered, Chassis: "hv1", Detail: "delivered to VM default/vm-a eth1 on hv1, as tcp 10.10.0.9:40000 > 10.10.0.5:22"}, p.Verdict)
	assert.Equal(t, "VM default/vm-x eth1", p.From)
	assert.Equal(t, Hop{Kind: HopSwitch, Object: "network net-a", Detail: "port x → VM default/vm-a eth1", Refs: map[string]string{"network": "net-a"}}, p.Hops[0])

	// An IPv6 destination: the VM's IPv6 address, ICMPv6 echo.
	_, err = Trace(context.Background(), []*Zone{testZone()}, Request{From: "default/vm-x/eth1", To: "2001:db8::7"}, r)
	require.NoError(t, err)
	assert.Equal(t, `inport == "kv-net-a_default_vm-x_eth1" && eth.src == 50:54:00:00:00:09 && eth.dst == fa:16:3e:00:00:01 && ip6.src == fd00:10::9 && ip6.dst == 2001:db8::7 && ip.ttl == 64 && icmp6 && icmp6.type == 128 && icmp6.code == 0`, r.microflow)

	_, err = Trace(context.Background(), []*Zone{testZone()}, Request{From: "default/vm-x/eth1", To: "lb:web"}, r)
	require.NoError(t, err)
	assert.Equal(t, `inport == "kv-net-a_default_vm-x_eth1" && eth.src == 50:54:00:00:00:09 && eth.dst == fa:16:3e:00:00:01 && ip4.src == 10.10.0.9 && ip4.dst == 10.10.0.100 && ip.ttl == 64 && udp && udp.src == 40000 && udp.dst == 8080`, r.microflow)
	assert.Equal(t, "10.10.0.9:8080", r.lbDst)

	p, err = Trace(context.Background(), []*Zone{testZone()}, Request{From: "default/vm-x/eth2", To: "198.51.100.7"}, r)
	require.NoError(t, err)
	assert.Equal(t, Verdict{Result: Unreachable, Detail: "network net-b has no router, and no port on it has 198.51.100.7"}, p.Verdict)
	assert.Empty(t, p.Traces)
}

const notInNB = " (a VirtualMachineInstance with an interface on a network of ours, with its MAC and address)"

// Bad requests are errors naming the flag and what is wrong, before any
// trace runs.
func TestTraceBadRequests(t *testing.T) {
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{From: "vm-a", To: "10.10.0.9"}, `--from: "vm-a" is no VM interface: namespace/name[/interface]`},
		{Request{From: "default/vm-z", To: "10.10.0.9"}, "--from: no port of VM default/vm-z is in the NB" + notInNB},
		{Request{From: "default/vm-x", To: "198.51.100.7"}, "--from: VM default/vm-x has interfaces eth1 (net-a), eth2 (net-b): name one (default/vm-x/eth1)"},
		{Request{From: "default/vm-a", To: "default/vm-q"}, "--to: no port of VM default/vm-q is in the NB" + notInNB},
		{Request{From: "default/vm-a", To: "lb:web", Member: "10.10.0.7"}, "--member 10.10.0.7 is no member of load balancer web's VIP 10.10.0.100 on 10.10.0.100:8080 (members: 10.10.0.5:8080, 10.10.0.9:8080)"},
		{Request{From: "default/vm-a", To: "lb:api"}, "--to: no load balancer api is in the NB"},
		{Request{From: "default/vm-a", To: "fip:fip-web"}, "--to: no floating IP fip-web is in the NB"},
		{Request{From: "default/vm-a", To: "10.10.0.9", Port: 80}, "--port: icmp has no ports"},
		{Request{From: "default/vm-a", To: "10.10.0.9", Protocol: "tcp"}, "--port: tcp needs a destination port (1-65535)"},
		{Request{From: "default/vm-a", To: "10.10.0.9", Protocol: "sctp", Port: 1}, `--protocol "sctp": tcp, udp or icmp`},
		{Request{From: "default/vm-a", To: "2001:db8::1"}, "VM default/vm-a eth1 has no IPv6 address, and 2001:db8::1 is IPv6"},
		{Request{From: "198.51.100.7", To: "default/vm-a"}, "from outside, a packet reaches a router's SNAT IP, a floating IP or a load balancer's floating IP; VM default/vm-a eth1 (10.10.0.5) is none of them"},
	} {
		r := &fakeRunner{}
		_, err := Trace(context.Background(), []*Zone{testZone()}, c.req, r)
		assert.EqualError(t, err, c.want, "%+v", c.req)
		assert.Empty(t, r.microflow, "%+v: nothing traced", c.req)
	}
}
