package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// connRouters is the size of the input the kill tests write, and
// connBatch the --batch-ops of their syncs: the sync commits it in about a
// hundred transactions, so that the NB can be killed between two (a sync
// that fits commits in one transaction).
const (
	connRouters = 400
	connBatch   = "50"
)

// The NB ovsdb-server SIGKILLed in the middle of a large sync and
// restarted on the same socket, port and database: the same sync waits for
// it, syncs again from what the NB holds, and exits 0 with the NB exactly
// as a sync on a fresh NB leaves it (0 duplicates, 0 missing, 0 orphans);
// a rerun writes nothing.
func TestConnSyncSurvivesNBKilledMidSync(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	manifests := manyRouters(t, connRouters)
	want := connFresh(t, manifests)

	p := connStart(t, "sync", "--nb", c.NBTCP, "--from-file", manifests, "--timeout", "120s", "--batch-ops", connBatch)
	require.NoError(t, sandbox.Poll(60*time.Second, "the sync's first routers in the NB", func() (bool, error) {
		return connCount(c, "Logical_Router") > 0 || p.exited(), nil
	}))
	require.False(t, p.exited(), "the sync ended before the NB could be killed mid-sync:\n%s", p.err.String())
	pid, err := c.KillNB()
	require.NoError(t, err)
	killed := time.Now()
	require.False(t, p.exited(), "the sync ended before the NB was killed")
	t.Logf("NB (pid %d) killed mid-sync", pid)

	// Restart only once the sync has seen the loss: it must wait, not fail.
	require.NoError(t, sandbox.Poll(60*time.Second, "the sync noticing the lost NB", func() (bool, error) {
		return strings.Contains(p.err.String(), "lost the NB connection") || p.exited(), nil
	}))
	require.False(t, p.exited(), "the sync gave up instead of waiting for the NB:\n%s", p.err.String())
	require.NoError(t, c.RestartNB())
	restarted := time.Now()
	r := p.wait(t, 120*time.Second)
	t.Logf("NB down %s; sync finished %s after the restart", restarted.Sub(killed).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stderr, "reconnected to the NB")
	assert.NotContains(t, r.stderr, "panic")
	assert.Contains(t, r.stdout, "changes per table:")

	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	connCompare(t, connOwned(t, c), want)
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", manifests)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout, "a rerun writes nothing")
}

// connRunRouters is the size of the input of the run kill test.
const connRunRouters = 100

// The NB ovsdb-server SIGKILLed while `run --from-file` reconciles, and an
// edit made while it is down: the controller does not panic and keeps
// running, and once the NB is back it applies the edit at once (the resync
// is 10 minutes away) and converges to what a sync on a fresh NB writes.
func TestConnRunSurvivesNBKilledAndAppliesEditMadeWhileDown(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	manifests := manyRouters(t, connRunRouters)
	ctrl := startController(t, "conn-run", "--nb", c.NBTCP, "--from-file", manifests, "--file-poll", "100ms", "--resync", "10m", "--batch-ops", ctrlBatchOps)
	written := 0
	waitNB(t, "the controller's first routers in the NB", func() bool { written = connCount(c, "Logical_Router"); return written > 0 })
	requireBatches(t, ctrl)
	pid, err := c.KillNB()
	require.NoError(t, err)
	killed := time.Now()
	t.Logf("NB (pid %d) killed with %d of %d routers written", pid, written, connRunRouters)
	waitNB(t, "the controller noticing the lost NB", func() bool { return strings.Contains(ctrl.out.String(), "NB connection lost") })
	code, body := ctrl.get("/readyz")
	assert.Equal(t, 503, code, "not ready while the NB is down: %s", body)

	edit(t, manifests+"/routers.yaml", "ip: "+manySNAT(7)+",", "ip: 172.16.200.7,")
	waitNB(t, "the controller reading the edit", func() bool { return strings.Contains(ctrl.out.String(), "manifests changed; reconciling") })
	want := connFresh(t, manifests)
	select {
	case <-ctrl.done:
		require.FailNow(t, "the controller exited while the NB was down", ctrl.out.String())
	default:
	}

	require.NoError(t, c.RestartNB())
	restarted := time.Now()
	waitNB(t, "rt-007's NAT follows the edit", func() bool { return natIPs(t, c, "rt-007") == "172.16.200.7" })
	t.Logf("NB down %s; the edit made meanwhile applied %s after the restart", restarted.Sub(killed).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	require.NoError(t, sandbox.Poll(120*time.Second, "the NB converged to a fresh sync's rows", func() (bool, error) {
		got := connOwned(t, c)
		for _, tb := range connTables {
			if len(got[tb.table]) != len(want[tb.table]) {
				return false, nil
			}
		}
		return true, nil
	}))
	t.Logf("converged %s after the restart", time.Since(restarted).Round(time.Millisecond))
	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	connCompare(t, connOwned(t, c), want)

	waitNB(t, "the controller logging the reconnection", func() bool {
		return strings.Contains(ctrl.out.String(), "NB connection back; reconciling every unit")
	})
	assert.NotContains(t, ctrl.out.String(), "panic")
	select {
	case <-ctrl.done:
		assert.Fail(t, "the controller exited")
	default:
	}
	code, _ = ctrl.get("/readyz")
	assert.Equal(t, 200, code, "ready again once the NB is back")
}

// The NB killed mid-sync and not back before --timeout: the sync exits 1
// naming the units it could not write and why; once the NB is back, a
// rerun converges to what a sync on a fresh NB writes.
func TestConnSyncNBNotBackBeforeTimeoutThenRerunConverges(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	manifests := manyRouters(t, connRouters)
	want := connFresh(t, manifests)

	p := connStart(t, "sync", "--nb", c.NBTCP, "--from-file", manifests, "--timeout", "15s", "--batch-ops", connBatch)
	require.NoError(t, sandbox.Poll(60*time.Second, "the sync's first routers in the NB", func() (bool, error) {
		return connCount(c, "Logical_Router") > 0 || p.exited(), nil
	}))
	_, err := c.KillNB()
	require.NoError(t, err)
	require.False(t, p.exited(), "the sync ended before the NB was killed")
	r := p.wait(t, 60*time.Second)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "note: the NB did not come back before --timeout")
	assert.Contains(t, r.stderr, "failure(s); the rows of these objects were left as they were:")
	assert.Regexp(t, `VirtualRouter rt-\d+: NB transaction (not sent|cut by a lost connection).*not connected to the NB`, r.stderr)

	require.NoError(t, c.RestartNB())
	r = connStart(t, "sync", "--nb", c.NBTCP, "--from-file", manifests).wait(t, 120*time.Second)
	assert.Equal(t, 0, r.code)
	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	connCompare(t, connOwned(t, c), want)
}
