package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestFileDefaultDeny: with Options.DefaultDeny a network's VM ports are
// in its default-deny Port_Group with its base ACLs; a VM's address
// change reconciles its network, not the router, and its port stays in
// the group.
func TestFileDefaultDeny(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("public.yaml", incPublic)
	write("r1.yaml", incRouterFile(1, "172.16.1.11", 0))
	write("vm.yaml", sgVMFile(`[]`))

	nbc, ctx, take, idle := startFileController(t, dir, func(o *Options) { o.DefaultDeny = true })
	pgName := tr.NetworkPortGroupName("net-1-0")
	port := tr.VMPortName("net-1-0", "default", "vm-sg", "eth1")
	group := func() *nbmodel.PortGroup {
		var rows []*nbmodel.PortGroup
		require.NoError(t, nbc.List(ctx, &rows))
		for _, p := range rows {
			if p.Name == pgName {
				return p
			}
		}
		return nil
	}
	portUUID := func() string {
		var rows []*nbmodel.LogicalSwitchPort
		require.NoError(t, nbc.List(ctx, &rows))
		for _, p := range rows {
			if p.Name == port {
				return p.UUID
			}
		}
		return ""
	}
	require.Eventually(t, func() bool {
		g := group()
		return g != nil && len(g.Ports) == 2 && slices.Contains(g.Ports, portUUID()) && idle()
	}, 60*time.Second, 10*time.Millisecond, "the group of net-1-0 holds its two VM ports, vm-sg's among them")
	assert.Len(t, group().ACLs, 4)
	var acls []*nbmodel.ACL
	require.NoError(t, nbc.List(ctx, &acls))
	mine := 0
	for _, a := range acls {
		if strings.Contains(a.Match, "@"+pgName+" ") {
			mine++
		}
	}
	assert.Equal(t, 4, mine, "its ACLs match its group")
	take()

	// The VM's port changes address: its network is reconciled, the
	// router is not, and the group keeps the (updated) port.
	write("vm.yaml", strings.Replace(sgVMFile(`[]`), "10.1.0.50", "10.1.0.51", 1))
	require.Eventually(t, func() bool {
		var rows []*nbmodel.LogicalSwitchPort
		require.NoError(t, nbc.List(ctx, &rows))
		for _, p := range rows {
			if p.Name == port && len(p.Addresses) == 1 && strings.HasSuffix(p.Addresses[0], "10.1.0.51") {
				return idle()
			}
		}
		return false
	}, 60*time.Second, 10*time.Millisecond)
	got := take()
	assert.Contains(t, got, tr.Unit{Kind: tr.KindNetwork, Name: "net-1-0"})
	assert.NotContains(t, got, tr.Unit{Kind: tr.KindRouter, Name: "r1"})
	assert.Contains(t, group().Ports, portUUID())
	assert.Len(t, group().Ports, 2)
}
