package nb_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestSyncDefaultDeny: with DefaultDeny each network's default-deny
// Port_Group is written with its VM ports and base ACLs beside the
// security groups, a second sync writes nothing, a VM gone leaves its
// network's group, and without DefaultDeny the groups go with their ACLs
// while the security groups stay.
func TestSyncDefaultDeny(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := withSecurityGroups()
	s.DefaultDeny = true
	requireNoFailures(t, sync(t, ours, s))
	pgs := portGroups(t, raw)
	netA, netB, pub := pgs[tr.NetworkPortGroupName("net-a")], pgs[tr.NetworkPortGroupName("net-b")], pgs[tr.NetworkPortGroupName("public")]
	require.NotNil(t, netA)
	require.NotNil(t, netB)
	require.NotNil(t, pub)
	assert.Equal(t, []string{tr.VMPortName("net-a", "default", "vm-a", "eth1")}, portNames(t, raw, netA))
	assert.Equal(t, []string{tr.VMPortName("net-b", "default", "vm-b", "eth1")}, portNames(t, raw, netB))
	assert.Empty(t, pub.Ports, "the localnet port is no VM port")
	assert.Equal(t, "net-a", netA.ExternalIDs[tr.KeyOwner])
	assert.Len(t, netA.ACLs, 4, "drop both ways, DHCP, gateway ping")
	assert.Len(t, portGroups(t, raw), 5, "three networks' groups, two security groups")
	assert.Len(t, list[nbmodel.ACL](t, raw), 10+3*4)
	requireIdle(t, ours, s)

	// vm-b goes: its network's group is left empty.
	s.VMs = s.VMs[:1]
	requireNoFailures(t, sync(t, ours, s))
	assert.Empty(t, portGroups(t, raw)[tr.NetworkPortGroupName("net-b")].Ports)
	assert.Equal(t, netB.UUID, portGroups(t, raw)[tr.NetworkPortGroupName("net-b")].UUID, "the same row")
	requireIdle(t, ours, s)

	// Off: the networks' groups and their ACLs go, the security groups stay.
	s.DefaultDeny = false
	requireNoFailures(t, sync(t, ours, s))
	pgs = portGroups(t, raw)
	assert.Len(t, pgs, 2)
	assert.Contains(t, pgs, tr.PortGroupName("sg-web"))
	assert.Contains(t, pgs, tr.PortGroupName("sg-db"))
	assert.Len(t, list[nbmodel.ACL](t, raw), 10)
	requireIdle(t, ours, s)
}
