// Package nbtest serves OVN Northbound databases to tests: an empty NB from
// libovsdb's in-process server, a loopback proxy in front of it that can
// cut, freeze and restore connections (a server killed, hung, restarted),
// and an endpoint that accepts connections and never answers.
package nbtest

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/ovn-kubernetes/libovsdb/ovsdb/serverdb"
	"github.com/ovn-kubernetes/libovsdb/server"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Serve serves an empty OVN_Northbound (and _Server) from libovsdb's
// in-process server until the test ends, and returns its unix socket path.
func Serve(t testing.TB) string {
	t.Helper()
	nbModel, err := nbmodel.FullDatabaseModel()
	require.NoError(t, err)
	return serveInProcess(t, "nb", nbModel, nbmodel.Schema())
}

// serveInProcess serves the database of clientModel and schema (and
// _Server) from libovsdb's in-process server until the test ends, at the
// unix socket it returns, named after what.
func serveInProcess(t testing.TB, what string, clientModel model.ClientDBModel, schema ovsdb.DatabaseSchema) string {
	t.Helper()
	srvModel, err := serverdb.FullDatabaseModel()
	require.NoError(t, err)
	log := logr.Discard()
	db := inmemory.NewDatabase(map[string]model.ClientDBModel{clientModel.Name(): clientModel, "_Server": srvModel}, &log)
	dbModel, errs := model.NewDatabaseModel(schema, clientModel)
	require.Empty(t, errs)
	srvDBModel, errs := model.NewDatabaseModel(serverdb.Schema(), srvModel)
	require.Empty(t, errs)
	srv, err := server.NewOvsdbServer(db, &log, dbModel, srvDBModel)
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), what+".sock")
	go func() { _ = srv.Serve("unix", sock) }()
	t.Cleanup(srv.Close)
	require.Eventually(t, srv.Ready, 5*time.Second, 10*time.Millisecond, "in-process %s did not start", what)
	return sock
}

// Proxy forwards a loopback TCP port to a unix socket. Down cuts every
// connection and refuses new ones (a killed server), Freeze keeps the
// clients' connections open but answers nothing (a hung server), Hang too
// and accepts new ones it never answers (a hung server on a live host), Up
// accepts again (the server restarted).
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
	// server holds the server sides; frozen keeps client sides open when
	// their server side closes.
	server []net.Conn
	frozen bool
	// hung: new connections are accepted and never answered.
	hung bool
}

// NewProxy listens on a free loopback port and forwards to the unix socket
// target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{t: t, target: target, addr: l.Addr().String()}
	p.serve(l)
	t.Cleanup(p.Down)
	return p
}

// Endpoint is the proxy's tcp: endpoint.
func (p *Proxy) Endpoint() string { return "tcp:" + p.addr }

func (p *Proxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			hung := p.hung
			if hung {
				p.conns = append(p.conns, c)
			}
			p.mu.Unlock()
			if hung {
				continue
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

// Hang is Freeze for a server whose host still accepts connections: new
// ones are accepted and never answered either.
func (p *Proxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen, p.hung = true, true
	for _, s := range p.server {
		s.Close()
	}
	p.server = nil
}

// Down closes every connection and refuses new ones.
func (p *Proxy) Down() {
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

// Freeze makes the server go silent: connections stay open, nothing is
// answered, new connections are refused.
func (p *Proxy) Freeze() {
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

// Up accepts connections again on the same port.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.frozen, p.hung = false, false
	listening := p.l != nil
	p.mu.Unlock()
	if listening {
		return
	}
	l, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(l)
}

// Silent returns a tcp: endpoint that accepts connections and never
// answers, like a hung server or a firewall that drops after the handshake.
func Silent(t testing.TB) string {
	t.Helper()
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
