package controller

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb/serverdb"
	"github.com/ovn-kubernetes/libovsdb/server"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// connFlakyNB serves an empty NB from libovsdb's in-process server behind
// a loopback TCP port that cut closes (connections dropped, new ones
// refused) and restore opens again.
type connFlakyNB struct {
	t     *testing.T
	sock  string
	addr  string
	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
}

func connStartFlakyNB(t *testing.T) *connFlakyNB {
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
	f := &connFlakyNB{t: t, sock: filepath.Join(t.TempDir(), "nb.sock")}
	go func() { _ = srv.Serve("unix", f.sock) }()
	t.Cleanup(srv.Close)
	require.Eventually(t, srv.Ready, 5*time.Second, 10*time.Millisecond)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.addr = l.Addr().String()
	f.serve(l)
	t.Cleanup(f.cut)
	return f
}

func (f *connFlakyNB) serve(l net.Listener) {
	f.mu.Lock()
	f.l = l
	f.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", f.sock)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, s)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

func (f *connFlakyNB) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.l != nil {
		f.l.Close()
		f.l = nil
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func (f *connFlakyNB) restore() {
	l, err := net.Listen("tcp", f.addr)
	require.NoError(f.t, err)
	f.serve(l)
}

type connSource struct{ snap translator.Snapshot }

func (s *connSource) Snapshot() (*translator.Snapshot, error) { cp := s.snap; return &cp, nil }
func (s *connSource) HasSynced() bool                         { return true }

// When the NB connection comes back, every unit is enqueued at once
// (not after its backoff or the resync).
func TestConnReconnectEnqueuesEveryUnit(t *testing.T) {
	nbSrv := connStartFlakyNB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nb, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: "tcp:" + nbSrv.addr, Timeout: time.Second}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()
	src := &connSource{snap: translator.Snapshot{Routers: []translator.Router{{Name: "r1"}, {Name: "r2"}}}}
	c := New(nb, nil, src, nil, Options{Instance: "test", Log: testr.New(t)})
	defer c.queue.ShutDown()
	go c.watchReconnect(ctx, c.nbState())

	nbSrv.cut()
	require.Eventually(t, func() bool { return !nb.Connected() }, 10*time.Second, 10*time.Millisecond, "disconnection seen")
	require.Zero(t, c.queue.Len(), "nothing enqueued while the NB is down")
	nbSrv.restore()
	require.Eventually(t, func() bool { return c.queue.Len() == 2 }, 15*time.Second, 10*time.Millisecond, "every unit enqueued on reconnection")
}
