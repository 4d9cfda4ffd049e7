package nb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// withSecurityGroups is example() with vm-a in sg-web and sg-db, vm-b in
// sg-db, sg-db's port open to sg-web's members.
func withSecurityGroups() *tr.Snapshot {
	s := example()
	s.VMs[0].SecurityGroups = "sg-db,sg-web"
	s.VMs[1].SecurityGroups = "sg-db"
	http, pg := 80, 5432
	s.SecurityGroups = []tr.SecurityGroup{
		{Name: "sg-web", ID: "sg-web", Rules: []tr.SecurityGroupRule{{ID: "web-http", Direction: "ingress", Protocol: "tcp", PortRangeMin: &http}}},
		{Name: "sg-db", ID: "sg-db"},
	}
	s.SecurityGroupRules = []tr.SecurityGroupRule{{Name: "db-pg", ID: "db-pg", SecurityGroupID: "sg-db", Direction: "ingress", Protocol: "tcp", PortRangeMin: &pg, RemoteGroupID: "sg-web"}}
	return s
}

func portGroups(t *testing.T, raw client.Client) map[string]*nbmodel.PortGroup {
	return byName(t, raw, func(p *nbmodel.PortGroup) string { return p.Name })
}

// portNames are the names of the switch ports pg refers to.
func portNames(t *testing.T, raw client.Client, pg *nbmodel.PortGroup) []string {
	t.Helper()
	byUUID := map[string]string{}
	for _, p := range list[nbmodel.LogicalSwitchPort](t, raw) {
		byUUID[p.UUID] = p.Name
	}
	var out []string
	for _, u := range pg.Ports {
		out = append(out, byUUID[u])
	}
	return out
}

// TestSyncSecurityGroups: each group is a Port_Group of its VM ports with
// its ACLs, written with the networks' ports in one sync; a second sync
// writes nothing; a rule edit is one update of its ACL in place; a VM
// leaving a group leaves its Port_Group; a group deleted takes its ACLs.
func TestSyncSecurityGroups(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withSecurityGroups()
	requireNoFailures(t, sync(t, ours, s))
	pgs := portGroups(t, raw)
	web, db := pgs[tr.PortGroupName("sg-web")], pgs[tr.PortGroupName("sg-db")]
	require.NotNil(t, web)
	require.NotNil(t, db)
	portA := tr.VMPortName("net-a", "default", "vm-a", "eth1")
	portB := tr.VMPortName("net-b", "default", "vm-b", "eth1")
	assert.Equal(t, []string{portA}, portNames(t, raw, web))
	assert.ElementsMatch(t, []string{portA, portB}, portNames(t, raw, db))
	assert.Len(t, web.ACLs, 5, "drop both ways, DHCP, gateway ping, web-http")
	assert.Len(t, db.ACLs, 5, "drop both ways, DHCP, gateway ping, db-pg")
	assert.Len(t, list[nbmodel.ACL](t, raw), 10)
	requireIdle(t, ours, s)

	// A rule edit: its ACL's match, in place.
	var before *nbmodel.ACL
	for _, a := range list[nbmodel.ACL](t, raw) {
		if a.ExternalIDs[tr.KeySecurityACL] == "rule/web-http" {
			before = a
		}
	}
	require.NotNil(t, before)
	https := 443
	s.SecurityGroups[0].Rules[0].PortRangeMin = &https
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	changes := changeList(res)
	require.Len(t, changes, 1)
	assert.Equal(t, nb.Update, changes[0].Action)
	assert.Equal(t, nbmodel.ACLTable, changes[0].Table)
	assert.Contains(t, changes[0].Detail, "tcp.dst == 443")
	var after *nbmodel.ACL
	for _, a := range list[nbmodel.ACL](t, raw) {
		if a.ExternalIDs[tr.KeySecurityACL] == "rule/web-http" {
			after = a
		}
	}
	require.NotNil(t, after)
	assert.Equal(t, before.UUID, after.UUID, "updated in place")
	assert.Equal(t, "outport == @"+tr.PortGroupName("sg-web")+" && ip4 && tcp && tcp.dst == 443", after.Match)
	requireIdle(t, ours, s)

	// vm-a leaves sg-db.
	s.VMs[0].SecurityGroups = "sg-web"
	requireNoFailures(t, sync(t, ours, s))
	assert.Equal(t, []string{portB}, portNames(t, raw, portGroups(t, raw)[tr.PortGroupName("sg-db")]))
	assert.Contains(t, byName(t, raw, func(p *nbmodel.LogicalSwitchPort) string { return p.Name }), portA, "its port stays")
	requireIdle(t, ours, s)

	// vm-b goes: its port leaves sg-db in the same sync (the network
	// deletes the port, the group drops its reference).
	s.VMs = s.VMs[:1]
	requireNoFailures(t, sync(t, ours, s))
	assert.Empty(t, portGroups(t, raw)[tr.PortGroupName("sg-db")].Ports)
	requireIdle(t, ours, s)

	// sg-db goes: sg-web's rules do not name it; its rows go, its
	// rule object with it (a rule of an undeclared group plans nothing).
	s.SecurityGroups = s.SecurityGroups[:1]
	s.SecurityGroupRules = nil
	requireNoFailures(t, sync(t, ours, s))
	pgs = portGroups(t, raw)
	assert.NotContains(t, pgs, tr.PortGroupName("sg-db"))
	assert.Len(t, list[nbmodel.ACL](t, raw), 5)
	requireIdle(t, ours, s)
}

