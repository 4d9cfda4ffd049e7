package translator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/tunnelkeys"
)

func TestForeignKeyIsNotHandedOut(t *testing.T) {
	in := zoneInput()
	in.SetInterconnect()
	// ovn-kubernetes' switch in zone hv1 requests the first key we would
	// take; a NAD records another.
	assert.Empty(t, in.SetForeignKeys("zone hv1's NB", []ForeignKey{{Key: MaxDatapathKey, Holder: "Logical_Switch other"}}))
	assert.Empty(t, in.SetForeignKeys("NAD default/blue", []ForeignKey{{Key: MaxDatapathKey - 2}}))
	keys := plannedKeys(t, in, nil)
	assert.Equal(t, map[string]int{"kv-net-a": MaxDatapathKey - 1, "kv-net-b": MaxDatapathKey - 3, "kv-public": MaxDatapathKey - 4}, keys.Switches)
}

func TestForeignKeyEqualToOursMovesOurs(t *testing.T) {
	in := zoneInput()
	first := plannedKeys(t, in, nil)
	netA := first.Switches["kv-net-a"]
	require.NotZero(t, netA)

	// Another tool requests net-a's key in zone gw1 (it was there first,
	// or northd gives it the key anyway).
	units := in.SetForeignKeys("zone gw1's NB", []ForeignKey{{Key: netA, Holder: "Logical_Switch intruder"}})
	assert.Equal(t, []Unit{{Kind: KindNetwork, Name: "net-a"}}, units, "net-a is reconciled again")
	up := in.Plan(Unit{Kind: KindNetwork, Name: "net-a"}, testInstance, nil)
	require.Empty(t, up.Errs)
	moved := up.Network.Keys.Switches["kv-net-a"]
	assert.NotEqual(t, netA, moved)
	assert.True(t, moved >= MinDatapathKey && moved <= MaxDatapathKey)
	for z, zr := range up.Network.Zones {
		assert.Equal(t, "key="+fmt.Sprint(moved), zoneView(zr)["LS kv-net-a"], "zone %s", z)
	}
	require.Len(t, up.Network.KeyNotes, 1)
	assert.Contains(t, up.Network.KeyNotes[0], fmt.Sprintf("Logical_Switch kv-net-a: tunnel key %d collides with Logical_Switch intruder (zone gw1's NB)", netA))
	again := in.Plan(Unit{Kind: KindNetwork, Name: "net-a"}, testInstance, nil)
	assert.Empty(t, again.Network.KeyNotes, "said once")
	assert.Equal(t, moved, again.Network.Keys.Switches["kv-net-a"])
	assert.Equal(t, first.Switches["kv-net-b"], plannedKeys(t, in, nil).Switches["kv-net-b"], "the others keep theirs")

	// The foreign row goes: nothing moves back.
	assert.Empty(t, in.SetForeignKeys("zone gw1's NB", nil))
	assert.Equal(t, moved, plannedKeys(t, in, nil).Switches["kv-net-a"])
}

func TestForeignKeyEqualToAHeldOneAtStartMovesOurs(t *testing.T) {
	first := plannedKeys(t, zoneInput(), nil)
	netA := first.Switches["kv-net-a"]

	// A restart: the NB says net-a holds netA, and a foreign switch
	// requests it too.
	in := zoneInput()
	in.SetForeignKeys("zone hv1's NB", []ForeignKey{{Key: netA, Holder: "Logical_Switch intruder"}})
	up := in.Plan(Unit{Kind: KindNetwork, Name: "net-a"}, testInstance, Claims{Keys: first})
	require.Empty(t, up.Errs)
	assert.NotEqual(t, netA, up.Network.Keys.Switches["kv-net-a"])
	require.Len(t, up.Network.KeyNotes, 1)
	assert.Contains(t, up.Network.KeyNotes[0], "collides with Logical_Switch intruder (zone hv1's NB)")
	assert.Equal(t, first.Switches["kv-net-b"], plannedKeys(t, in, Claims{Keys: first}).Switches["kv-net-b"])
}

