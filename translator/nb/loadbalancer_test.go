package nb_test

import (
	"context"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// withLoadBalancer is example() with a second VM on net-a and load
// balancer web (VIP 10.10.0.100, tcp 80 over both VMs) exposed through
// floating IP fip-web.
func withLoadBalancer() *tr.Snapshot {
	s := example()
	s.VMs = append(s.VMs, tr.VMInterface{Namespace: "default", VMI: "vm-a2", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:16", IP: "10.10.0.6"})
	s.LoadBalancers = []tr.LoadBalancer{{Name: "web", ID: "web", Network: "net-a", VIP: "10.10.0.100", Members: []string{"10.10.0.5", "10.10.0.6"},
		Rules: []tr.LBRule{{Protocol: "tcp", PortMin: 80}}}}
	s.FloatingIPs = []tr.FloatingIP{{Name: "fip-web", ID: "fip-web", Router: "router1", Network: "public", IP: "172.16.0.60", FixedIP: "10.10.0.100"}}
	return s
}

func lbRows(t *testing.T, raw client.Client) map[string]*nbmodel.LoadBalancer {
	t.Helper()
	return byName(t, raw, func(lb *nbmodel.LoadBalancer) string { return lb.Name })
}

// TestSyncLoadBalancer: a load balancer is a root row of its router's
// unit that the router refers to (its VIP and the floating IP on it) and
// one of its network's unit that the network's switch refers to (its
// VIP), and one of each other internal network of the router that its
// switch refers to (the VIP from there); a floating IP on the VIP has no NAT; a second sync writes nothing;
// a member change updates both rows in place; another tool's load
// balancer on our switch stays; a deleted load balancer goes with its
// references.
func TestSyncLoadBalancer(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withLoadBalancer()
	requireNoFailures(t, sync(t, ours, s))
	lbs := lbRows(t, raw)
	require.Len(t, lbs, 3)
	web, webSw, webB := lbs["kv-lb-web_tcp"], lbs["kv-lb-web_tcp_switch"], lbs["kv-lb-web_tcp_from_net-b"]
	require.NotNil(t, web)
	require.NotNil(t, webSw)
	require.NotNil(t, webB)
	assert.Equal(t, webSw.Vips, webB.Vips)
	assert.Equal(t, "net-b", webB.ExternalIDs[tr.KeyOwner])
	assert.Equal(t, map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80", "172.16.0.60:80": "10.10.0.5:80,10.10.0.6:80"}, web.Vips)
	assert.Equal(t, map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80"}, webSw.Vips)
	require.NotNil(t, web.Protocol)
	assert.Equal(t, "tcp", *web.Protocol)
	assert.Equal(t, "router1", web.ExternalIDs[tr.KeyOwner])
	assert.Equal(t, "net-a", webSw.ExternalIDs[tr.KeyOwner])
	assert.Equal(t, []string{web.UUID}, lrByName(t, raw)["kv-router1"].LoadBalancer, "the router refers to its row")
	assert.Equal(t, []string{webSw.UUID}, lsByName(t, raw)["kv-net-a"].LoadBalancer, "net-a's switch refers to its row")
	assert.Equal(t, []string{webB.UUID}, lsByName(t, raw)["kv-net-b"].LoadBalancer, "net-b's switch refers to its own row")
	assert.Empty(t, dnatRows(t, raw), "a floating IP on a VIP has no NAT row")
	requireIdle(t, ours, s)

	// Another tool's load balancer on our switch.
	foreign := &nbmodel.LoadBalancer{UUID: "foreign", Name: "other-lb", Vips: map[string]string{"10.10.0.200:22": "10.10.0.5:22"}}
	ops, err := raw.Create(foreign)
	require.NoError(t, err)
	sw := lsByName(t, raw)["kv-net-a"]
	mut, err := raw.Where(sw).Mutate(sw, model.Mutation{Field: &sw.LoadBalancer, Mutator: ovsdb.MutateOperationInsert, Value: []string{"foreign"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ops = append(ops, mut...)
	results, err := raw.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(results, ops)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var rows []*nbmodel.LogicalSwitch
		_ = ours.List(ctx, &rows)
		for _, r := range rows {
			if r.Name == "kv-net-a" {
				return len(r.LoadBalancer) == 2
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "our client sees the other tool's reference")
	foreignUUID := lbRows(t, raw)["other-lb"].UUID
	requireIdle(t, ours, s)

	// A member goes from the load balancer: the rows are updated in
	// place.
	s.LoadBalancers[0].Members = []string{"10.10.0.6"}
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	assert.ElementsMatch(t, []nb.Change{
		{Action: nb.Update, Table: nbmodel.LoadBalancerTable, Name: "kv-lb-web_tcp",
			Detail: `vips: {10.10.0.100:80="10.10.0.5:80,10.10.0.6:80", 172.16.0.60:80="10.10.0.5:80,10.10.0.6:80"} -> {10.10.0.100:80="10.10.0.6:80", 172.16.0.60:80="10.10.0.6:80"}`},
		{Action: nb.Update, Table: nbmodel.LoadBalancerTable, Name: "kv-lb-web_tcp_switch",
			Detail: `vips: {10.10.0.100:80="10.10.0.5:80,10.10.0.6:80"} -> {10.10.0.100:80="10.10.0.6:80"}`},
		{Action: nb.Update, Table: nbmodel.LoadBalancerTable, Name: "kv-lb-web_tcp_from_net-b",
			Detail: `vips: {10.10.0.100:80="10.10.0.5:80,10.10.0.6:80"} -> {10.10.0.100:80="10.10.0.6:80"}`},
	}, changeList(res))
	lbs = lbRows(t, raw)
	assert.Equal(t, web.UUID, lbs["kv-lb-web_tcp"].UUID, "updated in place")
	assert.Equal(t, webSw.UUID, lbs["kv-lb-web_tcp_switch"].UUID, "updated in place")
	assert.ElementsMatch(t, []string{webSw.UUID, foreignUUID}, lsByName(t, raw)["kv-net-a"].LoadBalancer, "the other tool's reference stays")
	requireIdle(t, ours, s)

	// Deleted: its rows go, and their references; the other tool's stay.
	s.LoadBalancers = nil
	s.FloatingIPs = nil
	requireNoFailures(t, sync(t, ours, s))
	lbs = lbRows(t, raw)
	assert.Len(t, lbs, 1)
	assert.Contains(t, lbs, "other-lb")
	assert.Empty(t, lrByName(t, raw)["kv-router1"].LoadBalancer)
	assert.Equal(t, []string{foreignUUID}, lsByName(t, raw)["kv-net-a"].LoadBalancer)
	requireIdle(t, ours, s)
}

// TestSyncLoadBalancerUnitsApart: the network's and the router's units
// each write their own rows and references, in either order, apart (a
// reference from the switch to the router's row would make each wait for
// the other: the router's port needs the switch).
func TestSyncLoadBalancerUnitsApart(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withLoadBalancer()
	netA, router1 := tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}, tr.Unit{Kind: tr.KindRouter, Name: "router1"}
	syncUnits := func(s *tr.Snapshot, units ...tr.Unit) *nb.SyncResult {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := nb.SyncUnits(ctx, ours, tr.Build(s, instance), units, nb.SyncOptions{Instance: instance})
		require.NoError(t, err)
		return res
	}
	requireNoFailures(t, syncUnits(s, netA))
	assert.Equal(t, []string{lbRows(t, raw)["kv-lb-web_tcp_switch"].UUID}, lsByName(t, raw)["kv-net-a"].LoadBalancer)
	requireNoFailures(t, syncUnits(s, tr.Unit{Kind: tr.KindNetwork, Name: "public"}, tr.Unit{Kind: tr.KindNetwork, Name: "net-b"}))
	requireNoFailures(t, syncUnits(s, router1))
	assert.Equal(t, []string{lbRows(t, raw)["kv-lb-web_tcp"].UUID}, lrByName(t, raw)["kv-router1"].LoadBalancer)
	requireIdle(t, ours, s)

	// The load balancer goes: the router's unit alone drops its row.
	s.LoadBalancers = nil
	requireNoFailures(t, syncUnits(s, router1))
	assert.NotContains(t, lbRows(t, raw), "kv-lb-web_tcp")
	assert.Contains(t, lbRows(t, raw), "kv-lb-web_tcp_switch")
	requireNoFailures(t, syncUnits(s, netA, tr.Unit{Kind: tr.KindNetwork, Name: "net-b"}))
	assert.Empty(t, lbRows(t, raw))
	assert.Empty(t, lsByName(t, raw)["kv-net-a"].LoadBalancer)
	requireIdle(t, ours, s)
}

// TestSyncLoadBalancerHealthCheck: health checks are children of their
// load balancer's rows: created with them, a second sync writes nothing,
// an edit of the interval updates them in place, and they go when the
// health check does, the rows staying.
func TestSyncLoadBalancerHealthCheck(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withLoadBalancer()
	s.LoadBalancers[0].HealthCheck = &tr.LBHealthCheck{SourceIP: "10.10.0.250", Interval: 2}
	requireNoFailures(t, sync(t, ours, s))
	hcs := list[nbmodel.LoadBalancerHealthCheck](t, raw)
	require.Len(t, hcs, 4, "the router row's VIP and floating IP keys, the switch row's VIP key, net-b's row's")
	lbs := lbRows(t, raw)
	webUUID := lbs["kv-lb-web_tcp"].UUID
	assert.Len(t, lbs["kv-lb-web_tcp"].HealthCheck, 2)
	assert.Len(t, lbs["kv-lb-web_tcp_switch"].HealthCheck, 1)
	assert.Equal(t, map[string]string{"10.10.0.5": "kv-net-a_default_vm-a_eth1:10.10.0.250", "10.10.0.6": "kv-net-a_default_vm-a2_eth1:10.10.0.250"},
		lbs["kv-lb-web_tcp"].IPPortMappings)
	requireIdle(t, ours, s)

	s.LoadBalancers[0].HealthCheck.Interval = 3
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	for _, c := range changeList(res) {
		assert.Equal(t, nb.Update, c.Action, "%s", c)
		assert.Equal(t, nbmodel.LoadBalancerHealthCheckTable, c.Table, "%s", c)
	}
	assert.Len(t, changeList(res), 4)
	var uuids []string
	for _, hc := range hcs {
		uuids = append(uuids, hc.UUID)
	}
	for _, hc := range list[nbmodel.LoadBalancerHealthCheck](t, raw) {
		assert.Contains(t, uuids, hc.UUID, "updated in place")
		assert.Equal(t, "3", hc.Options["interval"])
	}
	requireIdle(t, ours, s)

	s.LoadBalancers[0].HealthCheck = nil
	requireNoFailures(t, sync(t, ours, s))
	assert.Empty(t, list[nbmodel.LoadBalancerHealthCheck](t, raw))
	lbs = lbRows(t, raw)
	assert.Equal(t, webUUID, lbs["kv-lb-web_tcp"].UUID, "the row stays")
	assert.Empty(t, lbs["kv-lb-web_tcp"].IPPortMappings)
	requireIdle(t, ours, s)
}

// TestLoadBalancerFloatingIPClaimsReadFromNB: a floating IP on a VIP has
// no NAT row; its router's load balancer rows say who holds its address
// and its fixed IP (the VIP), in HeldClaims and in the HeldIndex, and the
// holder keeps them against an older claimant that comes later.
func TestLoadBalancerFloatingIPClaimsReadFromNB(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	index := nb.NewHeldIndex(ours, instance)
	s := withLoadBalancer()
	s.FloatingIPs[0].Created = t1
	requireNoFailures(t, sync(t, ours, s))
	assert.Equal(t, "fip-web", lbRows(t, raw)["kv-lb-web_tcp"].ExternalIDs[tr.KeyFloatingIP])
	assert.NotContains(t, lbRows(t, raw)["kv-lb-web_tcp_switch"].ExternalIDs, tr.KeyFloatingIP)

	held, err := nb.HeldClaims(context.Background(), ours, instance)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"172.16.0.60": "fip-web"}, held.FloatingIPs)
	assert.Equal(t, map[string]string{"router1 10.10.0.100": "fip-web"}, held.FixedIPs)
	require.Eventually(t, func() bool {
		return index.HeldFloatingIP("172.16.0.60") == "fip-web" && index.HeldFixedIP("router1", "10.10.0.100") == "fip-web"
	}, 5*time.Second, 10*time.Millisecond, "the HeldIndex follows the load balancer rows")

	// An older floating IP claims the same address and VIP.
	s.FloatingIPs = append(s.FloatingIPs, tr.FloatingIP{Name: "fip-0", ID: "fip-0", Router: "router1", Network: "public", IP: "172.16.0.60", FixedIP: "10.10.0.100", Created: t0})
	s.Held = held
	plan := tr.Build(s, instance)
	require.Len(t, plan.FloatingIPs, 2)
	assert.Equal(t, "FloatingIp fip-0: spec.floatingIp 172.16.0.60 is already the floating IP of FloatingIp fip-web", plan.FloatingIPs[0].Reason)
	assert.True(t, plan.FloatingIPs[1].Ready)
	res, err := nb.Sync(context.Background(), ours, plan, nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	requireNoFailures(t, res)
	assert.Empty(t, res.Changes(), "fip-web keeps its VIP key")

	// The floating IP goes: so do the keys and the claims.
	s.FloatingIPs, s.Held = nil, nil
	requireNoFailures(t, sync(t, ours, s))
	assert.NotContains(t, lbRows(t, raw)["kv-lb-web_tcp"].ExternalIDs, tr.KeyFloatingIP)
	require.Eventually(t, func() bool { return index.HeldFloatingIP("172.16.0.60") == "" }, 5*time.Second, 10*time.Millisecond)
}
