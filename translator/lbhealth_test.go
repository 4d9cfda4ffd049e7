package translator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// zoneLBRow is the row named name in zone's rows of up, nil for none.
func zoneLBRow(zr *ZoneRows, name string) *nbmodel.LoadBalancer {
	if zr == nil {
		return nil
	}
	for _, r := range zr.Rows {
		if lb, ok := r.Model.(*nbmodel.LoadBalancer); ok && lb.Name == name {
			return lb
		}
	}
	return nil
}

// TestZoneOfflineMembers: a member its own zone's health check finds
// offline (vm-a2, 10.10.0.6, zone hv2) is left out of the VIP in every
// other zone's rows, the router's (home zone gw1, floating IP keys too)
// and the switch's; its own zone's rows keep it (OVN takes it out there
// and keeps probing it). Only the load balancers with that member are
// re-planned; a status from a zone that is not the port's is ignored
// (stale); when the zone says it is online again it is back everywhere;
// with every member offline the VIP has no backends, rejecting with
// --lb-reject-empty.
func TestZoneOfflineMembers(t *testing.T) {
	s := lbSnapshot()
	s.Chassis = zoneChassis()
	s.ChassisKnown = true
	lb := webLB()
	lb.HealthCheck = &LBHealthCheck{SourceIP: "10.10.0.250"}
	s.LoadBalancers = []LoadBalancer{lb}
	in := NewInputFrom(s)
	require.True(t, in.Zoned())

	const vip, both, only5 = "10.10.0.100:80", "10.10.0.5:80,10.10.0.6:80", "10.10.0.5:80"
	a2 := OfflineMember{Port: VMPortName("net-a", "default", "vm-a2", "eth1"), IP: "10.10.0.6", Protocol: "tcp", PortNum: 80}
	a := OfflineMember{Port: VMPortName("net-a", "default", "vm-a", "eth1"), IP: "10.10.0.5", Protocol: "tcp", PortNum: 80}
	// net-b, r1's other internal network, has rows for the load balancer
	// too (kv-lb-web_tcp_from_net-b, in central mode).
	affected := []Unit{{KindNetwork, "net-a"}, {KindNetwork, "net-b"}, {KindRouter, "r1"}}

	type want struct{ router, gw1, hv1, hv2 string }
	check := func(w want, msg string) {
		t.Helper()
		r1 := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
		require.Empty(t, r1.Errs)
		router := zoneLBRow(r1.Router.Zones["gw1"], "kv-lb-web_tcp")
		require.NotNil(t, router, "the router's row in its home zone")
		assert.Equal(t, w.router, router.Vips[vip], "%s: router row, VIP", msg)
		for key, backends := range router.Vips {
			assert.Equal(t, w.router, backends, "%s: router row, key %s", msg, key)
		}
		na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
		require.Empty(t, na.Errs)
		for z, b := range map[string]string{"gw1": w.gw1, "hv1": w.hv1, "hv2": w.hv2} {
			sw := zoneLBRow(na.Network.Zones[z], "kv-lb-web_tcp_switch")
			require.NotNil(t, sw, "zone %s holds the switch's row", z)
			assert.Equal(t, b, sw.Vips[vip], "%s: zone %s's switch row", msg, z)
			assert.Len(t, sw.IPPortMappings, 2, "%s: zone %s maps every member", msg, z)
		}
		assert.Equal(t, both, na.Network.LoadBalancers[0].Vips[vip], "the unzoned plan is untouched")
	}
	check(want{both, both, both, both}, "all online")

	assert.Equal(t, affected, in.SetOfflineMembers("hv2", []OfflineMember{a2}), "the load balancer's units")
	check(want{only5, only5, only5, both}, "vm-a2 offline in its zone hv2")
	assert.Empty(t, in.SetOfflineMembers("hv2", []OfflineMember{a2}), "the same again changes nothing")

	// Another load balancer's member changing re-plans nothing of web.
	other := OfflineMember{Port: "x", IP: "10.99.0.1", Protocol: "tcp", PortNum: 80}
	assert.Empty(t, in.SetOfflineMembers("gw2", []OfflineMember{other}))

	// A status from a zone where the port does not live is stale.
	in.SetOfflineMembers("hv2", nil)
	in.SetOfflineMembers("hv1", []OfflineMember{a2})
	check(want{both, both, both, both}, "vm-a2 offline in hv1, where it does not live")
	in.SetOfflineMembers("hv1", nil)

	// Both offline: no backends in the zones where neither lives.
	in.SetOfflineMembers("hv2", []OfflineMember{a2})
	in.SetOfflineMembers("hv1", []OfflineMember{a})
	check(want{"", "", only5, "10.10.0.6:80"}, "both offline: each zone keeps its own, OVN decides there")
	na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	assert.Nil(t, zoneLBRow(na.Network.Zones["gw1"], "kv-lb-web_tcp_switch").Options, "drops, as OVN does")
	assert.Equal(t, affected, in.SetRejectEmptyLB(true))
	na = in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	assert.Equal(t, map[string]string{"reject": "true"}, zoneLBRow(na.Network.Zones["gw1"], "kv-lb-web_tcp_switch").Options, "--lb-reject-empty rejects")
	assert.Nil(t, zoneLBRow(na.Network.Zones["hv1"], "kv-lb-web_tcp_switch").Options, "a VIP with a backend left does not")

	// Online again: back everywhere.
	assert.Equal(t, affected, in.SetOfflineMembers("hv2", nil))
	assert.Equal(t, affected, in.SetOfflineMembers("hv1", nil))
	check(want{both, both, both, both}, "online again")
}

// TestSetAllOfflineMembers: a zone agent's view of every zone at once; a
// zone left out has none.
func TestSetAllOfflineMembers(t *testing.T) {
	s := lbSnapshot()
	s.Chassis = zoneChassis()
	s.ChassisKnown = true
	lb := webLB()
	lb.HealthCheck = &LBHealthCheck{SourceIP: "10.10.0.250"}
	s.LoadBalancers = []LoadBalancer{lb}
	in := NewInputFrom(s)
	a2 := OfflineMember{Port: VMPortName("net-a", "default", "vm-a2", "eth1"), IP: "10.10.0.6", Protocol: "tcp", PortNum: 80}
	// net-b, r1's other internal network, has rows for the load balancer
	// too (kv-lb-web_tcp_from_net-b, in central mode).
	affected := []Unit{{KindNetwork, "net-a"}, {KindNetwork, "net-b"}, {KindRouter, "r1"}}
	backends := func() string {
		r1 := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
		require.Empty(t, r1.Errs)
		return zoneLBRow(r1.Router.Zones["gw1"], "kv-lb-web_tcp").Vips["10.10.0.100:80"]
	}
	assert.Equal(t, affected, in.SetAllOfflineMembers(map[string][]OfflineMember{"hv2": {a2}, "hv1": nil}))
	assert.Equal(t, "10.10.0.5:80", backends())
	assert.Empty(t, in.SetAllOfflineMembers(map[string][]OfflineMember{"hv2": {a2}}), "hv1 had none")
	assert.Equal(t, affected, in.SetAllOfflineMembers(map[string][]OfflineMember{"hv1": nil}), "hv2 gone: none")
	assert.Equal(t, "10.10.0.5:80,10.10.0.6:80", backends())
}
