package translator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

func TestCheckTunnelKeys(t *testing.T) {
	sw := KeyRequest{Network: "net-a", Switch: "kv-net-a", SwitchUUID: "u-a", Key: 100}
	port := KeyRequest{Network: "net-a", Switch: "kv-net-a", Port: "kv-vm1", Key: 32767}
	foreign := SBDatapath{NBUUID: "u-foreign", Name: "foreign", Key: 100}
	for _, tc := range []struct {
		name string
		want []KeyRequest
		sb   SBKeys
		out  []KeyMismatch
	}{
		{name: "switch has its key, by UUID",
			want: []KeyRequest{sw}, sb: SBKeys{Datapaths: []SBDatapath{{NBUUID: "u-a", Name: "kv-net-a", Key: 100}}}},
		{name: "switch given another key: the holder is named",
			want: []KeyRequest{sw}, sb: SBKeys{Datapaths: []SBDatapath{foreign, {NBUUID: "u-a", Name: "kv-net-a", Key: 7}}},
			out: []KeyMismatch{{Zone: "z1", KeyRequest: sw, Actual: 7, Holder: "foreign"}}},
		{name: "holder without a name is named by its NB UUID",
			want: []KeyRequest{sw}, sb: SBKeys{Datapaths: []SBDatapath{{NBUUID: "u-foreign", Key: 100}, {NBUUID: "u-a", Key: 7}}},
			out: []KeyMismatch{{Zone: "z1", KeyRequest: sw, Actual: 7, Holder: "u-foreign"}}},
		{name: "matched by UUID, not by name: a foreign datapath of our switch's name is not ours",
			want: []KeyRequest{sw}, sb: SBKeys{Datapaths: []SBDatapath{{NBUUID: "u-x", Name: "kv-net-a", Key: 9}, {NBUUID: "u-a", Key: 100}}}},
		{name: "UUID unknown: the only binding of its name",
			want: []KeyRequest{{Network: "net-a", Switch: "kv-net-a", Key: 100}}, sb: SBKeys{Datapaths: []SBDatapath{{Name: "kv-net-a", Key: 5}}},
			out: []KeyMismatch{{Zone: "z1", KeyRequest: KeyRequest{Network: "net-a", Switch: "kv-net-a", Key: 100}, Actual: 5, Free: true}}},
		{name: "UUID known but no binding of it: another row's binding of the same name is not ours",
			want: []KeyRequest{sw}, sb: SBKeys{Datapaths: []SBDatapath{{NBUUID: "u-old", Name: "kv-net-a", Key: 5}}}},
		{name: "UUID unknown and two bindings of its name: not guessed",
			want: []KeyRequest{{Network: "net-a", Switch: "kv-net-a", Key: 100}}, sb: SBKeys{Datapaths: []SBDatapath{{Name: "kv-net-a", Key: 5}, {Name: "kv-net-a", Key: 6}}}},
		{name: "no binding yet: no mismatch",
			want: []KeyRequest{sw, port}, sb: SBKeys{Datapaths: []SBDatapath{foreign}}},
		{name: "port has its key",
			want: []KeyRequest{port}, sb: SBKeys{Ports: map[string]int{"kv-vm1": 32767}}},
		{name: "port given another key",
			want: []KeyRequest{port, sw}, sb: SBKeys{Ports: map[string]int{"kv-vm1": 1}, Datapaths: []SBDatapath{{NBUUID: "u-a", Key: 100}}},
			out: []KeyMismatch{{Zone: "z1", KeyRequest: port, Actual: 1}}},
		{name: "a row requesting no key is not checked",
			want: []KeyRequest{{Network: "net-a", Switch: "kv-net-a", Port: "kv-vm2"}}, sb: SBKeys{Ports: map[string]int{"kv-vm2": 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.out, CheckTunnelKeys("z1", tc.want, tc.sb))
		})
	}
}

func TestKeyMismatchString(t *testing.T) {
	m := KeyMismatch{Zone: "hv1", KeyRequest: KeyRequest{Network: "net-a", Switch: "kv-net-a", Key: 16711680}, Actual: 3, Holder: "other"}
	assert.Equal(t, "zone hv1: switch kv-net-a of network net-a requests tunnel key 16711680 but the SB gave it 3: another datapath (other) in zone hv1 requests the same key; ovn-northd gave ours another one: cross-zone traffic of network net-a breaks", m.String())
	m.Port, m.Key, m.Holder = "kv-vm1", 32767, ""
	assert.Equal(t, "zone hv1: port kv-vm1 of switch kv-net-a (network net-a) requests tunnel key 32767 but the SB gave it 3: another port of switch kv-net-a in zone hv1 requests the same key; ovn-northd gave ours another one: cross-zone traffic of port kv-vm1 of network net-a breaks", m.String())
}

func TestSBDatapathOf(t *testing.T) {
	assert.Equal(t, SBDatapath{NBUUID: "u1", Name: "kv-a", Key: 4}, SBDatapathOf(map[string]string{"logical-switch": "u1", "name": "kv-a"}, 4))
	assert.Equal(t, SBDatapath{NBUUID: "u2", Name: "lr", Key: 5}, SBDatapathOf(map[string]string{"logical-router": "u2", "name": "lr"}, 5))
}

// The keys a zone's plan requests are its switches' and ports', those of
// failed units left out.
func TestRequestedKeys(t *testing.T) {
	plan := Build(&Snapshot{
		Networks: []Network{publicNet(), netA(), netB()},
		Routers: []Router{{Name: "r1", EnableSNAT: true, Gateway: "gw1", Internal: []string{"net-a", "net-b"},
			External: &External{Network: "public", IP: "172.16.0.10"}}},
		VMs:     []VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1"}},
		Chassis: zoneChassis(), ChassisKnown: true, Interconnect: true,
	}, testInstance)
	require.Empty(t, plan.Errors)
	zone := "hv1"
	keys := RequestedKeys(plan, zone, func(Unit) bool { return false })
	require.NotEmpty(t, keys)
	switches, ports := 0, 0
	for _, k := range keys {
		assert.NotZero(t, k.Key, "%+v", k)
		assert.NotEmpty(t, k.Network, "%+v", k)
		assert.Equal(t, SwitchName(k.Network), k.Switch, "%+v", k)
		if k.Port == "" {
			switches++
		} else {
			ports++
		}
	}
	assert.Positive(t, switches)
	assert.Positive(t, ports)
	assert.Empty(t, RequestedKeys(plan, zone, func(Unit) bool { return true }))

	rows := []Row{
		{Model: &nbmodel.LogicalSwitch{UUID: "u1", Name: "kv-n", OtherConfig: map[string]string{KeyTunnel: "12"}, ExternalIDs: OwnerIDs("i", Unit{Kind: KindNetwork, Name: "n"})}},
		{Model: &nbmodel.LogicalSwitchPort{Name: "p1", Options: map[string]string{KeyTunnel: "7"}}, Parent: "kv-n"},
		{Model: &nbmodel.LogicalSwitchPort{Name: "p2"}, Parent: "kv-n"},
	}
	assert.Equal(t, []KeyRequest{{Network: "n", Switch: "kv-n", SwitchUUID: "u1", Key: 12}, {Network: "n", Switch: "kv-n", Port: "p1", Key: 7}}, KeysOfRows(rows, nil))
}
