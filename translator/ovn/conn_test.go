package ovn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// connAnswering answers list_dbs with dbs.
func connAnswering(t *testing.T, dbs ...string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var req struct {
					ID     any    `json:"id"`
					Method string `json:"method"`
				}
				if json.NewDecoder(c).Decode(&req) != nil {
					return
				}
				_ = json.NewEncoder(c).Encode(map[string]any{"id": "server-echo", "method": "echo", "params": []any{}})
				_ = json.NewEncoder(c).Encode(map[string]any{"id": req.ID, "result": dbs, "error": nil})
			}()
		}
	}()
	return "tcp:" + l.Addr().String()
}

func TestConnProbeNamesWhyAnEndpointFails(t *testing.T) {
	ctx := context.Background()
	silent := nbtest.Silent(t)
	start := time.Now()
	err := probe(ctx, silent, nil, "OVN_Northbound", 200*time.Millisecond)
	t.Logf("silent endpoint given up after %s", time.Since(start))
	assert.EqualError(t, err, "accepted the connection but did not answer list_dbs within 200ms")

	assert.NoError(t, probe(ctx, connAnswering(t, "_Server", "OVN_Northbound"), nil, "OVN_Northbound", time.Second))
	assert.EqualError(t, probe(ctx, connAnswering(t, "_Server", "OVN_Southbound"), nil, "OVN_Northbound", time.Second),
		"serves no OVN_Northbound database (it serves _Server, OVN_Southbound)")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "tcp:" + l.Addr().String()
	l.Close()
	assert.ErrorContains(t, probe(ctx, closed, nil, "OVN_Northbound", time.Second), "connection refused")
	assert.EqualError(t, probe(ctx, "udp:127.0.0.1:1", nil, "OVN_Northbound", time.Second), `unknown scheme "udp" (unix:, tcp: or ssl:)`)
}

// libovsdb panics when its reconnection backoff is nil or stops.
func TestConnReconnectBackoffNeverGivesUp(t *testing.T) {
	b := reconnectBackoff()
	b.Reset()
	for i := 0; i < 10000; i++ {
		d := b.NextBackOff()
		require.NotEqual(t, backoff.Stop, d, "attempt %d", i)
		require.LessOrEqual(t, d, 3*time.Second, "attempt %d", i)
	}
}

