package ovn

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// DefaultTimeout is how long one OVSDB endpoint may take to accept a
// connection and answer before the next one is tried.
const DefaultTimeout = 5 * time.Second

// supervisePeriod is how often a client looks at its connection.
const supervisePeriod = 200 * time.Millisecond

// reconnectBackoff paces libovsdb's reconnection attempts. It never gives
// up: libovsdb panics when its retry loop ends.
func reconnectBackoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0
	return b
}

// conn is a libovsdb client that reconnects on its own, with the endpoint
// bookkeeping libovsdb lacks: libovsdb tries the endpoints in order with one
// deadline for all, so an endpoint that accepts connections and never
// answers would eat every attempt. While disconnected, conn probes each
// endpoint with its own deadline and hands libovsdb only those that answer.
type conn struct {
	client.Client
	db      string // NB or SB, for messages
	dbName  string // OVN_Northbound or OVN_Southbound
	addrs   []string
	tls     *tls.Config
	timeout time.Duration
	log     logr.Logger

	// ctx ends when the client is closed.
	ctx  context.Context
	stop context.CancelFunc
	// current is the endpoint list libovsdb was last given.
	current []string
	// silent are the endpoints the last probe found not answering.
	silent map[string]string
	// metrics is the client's private registry of libovsdb's metrics,
	// read for its count of disconnections.
	metrics *prometheus.Registry
	// pending counts the operations of our transactions in flight, and
	// monitoring our monitor requests: the server works on them before it
	// answers an echo (echoPatience).
	pending    atomic.Int64
	monitoring atomic.Int64
	// rows is how many rows the cache held when last seen non-empty: a
	// reconnection's monitor reply sends them all again.
	rows atomic.Int64
}

// Transact is the client's Transact, counting the operations in flight.
func (c *conn) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	n := int64(len(ops))
	c.pending.Add(n)
	defer c.pending.Add(-n)
	return c.Client.Transact(ctx, ops...)
}

// Monitor is the client's Monitor, noted as in flight.
func (c *conn) Monitor(ctx context.Context, m *client.Monitor) (client.MonitorCookie, error) {
	c.monitoring.Add(1)
	defer c.monitoring.Add(-1)
	return c.Client.Monitor(ctx, m)
}

// MonitorAll is the client's MonitorAll, noted as in flight.
func (c *conn) MonitorAll(ctx context.Context) (client.MonitorCookie, error) {
	c.monitoring.Add(1)
	defer c.monitoring.Add(-1)
	return c.Client.MonitorAll(ctx)
}

// minOpsPerSecond is the pace at which a server is assumed to work through
// our transactions and send our rows at worst: an eighth of what
// ovsdb-server 23.03 managed on a loaded 2-core machine (260,000 inserts
// in 15 s).
const minOpsPerSecond = 2000

// reconnectAllowance is added to the endpoint timeout for a reconnection:
// libovsdb's attempt includes the monitor's first reply, every row we own
// again (260,000 rows at 10,000 routers took longer than the 5 s
// endpoint timeout here, and every attempt was cut, for good).
const reconnectAllowance = 2 * time.Minute

// echoPatience is how long an echo may wait for its answer: twice the
// endpoint timeout, plus the time the server may need for what it has to
// send or do for us first (it answers in order): the operations of our
// transactions in flight, and our rows (an update of many, or a monitor
// reply, ahead of the echo). Without that, a big sync's own transactions,
// and a start's monitor reply at 10,000 routers, made the server look dead:
// the connection was cut under them.
func (c *conn) echoPatience() time.Duration {
	return 2*c.timeout + time.Duration(c.pending.Load()+c.rows.Load())*time.Second/minOpsPerSecond
}

// noteRows records how many rows the cache holds, unless none (a
// reconnection empties it until the monitor's reply).
func (c *conn) noteRows() {
	tc := c.Cache()
	if tc == nil {
		return
	}
	n := 0
	for name := range tc.DatabaseModel().Types() {
		if rc := tc.Table(name); rc != nil {
			n += rc.Len()
		}
	}
	if n > 0 {
		c.rows.Store(int64(n))
	}
}

// Connected is true while the connection is up (libovsdb's own Connected
// stays true after the server went away).
func (c *conn) Connected() bool { return nb.Connected(c.Client) }

