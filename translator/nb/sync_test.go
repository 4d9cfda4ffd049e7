package nb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

const instance = "test"

// startNB serves an empty OVN_Northbound from libovsdb's in-process server
// and returns its endpoint.
func startNB(t *testing.T) string {
	t.Helper()
	sock := nbtest.Serve(t)
	return "unix:" + sock
}

// connect returns the client kubevirt-ovn uses (our rows only) and a raw
// client that sees every row, for seeding foreign rows and for checks.
func connect(t *testing.T, ep string) (ours, raw client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ours, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: ep}, instance, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(ours.Close)
	m, err := nbmodel.FullDatabaseModel()
	require.NoError(t, err)
	raw, err = client.NewOVSDBClient(m, client.WithEndpoint(ep))
	require.NoError(t, err)
	require.NoError(t, raw.Connect(ctx))
	t.Cleanup(raw.Close)
	_, err = raw.MonitorAll(ctx)
	require.NoError(t, err)
	return ours, raw
}

// example is the input of deploy/examples: a router with SNAT on two
// internal networks, a FLAT external network, a VM on each network.
func example() *tr.Snapshot {
	return &tr.Snapshot{
		Networks: []tr.Network{
			{Name: "public", Namespace: "default", Type: "FLAT", PhysicalNetworkName: "physnet1", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
			{Name: "net-a", Namespace: "default", Type: "GENEVE", SegmentID: "100", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
			{Name: "net-b", Namespace: "default", Type: "VXLAN", SegmentID: "200", CIDR: "10.20.0.0/24", GatewayIP: "10.20.0.1"},
		},
		Routers: []tr.Router{{
			Name: "router1", MAC: "fa:16:3e:00:00:01", EnableSNAT: true,
			Internal:   []string{"net-a", "net-b"},
			External:   &tr.External{IP: "172.16.0.100", Network: "public"},
			PeerRouter: &tr.PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"},
			Gateway:    "gw1",
		}},
		VMs: []tr.VMInterface{
			{Namespace: "default", VMI: "vm-a", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"},
			{Namespace: "default", VMI: "vm-b", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6"},
		},
	}
}

func sync(t *testing.T, c client.Client, s *tr.Snapshot) *nb.SyncResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := nb.Sync(ctx, c, tr.Build(s, instance), nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	return res
}

func requireNoFailures(t *testing.T, res *nb.SyncResult) {
	t.Helper()
	require.Empty(t, res.Failed(), "sync failures")
}

// requireIdle syncs s again and requires that nothing is written.
func requireIdle(t *testing.T, c client.Client, s *tr.Snapshot) {
	t.Helper()
	res := sync(t, c, s)
	requireNoFailures(t, res)
	assert.Zero(t, res.Transactions, "a second sync with no input change must not transact")
	assert.Empty(t, res.Changes(), "a second sync with no input change must change nothing")
}

func list[T any](t *testing.T, c client.Client) []*T {
	t.Helper()
	var rows []*T
	require.NoError(t, c.List(context.Background(), &rows))
	return rows
}

func byName[T any](t *testing.T, c client.Client, name func(*T) string) map[string]*T {
	out := map[string]*T{}
	for _, r := range list[T](t, c) {
		out[name(r)] = r
	}
	return out
}

func lsps(t *testing.T, c client.Client) map[string]*nbmodel.LogicalSwitchPort {
	return byName(t, c, func(p *nbmodel.LogicalSwitchPort) string { return p.Name })
}

func lrps(t *testing.T, c client.Client) map[string]*nbmodel.LogicalRouterPort {
	return byName(t, c, func(p *nbmodel.LogicalRouterPort) string { return p.Name })
}

func lsByName(t *testing.T, c client.Client) map[string]*nbmodel.LogicalSwitch {
	return byName(t, c, func(s *nbmodel.LogicalSwitch) string { return s.Name })
}

func lrByName(t *testing.T, c client.Client) map[string]*nbmodel.LogicalRouter {
	return byName(t, c, func(s *nbmodel.LogicalRouter) string { return s.Name })
}

func nats(t *testing.T, c client.Client) map[string]*nbmodel.NAT {
	return byName(t, c, func(n *nbmodel.NAT) string { return n.LogicalIP })
}

func TestSyncCreatesRowsAndSecondSyncWritesNothing(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	assert.Equal(t, 1, res.Transactions, "a full sync batches its units into one transaction")

	switches := lsByName(t, raw)
	require.Contains(t, switches, "kv-net-a")
	require.Contains(t, switches, "kv-public")
	ports := lsps(t, raw)
	assert.Contains(t, switches["kv-net-a"].Ports, ports["kv-net-a_default_vm-a_eth1"].UUID)
	assert.Contains(t, switches["kv-net-a"].Ports, ports["kv-stor-net-a_router1"].UUID)
	assert.Contains(t, switches["kv-public"].Ports, ports["kv-etor-router1"].UUID)
	assert.Contains(t, switches["kv-public"].Ports, ports["kv-ln-public"].UUID)
	assert.Equal(t, map[string]string{"router-port": "kv-rtoe-router1", "nat-addresses": "router"}, ports["kv-etor-router1"].Options)

	routers := lrByName(t, raw)
	require.Contains(t, routers, "kv-router1")
	lr := routers["kv-router1"]
	assert.Len(t, lr.Ports, 3)
	assert.Len(t, lr.Nat, 2)
	assert.Len(t, lr.StaticRoutes, 1)
	gw := lrps(t, raw)["kv-rtoe-router1"]
	require.NotNil(t, gw)
	require.Len(t, gw.GatewayChassis, 1)
	gcs := list[nbmodel.GatewayChassis](t, raw)
	require.Len(t, gcs, 1)
	assert.Equal(t, "gw1", gcs[0].ChassisName)
	mbs := list[nbmodel.StaticMACBinding](t, raw)
	require.Len(t, mbs, 1)
	assert.Equal(t, "00:00:00:00:ee:01", mbs[0].MAC)

	requireIdle(t, ours, s)
}

func TestSyncUpdatesInPlace(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	requireNoFailures(t, sync(t, ours, s))
	natsBefore := nats(t, raw)
	lrpsBefore := lrps(t, raw)
	lrBefore := lrByName(t, raw)["kv-router1"]

	s.Routers[0].External.IP = "172.16.0.101"
	s.Routers[0].PeerRouter.MAC = "00:00:00:00:ee:02"
	s.Routers[0].Description = "now described"
	res := sync(t, ours, s)
	requireNoFailures(t, res)

	natsAfter := nats(t, raw)
	for ip, n := range natsAfter {
		assert.Equal(t, natsBefore[ip].UUID, n.UUID, "NAT %s is updated in place", ip)
		assert.Equal(t, "172.16.0.101", n.ExternalIP)
	}
	gw := lrps(t, raw)["kv-rtoe-router1"]
	assert.Equal(t, lrpsBefore["kv-rtoe-router1"].UUID, gw.UUID, "gateway port is updated in place")
	assert.Equal(t, []string{"172.16.0.101/24"}, gw.Networks)
	lr := lrByName(t, raw)["kv-router1"]
	assert.Equal(t, lrBefore.UUID, lr.UUID)
	assert.Equal(t, "now described", lr.ExternalIDs[tr.KeyDescription])
	mbs := list[nbmodel.StaticMACBinding](t, raw)
	require.Len(t, mbs, 1)
	assert.Equal(t, "00:00:00:00:ee:02", mbs[0].MAC)
	for _, u := range res.Units {
		for _, c := range u.Changes {
			assert.Equal(t, nb.Update, c.Action, "only updates expected, got %s", c)
		}
	}
	requireIdle(t, ours, s)
}

func TestSyncGatewayChangeUpdatesPriorities(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	s.Routers[0].Gateway = ""
	s.ChassisKnown = true
	s.Chassis = []tr.Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}},
		{Name: "gw2", Hostname: "node-gw2", Gateway: true, Physnets: []string{"physnet1"}},
		{Name: "hv1", Hostname: "node-hv1"},
	}
	s.Routers[0].Gateway = "node-gw1"
	requireNoFailures(t, sync(t, ours, s))
	prio := func() map[string]int {
		out := map[string]int{}
		for _, g := range list[nbmodel.GatewayChassis](t, raw) {
			out[g.ChassisName] = g.Priority
		}
		return out
	}
	assert.Equal(t, map[string]int{"gw1": 2, "gw2": 1}, prio())
	before := map[string]string{}
	for _, g := range list[nbmodel.GatewayChassis](t, raw) {
		before[g.Name] = g.UUID
	}

	s.Routers[0].Gateway = "node-gw2"
	requireNoFailures(t, sync(t, ours, s))
	assert.Equal(t, map[string]int{"gw1": 1, "gw2": 2}, prio())
	for _, g := range list[nbmodel.GatewayChassis](t, raw) {
		assert.Equal(t, before[g.Name], g.UUID, "gateway chassis %s updated in place", g.Name)
	}
	requireIdle(t, ours, s)

	// A candidate disappears from the SB: its row goes.
	s.Chassis = s.Chassis[1:]
	requireNoFailures(t, sync(t, ours, s))
	assert.Equal(t, map[string]int{"gw2": 1}, prio())
	assert.Len(t, lrps(t, raw)["kv-rtoe-router1"].GatewayChassis, 1)
	requireIdle(t, ours, s)
}

func TestSyncInternalNetworkAttachAndDetach(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	s.Routers[0].Internal = []string{"net-a"}
	requireNoFailures(t, sync(t, ours, s))
	assert.Len(t, nats(t, raw), 1)

	s.Routers[0].Internal = []string{"net-a", "net-b"}
	requireNoFailures(t, sync(t, ours, s))
	assert.Contains(t, nats(t, raw), "10.20.0.0/24")
	assert.Contains(t, lrps(t, raw), "kv-rtos-router1_net-b")
	assert.Contains(t, lsps(t, raw), "kv-stor-net-b_router1")
	requireIdle(t, ours, s)

	s.Routers[0].Internal = []string{"net-a"}
	requireNoFailures(t, sync(t, ours, s))
	assert.NotContains(t, nats(t, raw), "10.20.0.0/24")
	assert.NotContains(t, lrps(t, raw), "kv-rtos-router1_net-b")
	assert.NotContains(t, lsps(t, raw), "kv-stor-net-b_router1")
	assert.Len(t, lrByName(t, raw)["kv-router1"].Ports, 2)
	requireIdle(t, ours, s)

	s.Routers[0].EnableSNAT = false
	requireNoFailures(t, sync(t, ours, s))
	assert.Empty(t, nats(t, raw))
	requireIdle(t, ours, s)
}

func TestSyncMovesGatewayPortToNewExternalNetwork(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	s.Networks = append(s.Networks, tr.Network{Name: "public2", Namespace: "default", Type: "VLAN", SegmentID: "100", PhysicalNetworkName: "physnet1", CIDR: "192.0.2.0/24", GatewayIP: "192.0.2.1"})
	requireNoFailures(t, sync(t, ours, s))
	before := lsps(t, raw)["kv-etor-router1"]

	s.Routers[0].External = &tr.External{IP: "192.0.2.10", Network: "public2"}
	s.Routers[0].PeerRouter = &tr.PeerRouter{IP: "192.0.2.1"}
	requireNoFailures(t, sync(t, ours, s))
	switches := lsByName(t, raw)
	after := lsps(t, raw)["kv-etor-router1"]
	require.NotNil(t, after)
	assert.Equal(t, before.UUID, after.UUID, "the port moves, it is not recreated")
	assert.Contains(t, switches["kv-public2"].Ports, after.UUID)
	assert.NotContains(t, switches["kv-public"].Ports, after.UUID)
	assert.Empty(t, list[nbmodel.StaticMACBinding](t, raw), "no peer MAC: the binding goes")
	requireIdle(t, ours, s)
}

func TestSyncRemovesRowsOfRemovedObjects(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	requireNoFailures(t, sync(t, ours, s))

	// A VM goes: only its port.
	s.VMs = s.VMs[:1]
	requireNoFailures(t, sync(t, ours, s))
	ports := lsps(t, raw)
	assert.NotContains(t, ports, "kv-net-b_default_vm-b_eth1")
	assert.Contains(t, ports, "kv-net-a_default_vm-a_eth1")
	requireIdle(t, ours, s)

	// The router goes: every row it owned, also its ports on the switches
	// and its static MAC binding; the networks stay.
	s.Routers = nil
	requireNoFailures(t, sync(t, ours, s))
	assert.Empty(t, list[nbmodel.LogicalRouter](t, raw))
	assert.Empty(t, list[nbmodel.LogicalRouterPort](t, raw))
	assert.Empty(t, list[nbmodel.NAT](t, raw))
	assert.Empty(t, list[nbmodel.LogicalRouterStaticRoute](t, raw))
	assert.Empty(t, list[nbmodel.GatewayChassis](t, raw))
	assert.Empty(t, list[nbmodel.StaticMACBinding](t, raw))
	ports = lsps(t, raw)
	assert.NotContains(t, ports, "kv-stor-net-a_router1")
	assert.NotContains(t, ports, "kv-etor-router1")
	assert.Len(t, lsByName(t, raw), 3)
	requireIdle(t, ours, s)

	// Everything goes.
	requireNoFailures(t, sync(t, ours, &tr.Snapshot{}))
	assert.Empty(t, list[nbmodel.LogicalSwitch](t, raw))
	assert.Empty(t, list[nbmodel.LogicalSwitchPort](t, raw))
}

// seedForeign writes rows the way ovn-kubernetes would: a gateway router
// with SNAT and a route, a node switch with a port, all with its own
// external_ids, and returns a dump of them.
func seedForeign(t *testing.T, raw client.Client) {
	t.Helper()
	ids := map[string]string{"k8s.ovn.org/owner-type": "Node", "k8s.ovn.org/name": "node1"}
	lsp := &nbmodel.LogicalSwitchPort{UUID: "lsp", Name: "default_pod1", Addresses: []string{"0a:58:0a:f4:00:05 10.244.0.5"}, ExternalIDs: ids}
	ls := &nbmodel.LogicalSwitch{UUID: "ls", Name: "node1", Ports: []string{"lsp"}, ExternalIDs: ids}
	nat := &nbmodel.NAT{UUID: "nat", Type: "snat", ExternalIP: "172.16.0.2", LogicalIP: "10.244.0.0/16", ExternalIDs: ids}
	route := &nbmodel.LogicalRouterStaticRoute{UUID: "route", IPPrefix: "0.0.0.0/0", Nexthop: "172.16.0.1", ExternalIDs: ids}
	lrp := &nbmodel.LogicalRouterPort{UUID: "lrp", Name: "rtoe-GR_node1", MAC: "0a:58:ac:10:00:02", Networks: []string{"172.16.0.2/24"}, ExternalIDs: ids}
	lr := &nbmodel.LogicalRouter{UUID: "lr", Name: "GR_node1", Ports: []string{"lrp"}, Nat: []string{"nat"}, StaticRoutes: []string{"route"}, ExternalIDs: ids}
	mb := &nbmodel.StaticMACBinding{UUID: "mb", LogicalPort: "rtoe-GR_node1", IP: "172.16.0.1", MAC: "00:00:00:00:ee:99"}
	var ops []ovsdb.Operation
	for _, m := range []model.Model{lsp, ls, nat, route, lrp, lr, mb} {
		o, err := raw.Create(m)
		require.NoError(t, err)
		ops = append(ops, o...)
	}
	_, err := nb.Commit(context.Background(), raw, "seed foreign rows", ops)
	require.NoError(t, err)
}

// dumpAll renders every row of the tables we write, keyed by table and
// UUID, to compare foreign rows before and after.
func dumpAll(t *testing.T, raw client.Client) map[string]string {
	out := map[string]string{}
	add := func(table, uuid string, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[table+"/"+uuid] = string(b)
	}
	for _, r := range list[nbmodel.LogicalRouter](t, raw) {
		sort.Strings(r.Ports)
		add("LR", r.UUID, *r)
	}
	for _, r := range list[nbmodel.LogicalRouterPort](t, raw) {
		add("LRP", r.UUID, *r)
	}
	for _, r := range list[nbmodel.LogicalSwitch](t, raw) {
		sort.Strings(r.Ports)
		add("LS", r.UUID, *r)
	}
	for _, r := range list[nbmodel.LogicalSwitchPort](t, raw) {
		add("LSP", r.UUID, *r)
	}
	for _, r := range list[nbmodel.NAT](t, raw) {
		add("NAT", r.UUID, *r)
	}
	for _, r := range list[nbmodel.LogicalRouterStaticRoute](t, raw) {
		add("Route", r.UUID, *r)
	}
	for _, r := range list[nbmodel.StaticMACBinding](t, raw) {
		add("SMB", r.UUID, *r)
	}
	return out
}

func TestSyncNeverTouchesForeignRows(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	seedForeign(t, raw)
	before := dumpAll(t, raw)
	require.Len(t, before, 7)

	s := example()
	requireNoFailures(t, sync(t, ours, s))
	s.Routers[0].External.IP = "172.16.0.102"
	requireNoFailures(t, sync(t, ours, s))
	requireNoFailures(t, sync(t, ours, &tr.Snapshot{}))

	after := dumpAll(t, raw)
	assert.Equal(t, before, after, "rows without our owner keys are never updated or deleted")
}

func TestBadRouterLeavesItsRowsAndOthersSync(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	s.Networks = append(s.Networks,
		tr.Network{Name: "net-c", Namespace: "default", Type: "GENEVE", CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"})
	s.Routers = append(s.Routers, tr.Router{
		Name: "router2", EnableSNAT: true, Internal: []string{"net-c"},
		External: &tr.External{IP: "172.16.0.200", Network: "public"}, Gateway: "gw1",
	})
	requireNoFailures(t, sync(t, ours, s))
	before := dumpAll(t, raw)

	// router2 becomes invalid, router1 changes.
	s.Routers[1].External.IP = "198.18.0.5"
	s.Routers[0].External.IP = "172.16.0.101"
	res := sync(t, ours, s)
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Error(), "VirtualRouter router2: spec.external.ip 198.18.0.5 is outside network public (172.16.0.0/24)")
	after := dumpAll(t, raw)
	natByIP := nats(t, raw)
	assert.Equal(t, "172.16.0.200", natByIP["10.30.0.0/24"].ExternalIP, "router2's NAT is left as it was")
	assert.Equal(t, "172.16.0.101", natByIP["10.10.0.0/24"].ExternalIP, "router1 synced")
	for k, v := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("row %s was deleted: %s", k, v)
		}
	}
}