// A silent endpoint listed first: ConnectNB names it and connects to the
// next one within about one endpoint timeout, not the caller's deadline.
func TestConnConnectSkipsSilentEndpoint(t *testing.T) {
	good := "unix:" + nbtest.Serve(t)
	silent := nbtest.Silent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	nb, err := ConnectNB(ctx, Endpoint{Address: silent + "," + good, Timeout: 300 * time.Millisecond}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()
	t.Logf("connected after %s", time.Since(start))
	assert.Equal(t, good, nb.CurrentEndpoint())

	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = ConnectNB(short, Endpoint{Address: silent, Timeout: 300 * time.Millisecond}, "test", logr.Discard())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connecting to NB "+silent+": "+silent+": accepted the connection but did not answer list_dbs within 300ms")
}

// The NB goes away and comes back: no panic, writes fail at once (not held
// for the reconnection and sent from the old cache) with an error
// errors.Is recognises, and the client reconnects on its own.
func TestConnCommitFailsFastWhileDisconnectedAndClientReconnects(t *testing.T) {
	p := nbtest.NewProxy(t, nbtest.Serve(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nb, err := ConnectNB(ctx, Endpoint{Address: p.Endpoint(), Timeout: time.Second}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()
	ls := &nbmodel.LogicalSwitch{UUID: "ls", Name: "kv-x", ExternalIDs: map[string]string{translator.KeyManagedBy: "test"}}
	ops, err := nb.Create(ls)
	require.NoError(t, err)
	_, err = kvnb.Commit(ctx, nb, "Network x", ops)
	require.NoError(t, err)

	p.Down()
	require.Eventually(t, func() bool { return !nb.Connected() }, 10*time.Second, 10*time.Millisecond, "disconnection seen")
	start := time.Now()
	_, err = kvnb.Commit(ctx, nb, "Network y", ops)
	took := time.Since(start)
	t.Logf("commit while disconnected failed after %s: %v", took, err)
	require.Error(t, err)
	assert.True(t, errors.Is(err, kvnb.ErrNotConnected))
	assert.True(t, errors.Is(err, client.ErrNotConnected))
	assert.Equal(t, "Network y: NB transaction not sent: not connected to the NB", err.Error())

	p.Up()
	require.Eventually(t, nb.Connected, 15*time.Second, 10*time.Millisecond, "reconnected")
	assert.Equal(t, 1, kvnb.Disconnections(nb))
	var rows []*nbmodel.LogicalSwitch
	require.NoError(t, nb.List(ctx, &rows))
	assert.Len(t, rows, 1, "the cache is re-synced from the server")
	ls2 := &nbmodel.LogicalSwitch{UUID: "ls2", Name: "kv-y", ExternalIDs: map[string]string{translator.KeyManagedBy: "test"}}
	ops, err = nb.Create(ls2)
	require.NoError(t, err)
	_, err = kvnb.Commit(ctx, nb, "Network y", ops)
	assert.NoError(t, err)
}

// A transaction the connection loss cuts is recognisable too.
func TestConnCutTransactionIsNotConnected(t *testing.T) {
	for _, cause := range []error{io.ErrUnexpectedEOF, client.ErrNotConnected, &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}} {
		c := &fakeTransact{err: cause}
		_, err := kvnb.Commit(context.Background(), c, "VirtualRouter r1", nil)
		require.Error(t, err)
		assert.True(t, errors.Is(err, kvnb.ErrNotConnected), "%v", err)
		assert.Contains(t, err.Error(), "VirtualRouter r1: NB transaction cut by a lost connection")
	}
	c := &fakeTransact{err: errors.New("validation failed for the operation")}
	_, err := kvnb.Commit(context.Background(), c, "VirtualRouter r1", nil)
	assert.False(t, errors.Is(err, kvnb.ErrNotConnected), "%v", err)
}

// fakeTransact is a connected client whose transactions fail with err.
type fakeTransact struct {
	client.Client
	err error
}

func (f *fakeTransact) Connected() bool         { return true }
func (f *fakeTransact) CurrentEndpoint() string { return "tcp:127.0.0.1:1" }
func (f *fakeTransact) Transact(context.Context, ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	return nil, f.err
}

// A server that goes silent after the connection is up is detected by the
// echo probes and the client reconnects once it answers again.
func TestConnSilentServerDetectedAndLeft(t *testing.T) {
	p := nbtest.NewProxy(t, nbtest.Serve(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nb, err := ConnectNB(ctx, Endpoint{Address: p.Endpoint(), Timeout: 300 * time.Millisecond}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()

	p.Freeze()
	start := time.Now()
	require.Eventually(t, func() bool { return !nb.Connected() }, 10*time.Second, 10*time.Millisecond, "silence detected")
	t.Logf("silent server left after %s (endpoint timeout 300ms)", time.Since(start).Round(time.Millisecond))
	p.Up()
	require.Eventually(t, nb.Connected, 15*time.Second, 10*time.Millisecond, "reconnected")
}

// A connect given up by its caller (a sync whose input failed to read)
// says nothing of the endpoints: they were not waited for, so "did not
// answer" would blame the NB for the caller's error.
func TestConnGivenUpReportsNoEndpoint(t *testing.T) {
	// An endpoint that accepts and never answers; the caller gives up
	// once the probe is connected to it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		c, err := l.Accept()
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		cancel()
	}()
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	_, err = ConnectNB(ctx, Endpoint{Address: "tcp:" + l.Addr().String(), Timeout: time.Minute}, "test", log)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, logged)
}

// A server working through a big transaction of ours answers nothing
// meanwhile, echoes included (it answers in order): that silence is not
// a dead server. Here ovsdb-server is stopped for 2 s, more than twice the
// endpoint timeout, with 20,000 operations of ours in flight: the
// connection stays, and the transaction commits once the server goes on.
// (At 10,000 routers a sync's own transactions had the echo cut the
// connection under them, twice per sync.)
func TestConnEchoWaitsForOurTransactionsInFlight(t *testing.T) {
	ops := make([]ovsdb.Operation, 20000)
	for i := range ops {
		ops[i] = ovsdb.Operation{Op: ovsdb.OperationSelect, Table: "NB_Global", Where: []ovsdb.Condition{}, Columns: []string{"_uuid"}}
	}
	c := inFlightWhileStopped(t, "the transaction", func(ctx context.Context, nbc client.Client) error {
		_, err := kvnb.Commit(ctx, nbc, "20,000 selects", ops)
		return err
	})
	assert.True(t, c.Connected())
}

// inFlightWhileStopped sends request on a connection to a real
// ovsdb-server (endpoint timeout 300 ms) that is stopped for 2 s: the
// request must not return meanwhile, must succeed once the server goes on,
// and the connection must not have been cut.
func inFlightWhileStopped(t *testing.T, what string, request func(context.Context, client.Client) error) *conn {
	t.Helper()
	sock, server := nbtest.RealProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nbc, err := DialNB(ctx, Endpoint{Address: "unix:" + sock, Timeout: 300 * time.Millisecond}, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(nbc.Close)
	c := nbc.(*conn)

	require.NoError(t, server.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = server.Signal(syscall.SIGCONT) })
	done := make(chan error, 1)
	go func() { done <- request(ctx, nbc) }()
	select {
	case err := <-done:
		require.FailNow(t, what+" returned while the server was stopped", "%v", err)
	case <-time.After(2 * time.Second):
	}
	require.NoError(t, server.Signal(syscall.SIGCONT))
	require.NoError(t, <-done, what+" in flight gets its answer")
	assert.Zero(t, c.Disconnections(), "the connection was not cut under "+what)
	return c
}

// A cluster member that hangs on a live host (it accepts connections and
// answers nothing) is left for another member at once: the echo that finds
// it silent takes it off libovsdb's list before the connection is dropped,
// since libovsdb's reconnection attempt, which also waits for the
// monitors' first reply, may take minutes on it.
func TestConnHungMemberLeftForAnother(t *testing.T) {
	sock := nbtest.Serve(t)
	a, b := nbtest.NewProxy(t, sock), nbtest.NewProxy(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nbc, err := ConnectNB(ctx, Endpoint{Address: a.Endpoint() + "," + b.Endpoint(), Timeout: 300 * time.Millisecond}, "test", logr.Discard())
	require.NoError(t, err)
	defer nbc.Close()
	require.Equal(t, a.Endpoint(), nbc.CurrentEndpoint())

	a.Hang()
	start := time.Now()
	require.Eventually(t, func() bool { return nbc.Connected() && nbc.CurrentEndpoint() == b.Endpoint() }, 20*time.Second, 10*time.Millisecond,
		"connected to the other member (a reconnection attempt on the hung one lasts the endpoint timeout and %s)", reconnectAllowance)
	t.Logf("hung member left for the other after %s", time.Since(start).Round(time.Millisecond))
}

// Nor is a monitor request of ours in flight (its reply, every row we
// own, comes before an echo's: at 10,000 routers a start's took longer
// than the echo's patience, and the connection was cut under it).
func TestConnEchoWaitsForOurMonitorInFlight(t *testing.T) {
	inFlightWhileStopped(t, "the monitor", func(ctx context.Context, nbc client.Client) error {
		_, err := nbc.MonitorAll(ctx)
		return err
	})
}
