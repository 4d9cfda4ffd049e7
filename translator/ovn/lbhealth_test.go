package ovn

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestOfflineMembers: a zone's offline members are its Service_Monitors
// whose status ovn-controller set to offline (as ovn-northd and
// ovn-controller write them); online ones and a remote twin's, which has
// no status, are not; an online one going offline is read from the
// monitor's cache.
func TestOfflineMembers(t *testing.T) {
	s := newRealSB(t)
	ctx := context.Background()
	s.ctl("create", "Service_Monitor", "ip=10.10.0.5", "port=8080", "protocol=tcp", "logical_port=kv-net-a_default_vm-a_eth1", "src_ip=10.10.0.250", "status=offline")
	c := s.ctl("create", "Service_Monitor", "ip=10.10.0.7", "port=8080", "protocol=tcp", "logical_port=kv-net-a_default_vm-c_eth1", "src_ip=10.10.0.250", "status=online")
	s.ctl("create", "Service_Monitor", "ip=10.10.0.8", "port=53", "protocol=udp", "logical_port=kv-net-a_default_vm-d_eth1", "src_ip=10.10.0.250")
	a := translator.OfflineMember{Port: "kv-net-a_default_vm-a_eth1", IP: "10.10.0.5", Protocol: "tcp", PortNum: 8080}
	s.cached(func() bool {
		down, err := OfflineMembers(ctx, s.sb)
		return err == nil && len(down) == 1
	}, "vm-a offline")
	down, err := OfflineMembers(ctx, s.sb)
	require.NoError(t, err)
	assert.Equal(t, []translator.OfflineMember{a}, down)

	s.ctl("set", "Service_Monitor", c, "status=offline")
	s.cached(func() bool {
		down, err := OfflineMembers(ctx, s.sb)
		return err == nil && len(down) == 2
	}, "vm-c offline")
	down, err = OfflineMembers(ctx, s.sb)
	require.NoError(t, err)
	assert.Equal(t, []translator.OfflineMember{a, {Port: "kv-net-a_default_vm-c_eth1", IP: "10.10.0.7", Protocol: "tcp", PortNum: 8080}}, down)
}
