package integration

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// ctrlRouters is the size of the busy inputs: big enough that the initial
// reconcile takes a while, as in the reports of issue 7 (500 routers).
const ctrlRouters = 500

// ctrlWorkers is the controller's --workers in these tests: at most one
// transaction per worker may be in flight when it is told to stop.
const ctrlWorkers = 2

// ctrlBatchOps is the --batch-ops of the tests that stop the controller
// during its start: a start reconciles in batches of up to 512 units, each
// committed here in several transactions, so that there are many commits
// to interrupt; what lands after the stop is still at most one transaction
// per worker.
const ctrlBatchOps = "300"

// requireBatches fails unless the controller reconciles units in batches
// (more than one unit per reconcile on average, once a reconcile ended).
// The sum and the count come from one scrape: from two, a batch observed
// between them read as "0 units in 1 reconcile".
func requireBatches(t *testing.T, p *controllerProc) {
	t.Helper()
	var units, batches float64
	require.NoError(t, sandbox.Poll(30*time.Second, "units reconciled in batches", func() (bool, error) {
		m := p.metrics("kubevirt_ovn_reconcile_batch_units_sum", "kubevirt_ovn_reconcile_batch_units_count")
		units, batches = m[0], m[1]
		return batches > 0, nil
	}))
	require.Greater(t, units, batches, "units reconciled in batches (%v units in %v reconciles)", units, batches)
}

// SIGTERM during the initial reconcile of 500 routers, in batches: the
// controller stops writing at once (at most the transactions in flight
// commit, not the rest of their batches) and exits, instead of draining
// its queue.
func TestCtrlSIGTERMStopsWritingAtOnce(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	dir := ctrlInput(t, ctrlRouters)
	p := startController(t, "sigterm", "--nb", c.NBTCP, "--from-file", dir, "--workers", "2", "--batch-ops", ctrlBatchOps)

	require.NoError(t, sandbox.Poll(120*time.Second, "the controller committing", func() (bool, error) {
		return ctrlNBCfg(t, c) >= 20, nil
	}))
	requireBatches(t, p)
	// Frozen while nb_cfg is read, so that the commits counted are those
	// after the signal, not those between the read and the signal (one
	// reconcile is a millisecond or two).
	// A commit the controller sent before it stopped may still be in the
	// server's socket buffer: it counts before the signal. The server reads
	// every connection in each loop, so once the process is stopped and two
	// reads of nb_cfg (each a round trip through that loop) agree, nothing
	// sent before the stop is still to come.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	require.NoError(t, sandbox.Poll(10*time.Second, "the controller stopped (state T)", func() (bool, error) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return false, err
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(rest, "T"), nil
	}))
	before := ctrlNBCfg(t, c)
	require.NoError(t, sandbox.Poll(10*time.Second, "nb_cfg steady while the controller is stopped", func() (bool, error) {
		prev := before
		before = ctrlNBCfg(t, c)
		return before == prev, nil
	}))
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		require.FailNow(t, "still running 60s after SIGTERM", "nb_cfg went from %d to %d", before, ctrlNBCfg(t, c))
	}
	took := time.Since(start)
	after := ctrlNBCfg(t, c)
	t.Logf("exited %s after SIGTERM, %d NB commits after it (nb_cfg %d -> %d)", took, after-before, before, after)
	// Per worker, at most two: the transaction in flight when the process
	// was stopped (maybe cut mid-write, so that the server could not count
	// it before), and one sent after SIGCONT before the Go runtime
	// delivered the signal to the program: two goroutine hops, each
	// waiting for a processor on a loaded machine (this was 4 of 3 under
	// the suite's load). A controller that drained its queue after the
	// signal would land hundreds.
	assert.LessOrEqual(t, after-before, 2*ctrlWorkers, "NB commits after SIGTERM: only those in flight, or sent before the program could see the signal, may land")
	assert.Equal(t, 0, ctrlExitCode(p), "SIGTERM is a clean stop")
	assert.Contains(t, p.out.String(), "controller stopped")
	assert.NotContains(t, ctrlDryRun(t, c, dir), "no changes", "the test stopped it before it converged")
}

// `run` of 500 routers on an empty NB: networks go first and a router is not
// tried before its networks' switches exist, so no reconcile fails (today
// every router's first try fails and waits for the rate limiter).
func TestCtrlRunConvergesWithoutFailures(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	dir := ctrlInput(t, ctrlRouters)
	start := time.Now()
	// No periodic resync in the way of the count.
	p := startController(t, "converge", "--nb", c.NBTCP, "--from-file", dir, "--workers", "2", "--resync", "1h")

	require.NoError(t, sandbox.Poll(240*time.Second, "every router Ready", func() (bool, error) {
		return p.metric("kubevirt_ovn_routers_ready") == ctrlRouters, nil
	}))
	took := time.Since(start)
	requireBatches(t, p)
	require.NoError(t, sandbox.Poll(120*time.Second, "an empty queue", func() (bool, error) {
		return p.metric("kubevirt_ovn_queue_depth") == 0, nil
	}))
	idle := time.Since(start)
	var dry string
	require.NoError(t, sandbox.Poll(60*time.Second, "a dry-run sync finding nothing to do", func() (bool, error) {
		dry = ctrlDryRun(t, c, dir)
		return strings.HasSuffix(dry, "\nno changes\n"), nil
	}), "last dry run:\n%s", dry)

	reconciles := p.metric("kubevirt_ovn_reconcile_duration_seconds_count")
	failed := p.metric("kubevirt_ovn_reconcile_errors_total")
	parked := p.metric("kubevirt_ovn_routers_parked_total")
	txns := p.metric("kubevirt_ovn_nb_transaction_duration_seconds_count")
	t.Logf("%d routers Ready after %s, queue empty after %s: %.0f reconciles (%.0f parked routers), %.0f NB transactions, %.0f failed reconciles",
		ctrlRouters, took, idle, reconciles, parked, txns, failed)
	assert.Zero(t, failed, "failed reconciles; the log says why:\n%s", ctrlFailures(p.out.String()))
	// Each of the 2n+1 units once, and a parked router once more: the NB
	// announcing the rows a reconcile inserted reconciles nothing again
	// (it reconciled every unit twice).
	units := float64(2*ctrlRouters + 1)
	assert.Less(t, reconciles, 2*units, "reconciles of %v units", units)
}

// ctrlFailures are the first lines of a controller log that report failed
// reconciles.
func ctrlFailures(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "reconcile failed") && len(out) < 5 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
