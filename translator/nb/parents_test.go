package nb_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// The parent index follows the cache: a router's port on a network switch
// is found on that switch, before and after the router moves to another
// external network, and is forgotten once the router is gone.
func TestParentIndexFollowsTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: "unix:" + nbtest.Serve(t)}, "test", logr.Discard())
	require.NoError(t, err)
	defer c.Close()
	idx := nb.NewParentIndex(c)
	s := &translator.Snapshot{
		Networks: []translator.Network{
			{Name: "public", Namespace: "default", Type: "FLAT", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
			{Name: "public2", Namespace: "default", Type: "FLAT", CIDR: "172.17.0.0/24", GatewayIP: "172.17.0.1"},
			{Name: "net-a", Namespace: "default", Type: "GENEVE", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
		},
		Routers: []translator.Router{{Name: "r1", EnableSNAT: true, Internal: []string{"net-a"},
			External: &translator.External{IP: "172.16.0.100", Network: "public"}, Gateway: "gw1"}},
	}
	sync := func() {
		res, err := nb.Sync(ctx, c, translator.Build(s, "test"), nb.SyncOptions{Instance: "test", Parents: idx})
		require.NoError(t, err)
		require.Empty(t, res.Failed())
	}
	uuidOfName := func(table string, name string) string {
		for uuid, m := range c.Cache().Table(table).RowsShallow() {
			switch r := m.(type) {
			case *nbmodel.LogicalSwitch:
				if r.Name == name {
					return uuid
				}
			case *nbmodel.LogicalSwitchPort:
				if r.Name == name {
					return uuid
				}
			}
		}
		return ""
	}
	parentIs := func(port, sw string) func() bool {
		return func() bool {
			return idx.ParentOf(uuidOfName(nbmodel.LogicalSwitchPortTable, port)) == uuidOfName(nbmodel.LogicalSwitchTable, sw)
		}
	}
	sync()
	require.Eventually(t, parentIs("kv-etor-r1", "kv-public"), 5*time.Second, 10*time.Millisecond)
	port := uuidOfName(nbmodel.LogicalSwitchPortTable, "kv-etor-r1")

	s.Routers[0].External = &translator.External{IP: "172.17.0.100", Network: "public2"}
	sync()
	require.Eventually(t, parentIs("kv-etor-r1", "kv-public2"), 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, port, uuidOfName(nbmodel.LogicalSwitchPortTable, "kv-etor-r1"), "moved, not recreated")

	s.Routers = nil
	sync()
	require.Eventually(t, func() bool { return idx.ParentOf(port) == "" }, 5*time.Second, 10*time.Millisecond)
}