func TestFailedTransactionIsolatedToItsUnit(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	// A foreign router already has the name kv-router2: our wait guard
	// refuses to create a second one, and only router2 fails.
	op, err := raw.Create(&nbmodel.LogicalRouter{Name: "kv-router2", ExternalIDs: map[string]string{"owner": "someone-else"}})
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "seed", op)
	require.NoError(t, err)

	s := example()
	s.Networks = append(s.Networks,
		tr.Network{Name: "net-c", Namespace: "default", Type: "GENEVE", CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"})
	s.Routers = append(s.Routers, tr.Router{Name: "router2", Internal: []string{"net-c"}})
	res := sync(t, ours, s)
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Error(), "VirtualRouter router2")
	assert.Contains(t, failed[0].Error(), "Logical_Router kv-router2 already exists in the NB and is not this kubevirt-ovn instance's row")
	assert.Contains(t, lrByName(t, raw), "kv-router1", "router1 committed despite router2's failure")
	assert.Contains(t, lsByName(t, raw), "kv-net-c", "network net-c committed")
	routers := list[nbmodel.LogicalRouter](t, raw)
	assert.Len(t, routers, 2, "no second kv-router2")
}

func TestDryRunWritesNothing(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	ctx := context.Background()
	res, err := nb.Sync(ctx, ours, tr.Build(s, instance), nb.SyncOptions{Instance: instance, DryRun: true})
	require.NoError(t, err)
	assert.Zero(t, res.Transactions)
	assert.NotEmpty(t, res.Changes())
	assert.Empty(t, list[nbmodel.LogicalSwitch](t, raw))
	assert.Empty(t, list[nbmodel.LogicalRouter](t, raw))

	requireNoFailures(t, sync(t, ours, s))
	s.Routers[0].External.IP = "172.16.0.101"
	res, err = nb.Sync(ctx, ours, tr.Build(s, instance), nb.SyncOptions{Instance: instance, DryRun: true})
	require.NoError(t, err)
	var changes []string
	for _, u := range res.Units {
		for _, c := range u.Changes {
			changes = append(changes, c.String())
		}
	}
	assert.ElementsMatch(t, []string{
		`update Logical_Router_Port kv-rtoe-router1 (mac: "0a:58:ac:10:00:64" -> "0a:58:ac:10:00:65"; networks: ["172.16.0.100/24"] -> ["172.16.0.101/24"])`,
		`update NAT snat 10.10.0.0/24 (external_ip: "172.16.0.100" -> "172.16.0.101")`,
		`update NAT snat 10.20.0.0/24 (external_ip: "172.16.0.100" -> "172.16.0.101")`,
	}, changes)
	assert.Equal(t, "172.16.0.100", nats(t, raw)["10.10.0.0/24"].ExternalIP)
}