// Disconnections counts the times the connection was lost since it was
// made; a change says a reconnection happened, also one too quick for a
// poll of Connected to see.
func (c *conn) Disconnections() int {
	families, err := c.metrics.Gather()
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range families {
		if f.GetName() == "libovsdb_disconnects_total" {
			for _, m := range f.GetMetric() {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n
}

// Close stops the supervisor and closes the connection. (A reconnection
// libovsdb has under way when the connection is down goes on: libovsdb
// offers no way to stop it.)
func (c *conn) Close() {
	c.stop()
	c.Client.Close()
}

// connect makes a client for ep and connects it; modelFor builds its
// client model from the server's schema (fetched before each connection
// is made), so that optional tables follow what the server has. It tries until
// ctx ends: each round probes every endpoint (dial and list_dbs, each
// within ep's timeout, all at once) and connects to the first that
// answered, in the order given; the error of the last round names every
// endpoint and why it failed. Once connected, the client reconnects on its
// own with a backoff that never gives up, detects a server gone silent with
// echo probes, and, for a cluster (several endpoints), accepts only the
// Raft leader, as ovn-nbctl does.
func connect(ctx context.Context, db, dbName string, modelFor func(ovsdb.DatabaseSchema) (model.ClientDBModel, error), ep Endpoint, log logr.Logger) (client.Client, error) {
	c := &conn{db: db, dbName: dbName, addrs: ep.addresses(), timeout: ep.timeout(), log: log}
	if len(c.addrs) == 0 {
		return nil, errors.New("no OVSDB endpoint given")
	}
	if ep.UsesTLS() {
		var err error
		if c.tls, err = ep.tlsConfig(); err != nil {
			return nil, err
		}
	}
	retry := reconnectBackoff()
	var last error
	for {
		err := c.connectOnce(ctx, modelFor)
		if err == nil {
			c.ctx, c.stop = context.WithCancel(context.Background())
			go c.supervise()
			return c, nil
		}
		if ctx.Err() != nil {
			// An attempt the caller's deadline cut short says less than
			// the last whole one ("no connection" rather than why).
			if last != nil {
				err = last
			}
			return nil, fmt.Errorf("connecting to %s %s: %w", db, ep.Address, err)
		}
		last = err
		wait := retry.NextBackOff()
		log.Info("could not connect; retrying", "database", db, "in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to %s %s: %w", db, ep.Address, last)
		case <-time.After(wait):
		}
	}
}

// ProbeNB says whether an endpoint of ep answers as an OVN Northbound
// (it accepts a connection and lists OVN_Northbound within ep's timeout),
// without making a client: a zone agent waits on it before it connects.
// Its error names every endpoint and why it failed, e.g. "NB:
// unix:/var/run/ovn/ovnnb_db.sock: dial unix /var/run/ovn/ovnnb_db.sock:
// connect: no such file or directory".
func ProbeNB(ctx context.Context, ep Endpoint) error {
	return probeEndpoint(ctx, "NB", nbmodel.Schema().Name, ep)
}

// ProbeSB is ProbeNB for an OVN Southbound.
func ProbeSB(ctx context.Context, ep Endpoint) error {
	return probeEndpoint(ctx, "SB", sbmodel.Schema().Name, ep)
}

func probeEndpoint(ctx context.Context, db, dbName string, ep Endpoint) error {
	c := &conn{db: db, dbName: dbName, addrs: ep.addresses(), timeout: ep.timeout()}
	if len(c.addrs) == 0 {
		return fmt.Errorf("%s: no OVSDB endpoint given", db)
	}
	if ep.UsesTLS() {
		var err error
		if c.tls, err = ep.tlsConfig(); err != nil {
			return fmt.Errorf("%s: %w", db, err)
		}
	}
	answered, failed := c.probeAll(ctx)
	if len(answered) > 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", db, c.joinFailures(failed))
}

// connectOnce is one round of connect.
func (c *conn) connectOnce(ctx context.Context, modelFor func(ovsdb.DatabaseSchema) (model.ClientDBModel, error)) error {
	answered, failed := c.probeAll(ctx)
	if err := ctx.Err(); err != nil {
		// Given up (an input error stopped the sync): the endpoints did
		// not fail, they were not waited for.
		return err
	}
	c.report(failed)
	if len(answered) == 0 {
		return c.joinFailures(failed)
	}
	schema, err := getSchema(ctx, answered[0], c.tls, c.dbName, c.timeout)
	if err != nil {
		return fmt.Errorf("%s: %w", answered[0], err)
	}
	dbModel, err := modelFor(schema)
	if err != nil {
		return err
	}
	// A reconnection attempt (libovsdb's: dialing, then every monitor's
	// first reply) has the endpoint timeout and reconnectAllowance; the
	// supervisor keeps endpoints that do not answer off the list. Not
	// WithInactivityCheck: libovsdb v0.8.1 then panics (send on a closed
	// channel) when a disconnection races a transaction's reply; the
	// supervisor sends the echo probes instead.
	reg := prometheus.NewRegistry()
	opts := []client.Option{client.WithLogger(&c.log), client.WithReconnect(c.timeout+reconnectAllowance, reconnectBackoff()), client.WithMetricsRegistry(reg)}
	for _, a := range answered {
		opts = append(opts, client.WithEndpoint(a))
	}
	if c.tls != nil {
		opts = append(opts, client.WithTLSConfig(c.tls))
	}
	if len(c.addrs) > 1 {
		opts = append(opts, client.WithLeaderOnly(true))
	}
	cl, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(len(answered))*c.timeout)
	defer cancel()
	if err := cl.Connect(cctx); err != nil {
		cl.Close()
		if len(failed) > 0 {
			return fmt.Errorf("%w; %w", err, c.joinFailures(failed))
		}
		return err
	}
	c.Client, c.metrics = cl, reg
	c.current = answered
	return nil
}

// probeAll probes every endpoint at once. answered keeps the given order;
// failed says why each of the others failed.
func (c *conn) probeAll(ctx context.Context) (answered []string, failed map[string]string) {
	errs := make([]error, len(c.addrs))
	var wg sync.WaitGroup
	for i, a := range c.addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probe(ctx, a, c.tls, c.dbName, c.timeout)
		}()
	}
	wg.Wait()
	failed = map[string]string{}
	for i, a := range c.addrs {
		if errs[i] == nil {
			answered = append(answered, a)
		} else {
			failed[a] = errs[i].Error()
		}
	}
	return answered, failed
}

