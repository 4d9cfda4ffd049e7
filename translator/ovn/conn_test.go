package ovn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/ovn-kubernetes/libovsdb/ovsdb/serverdb"
	"github.com/ovn-kubernetes/libovsdb/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// connServeNB serves an empty OVN_Northbound from libovsdb's in-process
// server on a unix socket.
func connServeNB(t *testing.T) string {
	t.Helper()
	nbModel, err := nbmodel.FullDatabaseModel()
	require.NoError(t, err)
	srvModel, err := serverdb.FullDatabaseModel()
	require.NoError(t, err)
	log := logr.Discard()
	db := inmemory.NewDatabase(map[string]model.ClientDBModel{"OVN_Northbound": nbModel, "_Server": srvModel}, &log)
	nbDBModel, errs := model.NewDatabaseModel(nbmodel.Schema(), nbModel)
	require.Empty(t, errs)
	srvDBModel, errs := model.NewDatabaseModel(serverdb.Schema(), srvModel)
	require.Empty(t, errs)
	srv, err := server.NewOvsdbServer(db, &log, nbDBModel, srvDBModel)
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), "nb.sock")
	go func() { _ = srv.Serve("unix", sock) }()
	t.Cleanup(srv.Close)
	require.Eventually(t, srv.Ready, 5*time.Second, 10*time.Millisecond, "in-process NB did not start")
	return sock
}

// connProxy forwards a loopback TCP port to a unix socket; down cuts every
// connection and refuses new ones (a killed server), up accepts again (the
// server restarted).
type connProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
	// server holds the server sides; frozen keeps client sides open
	// when they close.
	server []net.Conn
	frozen bool
}

func connNewProxy(t *testing.T, target string) *connProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connProxy{t: t, target: target, addr: l.Addr().String()}
	p.serve(l)
	t.Cleanup(p.down)
	return p
}

func (p *connProxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.server = append(p.server, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				_, _ = io.Copy(c, s)
				p.mu.Lock()
				defer p.mu.Unlock()
				if !p.frozen {
					c.Close()
				}
			}()
		}
	}()
}

func (p *connProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// freeze makes the server go silent: connections stay open, nothing is
// answered, new connections are refused.
func (p *connProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, s := range p.server {
		s.Close()
	}
	p.server = nil
}

func (p *connProxy) up() {
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
	l, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(l)
}

// connSilent accepts TCP connections and never answers, like a hung
// server (or a firewall that drops after the handshake).
func connSilent(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return "tcp:" + l.Addr().String()
}

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
	silent := connSilent(t)
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
	good := "unix:" + connServeNB(t)
	silent := connSilent(t)
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
	p := connNewProxy(t, connServeNB(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nb, err := ConnectNB(ctx, Endpoint{Address: "tcp:" + p.addr, Timeout: time.Second}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()
	ls := &nbmodel.LogicalSwitch{UUID: "ls", Name: "kv-x", ExternalIDs: map[string]string{translator.KeyManagedBy: "test"}}
	ops, err := nb.Create(ls)
	require.NoError(t, err)
	_, err = translator.Commit(ctx, nb, "Network x", ops)
	require.NoError(t, err)

	p.down()
	require.Eventually(t, func() bool { return !nb.Connected() }, 10*time.Second, 10*time.Millisecond, "disconnection seen")
	start := time.Now()
	_, err = translator.Commit(ctx, nb, "Network y", ops)
	took := time.Since(start)
	t.Logf("commit while disconnected failed after %s: %v", took, err)
	require.Error(t, err)
	assert.True(t, errors.Is(err, translator.ErrNotConnected))
	assert.True(t, errors.Is(err, client.ErrNotConnected))
	assert.Equal(t, "Network y: NB transaction not sent: not connected to the NB", err.Error())

	p.up()
	require.Eventually(t, nb.Connected, 15*time.Second, 10*time.Millisecond, "reconnected")
	assert.Equal(t, 1, translator.Disconnections(nb))
	var rows []*nbmodel.LogicalSwitch
	require.NoError(t, nb.List(ctx, &rows))
	assert.Len(t, rows, 1, "the cache is re-synced from the server")
	ls2 := &nbmodel.LogicalSwitch{UUID: "ls2", Name: "kv-y", ExternalIDs: map[string]string{translator.KeyManagedBy: "test"}}
	ops, err = nb.Create(ls2)
	require.NoError(t, err)
	_, err = translator.Commit(ctx, nb, "Network y", ops)
	assert.NoError(t, err)
}

// A transaction the connection loss cuts is recognisable too.
func TestConnCutTransactionIsNotConnected(t *testing.T) {
	for _, cause := range []error{io.ErrUnexpectedEOF, client.ErrNotConnected, &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}} {
		c := &fakeTransact{err: cause}
		_, err := translator.Commit(context.Background(), c, "VirtualRouter r1", nil)
		require.Error(t, err)
		assert.True(t, errors.Is(err, translator.ErrNotConnected), "%v", err)
		assert.Contains(t, err.Error(), "VirtualRouter r1: NB transaction cut by a lost connection")
	}
	c := &fakeTransact{err: errors.New("validation failed for the operation")}
	_, err := translator.Commit(context.Background(), c, "VirtualRouter r1", nil)
	assert.False(t, errors.Is(err, translator.ErrNotConnected), "%v", err)
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
	p := connNewProxy(t, connServeNB(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nb, err := ConnectNB(ctx, Endpoint{Address: "tcp:" + p.addr, Timeout: 300 * time.Millisecond}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()

	p.freeze()
	start := time.Now()
	require.Eventually(t, func() bool { return !nb.Connected() }, 10*time.Second, 10*time.Millisecond, "silence detected")
	t.Logf("silent server left after %s (endpoint timeout 300ms)", time.Since(start).Round(time.Millisecond))
	p.up()
	require.Eventually(t, nb.Connected, 15*time.Second, 10*time.Millisecond, "reconnected")
}