func TestAnotherInstanceRowsAreNotOurs(t *testing.T) {
	ep := startNB(t)
	ours, raw := connect(t, ep)
	requireNoFailures(t, sync(t, ours, example()))
	ctx := context.Background()
	other, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: ep}, "other", logr.Discard())
	require.NoError(t, err)
	t.Cleanup(other.Close)
	before := dumpAll(t, raw)
	res, err := nb.Sync(ctx, other, tr.Build(&tr.Snapshot{}, "other"), nb.SyncOptions{Instance: "other"})
	require.NoError(t, err)
	assert.Empty(t, res.Changes())
	assert.Equal(t, before, dumpAll(t, raw))
}

func TestSyncBumpsNBCfgOnlyWhenItWrites(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	op, err := raw.Create(&nbmodel.NBGlobal{})
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "NB_Global", op)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(list[nbmodel.NBGlobal](t, ours)) == 1 }, 5*time.Second, 10*time.Millisecond)

	opts := nb.SyncOptions{Instance: instance, BumpNBCfg: true}
	res, err := nb.Sync(context.Background(), ours, tr.Build(example(), instance), opts)
	require.NoError(t, err)
	assert.Equal(t, 1, res.NBCfg, "the transaction that wrote bumped nb_cfg")
	assert.Equal(t, 1, list[nbmodel.NBGlobal](t, raw)[0].NbCfg)

	res, err = nb.Sync(context.Background(), ours, tr.Build(example(), instance), opts)
	require.NoError(t, err)
	assert.Zero(t, res.Transactions)
	assert.Zero(t, res.NBCfg, "nothing written, nothing to wait for")
	assert.Equal(t, 1, list[nbmodel.NBGlobal](t, raw)[0].NbCfg)

	// One unit alone, as a controller reconciles it.
	s := example()
	s.Routers[0].External.IP = "172.16.0.101"
	plan := tr.Build(s, instance)
	res, err = nb.SyncUnits(context.Background(), ours, plan, []tr.Unit{{Kind: tr.KindRouter, Name: "router1"}}, opts)
	require.NoError(t, err)
	assert.Equal(t, 2, res.NBCfg)
	require.Len(t, res.Units, 1)
	assert.Equal(t, "VirtualRouter router1", res.Units[0].Unit.String())
}