// report logs the endpoints that stopped answering, once each time the set
// changes.
func (c *conn) report(failed map[string]string) {
	for _, a := range c.addrs {
		why, ok := failed[a]
		if _, was := c.silent[a]; ok && !was {
			c.log.Info("endpoint did not answer; using the others", "database", c.db, "endpoint", a, "error", why)
		} else if !ok && was {
			c.log.Info("endpoint answers again", "database", c.db, "endpoint", a)
		}
	}
	c.silent = failed
}

func (c *conn) joinFailures(failed map[string]string) error {
	var parts []string
	for _, a := range c.addrs {
		if why, ok := failed[a]; ok {
			parts = append(parts, fmt.Sprintf("%s: %s", a, why))
		}
	}
	return errors.New(strings.Join(parts, "; "))
}

// supervise logs losing and regaining the connection; while it is up,
// checks every endpoint timeout that the server still answers; while it
// is down, keeps libovsdb's endpoint list to the endpoints that answer, so
// that its reconnection attempts are not spent on a silent one.
func (c *conn) supervise() {
	t := time.NewTicker(supervisePeriod)
	defer t.Stop()
	up := true
	lastEcho := time.Now()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if c.Connected() {
			if !up {
				c.log.Info("reconnected", "database", c.db, "endpoint", c.CurrentEndpoint())
				lastEcho = time.Now()
			}
			up = true
			// Not while a monitor request of ours is in flight: its reply
			// (every row we own) comes before an echo's, and its caller's
			// deadline bounds it.
			if time.Since(lastEcho) >= c.timeout && c.monitoring.Load() == 0 {
				c.noteRows()
				c.echo()
				lastEcho = time.Now()
			}
			continue
		}
		if up {
			c.log.Info("connection lost; reconnecting", "database", c.db)
			up = false
		}
		if len(c.addrs) < 2 {
			continue
		}
		answered, failed := c.probeAll(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		c.report(failed)
		if len(answered) == 0 {
			answered = c.addrs
		}
		if !slices.Equal(answered, c.current) && !c.Connected() {
			c.UpdateEndpoints(answered)
			c.current = answered
		}
	}
}

