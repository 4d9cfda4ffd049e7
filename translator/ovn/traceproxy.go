package ovn

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// TraceProxy serves one SB to ovn-trace on a unix socket of its own, and
// shows ovn-trace the SB's static MAC bindings as MAC_Binding rows.
//
// ovn-controller realizes Static_MAC_Binding (the peer router's MAC of a
// gateway port, NB Static_MAC_Binding) in OpenFlow, with no logical flow
// and no MAC_Binding row, and ovn-trace reads MAC_Binding only: without
// the proxy every trace to the peer router stops at "No MAC binding" and
// an ARP request the datapath never sends, before the gateway's SNAT. The
// proxy forwards every message between ovn-trace and the SB unchanged but
// the answer to ovn-trace's SB monitor, into whose MAC_Binding table it
// adds a row per static binding (replacing a learned one for the same
// port and IP when the static binding overrides it, as ovn-controller
// does). It also spares ovn-trace the SB's TLS material: the proxy
// connects with the endpoint's.
type TraceProxy struct {
	// Address is the proxy's endpoint for ovn-trace --db.
	Address string
	// Static are the static bindings shown, as logical_port/ip.
	Static []string

	upstream string
	tlsEP    Endpoint
	ln       net.Listener
	dir      string
	rows     map[string]staticBinding // by logical_port/ip
	wg       sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	member   string
}