// TestDuplicateOwnedRowsAreDeleted: a second copy of a NAT or a route that
// carries our owner keys (a second writer, a transaction retried after its
// reply was lost, a hand-made copy) is found and deleted by the next sync,
// the same copy whichever writer does it, and the sync after writes nothing.
func TestDuplicateOwnedRowsAreDeleted(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	requireNoFailures(t, sync(t, ours, s))
	lr := lrByName(t, raw)["kv-router1"]
	require.NotNil(t, lr)

	var copies []ovsdb.Operation
	var natCopies, routeCopies []string
	for _, n := range list[nbmodel.NAT](t, raw) {
		c := n.DeepCopy()
		c.UUID = "natcopy" + string(rune('a'+len(natCopies)))
		natCopies = append(natCopies, c.UUID)
		op, err := raw.Create(c)
		require.NoError(t, err)
		copies = append(copies, op...)
	}
	for _, r := range list[nbmodel.LogicalRouterStaticRoute](t, raw) {
		c := r.DeepCopy()
		c.UUID = "routecopy"
		routeCopies = append(routeCopies, c.UUID)
		op, err := raw.Create(c)
		require.NoError(t, err)
		copies = append(copies, op...)
	}
	m := &nbmodel.LogicalRouter{UUID: lr.UUID}
	op, err := raw.Where(m).Mutate(m,
		model.Mutation{Field: &m.Nat, Mutator: ovsdb.MutateOperationInsert, Value: natCopies},
		model.Mutation{Field: &m.StaticRoutes, Mutator: ovsdb.MutateOperationInsert, Value: routeCopies})
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "seed duplicates", append(copies, op...))
	require.NoError(t, err)
	require.Len(t, list[nbmodel.NAT](t, raw), 4, "precondition: every NAT twice")
	require.Len(t, list[nbmodel.LogicalRouterStaticRoute](t, raw), 2, "precondition: the route twice")
	require.Eventually(t, func() bool { return len(list[nbmodel.NAT](t, ours)) == 4 }, 5*time.Second, 10*time.Millisecond)

	res := sync(t, ours, s)
	requireNoFailures(t, res)
	assert.Equal(t, map[string]map[string]int{
		nbmodel.NATTable:                      {nb.Delete: 2},
		nbmodel.LogicalRouterStaticRouteTable: {nb.Delete: 1},
	}, res.Changes())
	for _, u := range res.Units {
		for _, c := range u.Changes {
			assert.Contains(t, c.Detail, "duplicate", c.String())
		}
	}
	assert.Len(t, list[nbmodel.NAT](t, raw), 2, "one NAT per internal network")
	assert.Len(t, list[nbmodel.LogicalRouterStaticRoute](t, raw), 1, "one default route")
	lr = lrByName(t, raw)["kv-router1"]
	assert.Len(t, lr.Nat, 2)
	assert.Len(t, lr.StaticRoutes, 1)
	requireIdle(t, ours, s)
}

