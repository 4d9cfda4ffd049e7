package integration

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunStopsWhileNBIsDown: SIGTERM while the NB is down and a reconcile
// waits for it (libovsdb holds cache reads until it has reconnected) ends
// the process at once, without waiting for an NB that may never come back.
func TestRunStopsWhileNBIsDown(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	ex := examples(t)
	p := startController(t, "nb-down", "--nb", c.NBTCP, "--from-file", ex, "--file-poll", "100ms")
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })

	_, err := c.KillNB()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.RestartNB()) }) // for keepForeign's check
	changes := strings.Count(p.out.String(), "manifests changed")
	edit(t, filepath.Join(ex, "router.yaml"), "ip: 172.16.0.100", "ip: 172.16.0.105")
	waitNB(t, "the edit read while the NB is down", func() bool { return strings.Count(p.out.String(), "manifests changed") > changes })

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	start := time.Now()
	select {
	case <-p.done:
		t.Logf("exited %v after SIGTERM with the NB down", time.Since(start))
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60s after SIGTERM with the NB down:\n%s", p.out.String())
	}
	assert.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.out.String())
}
