package ovn

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// TestZoneSBKeys: a zone SB's keys read by selects (sync) and from
// ConnectZoneSB's monitor (run) are the same: every datapath's, and the
// keys of the named ports of ours. The monitor holds our port bindings
// (ovn-northd copies our managed-by from the port's external_ids), not the
// others of the zone.
func TestZoneSBKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &realSB{t: t, sock: nbtest.RealSB(t)}
	s.ctl("init")
	zc, err := ConnectZoneSB(ctx, Endpoint{Address: "unix:" + s.sock, Timeout: time.Second}, "kv", logr.Discard())
	require.NoError(t, err)
	t.Cleanup(zc.Close)

	ours := s.ctl("create", "Datapath_Binding", "tunnel_key=7", "external_ids:logical-switch=11111111-1111-1111-1111-111111111111", "external_ids:name=kv-net-a")
	s.ctl("create", "Datapath_Binding", "tunnel_key=16711680", "external_ids:logical-switch=22222222-2222-2222-2222-222222222222", "external_ids:name=other")
	// pod1 first: once the monitor brings kv-vm1, it would have brought
	// pod1 too.
	s.ctl("create", "Port_Binding", "logical_port=pod1", "datapath="+ours, "tunnel_key=4")
	s.ctl("create", "Port_Binding", "logical_port=kv-vm1", "datapath="+ours, "tunnel_key=3", "external_ids:"+translator.KeyManagedBy+"=kv")

	want := translator.SBKeys{
		Datapaths: []translator.SBDatapath{
			{NBUUID: "11111111-1111-1111-1111-111111111111", Name: "kv-net-a", Key: 7},
			{NBUUID: "22222222-2222-2222-2222-222222222222", Name: "other", Key: 16711680},
		},
		Ports: map[string]int{"kv-vm1": 3},
	}
	selected, err := ReadSBKeys(ctx, zc, []string{"kv-vm1", "kv-vm-gone"})
	require.NoError(t, err)
	assert.ElementsMatch(t, want.Datapaths, selected.Datapaths)
	assert.Equal(t, want.Ports, selected.Ports)

	require.Eventually(t, func() bool {
		var dps []*sbmodel.DatapathBinding
		pb := &sbmodel.PortBinding{LogicalPort: "kv-vm1"}
		return zc.List(ctx, &dps) == nil && len(dps) == 2 && zc.Get(ctx, pb) == nil
	}, 30*time.Second, 5*time.Millisecond, "the monitor never brought the datapaths and our port")
	cached, err := CachedSBKeys(ctx, zc, []string{"kv-vm1", "kv-vm-gone"})
	require.NoError(t, err)
	assert.ElementsMatch(t, want.Datapaths, cached.Datapaths)
	assert.Equal(t, want.Ports, cached.Ports)
	assert.Equal(t, "11111111-1111-1111-1111-111111111111", SwitchOfDatapath(ctx, zc, ours))

	var pbs []*sbmodel.PortBinding
	require.NoError(t, zc.List(ctx, &pbs))
	require.Len(t, pbs, 1, "only our port binding is monitored")
	assert.Equal(t, "kv-vm1", pbs[0].LogicalPort)
}
