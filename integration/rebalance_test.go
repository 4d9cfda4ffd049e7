package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// primariesOf reads each router's highest-priority Gateway_Chassis from the
// NB: router name -> chassis.
func primariesOf(t *testing.T, d nbCtler) map[string]string {
	t.Helper()
	out := nbctl(t, d, "--bare", "--columns=name,chassis_name,priority", "list", "Gateway_Chassis")
	best := map[string]string{}
	prio := map[string]string{}
	fields := strings.Fields(out)
	for i := 0; i+2 < len(fields); i += 3 {
		chassis, p := fields[i+1], fields[i+2]
		router := strings.TrimSuffix(strings.TrimPrefix(fields[i], "kv-rtoe-"), "_"+chassis)
		if len(p) > len(prio[router]) || (len(p) == len(prio[router]) && p > prio[router]) {
			best[router], prio[router] = chassis, p
		}
	}
	return best
}

func countBy(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

// Routers without spec.gateway keep their gateway across syncs (sticky),
// so an assignment left unbalanced (here: every router pinned to gw1, then
// all but one unpinned) stays; `rebalance --dry-run` shows the moves and writes
// nothing; `rebalance` evens the primaries out one router per transaction;
// a sync afterwards keeps the new assignment (writes nothing); `status`
// shows where each gateway port is active.
func TestRebalanceEvensOutAndSyncKeepsIt(t *testing.T) {
	e := newOVN(t)
	dir := manyRouters(t, 6)
	nb, sb := e.l.NBEndpoint(), e.l.SBEndpoint()
	sync := func() string {
		t.Helper()
		r := kubevirtOVN(t, "sync", "--nb", nb, "--sb", sb, "--from-file", dir)
		require.Equal(t, 0, r.code, "sync:\n%s", r.stderr)
		return r.stdout
	}
	sync()
	assert.Equal(t, map[string]int{"gw1": 6}, countBy(primariesOf(t, e.l)), "pinned to gw1")

	routers := filepath.Join(dir, "routers.yaml")
	b, err := os.ReadFile(routers)
	require.NoError(t, err)
	// rt-005 stays pinned: rebalance never moves it.
	require.NoError(t, os.WriteFile(routers, []byte(strings.Replace(string(b), "  gateway: gw1\n", "", 5)), 0o644))
	out := sync()
	assert.NotContains(t, out, "priority", "unpinned routers keep their primary: %s", out)
	assert.Equal(t, map[string]int{"gw1": 6}, countBy(primariesOf(t, e.l)), "sticky after unpinning")
	assert.Equal(t, "no changes\n", sync())

	dry := kubevirtOVN(t, "rebalance", "--nb", nb, "--sb", sb, "--dry-run")
	require.Equal(t, 0, dry.code, dry.stderr)
	assert.Contains(t, dry.stdout, "dry run: 3 moves, nothing is written")
	assert.Equal(t, 3, strings.Count(dry.stdout, "-> gw2"), dry.stdout)
	assert.Equal(t, map[string]int{"gw1": 6}, countBy(primariesOf(t, e.l)), "a dry run writes nothing")

	r := kubevirtOVN(t, "rebalance", "--nb", nb, "--sb", sb)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "3 routers moved")
	after := primariesOf(t, e.l)
	assert.Equal(t, map[string]int{"gw1": 3, "gw2": 3}, countBy(after))
	assert.Equal(t, "gw1", after["rt-005"], "the pinned router stays")
	assert.NotContains(t, r.stdout, "rt-005")
	assert.Equal(t, "no changes\n", sync(), "sync keeps what rebalance wrote")
	assert.Equal(t, after, primariesOf(t, e.l))
	again := kubevirtOVN(t, "rebalance", "--nb", nb, "--sb", sb)
	assert.Equal(t, "balanced: no router to move\n", again.stdout)

	// status: the planned order and where each port is bound (the SB).
	for rt, gw := range after {
		require.NoError(t, sandbox.Poll(90e9, "cr-kv-rtoe-"+rt+" bound to "+gw, func() (bool, error) {
			st := kubevirtOVN(t, "status", "--nb", nb, "--sb", sb, "-o", "json")
			var report struct {
				Routers []struct{ Name, Primary, Active string }
			}
			if err := json.Unmarshal([]byte(st.stdout), &report); err != nil {
				return false, err
			}
			for _, r := range report.Routers {
				if r.Name == rt {
					return r.Primary == gw && r.Active == gw, nil
				}
			}
			return false, nil
		}))
	}
	st := kubevirtOVN(t, "status", "--nb", nb, "--sb", sb)
	t.Logf("kubevirt-ovn status:\n%s", st.stdout)
	assert.Contains(t, st.stdout, "ROUTER")
	assert.Regexp(t, `rt-005 +True +True +172\.16\.1\.7 +gw1 \(spec\.gateway\)`, st.stdout)
	assert.Regexp(t, `gw1 +3 / 3 +maps physnet1`, st.stdout)
	assert.Regexp(t, `gw2 +3 / 3 +maps physnet1`, st.stdout)
}
