package ovn

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// ReadZoneKeys reads, from Debian's ovsdb-server, the keys other tools'
// switches and routers request, not ours nor keyless rows, and max_tunid.
func TestReadZoneKeysReadsForeignKeysAndMaxTunID(t *testing.T) {
	sock := nbtest.Real(t)
	ctl := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ovn-nbctl", append([]string{"--db=unix:" + sock}, args...)...).CombinedOutput()
		require.NoError(t, err, "ovn-nbctl %s: %s", strings.Join(args, " "), out)
	}
	ctl("init")
	ctl("ls-add", "transit_switch", "--", "set", "Logical_Switch", "transit_switch", "other_config:requested-tnl-key=16711683", "other_config:interconn-ts=transit_switch")
	ctl("ls-add", "squatter", "--", "set", "Logical_Switch", "squatter", "other_config:requested-tnl-key=16711680")
	ctl("ls-add", "keyless")
	ctl("ls-add", "kv-net-a", "--", "set", "Logical_Switch", "kv-net-a", "other_config:requested-tnl-key=16711679", "external_ids:"+translator.KeyManagedBy+"=test")
	ctl("ls-add", "kv-other-instance", "--", "set", "Logical_Switch", "kv-other-instance", "other_config:requested-tnl-key=16711678", "external_ids:"+translator.KeyManagedBy+"=other")
	ctl("lr-add", "transit_router", "--", "set", "Logical_Router", "transit_router", "options:requested-tnl-key=16715779")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ConnectNB(ctx, Endpoint{Address: "unix:" + sock}, "test", logr.Discard())
	require.NoError(t, err)
	defer c.Close()

	zk, err := ReadZoneKeys(ctx, c, "test")
	require.NoError(t, err)
	assert.Equal(t, []translator.ForeignKey{
		{Key: 16711678, Holder: "Logical_Switch kv-other-instance"},
		{Key: 16711680, Holder: "Logical_Switch squatter"},
		{Key: 16711683, Holder: "Logical_Switch transit_switch"},
		{Key: 16715779, Holder: "Logical_Router transit_router"},
	}, zk.Foreign, "another instance's rows are not ours either")
	assert.Zero(t, zk.MaxTunID, "no northd has written it")
	assert.NoError(t, zk.CheckGeneve("hv1"))

	ctl("set", "NB_Global", ".", "options:max_tunid=16711680")
	zk, err = ReadZoneKeys(ctx, c, "test")
	require.NoError(t, err)
	assert.Equal(t, 16711680, zk.MaxTunID)
	assert.NoError(t, zk.CheckGeneve("hv1"))

	ctl("set", "NB_Global", ".", "options:max_tunid=4095")
	zk, err = ReadZoneKeys(ctx, c, "test")
	require.NoError(t, err)
	assert.EqualError(t, zk.CheckGeneve("hv1"), "zone hv1: NB_Global options:max_tunid=4095 (VXLAN): kubevirt-ovn's interconnect tunnel keys need Geneve (max_tunid 16711680)")
}