// echo checks that the server still answers, within echoPatience (it
// answers in order, after our transactions in progress), and drops the
// connection when it does not: libovsdb then reconnects.
func (c *conn) echo() {
	ctx, cancel := context.WithTimeout(c.ctx, c.echoPatience())
	defer cancel()
	err := c.Echo(ctx)
	if err == nil || c.ctx.Err() != nil || !c.Connected() {
		return
	}
	cur := c.CurrentEndpoint()
	c.log.Info("server does not answer; reconnecting", "database", c.db, "endpoint", cur, "error", err.Error())
	// A reconnection attempt may take reconnectAllowance: with the silent
	// endpoint left out of libovsdb's list, the others are tried first
	// (libovsdb drops the connection when its endpoint leaves the list).
	if others := slices.DeleteFunc(slices.Clone(c.current), func(a string) bool { return a == cur }); len(others) > 0 && len(others) < len(c.current) {
		c.current = others
		c.UpdateEndpoints(others)
		return
	}
	c.Disconnect()
}

// probe connects to addr and asks for its databases, within timeout.
func probe(ctx context.Context, addr string, tlsCfg *tls.Config, dbName string, timeout time.Duration) error {
	result, err := call(ctx, addr, tlsCfg, timeout, "list_dbs", []any{})
	if err != nil {
		return err
	}
	var dbs []string
	if err := json.Unmarshal(result, &dbs); err != nil {
		return fmt.Errorf("bad answer to list_dbs: %w", err)
	}
	if !slices.Contains(dbs, dbName) {
		return fmt.Errorf("serves no %s database (it serves %s)", dbName, strings.Join(dbs, ", "))
	}
	return nil
}

// getSchema asks addr for the schema of dbName, within timeout: the client
// model is built from what the server has.
func getSchema(ctx context.Context, addr string, tlsCfg *tls.Config, dbName string, timeout time.Duration) (ovsdb.DatabaseSchema, error) {
	var schema ovsdb.DatabaseSchema
	result, err := call(ctx, addr, tlsCfg, timeout, "get_schema", []any{dbName})
	if err != nil {
		return schema, err
	}
	if err := json.Unmarshal(result, &schema); err != nil {
		return schema, fmt.Errorf("bad answer to get_schema %s: %w", dbName, err)
	}
	return schema, nil
}

// call connects to addr, sends one JSON-RPC request and returns its
// result, within timeout.
func call(ctx context.Context, addr string, tlsCfg *tls.Config, timeout time.Duration, method string, params []any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := dialEndpoint(ctx, addr, tlsCfg, timeout)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	stopWatch := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stopWatch()
	if err := json.NewEncoder(nc).Encode(map[string]any{"id": "probe", "method": method, "params": params}); err != nil {
		return nil, fmt.Errorf("sending %s: %w", method, err)
	}
	dec := json.NewDecoder(nc)
	for {
		var msg struct {
			ID     any             `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  any             `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("accepted the connection but did not answer %s within %s", method, timeout)
			}
			return nil, fmt.Errorf("reading the answer to %s: %w", method, err)
		}
		if msg.Method != "" || msg.ID != "probe" {
			continue // a request of the server's (echo): not our answer
		}
		if msg.Error != nil {
			return nil, fmt.Errorf("%s failed: %v", method, msg.Error)
		}
		return msg.Result, nil
	}
}

// dialEndpoint connects to an OVSDB endpoint (unix:, tcp: or ssl:) within
// timeout.
func dialEndpoint(ctx context.Context, addr string, tlsCfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	scheme, rest, _ := strings.Cut(addr, ":")
	var nc net.Conn
	var err error
	switch scheme {
	case "unix":
		nc, err = (&net.Dialer{}).DialContext(ctx, "unix", rest)
	case "tcp":
		nc, err = (&net.Dialer{}).DialContext(ctx, "tcp", rest)
	case "ssl":
		nc, err = (&tls.Dialer{Config: tlsCfg}).DialContext(ctx, "tcp", rest)
	default:
		return nil, fmt.Errorf("unknown scheme %q (unix:, tcp: or ssl:)", scheme)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("no connection within %s", timeout)
		}
		return nil, err
	}
	return nc, nil
}