// TestFirstClaimantKeepsSNATIPAcrossRestarts: in file mode there are no
// creation times, so without the NB's word a newer router whose name sorts
// first would take the SNAT IP and the internal network of the router that
// has them, and the NB would hold two gateway ports with one IP. What the NB
// holds decides.
func TestFirstClaimantKeepsSNATIPAcrossRestarts(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	requireNoFailures(t, sync(t, ours, s))
	before := dumpAll(t, raw)

	// A new router "a-router" (sorts before router1) claims router1's SNAT
	// IP and internal network.
	s.Routers = append(s.Routers, tr.Router{
		Name: "a-router", MAC: "fa:16:3e:00:00:02", EnableSNAT: true,
		Internal: []string{"net-a"},
		External: &tr.External{IP: "172.16.0.100", Network: "public"},
		Gateway:  "gw1",
	})
	held, err := nb.HeldClaims(context.Background(), ours, instance)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"172.16.0.100": "router1"}, held.SNATIPs)
	assert.Equal(t, map[string]string{"net-a": "router1", "net-b": "router1"}, held.Internal)
	assert.Equal(t, "kv-net-a_default_vm-a_eth1", held.VMAddresses["net-a 10.10.0.5"])
	s.Held = held

	ctx := context.Background()
	plan := tr.Build(s, instance)
	res, err := nb.Sync(ctx, ours, plan, nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Error(), "VirtualRouter a-router: spec.external.ip 172.16.0.100 is already the SNAT IP of VirtualRouter router1")
	assert.Contains(t, failed[0].Error(), "VirtualRouter a-router: spec.internal[0] network net-a is already an internal network of VirtualRouter router1")
	assert.Equal(t, before, dumpAll(t, raw), "router1's rows are untouched and a-router has none")
}

