package nb_test

import (
	"context"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

var (
	t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

// withFloatingIP is example() with floating IP fip-1 bound to vm-a.
func withFloatingIP() *tr.Snapshot {
	s := example()
	s.FloatingIPs = []tr.FloatingIP{{Name: "fip-1", ID: "fip-1", Router: "router1", Network: "public", IP: "172.16.0.50", FixedIP: "10.10.0.5", VMName: "vm-a"}}
	return s
}

func changeList(res *nb.SyncResult) []nb.Change {
	var out []nb.Change
	for _, u := range res.Units {
		out = append(out, u.Changes...)
	}
	return out
}

func dnatRows(t *testing.T, raw client.Client) []*nbmodel.NAT {
	t.Helper()
	var out []*nbmodel.NAT
	for _, n := range list[nbmodel.NAT](t, raw) {
		if n.Type == nbmodel.NATTypeDNATAndSNAT {
			out = append(out, n)
		}
	}
	return out
}

// TestSyncFloatingIPMoveIsOneUpdate: a floating IP moved from VM A to VM B
// in one edit is one update of its NAT row's logical_ip (the row keeps its
// UUID: identified by its external IP), and a second sync writes nothing.
func TestSyncFloatingIPMoveIsOneUpdate(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withFloatingIP()
	requireNoFailures(t, sync(t, ours, s))
	before := dnatRows(t, raw)
	require.Len(t, before, 1)
	assert.Equal(t, "172.16.0.50", before[0].ExternalIP)
	assert.Equal(t, "10.10.0.5", before[0].LogicalIP)
	assert.Equal(t, "fip-1", before[0].ExternalIDs[tr.KeyFloatingIP])
	assert.Nil(t, before[0].LogicalPort, "centralized: no logical_port")
	assert.Nil(t, before[0].ExternalMAC, "centralized: no external_mac")
	snatsBefore := nats(t, raw)
	requireIdle(t, ours, s)

	s.FloatingIPs[0].FixedIP, s.FloatingIPs[0].VMName = "10.20.0.6", "default/vm-b"
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	assert.Equal(t, []nb.Change{{Action: nb.Update, Table: nbmodel.NATTable, Name: "dnat_and_snat 172.16.0.50",
		Detail: `logical_ip: "10.10.0.5" -> "10.20.0.6"`}}, changeList(res))
	after := dnatRows(t, raw)
	require.Len(t, after, 1)
	assert.Equal(t, before[0].UUID, after[0].UUID, "updated in place")
	assert.Equal(t, "10.20.0.6", after[0].LogicalIP)
	for ip, n := range nats(t, raw) {
		if n.Type == nbmodel.NATTypeSNAT {
			assert.Equal(t, snatsBefore[ip].UUID, n.UUID, "snat %s untouched", ip)
		}
	}
	requireIdle(t, ours, s)

	// Deleted while bound: its row goes, the snat rows stay.
	s.FloatingIPs = nil
	res = sync(t, ours, s)
	requireNoFailures(t, res)
	assert.Equal(t, []nb.Change{{Action: nb.Delete, Table: nbmodel.NATTable, Name: "dnat_and_snat 172.16.0.50"}}, changeList(res))
	assert.Empty(t, dnatRows(t, raw))
	assert.Len(t, lrByName(t, raw)["kv-router1"].Nat, 2)
}

// TestFloatingIPClaimsReadFromNB: who holds a floating IP and a fixed IP is
// read from the NAT rows, and the holder keeps them against an older
// claimant that comes later.
func TestFloatingIPClaimsReadFromNB(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withFloatingIP()
	s.FloatingIPs[0].Created = t1
	requireNoFailures(t, sync(t, ours, s))

	held, err := nb.HeldClaims(context.Background(), ours, instance)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"172.16.0.50": "fip-1"}, held.FloatingIPs)
	assert.Equal(t, map[string]string{"router1 10.10.0.5": "fip-1"}, held.FixedIPs)

	// An older floating IP claims the same address and fixed IP.
	s.FloatingIPs = append(s.FloatingIPs, tr.FloatingIP{Name: "fip-0", ID: "fip-0", Router: "router1", Network: "public", IP: "172.16.0.50", FixedIP: "10.10.0.5", Created: t0})
	s.Held = held
	plan := tr.Build(s, instance)
	require.Len(t, plan.FloatingIPs, 2)
	assert.Equal(t, "FloatingIp fip-0: spec.floatingIp 172.16.0.50 is already the floating IP of FloatingIp fip-1", plan.FloatingIPs[0].Reason)
	assert.True(t, plan.FloatingIPs[1].Ready)
	res, err := nb.Sync(context.Background(), ours, plan, nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	requireNoFailures(t, res)
	assert.Empty(t, res.Changes(), "fip-1 keeps its row")
	assert.Equal(t, "fip-1", dnatRows(t, raw)[0].ExternalIDs[tr.KeyFloatingIP])
}

// TestSyncFloatingIPWithoutSNAT: a router with enableSnat false and a
// floating IP keeps its gateway side with no snat row, and policies that
// let out only the floating IP's fixed address; without the floating IP
// its external side goes, policies and all.
func TestSyncFloatingIPWithoutSNAT(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withFloatingIP()
	s.Routers[0].EnableSNAT = false
	requireNoFailures(t, sync(t, ours, s))
	lr := lrByName(t, raw)["kv-router1"]
	require.NotNil(t, lr)
	assert.Contains(t, lrps(t, raw), "kv-rtoe-router1")
	assert.Len(t, lr.Nat, 1)
	assert.Len(t, lr.StaticRoutes, 1)
	policies := byName(t, raw, func(p *nbmodel.LogicalRouterPolicy) string { return p.Match })
	require.Len(t, policies, 2)
	assert.Equal(t, nbmodel.LogicalRouterPolicyActionAllow, policies["ip4.src == 10.10.0.5 || ip4.dst == 172.16.0.50"].Action)
	drop := policies["ip4.src == {10.10.0.0/24, 10.20.0.0/24} && ip4.dst != {10.10.0.0/24, 10.20.0.0/24}"]
	require.NotNil(t, drop)
	assert.Equal(t, nbmodel.LogicalRouterPolicyActionDrop, drop.Action)
	assert.ElementsMatch(t, []string{drop.UUID, policies["ip4.src == 10.10.0.5 || ip4.dst == 172.16.0.50"].UUID}, lr.Policies)
	requireIdle(t, ours, s)

	s.FloatingIPs = nil
	requireNoFailures(t, sync(t, ours, s))
	assert.Empty(t, list[nbmodel.LogicalRouterPolicy](t, raw))
	assert.Empty(t, list[nbmodel.NAT](t, raw))
	assert.NotContains(t, lrps(t, raw), "kv-rtoe-router1")
	requireIdle(t, ours, s)
}