func TestBuildTakesTheSnapshotsForeignKeys(t *testing.T) {
	s := &Snapshot{Interconnect: true, Chassis: zoneChassis(), ChassisKnown: true,
		Networks:    []Network{netA()},
		VMs:         []VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "hv1"}},
		ForeignKeys: map[string][]ForeignKey{"zone hv1's NB": {{Key: MaxDatapathKey}}},
		Held:        Claims{Keys: TunnelKeys{Switches: map[string]int{"kv-net-a": MaxDatapathKey}}},
	}
	p := Build(s, testInstance)
	require.Len(t, p.Networks, 1)
	assert.Equal(t, MaxDatapathKey-1, p.Networks[0].Keys.Switches["kv-net-a"])
	require.Len(t, p.Notes, 1)
	assert.Contains(t, p.Notes[0], "collides with zone hv1's NB")
}

// Keys ovn-kubernetes records in NADs are outside the range today; with a
// range that reaches them (a future change of either range) they are not
// handed out.
func TestNADKeysAreTakenWhateverTheRange(t *testing.T) {
	in := NewInput()
	in.SetInterconnect()
	in.keys = tunnelkeys.NewInRange[Unit](16711682, 16711686)
	in.SetForeignKeys("NAD default/l2", []ForeignKey{{Key: 16711683 + 3, Holder: "k8s.ovn.org/network-id 3"}, {Key: 16711684, Holder: "k8s.ovn.org/tunnel-keys"}})
	in.SetForeignKeys("NAD default/default", []ForeignKey{{Key: 16711683}})
	var got []int
	for i := range 3 {
		sw := fmt.Sprint("kv-", i)
		keys, _, _ := in.keys.Take(Unit{Kind: KindNetwork, Name: sw}, []tunnelkeys.Ref{{Switch: sw}})
		got = append(got, keys[tunnelkeys.Ref{Switch: sw}])
	}
	assert.Equal(t, []int{16711685, 16711682, 0}, got)
}

// When a range runs out, the unit gets no key 0: it fails, naming the
// switch or port and the range, and takes nothing (its rows stay as they
// are, with the keys they request).
func TestTunnelKeysRunningOutFailTheUnit(t *testing.T) {
	in := zoneInput() // networks net-a, net-b, public
	in.keys = tunnelkeys.NewInRange[Unit](MaxDatapathKey-1, MaxDatapathKey)
	for _, n := range []string{"net-a", "net-b"} {
		up := in.Plan(Unit{Kind: KindNetwork, Name: n}, testInstance, nil)
		require.Empty(t, up.Errs, n)
	}
	up := in.Plan(Unit{Kind: KindNetwork, Name: "public"}, testInstance, nil)
	assert.Nil(t, up.Network, "no rows: those in the NB stay as they are")
	require.Len(t, up.Errs, 1)
	assert.EqualError(t, up.Errs[0], "NetworkAttachmentDefinition public: tunnel keys ran out: every datapath key of kubevirt-ovn's range [16711679, 16711680] is taken (by its switches, or requested by datapaths not ours), none left for switch kv-public")
	var ie *InputError
	require.ErrorAs(t, up.Errs[0], &ie)
	assert.Equal(t, ReasonTunnelKeysExhausted, ie.Reason)

	// A network that goes frees its key: public gets it.
	in.Set("nets", Objects{Networks: []Network{publicNet(), netA()}})
	in.Plan(Unit{Kind: KindNetwork, Name: "net-b"}, testInstance, nil)
	up = in.Plan(Unit{Kind: KindNetwork, Name: "public"}, testInstance, nil)
	require.Empty(t, up.Errs)
	assert.Equal(t, MaxDatapathKey-1, up.Network.Keys.Switches["kv-public"])
}