// TestSyncStoppedWritesNothing: a sync whose context has ended (SIGINT, a
// lost Lease) sends no transaction, not even unit by unit, and says why for
// every unit.
func TestSyncStoppedWritesNothing(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := nb.Sync(ctx, ours, tr.Build(example(), instance), nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	assert.Zero(t, res.Transactions)
	require.NotEmpty(t, res.Units)
	for _, u := range res.Units {
		assert.ErrorIs(t, u.Err, context.Canceled, u.Unit.String())
		assert.Empty(t, u.Changes)
	}
	assert.Empty(t, list[nbmodel.LogicalSwitch](t, raw))
	assert.Empty(t, list[nbmodel.LogicalRouter](t, raw))
}

// TestUnitThatCannotBeDiffedFailsAlone: an error building one unit's
// operations (here a row of a table kubevirt-ovn does not write) fails that
// unit, named, and the other units of the sync commit.
func TestUnitThatCannotBeDiffedFailsAlone(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	s.Networks = append(s.Networks, tr.Network{Name: "net-c", Namespace: "default", Type: "GENEVE", CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"})
	plan := tr.Build(s, instance)
	units := []tr.Unit{{Kind: tr.KindNetwork, Name: "net-a"}, {Kind: tr.KindNetwork, Name: "net-b"}, {Kind: tr.KindNetwork, Name: "net-c"},
		{Kind: tr.KindNetwork, Name: "public"}, {Kind: tr.KindRouter, Name: "router1"}}
	work := nb.PlanWork(plan, units, "")
	for i := range work {
		if work[i].Unit.Name == "net-c" {
			work[i].Rows = append(work[i].Rows, tr.Row{Model: &nbmodel.QoS{Action: map[string]int{"dscp": 1}}})
		}
	}
	res, err := nb.SyncWork(context.Background(), ours, work, nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Error(), "Network net-c")
	assert.Contains(t, failed[0].Error(), "kubevirt-ovn does not write rows of *nbmodel.QoS")
	assert.Contains(t, lrByName(t, raw), "kv-router1", "the other units committed")
	assert.Contains(t, lsByName(t, raw), "kv-net-a")
	assert.NotContains(t, lsByName(t, raw), "kv-net-c")
	assert.Equal(t, 1, res.Transactions)
}

// manyRouters is n routers, each with one internal network, sharing the
// example's public network.
func manyRouters(n int) *tr.Snapshot {
	s := example()
	s.Routers, s.VMs = nil, nil
	for i := 0; i < n; i++ {
		net := fmt.Sprintf("net-%d", i)
		s.Networks = append(s.Networks, tr.Network{Name: net, Namespace: "default", Type: "GENEVE",
			CIDR: fmt.Sprintf("10.%d.0.0/24", 100+i), GatewayIP: fmt.Sprintf("10.%d.0.1", 100+i)})
		s.Routers = append(s.Routers, tr.Router{Name: fmt.Sprintf("r%d", i), EnableSNAT: true, Internal: []string{net},
			External: &tr.External{IP: fmt.Sprintf("172.16.0.%d", 100+i), Network: "public"}, Gateway: "gw1"})
	}
	return s
}

// TestBulkInsertGuardsEachTableOnce (on ovsdb-server): a sync creating
// many routers and switches sends one wait per table over its names, not a
// wait per new row; a router whose name a foreign row holds fails alone,
// named, before anything is sent, and the others commit in one
// transaction.
func TestBulkInsertGuardsEachTableOnce(t *testing.T) {
	ours, raw := connect(t, "unix:"+nbtest.Real(t))
	op, err := raw.Create(&nbmodel.LogicalRouter{Name: "kv-r7", ExternalIDs: map[string]string{"owner": "someone-else"}})
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "seed", op)
	require.NoError(t, err)
	counting := &countingClient{Client: ours}
	res, err := nb.Sync(context.Background(), counting, tr.Build(manyRouters(20), instance), nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Error(), "VirtualRouter r7")
	assert.Contains(t, failed[0].Error(), "Logical_Router kv-r7 already exists in the NB and is not this kubevirt-ovn instance's row")
	assert.Equal(t, 1, res.Transactions)
	assert.Eventually(t, func() bool { return len(lrByName(t, raw)) == 20 }, 10*time.Second, 10*time.Millisecond, "19 routers of ours and the foreign kv-r7")
	assert.Equal(t, 2, counting.waits, "one wait for Logical_Router, one for Logical_Switch")
	assert.Empty(t, counting.errs)
}

// TestBulkInsertGuardSeesAnotherWriter: a foreign row created between the
// read of the foreign names and the commit fails the transaction (the
// table's wait), and the units are committed again in smaller batches that
// read the names anew.
func TestBulkInsertGuardSeesAnotherWriter(t *testing.T) {
	ours, raw := connect(t, "unix:"+nbtest.Real(t))
	racing := &countingClient{Client: ours, afterSelect: func() {
		op, err := raw.Create(&nbmodel.LogicalSwitch{Name: "someone-elses", ExternalIDs: map[string]string{"owner": "someone-else"}})
		require.NoError(t, err)
		_, err = nb.Commit(context.Background(), raw, "race", op)
		require.NoError(t, err)
	}}
	res, err := nb.Sync(context.Background(), racing, tr.Build(manyRouters(20), instance), nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	require.Empty(t, res.Failed())
	assert.Greater(t, res.Transactions, 1, "the first transaction failed its wait")
	assert.Eventually(t, func() bool { return len(lrByName(t, raw)) == 20 }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, lsByName(t, raw), "someone-elses")
	requireIdle(t, ours, manyRouters(20))
}

// countingClient counts the wait operations sent, lists the mutates and
// the waits for one row of ours that find their row by its name
// (byName), and runs afterSelect once, after the first select.
type countingClient struct {
	client.Client
	waits       int
	byName      []string
	errs        []string
	afterSelect func()
}

func (c *countingClient) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	res, err := c.Client.Transact(ctx, ops...)
	for i, r := range res {
		if r.Error != "" && i < len(ops) {
			c.errs = append(c.errs, fmt.Sprintf("%s %s: %s %s", ops[i].Op, ops[i].Table, r.Error, r.Details))
		}
	}
	for _, op := range ops {
		if op.Op == ovsdb.OperationWait {
			c.waits++
		}
		mutate := op.Op == ovsdb.OperationMutate
		exists := op.Op == ovsdb.OperationWait && op.Until == string(ovsdb.WaitConditionEqual) && len(op.Rows) == 1
		for _, cond := range op.Where {
			if cond.Column == "name" && (mutate || exists) {
				c.byName = append(c.byName, fmt.Sprintf("%s %s %v", op.Op, op.Table, cond.Value))
			}
		}
	}
	if len(ops) > 0 && ops[0].Op == ovsdb.OperationSelect && c.afterSelect != nil {
		f := c.afterSelect
		c.afterSelect = nil
		f()
	}
	return res, err
}

// TestSwitchTunnelKeyIsOurOnlyOtherConfigKey: of a switch's other_config
// kubevirt-ovn writes requested-tnl-key (interconnect mode) and nothing
// else: another tool's key stays through a change of our key and its
// removal, and the change is a mutation of our key.
func TestSwitchTunnelKeyIsOurOnlyOtherConfigKey(t *testing.T) {
	ours, raw := connect(t, "unix:"+nbtest.Real(t))
	ctx := context.Background()
	const sw = "kv-net-a"
	desired := func(key string) nb.Work {
		ls := &nbmodel.LogicalSwitch{Name: sw, ExternalIDs: tr.OwnerIDs(instance, tr.Unit{Kind: tr.KindNetwork, Name: "net-a"})}
		if key != "" {
			ls.OtherConfig = map[string]string{tr.KeyTunnel: key}
		}
		return nb.Work{Desired: nb.Desired{Unit: tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}, Rows: []tr.Row{{Model: ls}}}}
	}
	write := func(key string) *nb.SyncResult {
		t.Helper()
		res, err := nb.SyncWork(ctx, ours, []nb.Work{desired(key)}, nb.SyncOptions{Instance: instance})
		require.NoError(t, err)
		requireNoFailures(t, res)
		return res
	}
	otherConfig := func() map[string]string {
		t.Helper()
		require.Eventually(t, func() bool { return lsByName(t, raw)[sw] != nil }, 5*time.Second, 10*time.Millisecond)
		return lsByName(t, raw)[sw].OtherConfig
	}
	write("16777215")
	require.Eventually(t, func() bool { return otherConfig()[tr.KeyTunnel] == "16777215" }, 5*time.Second, 10*time.Millisecond)
	ls := lsByName(t, raw)[sw]
	ops, err := raw.Where(ls).Mutate(ls, model.Mutation{Field: &ls.OtherConfig, Mutator: ovsdb.MutateOperationInsert, Value: map[string]string{"mcast_snoop": "true"}})
	require.NoError(t, err)
	_, err = raw.Transact(ctx, ops...)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return otherConfig()["mcast_snoop"] == "true" }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		var rows []*nbmodel.LogicalSwitch
		_ = ours.List(ctx, &rows)
		return len(rows) == 1 && rows[0].OtherConfig["mcast_snoop"] == "true"
	}, 5*time.Second, 10*time.Millisecond)

	assert.Zero(t, write("16777215").Transactions, "the other tool's key is not ours to remove")
	res := write("16777214")
	require.Eventually(t, func() bool { return otherConfig()[tr.KeyTunnel] == "16777214" }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, map[string]string{tr.KeyTunnel: "16777214", "mcast_snoop": "true"}, otherConfig())
	require.Len(t, res.Units, 1)
	assert.Contains(t, res.Units[0].Changes[0].String(), `other_config: {requested-tnl-key="16777215"} -> {requested-tnl-key="16777214"}`)
	write("")
	require.Eventually(t, func() bool { return otherConfig()[tr.KeyTunnel] == "" }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, map[string]string{"mcast_snoop": "true"}, otherConfig())
}

