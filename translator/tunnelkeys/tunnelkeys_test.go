package tunnelkeys

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takeSwitch allocates switch sw's key as its network's plan does (the
// owner is named after the switch); 0 when none is left.
func takeSwitch(k *Allocator[string], sw string) (int, []string) {
	keys, notes, err := k.Take(sw, []Ref{{Switch: sw}})
	if err != nil {
		return 0, nil
	}
	return keys[Ref{Switch: sw}], notes
}

func TestDatapathKeyRangeIsTheTopOfOVNsLocalRange(t *testing.T) {
	assert.Equal(t, 16711680, MaxDatapathKey, "OVN_MAX_DP_KEY_LOCAL: ovn-northd's max_tunid under Geneve")
	assert.Equal(t, 65536, MaxDatapathKey-MinDatapathKey+1)

	// Every key of the range, top down, and nothing outside it: never
	// OVN's global range (ovn-ic, ovn-kubernetes' transit switches and
	// tunnel key allocator).
	k := New[string]()
	seen := map[int]bool{}
	for i := range MaxDatapathKey - MinDatapathKey + 1 {
		key, _ := takeSwitch(k, fmt.Sprintf("kv-%d", i))
		require.Equal(t, MaxDatapathKey-i, key, "switch %d", i)
		require.False(t, seen[key])
		seen[key] = true
	}
	_, _, err := k.Take("kv-one-too-many", []Ref{{Switch: "kv-one-too-many"}})
	assert.EqualError(t, err, "ran out: every datapath key of kubevirt-ovn's range [16646145, 16711680] is taken (by its switches, or requested by datapaths not ours), none left for switch kv-one-too-many",
		"the range is full: no key rather than one outside it")

	// A freed key is handed out again: the allocation goes round within
	// the range.
	k.Release("kv-7")
	key, _ := takeSwitch(k, "kv-again")
	assert.Equal(t, MaxDatapathKey-7, key)
}

func TestDatapathKeysWrapWithinTheRange(t *testing.T) {
	k := NewInRange[string](100, 103)
	var got []int
	for _, sw := range []string{"a", "b", "c"} {
		key, _ := takeSwitch(k, sw)
		got = append(got, key)
	}
	k.Release("a")
	for _, sw := range []string{"d", "e", "f"} {
		key, _ := takeSwitch(k, sw)
		got = append(got, key)
	}
	assert.Equal(t, []int{103, 102, 101, 100, 103, 0}, got, "round the range, a's freed key last, then none")
}

func TestHeldKeysOutsideTheRangeAreReplaced(t *testing.T) {
	k := New[string]()
	k.AdoptHeld(map[string]int{
		"kv-old":     16777215,           // an older kubevirt-ovn's
		"kv-transit": 16711683,           // ovn-kubernetes' default network's transit switch
		"kv-kept":    MaxDatapathKey - 5, // in range
	}, nil)
	kept, notes := takeSwitch(k, "kv-kept")
	assert.Equal(t, MaxDatapathKey-5, kept)
	assert.Empty(t, notes)
	for _, sw := range []string{"kv-old", "kv-transit"} {
		key, notes := takeSwitch(k, sw)
		assert.True(t, key >= MinDatapathKey && key <= MaxDatapathKey, "%s: %d", sw, key)
		require.Len(t, notes, 1)
		assert.Contains(t, notes[0], "outside kubevirt-ovn's range [16646145, 16711680]")
		assert.Contains(t, notes[0], fmt.Sprintf("moved to tunnel key %d", key))
		key2, notes := takeSwitch(k, sw)
		assert.Equal(t, key, key2, "once")
		assert.Empty(t, notes)
	}
}

// The held keys are adopted before the first allocation, never after.
func TestAdoptHeldOnlyFirst(t *testing.T) {
	k := New[string]()
	key, _ := takeSwitch(k, "kv-a")
	require.True(t, k.Adopted())
	k.AdoptHeld(map[string]int{"kv-b": key - 5}, nil)
	b, _ := takeSwitch(k, "kv-b")
	assert.Equal(t, key-1, b, "kv-b's key in the NB came too late")
}

func TestHeldPortKeysAreKeptAndAvoided(t *testing.T) {
	k := New[string]()
	k.AdoptHeld(nil, map[string]int{"p-old": MaxPortKey, "p-elsewhere": MaxPortKey - 1})
	keys, _, err := k.Take("net", []Ref{{Switch: "kv-a"}, {Switch: "kv-a", Port: "p-new"}, {Switch: "kv-a", Port: "p-old"}})
	require.NoError(t, err)
	assert.Equal(t, MaxPortKey, keys[Ref{"kv-a", "p-old"}], "kept")
	assert.Equal(t, MaxPortKey-2, keys[Ref{"kv-a", "p-new"}], "a new port avoids every held key")
}

// When a range runs out, the owner gets no key 0: Take fails, naming the
// switch or port and the range, and takes and releases nothing.
func TestPortKeysRunningOut(t *testing.T) {
	k := New[string]()
	full := []Ref{{Switch: "kv-a"}}
	for i := range MaxPortKey {
		full = append(full, Ref{"kv-a", fmt.Sprint("p-", i)})
	}
	keys, _, err := k.Take("kv-a", full)
	require.NoError(t, err)
	require.Len(t, keys, MaxPortKey+1)

	_, _, err = k.Take("r1", []Ref{{"kv-b", "rp-b"}})
	require.NoError(t, err)
	_, _, err = k.Take("r1", []Ref{{Switch: "kv-c"}, {"kv-b", "rp-b"}, {"kv-a", "rp-a"}})
	assert.EqualError(t, err, "ran out: every port key of switch kv-a ([1, 32767]) is taken, none left for port rp-a")
	assert.Equal(t, []Ref{{"kv-b", "rp-b"}}, k.owned["r1"], "r1 keeps what it had and takes nothing")
	assert.Empty(t, k.switches["kv-c"], "the switch key taken before the failure is undone")
	c, _ := takeSwitch(k, "kv-c")
	assert.Equal(t, MaxDatapathKey-2, c, "the undone key comes round last")
}

func TestForeignKeys(t *testing.T) {
	k := New[string]()
	assert.Empty(t, k.SetForeign("zone z1", []ForeignKey{{Key: MaxDatapathKey, Holder: "Logical_Switch other"}}))
	a, _ := takeSwitch(k, "kv-a")
	assert.Equal(t, MaxDatapathKey-1, a, "a foreign key is never handed out")

	moved := k.SetForeign("NAD default/blue", []ForeignKey{{Key: a}})
	assert.Equal(t, []string{"kv-a"}, moved, "its owner moves")
	again, notes := takeSwitch(k, "kv-a")
	assert.NotEqual(t, a, again)
	require.Len(t, notes, 1)
	assert.Equal(t, fmt.Sprintf("Logical_Switch kv-a: tunnel key %d collides with NAD default/blue (ovn-northd gives a requested key to the datapath that had it first; the other gets a zone-local key and loses its cross-zone traffic): moved to tunnel key %d in every zone", a, again), notes[0])
	assert.Empty(t, k.SetForeign("NAD default/blue", nil))
	same, _ := takeSwitch(k, "kv-a")
	assert.Equal(t, again, same, "nothing moves back")
}
