package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZonesDefaultDeny: in interconnect mode with --default-deny, each
// zone of net-a has the network's group with its own VM port. vm-a (zone
// hv1) gets its DHCP answer but its UDP to vm-c (net-a, zone hv2) is
// dropped; with zone hv1's egress drop taken out by hand it is still
// dropped, by vm-c's own zone (a packet leaves by its port's to-lport ACLs
// in the receiver's zone). Without the flag it passes.
func TestZonesDefaultDeny(t *testing.T) {
	e := newZoneEnv(t)
	const vmCPort, vmCMAC, vmCIP = "kv-net-a_default_vm-c_eth1", "50:54:00:00:00:07", "10.10.0.7"
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmCPort))
	e.write("vm-c.yaml", vmCOnNetA(vmCMAC, vmCIP))
	syncDeny := func() string {
		t.Helper()
		r := kubevirtOVN(t, e.syncArgs("--default-deny")...)
		require.Equal(t, 0, r.code, "kubevirt-ovn sync failed:\n%s", r.stderr)
		e.neighbour()
		e.realized()
		return r.stdout
	}
	syncDeny()
	pgPorts := func(zone string) string {
		t.Helper()
		out := nbctl(t, e.z.Zone(zone), "--bare", "--columns=name,ports", "find", "Port_Group", "external_ids:kubevirt-ovn/default-deny=net-a")
		return strings.Join(strings.Fields(out), " ")
	}
	lspUUID := func(zone, port string) string {
		return strings.TrimSpace(nbctl(t, e.z.Zone(zone), "get", "Logical_Switch_Port", port, "_uuid"))
	}
	assert.Contains(t, pgPorts("hv1"), lspUUID("hv1", vmAPort), "zone hv1: vm-a's port")
	assert.NotContains(t, pgPorts("hv1"), lspUUID("hv1", vmCPort), "zone hv1: not vm-c's remote twin")
	assert.Contains(t, pgPorts("hv2"), lspUUID("hv2", vmCPort), "zone hv2: vm-c's port")
	assert.NotContains(t, pgPorts("hv2"), lspUUID("hv2", vmAPort), "zone hv2: not vm-a's remote twin")

	e.ready("gw1")
	nbctl(t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmCPort, "up=true")
	atC := e.vm("hv2", "vm-c")
	toC := func(sport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SrcIP == vmAIP && s.SPort == sport && s.DPort == 9000 }
	}
	send := func(sport uint16) {
		t.Helper()
		require.NoError(t, e.z.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: vmCMAC, SrcIP: vmAIP, DstIP: vmCIP, TTL: 64, SPort: sport, DPort: 9000})))
	}
	// Dropped; barrier: vm-a's DHCP exchange, answered in its zone.
	skip := count(t, atC)
	send(8300)
	e.exchange(vmA, "net-a", netAGateway, 0x7000)
	requireNone(t, atC, "vm-a -> vm-c across zones (default deny)", skip, toC(8300))

	// Zone hv1's egress drop out: vm-c's zone still drops it.
	egress := strings.TrimSpace(nbctl(t, e.z.Zone("hv1"), "--bare", "--columns=_uuid", "find", "ACL", "external_ids:kubevirt-ovn/sg-acl=base/drop-egress"))
	require.NotEmpty(t, egress)
	pg := strings.TrimSpace(nbctl(t, e.z.Zone("hv1"), "--bare", "--columns=_uuid", "find", "Port_Group", "external_ids:kubevirt-ovn/default-deny=net-a"))
	nbctl(t, e.z.Zone("hv1"), "--wait=hv", "remove", "Port_Group", pg, "acls", egress)
	skip = count(t, atC)
	send(8301)
	e.exchange(vmA, "net-a", netAGateway, 0x7100)
	requireNone(t, atC, "vm-a -> vm-c across zones, zone hv1's egress drop out (vm-c's zone drops)", skip, toC(8301))
	assert.Contains(t, syncDeny(), "create ACL", "a sync puts the drop back")

	// Without the flag: open.
	e.sync()
	for _, zdb := range e.z.List() {
		assert.NotContains(t, nbctl(t, zdb, "--bare", "--columns=name", "list", "Port_Group"), "kv_net_", "zone %s", zdb.Name)
	}
	skip = count(t, atC)
	send(8302)
	waitFor(t, atC, "vm-a -> vm-c across zones without --default-deny", skip, toC(8302))
}
