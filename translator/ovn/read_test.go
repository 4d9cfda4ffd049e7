package ovn

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// ReadOwned fills the cache with what the monitor fills it with: our rows
// of every registry table (every Static_MAC_Binding), column for column,
// and not another tool's or another instance's rows.
func TestReadOwnedReadsWhatTheMonitorSees(t *testing.T) {
	ep := Endpoint{Address: "unix:" + nbtest.Serve(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mon, err := ConnectNB(ctx, ep, "test", logr.Discard())
	require.NoError(t, err)
	defer mon.Close()

	s := &translator.Snapshot{
		Networks: []translator.Network{
			{Name: "public", Namespace: "default", Type: "VLAN", SegmentID: "7", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
			{Name: "net-a", Namespace: "default", Type: "GENEVE", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
		},
		// No SNAT and a floating IP: NAT rows and policies.
		Routers: []translator.Router{{Name: "r1", Internal: []string{"net-a"}, Description: `a "quoted" \ description`,
			External: &translator.External{IP: "172.16.0.100", Network: "public"}, PeerRouter: &translator.PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"}, Gateway: "gw1"}},
		// The VM in a security group with a rule: a Port_Group and ACLs.
		VMs: []translator.VMInterface{{Namespace: "default", VMI: "vm", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5",
			SecurityGroups: "sg"}},
		SecurityGroups: []translator.SecurityGroup{{Name: "sg", ID: "sg", Rules: []translator.SecurityGroupRule{{ID: "ssh", SecurityGroupID: "sg",
			Direction: "ingress", EtherType: "IPv4", Protocol: "tcp", PortRangeMin: ptr(22), PortRangeMax: ptr(22), RemoteGroupID: "sg"}}}},
		FloatingIPs: []translator.FloatingIP{{Name: "fip", ID: "fip", Router: "r1", Network: "public", IP: "172.16.0.50", FixedIP: "10.10.0.5"}},
		// A load balancer with a health check: its rows and their children.
		LoadBalancers: []translator.LoadBalancer{{Name: "lb", ID: "lb", Network: "net-a", VIP: "10.10.0.100", Members: []string{"10.10.0.5"},
			Rules: []translator.LBRule{{Protocol: "tcp", PortMin: 80}}, HealthCheck: &translator.LBHealthCheck{SourceIP: "10.10.0.250"}}},
		// One zone of interconnect mode: a remote group's Address_Set
		// too.
		Interconnect: true, ChassisKnown: true,
		Chassis: []translator.Chassis{
			{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"public", "public2"}, Zone: "z1"},
			{Name: "gw2", Hostname: "node-gw2", Gateway: true, Physnets: []string{"public", "public2"}, Zone: "z1"},
			{Name: "hv1", Hostname: "node-hv1", Zone: "z1"},
		},
	}
	s.VMs[0].Node = "hv1"
	res, err := nb.Sync(ctx, mon, translator.Build(s, "test"), nb.SyncOptions{Instance: "test", Zone: "z1"})
	require.NoError(t, err)
	require.Empty(t, res.Failed())
	// Another instance's rows and a foreign column on ours.
	other, err := ConnectNB(ctx, ep, "other", logr.Discard())
	require.NoError(t, err)
	defer other.Close()
	s.Routers[0].External.IP = "172.16.0.101"
	s.Routers[0].Gateway = "gw2"
	s.Networks[0].Name, s.Networks[1].Name, s.VMs[0].Network = "public2", "net-b", "net-b"
	s.Routers[0].Internal, s.Routers[0].External.Network, s.Routers[0].Name = []string{"net-b"}, "public2", "r2"
	s.FloatingIPs[0].Router, s.FloatingIPs[0].Network = "r2", "public2"
	s.LoadBalancers[0].Name, s.LoadBalancers[0].Network = "lb2", "net-b"
	// Port_Group names are one namespace across instances.
	s.VMs[0].SecurityGroups, s.SecurityGroups[0].ID, s.SecurityGroups[0].Rules[0].SecurityGroupID = "sg2", "sg2", "sg2"
	s.SecurityGroups[0].Rules[0].RemoteGroupID = "sg2"
	res, err = nb.Sync(ctx, other, translator.Build(s, "other"), nb.SyncOptions{Instance: "other", Zone: "z1"})
	require.NoError(t, err)
	require.Empty(t, res.Failed())
	lr := &nbmodel.LogicalRouter{}
	lr.UUID = rowsByName(t, mon)["kv-r1"]
	lr.Enabled = ptr(false)
	ops, err := mon.Where(lr).Update(lr, &lr.Enabled)
	require.NoError(t, err)
	_, err = nb.Commit(ctx, mon, "foreign column", ops)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r := &nbmodel.LogicalRouter{UUID: lr.UUID}
		return mon.Get(ctx, r) == nil && r.Enabled != nil
	}, 5*time.Second, 10*time.Millisecond)

	require.NotEmpty(t, rowsByName(t, mon)["kv-r2"], "the other instance's router is in the NB")
	read, err := DialNB(ctx, ep, logr.Discard())
	require.NoError(t, err)
	defer read.Close()
	require.NoError(t, ReadOwned(ctx, read, "test"))
	assert.Len(t, read.Cache().Table(nbmodel.LogicalRouterTable).RowsShallow(), 1, "the other instance's router is not read")
	for _, tbl := range nb.Default.Tables() {
		want := rowsOf(t, mon, tbl.Name)
		got := rowsOf(t, read, tbl.Name)
		require.NotEmpty(t, want, tbl.Name)
		assert.Equal(t, want, got, tbl.Name)
	}
	// Read again: the cache is emptied first, not added to.
	require.NoError(t, ReadOwned(ctx, read, "test"))
	assert.Equal(t, rowsOf(t, mon, nbmodel.LogicalSwitchPortTable), rowsOf(t, read, nbmodel.LogicalSwitchPortTable))
}

func ptr[T any](v T) *T { return &v }

func rowsByName(t *testing.T, c client.Client) map[string]string {
	var rows []*nbmodel.LogicalRouter
	require.NoError(t, c.List(context.Background(), &rows))
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.UUID
	}
	return out
}

// rowsOf renders the cached rows of table that are ours (the test
// server's monitor ignores conditions) by UUID, each column that holds a
// value (so that an empty set and an absent one compare equal); the
// columns a one-shot read leaves out of a child table are left out.
func rowsOf(t *testing.T, c client.Client, table string) map[string]map[string]any {
	t.Helper()
	cols := nb.Default.ReadColumns(nb.Lookup(table))
	out := map[string]map[string]any{}
	for uuid, m := range c.Cache().Table(table).RowsShallow() {
		if ids, ok := m.(interface{ GetExternalIDs() map[string]string }); ok && ids.GetExternalIDs()[translator.KeyManagedBy] != "test" {
			continue
		}
		out[uuid] = columnsOf(m, cols)
	}
	return out
}

func columnsOf(m model.Model, cols []string) map[string]any {
	v := reflect.ValueOf(m).Elem()
	out := map[string]any{}
	for i := 0; i < v.NumField(); i++ {
		col := v.Type().Field(i).Tag.Get("ovsdb")
		f := v.Field(i)
		keep := false
		for _, c := range cols {
			keep = keep || c == col
		}
		if !keep || ((f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && f.Len() == 0) || (f.Kind() == reflect.Pointer && f.IsNil()) {
			continue
		}
		out[col] = f.Interface()
	}
	return out
}