// TestSyncLargeSecurityGroup: a group of 120 ports (which the differ reads
// through one walk of the switch port table rather than a lookup per
// port) is written whole; a second sync writes nothing; members leaving
// and joining change exactly those references; another tool's port in
// the Port_Group stays.
func TestSyncLargeSecurityGroup(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withSecurityGroups()
	var want []string
	for i := 0; i < 120; i++ {
		v := tr.VMInterface{Namespace: "default", VMI: fmt.Sprintf("big-%d", i), Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
			MAC: fmt.Sprintf("50:54:00:00:01:%02x", i), IP: fmt.Sprintf("10.10.0.%d", 100+i), SecurityGroups: "sg-web"}
		s.VMs = append(s.VMs, v)
		want = append(want, tr.VMPortName("net-a", "default", v.VMI, "eth1"))
	}
	want = append(want, tr.VMPortName("net-a", "default", "vm-a", "eth1"))
	requireNoFailures(t, sync(t, ours, s))
	web := tr.PortGroupName("sg-web")
	assert.ElementsMatch(t, want, portNames(t, raw, portGroups(t, raw)[web]))
	requireIdle(t, ours, s)

	// Another tool's port in our group.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls := &nbmodel.LogicalSwitch{UUID: "ls", Name: "other-ls", Ports: []string{"lsp"}}
	lsp := &nbmodel.LogicalSwitchPort{UUID: "lsp", Name: "other-port"}
	ops, err := raw.Create(lsp)
	require.NoError(t, err)
	lsOps, err := raw.Create(ls)
	require.NoError(t, err)
	ops = append(ops, lsOps...)
	pg := portGroups(t, raw)[web]
	mut, err := raw.Where(pg).Mutate(pg, model.Mutation{Field: &pg.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{"lsp"}})
	require.NoError(t, err)
	ops = append(ops, mut...)
	results, err := raw.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(results, ops)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var rows []*nbmodel.PortGroup
		_ = ours.List(ctx, &rows)
		return len(rows) == 2 && (rows[0].Name != web || len(rows[0].Ports) == len(want)+1) && (rows[1].Name != web || len(rows[1].Ports) == len(want)+1)
	}, 10*time.Second, 10*time.Millisecond)

	// Five members leave, vm-b joins.
	for i := 0; i < 5; i++ {
		s.VMs[2+i*10].SecurityGroups = ""
		want = slices.DeleteFunc(want, func(p string) bool { return p == tr.VMPortName("net-a", "default", s.VMs[2+i*10].VMI, "eth1") })
	}
	s.VMs[1].SecurityGroups = "sg-db,sg-web"
	want = append(want, tr.VMPortName("net-b", "default", "vm-b", "eth1"))
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	assert.ElementsMatch(t, append(slices.Clone(want), "other-port"), portNames(t, raw, portGroups(t, raw)[web]), "ours as planned, the other tool's kept")
	// The change names the references added and removed, not the 120
	// kept.
	var left []string
	for i := 0; i < 5; i++ {
		left = append(left, nbmodel.LogicalSwitchPortTable+" "+tr.VMPortName("net-a", "default", s.VMs[2+i*10].VMI, "eth1"))
	}
	slices.Sort(left)
	var pgChange []string
	for _, c := range changeList(res) {
		if c.Table == nbmodel.PortGroupTable && c.Name == web {
			pgChange = append(pgChange, c.Detail)
		}
	}
	assert.Equal(t, []string{"ports: added [" + nbmodel.LogicalSwitchPortTable + " " + tr.VMPortName("net-b", "default", "vm-b", "eth1") + "], removed [" + strings.Join(left, ", ") + "]"}, pgChange)
	requireIdle(t, ours, s)

	// Every member leaves but one, then all come back: exact both ways.
	saved := slices.Clone(s.VMs)
	for i := range s.VMs {
		if i != 0 {
			s.VMs[i].SecurityGroups = ""
		}
	}
	requireNoFailures(t, sync(t, ours, s))
	assert.ElementsMatch(t, []string{tr.VMPortName("net-a", "default", "vm-a", "eth1"), "other-port"}, portNames(t, raw, portGroups(t, raw)[web]))
	requireIdle(t, ours, s)
	s.VMs = saved
	requireNoFailures(t, sync(t, ours, s))
	assert.ElementsMatch(t, append(slices.Clone(want), "other-port"), portNames(t, raw, portGroups(t, raw)[web]))
	requireIdle(t, ours, s)
}

