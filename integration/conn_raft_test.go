package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// connStartCluster starts a 3-member Raft NB for one test and stops it when
// the test ends.
func connStartCluster(t *testing.T) *sandbox.NBCluster {
	t.Helper()
	dir := t.TempDir()
	c, err := sandbox.StartNBCluster(dir, 3)
	require.NoError(t, err)
	t.Cleanup(func() {
		pids := c.Pids()
		if t.Failed() {
			t.Logf("OVN logs: %s", strings.Join(c.Logs(), " "))
		}
		assert.NoError(t, c.Stop())
		for _, pid := range pids {
			assert.False(t, sandbox.Alive(pid), "daemon pid %d left behind", pid)
		}
	})
	return c
}

// A 3-member Raft NB whose leader is SIGKILLed in the middle of a large
// sync: the sync follows the new leader and converges to what a sync on a
// fresh NB writes; the killed member rejoins and a rerun writes nothing.
func TestConnSyncSurvivesRaftLeaderKilled(t *testing.T) {
	c := connStartCluster(t)
	keepForeign(t, c)
	manifests := manyRouters(t, connRouters)
	want := connFresh(t, manifests)

	p := connStart(t, "sync", "--nb", c.NB, "--from-file", manifests, "--timeout", "120s", "--batch-ops", connBatch)
	require.NoError(t, sandbox.Poll(60*time.Second, "the sync's first routers in the NB", func() (bool, error) {
		return connCount(c, "Logical_Router") > 0 || p.exited(), nil
	}))
	require.False(t, p.exited(), "the sync ended before the leader could be killed mid-sync:\n%s", p.err.String())
	leader, err := c.Leader()
	require.NoError(t, err)
	pid, err := c.Kill(leader)
	require.NoError(t, err)
	killed := time.Now()
	require.False(t, p.exited(), "the sync ended before the leader was killed")
	t.Logf("leader %s (pid %d) killed mid-sync", c.Members[leader], pid)

	r := p.wait(t, 120*time.Second)
	t.Logf("sync finished %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	assert.Equal(t, 0, r.code)
	assert.NotContains(t, r.stderr, "panic")
	next, err := c.WaitLeader(30 * time.Second)
	require.NoError(t, err)
	assert.NotEqual(t, leader, next)

	require.NoError(t, c.Restart(leader))
	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	connCompare(t, connOwned(t, c), want)
	r = kubevirtOVN(t, "sync", "--nb", c.NB, "--from-file", manifests)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout, "a rerun writes nothing")
}

// `run --from-file` on a 3-member Raft NB whose leader is SIGKILLed while
// it reconciles, with an edit made right after: it follows the new leader,
// applies the edit and converges to what a sync on a fresh NB writes.
func TestConnRunSurvivesRaftLeaderKilled(t *testing.T) {
	c := connStartCluster(t)
	keepForeign(t, c)
	manifests := manyRouters(t, connRunRouters)
	ctrl := startController(t, "conn-raft", "--nb", c.NB, "--from-file", manifests, "--file-poll", "100ms", "--resync", "10m")
	waitNB(t, "the controller's first routers in the NB", func() bool { return connCount(c, "Logical_Router") > 0 })
	leader, err := c.Leader()
	require.NoError(t, err)
	pid, err := c.Kill(leader)
	require.NoError(t, err)
	killed := time.Now()
	t.Logf("leader %s (pid %d) killed", c.Members[leader], pid)
	edit(t, manifests+"/routers.yaml", "ip: "+manySNAT(7)+",", "ip: 172.16.200.7,")

	// ovn-nbctl itself fails until a new leader is elected.
	waitNB(t, "rt-007's NAT follows the edit", func() bool {
		out, err := c.NBCtl("--bare", "--columns=external_ip", "find", "NAT", "external_ids:kubevirt-ovn/owner=rt-007")
		return err == nil && strings.TrimSpace(out) == "172.16.200.7"
	})
	t.Logf("edit applied %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	want := connFresh(t, manifests)
	require.NoError(t, sandbox.Poll(120*time.Second, "the NB converged to a fresh sync's rows", func() (bool, error) {
		got := connOwned(t, c)
		for _, tb := range connTables {
			if len(got[tb.table]) != len(want[tb.table]) {
				return false, nil
			}
		}
		return true, nil
	}))
	t.Logf("converged %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	require.NoError(t, c.Restart(leader))
	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	connCompare(t, connOwned(t, c), want)
	out := ctrl.out.String()
	assert.NotContains(t, out, "panic")
	select {
	case <-ctrl.done:
		assert.Fail(t, "the controller exited")
	default:
	}
}
