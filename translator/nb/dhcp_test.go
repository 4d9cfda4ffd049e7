package nb_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// dhcpExample is example() with net-c, a network of no router with a VM,
// and DNS servers on net-a.
func dhcpExample() *tr.Snapshot {
	s := example()
	s.Networks[1].DNSes = []string{"10.0.0.53"}
	s.Networks = append(s.Networks, tr.Network{Name: "net-c", Namespace: "default", Type: "GENEVE", CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1", DefaultRoute: true})
	s.VMs = append(s.VMs, tr.VMInterface{Namespace: "default", VMI: "vm-c", Interface: "eth1", Network: "net-c", NetworkNamespace: "default", MAC: "50:54:00:00:00:07", IP: "10.30.0.7"})
	return s
}

// dhcpOf is the key (network) of the DHCP_Options row VM port p refers
// to, "" for none.
func dhcpOf(t *testing.T, raw client.Client, port string) string {
	t.Helper()
	p := lsps(t, raw)[port]
	require.NotNil(t, p, "port %s", port)
	if p.Dhcpv4Options == nil {
		return ""
	}
	for _, d := range list[nbmodel.DHCPOptions](t, raw) {
		if d.UUID == *p.Dhcpv4Options {
			return d.ExternalIDs[tr.KeyDHCPNetwork]
		}
	}
	return "?"
}

// A network's DHCP options: created with the ports that refer to them,
// nothing written by a second sync, updated in place when the network's
// options change, deleted with the references when its gatewayIp goes,
// and created again when it comes back.
func TestSyncDHCPOptions(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := dhcpExample()
	res := sync(t, ours, s)
	requireNoFailures(t, res)
	rows := dhcp(t, raw)
	assert.ElementsMatch(t, []string{"public", "net-a", "net-b", "net-c"}, slices.Collect(maps.Keys(rows)))
	assert.Equal(t, "10.10.0.0/24", rows["net-a"].Cidr)
	assert.Equal(t, "{10.0.0.53}", rows["net-a"].Options["dns_server"])
	assert.NotContains(t, rows["net-a"].Options, "router", "defaultRoute is false")
	assert.Equal(t, "10.30.0.1", rows["net-c"].Options["router"])
	assert.Equal(t, "net-a", dhcpOf(t, raw, "kv-net-a_default_vm-a_eth1"))
	assert.Equal(t, "net-c", dhcpOf(t, raw, "kv-net-c_default_vm-c_eth1"))
	assert.Equal(t, "", dhcpOf(t, raw, "kv-stor-net-a_router1"), "a router's port has none")
	assert.Equal(t, "", dhcpOf(t, raw, "kv-ln-public"), "a localnet port has none")
	requireIdle(t, ours, s)

	// dnses change: the row is updated in place, nothing else.
	before := rows["net-a"].UUID
	s.Networks[1].DNSes = []string{"10.0.0.53", "10.0.0.54"}
	res = sync(t, ours, s)
	requireNoFailures(t, res)
	lines := changeLines(res)
	require.Len(t, lines, 1, "%q", lines)
	assert.Contains(t, lines[0], `update DHCP_Options net-a (options: {dns_server="{10.0.0.53}", `)
	assert.Equal(t, before, dhcp(t, raw)["net-a"].UUID)
	assert.Equal(t, "{10.0.0.53, 10.0.0.54}", dhcp(t, raw)["net-a"].Options["dns_server"])
	requireIdle(t, ours, s)

	// net-c loses its gatewayIp: no DHCP, its row and the reference go
	// in one transaction.
	s.Networks[3].GatewayIP = ""
	res = sync(t, ours, s)
	requireNoFailures(t, res)
	assert.Equal(t, 1, res.Transactions)
	assert.NotContains(t, dhcp(t, raw), "net-c")
	assert.Equal(t, "", dhcpOf(t, raw, "kv-net-c_default_vm-c_eth1"))
	assert.Contains(t, changeLines(res), "delete DHCP_Options net-c")
	requireIdle(t, ours, s)

	s.Networks[3].GatewayIP = "10.30.0.1"
	requireNoFailures(t, sync(t, ours, s))
	assert.Equal(t, "net-c", dhcpOf(t, raw, "kv-net-c_default_vm-c_eth1"))
	requireIdle(t, ours, s)

	// The network goes: its row with it.
	s.Networks = s.Networks[:3]
	s.VMs = s.VMs[:2]
	requireNoFailures(t, sync(t, ours, s))
	assert.NotContains(t, dhcp(t, raw), "net-c")
	requireIdle(t, ours, s)
}
