package translator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// siblingRows are the names and VIPs of network n's rows for the load
// balancers of its sibling networks.
func siblingRows(t *testing.T, in *Input, n string) map[string]map[string]string {
	t.Helper()
	up := in.Plan(Unit{KindNetwork, n}, testInstance, nil)
	require.NotNil(t, up.Network)
	out := map[string]map[string]string{}
	for _, lb := range up.Network.LoadBalancers {
		if lb.ExternalIDs[KeyOwner] != n {
			t.Errorf("%s: owned by %s, not %s", lb.Name, lb.ExternalIDs[KeyOwner], n)
		}
		out[lb.Name] = lb.Vips
	}
	return out
}

// TestSiblingLoadBalancers: net-b, r1's other internal network, has a row
// of its own for web (on net-a) with the same VIP and members, which its
// switch refers to; net-c (r2's) has none. A member's VM, the load
// balancer and r1's internal networks reach net-b's unit, and the
// incremental plan equals the whole one.
func TestSiblingLoadBalancers(t *testing.T) {
	s := lbSnapshot()
	in := NewInputFrom(s)
	both := map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80"}
	assert.Equal(t, map[string]map[string]string{"kv-lb-web_tcp_from_net-b": both}, siblingRows(t, in, "net-b"))
	assert.Equal(t, map[string]map[string]string{"kv-lb-web_tcp_switch": both}, siblingRows(t, in, "net-a"))
	assert.Empty(t, siblingRows(t, in, "net-c"))
	np := in.Plan(Unit{KindNetwork, "net-b"}, testInstance, nil).Network
	assert.Equal(t, []Ref{{Column: "load_balancer", Key: "kv-lb-web_tcp_from_net-b"}}, np.Rows()[0].Refs)

	netB, netC := Unit{KindNetwork, "net-b"}, Unit{KindNetwork, "net-c"}
	// A member's VM goes: net-b's row follows.
	var vms []VMInterface
	for _, v := range s.VMs {
		if v.IP != "10.10.0.6" {
			vms = append(vms, v)
		}
	}
	lb := webLB()
	lb.Members = []string{"10.10.0.5"}
	objs := Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms, FloatingIPs: s.FloatingIPs, LoadBalancers: []LoadBalancer{lb}}
	assert.Contains(t, in.Set("snapshot", objs), netB, "the load balancer and a member's VM changed")
	assert.Equal(t, map[string]map[string]string{"kv-lb-web_tcp_from_net-b": {"10.10.0.100:80": "10.10.0.5:80"}}, siblingRows(t, in, "net-b"))

	// r1 takes net-c too: net-c gets a row, r1's networks are affected.
	routers := append([]Router(nil), objs.Routers...)
	for i := range routers {
		switch routers[i].Name {
		case "r1":
			routers[i].Internal = []string{"net-a", "net-b", "net-c"}
		case "r2":
			routers[i].Internal = nil
		}
	}
	objs.Routers = routers
	affected := in.Set("snapshot", objs)
	assert.Contains(t, affected, netB)
	assert.Contains(t, affected, netC)
	assert.Equal(t, map[string]map[string]string{"kv-lb-web_tcp_from_net-c": {"10.10.0.100:80": "10.10.0.5:80"}}, siblingRows(t, in, "net-c"))

	whole := NewInputFrom(&Snapshot{Routers: routers, Networks: s.Networks, VMs: vms, FloatingIPs: s.FloatingIPs, LoadBalancers: []LoadBalancer{lb}, Chassis: s.Chassis, ChassisKnown: s.ChassisKnown})
	for _, u := range []Unit{netB, netC} {
		assert.Equal(t, whole.Plan(u, testInstance, nil).Network.LoadBalancers, in.Plan(u, testInstance, nil).Network.LoadBalancers, u.Name)
	}

	// The load balancer goes: the rows go.
	objs.LoadBalancers = nil
	affected = in.Set("snapshot", objs)
	assert.Contains(t, affected, netB)
	assert.Contains(t, affected, netC)
	assert.Empty(t, siblingRows(t, in, "net-b"))
	assert.Empty(t, siblingRows(t, in, "net-c"))
}
