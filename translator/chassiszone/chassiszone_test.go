package chassiszone

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

func ch(name, zone string) translator.Chassis {
	return translator.Chassis{Name: name, Hostname: "node-" + name, Zone: zone}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		name      string
		held      []translator.Chassis // an earlier Resolve
		in        []translator.Chassis
		want      []translator.Chassis
		conflicts []Conflict
	}{
		{name: "every chassis in one zone passes unchanged",
			in:   []translator.Chassis{ch("gw1", "a"), ch("hv1", "b"), ch("hv2", "b")},
			want: []translator.Chassis{ch("gw1", "a"), ch("hv1", "b"), ch("hv2", "b")}},
		{name: "central chassis are not zoned: no rule",
			in:   []translator.Chassis{ch("gw1", ""), ch("gw1", "")},
			want: []translator.Chassis{ch("gw1", ""), ch("gw1", "")}},
		{name: "two zones list one chassis: the first zone keeps it, the later is refused",
			in:        []translator.Chassis{ch("gw1", "a"), ch("hv1", "a"), ch("hv1", "b"), ch("hv2", "b")},
			want:      []translator.Chassis{ch("gw1", "a"), ch("hv1", "a"), ch("hv2", "b")},
			conflicts: []Conflict{{Chassis: "hv1", Kept: "a", Refused: "b"}}},
		{name: "three zones: one conflict per refused zone",
			in:        []translator.Chassis{ch("hv1", "a"), ch("hv1", "b"), ch("hv1", "c")},
			want:      []translator.Chassis{ch("hv1", "a")},
			conflicts: []Conflict{{Chassis: "hv1", Kept: "a", Refused: "b"}, {Chassis: "hv1", Kept: "a", Refused: "c"}}},
		{name: "the zone that held the chassis keeps it, though it is listed later",
			held:      []translator.Chassis{ch("hv1", "b")},
			in:        []translator.Chassis{ch("hv1", "a"), ch("hv1", "b")},
			want:      []translator.Chassis{ch("hv1", "b")},
			conflicts: []Conflict{{Chassis: "hv1", Kept: "b", Refused: "a"}}},
		{name: "a holder that no longer lists it gives it up",
			held: []translator.Chassis{ch("hv1", "b")},
			in:   []translator.Chassis{ch("hv1", "a")},
			want: []translator.Chassis{ch("hv1", "a")}},
		{name: "a zone that lists a chassis twice keeps it once",
			in:   []translator.Chassis{ch("hv1", "a"), ch("hv1", "a")},
			want: []translator.Chassis{ch("hv1", "a")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var claims Claims
			if c.held != nil {
				_, conflicts := claims.Resolve(c.held)
				require.Empty(t, conflicts)
			}
			got, conflicts := claims.Resolve(c.in)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.conflicts, conflicts)
		})
	}
}

// The refused zone stays refused while both list the chassis, whatever
// the order they are read in.
func TestResolveKeepsTheHolderAcrossReadings(t *testing.T) {
	var claims Claims
	_, conflicts := claims.Resolve([]translator.Chassis{ch("hv1", "b")})
	require.Empty(t, conflicts)
	for range 3 {
		got, conflicts := claims.Resolve([]translator.Chassis{ch("hv1", "a"), ch("hv1", "b")})
		assert.Equal(t, []translator.Chassis{ch("hv1", "b")}, got)
		assert.Equal(t, []Conflict{{Chassis: "hv1", Kept: "b", Refused: "a"}}, conflicts)
	}
}

func TestCheck(t *testing.T) {
	assert.NoError(t, Check([]translator.Chassis{ch("gw1", "a"), ch("hv1", "b")}))
	err := Check([]translator.Chassis{ch("gw1", "a"), ch("hv1", "a"), ch("hv1", "b"), ch("gw1", "c")})
	require.Error(t, err)
	assert.Equal(t, "chassis gw1 is a local chassis of zones a and c (not other_config:is-remote=true in either SB)\n"+
		"chassis hv1 is a local chassis of zones a and b (not other_config:is-remote=true in either SB)", err.Error())
}