// StartTraceProxy listens on a unix socket in a new temporary directory
// and reads the static MAC bindings of the SB at addr, one of ep's
// endpoints (the one a client is connected to, the leader of a cluster).
func StartTraceProxy(ctx context.Context, ep Endpoint, addr string) (*TraceProxy, error) {
	p := &TraceProxy{upstream: addr, tlsEP: ep, rows: map[string]staticBinding{}}
	if err := p.readStatic(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubevirt-ovn-trace-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "sb.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.Address, p.ln, p.dir = "unix:"+sock, ln, dir
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Close stops the proxy, its connections, and removes its socket.
func (p *TraceProxy) Close() {
	p.cancel()
	p.ln.Close()
	p.wg.Wait()
	os.RemoveAll(p.dir)
}

// readStatic reads the SB's Static_MAC_Binding rows (none before OVN
// 22.09, whose SB has no such table) as MAC_Binding rows to show.
func (p *TraceProxy) readStatic(ctx context.Context) error {
	tlsCfg, err := p.tls()
	if err != nil {
		return err
	}
	op := map[string]any{"op": "select", "table": "Static_MAC_Binding", "where": []any{},
		"columns": []string{"logical_port", "ip", "mac", "datapath", "override_dynamic_mac"}}
	result, err := call(ctx, p.upstream, tlsCfg, p.tlsEP.timeout(), "transact", []any{"OVN_Southbound", op})
	if err != nil {
		return fmt.Errorf("reading the SB's static MAC bindings: %w", err)
	}
	var answers []struct {
		Rows  []map[string]json.RawMessage `json:"rows"`
		Error string                       `json:"error"`
	}
	if err := json.Unmarshal(result, &answers); err != nil || len(answers) != 1 {
		return fmt.Errorf("reading the SB's static MAC bindings: bad answer %s", result)
	}
	if answers[0].Error != "" {
		return nil // no such table: an SB before 22.09
	}
	for _, r := range answers[0].Rows {
		var port, ip string
		if json.Unmarshal(r["logical_port"], &port) != nil || json.Unmarshal(r["ip"], &ip) != nil {
			continue
		}
		row, err := json.Marshal(map[string]json.RawMessage{"logical_port": r["logical_port"], "ip": r["ip"], "mac": r["mac"], "datapath": r["datapath"]})
		if err != nil {
			return err
		}
		var override bool
		_ = json.Unmarshal(r["override_dynamic_mac"], &override)
		p.rows[port+"/"+ip] = staticBinding{row: row, override: override}
		p.Static = append(p.Static, port+"/"+ip)
	}
	return nil
}

func (p *TraceProxy) tls() (*tls.Config, error) {
	if !p.tlsEP.UsesTLS() {
		return nil, nil
	}
	return p.tlsEP.tlsConfig()
}

func (p *TraceProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// serve forwards one client's messages to a connection of its own to the
// SB and the SB's back, patching the answers to its SB monitors.
func (p *TraceProxy) serve(client net.Conn) {
	defer client.Close()
	tlsCfg, err := p.tls()
	if err != nil {
		return
	}
	up, err := dialEndpoint(p.ctx, p.upstream, tlsCfg, p.tlsEP.timeout())
	if err != nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(p.ctx, func() { client.Close(); up.Close() })
	defer stop()

	var mu sync.Mutex
	monitors := map[string]string{} // the client's SB monitor requests' methods by id
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer up.Close()
		dec := json.NewDecoder(client)
		for {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return
			}
			var msg struct {
				ID     json.RawMessage   `json:"id"`
				Method string            `json:"method"`
				Params []json.RawMessage `json:"params"`
			}
			if json.Unmarshal(raw, &msg) == nil && isSBMonitor(msg.Method, msg.Params) {
				mu.Lock()
				monitors[string(msg.ID)] = msg.Method
				mu.Unlock()
			}
			if _, err := up.Write(raw); err != nil {
				return
			}
		}
	}()
	dec := json.NewDecoder(up)
	for {
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			break
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(raw, &msg) == nil && msg.Method == "" && len(msg.ID) > 0 {
			mu.Lock()
			method := monitors[string(msg.ID)]
			delete(monitors, string(msg.ID))
			mu.Unlock()
			if method != "" {
				if patched, err := p.patch(raw, method); err == nil {
					raw = patched
				}
			}
		}
		if _, err := client.Write(raw); err != nil {
			break
		}
	}
	client.Close()
	<-done
}

// isSBMonitor says whether a request monitors OVN_Southbound.
func isSBMonitor(method string, params []json.RawMessage) bool {
	switch method {
	case "monitor", "monitor_cond", "monitor_cond_since":
	default:
		return false
	}
	var db string
	return len(params) > 0 && json.Unmarshal(params[0], &db) == nil && db == "OVN_Southbound"
}

// staticBinding is a Static_MAC_Binding as a MAC_Binding row.
type staticBinding struct {
	row      json.RawMessage
	override bool // override_dynamic_mac
}

// patch changes the answer to a monitor request of method
// (monitor_cond_since's [found, last-id, updates] or monitor's and
// monitor_cond's updates): it adds the static MAC bindings to its
// MAC_Binding table and narrows the load balancers' backends to the
// member followed.
func (p *TraceProxy) patch(raw json.RawMessage, method string) (json.RawMessage, error) {
	member := p.Member()
	if len(p.rows) == 0 && member == "" {
		return raw, nil
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, err
	}
	result := msg["result"]
	var since []json.RawMessage
	updatesRaw := result
	if method == "monitor_cond_since" {
		if err := json.Unmarshal(result, &since); err != nil || len(since) != 3 {
			return nil, errors.New("unexpected monitor_cond_since answer")
		}
		updatesRaw = since[2]
	}
	var updates map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(updatesRaw, &updates); err != nil {
		return nil, err
	}
	kind := "initial" // monitor_cond's and monitor_cond_since's updates2
	if method == "monitor" {
		kind = "new"
	}
	if len(p.rows) > 0 {
		updates["MAC_Binding"] = p.addStatic(updates["MAC_Binding"], kind)
	}
	if member != "" {
		if err := narrowBackends(updates["Logical_Flow"], member); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(updates)
	if err != nil {
		return nil, err
	}
	if since != nil {
		since[2] = b
		if b, err = json.Marshal(since); err != nil {
			return nil, err
		}
	}
	msg["result"] = b
	return json.Marshal(msg)
}

// addStatic adds the static bindings to a monitor's MAC_Binding rows: a
// learned binding for a port and IP that a static one has stays when the
// static one does not override learned ones, else the static one wins.
func (p *TraceProxy) addStatic(table map[string]map[string]json.RawMessage, kind string) map[string]map[string]json.RawMessage {
	if table == nil {
		table = map[string]map[string]json.RawMessage{}
	}
	show := maps.Clone(p.rows)
	for uuid, change := range table {
		for _, row := range change {
			var r struct {
				Port string `json:"logical_port"`
				IP   string `json:"ip"`
			}
			if json.Unmarshal(row, &r) != nil {
				continue
			}
			if s, ok := show[r.Port+"/"+r.IP]; ok {
				if s.override {
					delete(table, uuid)
				} else {
					delete(show, r.Port+"/"+r.IP)
				}
			}
		}
	}
	for _, s := range show {
		table[newUUID()] = map[string]json.RawMessage{kind: s.row}
	}
	return table
}

// backendsRE is the backends of a load-balancing action,
// ct_lb_mark(backends=A,B; hash_fields=...).
var backendsRE = regexp.MustCompile(`backends=([^;)]*)`)

// narrowBackends leaves member alone in the backends of every logical
// flow that load-balances over it. ovn-trace picks a backend at random
// (and its --lb-dst also rewrites every address-less ct_lb_mark, the
// conntrack lookup before a load balancer, so that the load balancer's
// own flow never matches); narrowed, the trace follows the member asked
// for through the load balancer's flow.
func narrowBackends(table map[string]map[string]json.RawMessage, member string) error {
	for _, change := range table {
		for k, row := range change {
			if !bytes.Contains(row, []byte("backends=")) {
				continue
			}
			var r map[string]json.RawMessage
			if err := json.Unmarshal(row, &r); err != nil {
				return err
			}
			var actions string
			if json.Unmarshal(r["actions"], &actions) != nil {
				continue
			}
			narrowed := backendsRE.ReplaceAllStringFunc(actions, func(m string) string {
				for _, b := range strings.Split(strings.TrimPrefix(m, "backends="), ",") {
					if strings.TrimSpace(b) == member {
						return "backends=" + member
					}
				}
				return m
			})
			if narrowed == actions {
				continue
			}
			b, err := json.Marshal(narrowed)
			if err != nil {
				return err
			}
			r["actions"] = b
			if change[k], err = json.Marshal(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetMember has the next ovn-trace runs follow load balancer member
// ("ip:port", "" any).
func (p *TraceProxy) SetMember(member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.member = member
}

// Member is the member SetMember set.
func (p *TraceProxy) Member() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.member
}

// newUUID is a random UUID for a row the proxy makes up.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