// TestDualStackSync: a dual stack network's rows (the router port's IPv6
// gateway and router advertisements, the VM ports' IPv6 addresses) are
// written once, a second sync writes nothing, and a VM port's IPv6
// address is its claim: the port holding it keeps it, also when a VM
// whose name sorts first reports it later.
func TestDualStackSync(t *testing.T) {
	ours, _ := connect(t, startNB(t))
	s := example()
	s.Networks[1].IPv6CIDR, s.Networks[1].IPv6GatewayIP = "fd00:10::/64", "fd00:10::1"
	requireNoFailures(t, sync(t, ours, s))
	requireIdle(t, ours, s)

	held, err := nb.HeldClaims(context.Background(), ours, instance)
	require.NoError(t, err)
	const vmA6 = "fd00:10::5254:ff:fe00:5"
	assert.Equal(t, "kv-net-a_default_vm-a_eth1", held.VMAddresses["net-a "+vmA6])
	lrp := &nbmodel.LogicalRouterPort{Name: tr.RouterPortName("router1", "net-a")}
	require.NoError(t, ours.Get(context.Background(), lrp))
	assert.Equal(t, []string{"10.10.0.1/24", "fd00:10::1/64"}, lrp.Networks)
	assert.Equal(t, "slaac", lrp.Ipv6RaConfigs["address_mode"])

	s.Held = held
	s.VMs = append(s.VMs, tr.VMInterface{Namespace: "default", VMI: "a-vm", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
		MAC: "50:54:00:00:00:07", IP: "10.10.0.7", IPv6: vmA6})
	plan := tr.Build(s, instance)
	require.Len(t, plan.Errors, 1)
	assert.Contains(t, plan.Errors[0].Error(), "VirtualMachineInstance default/a-vm: status.interfaces[eth1].ipAddresses "+vmA6+" is already the IPv6 address of VirtualMachineInstance default/vm-a interface eth1 on network net-a")
}