// TestSyncSecurityGroupsInZone: in interconnect mode, zone hv1's NB (vm-a's
// node; vm-b is in zone hv2) gets sg-web's and sg-db's Port_Groups with
// vm-a's port only, and sg-web's Address_Set (sg-db's rule names sg-web
// as its remote group) with its members' addresses; a second sync writes
// nothing; a member's address change updates the set in place.
func TestSyncSecurityGroupsInZone(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withSecurityGroups()
	s.Networks[2].Type = "GENEVE"
	s.VMs[0].Node, s.VMs[1].Node = "node-hv1", "node-hv2"
	s.VMs[1].SecurityGroups = "sg-db,sg-web"
	s.Interconnect, s.ChassisKnown = true, true
	s.Chassis = []tr.Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw1"},
		{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"},
		{Name: "hv2", Hostname: "node-hv2", Zone: "hv2"},
	}
	syncZone := func() *nb.SyncResult {
		t.Helper()
		res, err := nb.Sync(t.Context(), ours, tr.Build(s, instance), nb.SyncOptions{Instance: instance, Zone: "hv1"})
		require.NoError(t, err)
		requireNoFailures(t, res)
		return res
	}
	syncZone()
	pgs := portGroups(t, raw)
	portA := tr.VMPortName("net-a", "default", "vm-a", "eth1")
	require.Contains(t, pgs, tr.PortGroupName("sg-web"))
	require.Contains(t, pgs, tr.PortGroupName("sg-db"))
	assert.Equal(t, []string{portA}, portNames(t, raw, pgs[tr.PortGroupName("sg-web")]), "only the zone's own member")
	assert.Equal(t, []string{portA}, portNames(t, raw, pgs[tr.PortGroupName("sg-db")]))
	sets := byName(t, raw, func(a *nbmodel.AddressSet) string { return a.Name })
	require.Len(t, sets, 1)
	set := sets[tr.AddressSetName("sg-web")]
	require.NotNil(t, set)
	assert.Equal(t, []string{s.VMs[0].IP, s.VMs[1].IP}, set.Addresses, "every zone's members")
	assert.Equal(t, "sg-web", set.ExternalIDs[tr.KeySecurityGroup])
	assert.Equal(t, tr.NotAnOVNKNetwork, set.ExternalIDs[tr.KeyOVNKOwnerController], "ovnkube-controller v1.0.0's address-set syncer leaves it")
	var rule *nbmodel.ACL
	for _, a := range list[nbmodel.ACL](t, raw) {
		if a.ExternalIDs[tr.KeySecurityACL] == "rule/db-pg" {
			rule = a
		}
	}
	require.NotNil(t, rule)
	assert.Contains(t, rule.Match, "ip4.src == $"+tr.AddressSetName("sg-web"))
	res, err := nb.Sync(t.Context(), ours, tr.Build(s, instance), nb.SyncOptions{Instance: instance, Zone: "hv1"})
	require.NoError(t, err)
	assert.Zero(t, res.Transactions, "a second sync writes nothing")

	// vm-b (zone hv2) takes another address: the set is updated in place.
	s.VMs[1].IP = "10.20.0.9"
	changes := changeList(syncZone())
	require.Len(t, changes, 1, "%v", changes)
	assert.Equal(t, nb.Update, changes[0].Action)
	assert.Equal(t, nbmodel.AddressSetTable, changes[0].Table)
	after := byName(t, raw, func(a *nbmodel.AddressSet) string { return a.Name })[tr.AddressSetName("sg-web")]
	assert.Equal(t, set.UUID, after.UUID)
	assert.Equal(t, []string{s.VMs[0].IP, "10.20.0.9"}, after.Addresses)
}