// TestDHCPv6Sync: a network turned dhcpv6-stateful gets a second
// DHCP_Options row, for its ipv6Cidr, which its VM ports refer to in
// dhcpv6_options beside their dhcpv4_options; a second sync writes
// nothing; back to slaac the row goes and the references with it.
func TestDHCPv6Sync(t *testing.T) {
	ours, _ := connect(t, startNB(t))
	s := example()
	s.Networks[1].IPv6CIDR, s.Networks[1].IPv6GatewayIP, s.Networks[1].IPv6AddressMode = "fd00:10::/64", "fd00:10::1", "dhcpv6-stateful"
	requireNoFailures(t, sync(t, ours, s))
	requireIdle(t, ours, s)
	var opts []nbmodel.DHCPOptions
	require.NoError(t, ours.List(context.Background(), &opts))
	byCIDR := map[string]nbmodel.DHCPOptions{}
	for _, o := range opts {
		byCIDR[o.Cidr] = o
	}
	require.Contains(t, byCIDR, "fd00:10::/64")
	require.Contains(t, byCIDR, "10.10.0.0/24")
	lsp := &nbmodel.LogicalSwitchPort{Name: "kv-net-a_default_vm-a_eth1"}
	require.NoError(t, ours.Get(context.Background(), lsp))
	require.NotNil(t, lsp.Dhcpv6Options)
	assert.Equal(t, byCIDR["fd00:10::/64"].UUID, *lsp.Dhcpv6Options)
	require.NotNil(t, lsp.Dhcpv4Options)
	assert.Equal(t, byCIDR["10.10.0.0/24"].UUID, *lsp.Dhcpv4Options)

	s.Networks[1].IPv6AddressMode = ""
	requireNoFailures(t, sync(t, ours, s))
	requireIdle(t, ours, s)
	opts = nil
	require.NoError(t, ours.List(context.Background(), &opts))
	for _, o := range opts {
		assert.NotEqual(t, "fd00:10::/64", o.Cidr)
	}
	require.NoError(t, ours.Get(context.Background(), lsp))
	assert.Nil(t, lsp.Dhcpv6Options)
	assert.NotNil(t, lsp.Dhcpv4Options)
}

// TestOneShotSyncNamesEarlierTransactionsRowsByUUID (on ovsdb-server): a
// one-shot sync (no monitor: its cache never holds what it wrote) split in
// several transactions names the parents an earlier transaction inserted
// by UUID, from that transaction's results. By name (a wait and a mutate
// whose where clause is the name) ovsdb-server scans the whole table for
// each: at 10,000 routers three quarters of the server's work, 62 s of
// CPU where the same rows in one transaction took 15 s.
func TestOneShotSyncNamesEarlierTransactionsRowsByUUID(t *testing.T) {
	ep := ovn.Endpoint{Address: "unix:" + nbtest.Real(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	oneShot, err := ovn.DialNB(ctx, ep, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(oneShot.Close)
	require.NoError(t, ovn.ReadOwned(ctx, oneShot, instance))
	rec := &countingClient{Client: oneShot}
	res, err := nb.Sync(ctx, rec, tr.Build(manyRouters(20), instance), nb.SyncOptions{Instance: instance, BatchOps: 60})
	require.NoError(t, err)
	requireNoFailures(t, res)
	require.Greater(t, res.Transactions, 2, "the batches split the sync")
	assert.Empty(t, rec.errs)
	assert.Empty(t, rec.byName, "a row of an earlier transaction named by its name")

	ours, _ := connect(t, ep.Address)
	requireIdle(t, ours, manyRouters(20))
}
