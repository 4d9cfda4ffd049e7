package ovn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/trace"
)

// TraceRunner is kubevirt-ovn trace's trace.Runner: it reads each zone's
// NB and SB, and runs ovn-trace on a zone's SB through a TraceProxy.
type TraceRunner struct {
	// Binary is the ovn-trace to run.
	Binary string
	zones  map[string]*traceZone
}

type traceZone struct {
	nb, sb client.Client
	sbEP   Endpoint
	proxy  *TraceProxy
}

// ErrNoOVNTrace says that the ovn-trace binary is not there.
var ErrNoOVNTrace = errors.New("ovn-trace is not installed")

// NewTraceRunner checks that binary (a name on PATH or a path) runs.
func NewTraceRunner(binary string) (*TraceRunner, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not on PATH or not executable (install OVN's ovn-common package, ovn-trace's home, or name it with --ovn-trace)", ErrNoOVNTrace, binary)
	}
	return &TraceRunner{Binary: path, zones: map[string]*traceZone{}}, nil
}

// Open reads zone name's (central: "") NB rows of instance and SB facts,
// and starts the zone's proxy for ovn-trace.
func (r *TraceRunner) Open(ctx context.Context, name string, nbEP, sbEP Endpoint, instance string, log logr.Logger) (*trace.Zone, error) {
	nbc, err := DialNB(ctx, nbEP, log)
	if err != nil {
		return nil, err
	}
	z := &traceZone{nb: nbc, sbEP: sbEP}
	r.zones[name] = z
	if err := ReadOwned(ctx, nbc, instance); err != nil {
		return nil, err
	}
	if z.sb, err = ConnectWatchSB(ctx, sbEP, instance, log); err != nil {
		return nil, err
	}
	if z.proxy, err = StartTraceProxy(ctx, sbEP, z.sb.CurrentEndpoint()); err != nil {
		return nil, err
	}
	out := &trace.Zone{Name: name, Order: map[string][]string{}}
	if err := readTraceRows(ctx, nbc, &out.Rows); err != nil {
		return nil, err
	}
	for _, a := range kvnb.Gateways(nbc, instance) {
		out.Order[a.Router] = a.Order
	}
	if out.Active, err = ActiveGateways(ctx, z.sb); err != nil {
		return nil, err
	}
	if out.Bound, err = BoundPorts(ctx, z.sb, instance); err != nil {
		return nil, err
	}
	if out.Offline, err = OfflineBackends(ctx, z.sb); err != nil {
		return nil, err
	}
	return out, nil
}

// readTraceRows copies the rows a trace reads from c's cache.
func readTraceRows(ctx context.Context, c client.Client, rows *trace.Rows) error {
	for _, l := range []any{&rows.Switches, &rows.SwitchPorts, &rows.Routers, &rows.RouterPorts, &rows.NATs,
		&rows.Routes, &rows.ACLs, &rows.PortGroups, &rows.LoadBalancers, &rows.StaticBindings} {
		if err := c.List(ctx, l); err != nil && !errors.Is(err, client.ErrNotFound) {
			return fmt.Errorf("reading the NB's rows: %w", err)
		}
	}
	return nil
}

// Close stops the proxies and closes the connections.
func (r *TraceRunner) Close() {
	for _, z := range r.zones {
		if z.proxy != nil {
			z.proxy.Close()
		}
		if z.sb != nil {
			z.sb.Close()
		}
		z.nb.Close()
	}
}

// ctNew is how many conntrack lookups of a trace see a new connection:
// more than any path has, so that each of them does (ovn-trace's default
// is an established one, which every stateful ACL lets through).
const ctNew = 32

// Trace runs ovn-trace --detailed on zone's SB.
func (r *TraceRunner) Trace(ctx context.Context, zone, datapath, microflow, lbDst string) (string, error) {
	z := r.zones[zone]
	if z == nil {
		return "", fmt.Errorf("zone %q was not opened", zone)
	}
	args := []string{"--db=" + z.proxy.Address, "--detailed"}
	for range ctNew {
		args = append(args, "--ct=new")
	}
	// Not ovn-trace's --lb-dst: see narrowBackends.
	z.proxy.SetMember(lbDst)
	args = append(args, datapath, microflow)
	cmd := exec.CommandContext(ctx, r.Binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", r.Binary, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// StageHints reads, from zone's SB, the stage-hint of each logical flow
// among events: one select per (pipeline, table, priority), one
// transaction.
func (r *TraceRunner) StageHints(ctx context.Context, zone string, events []trace.Event) (map[string]string, error) {
	z := r.zones[zone]
	if z == nil {
		return nil, fmt.Errorf("zone %q was not opened", zone)
	}
	params := []any{"OVN_Southbound"}
	seen := map[string]bool{}
	for _, e := range events {
		if e.Kind != trace.Flow || e.UUID == "" {
			continue
		}
		key := fmt.Sprintf("%s/%d/%d", e.Pipeline, e.Table, e.Priority)
		if seen[key] {
			continue
		}
		seen[key] = true
		params = append(params, map[string]any{"op": "select", "table": "Logical_Flow",
			"where":   []any{[]any{"pipeline", "==", e.Pipeline}, []any{"table_id", "==", e.Table}, []any{"priority", "==", e.Priority}},
			"columns": []string{"_uuid", "external_ids"}})
	}
	hints := map[string]string{}
	if len(params) == 1 {
		return hints, nil
	}
	tlsCfg, err := z.proxy.tls()
	if err != nil {
		return nil, err
	}
	result, err := call(ctx, z.sb.CurrentEndpoint(), tlsCfg, z.sbEP.timeout(), "transact", params)
	if err != nil {
		return nil, fmt.Errorf("reading logical flows: %w", err)
	}
	var answers []struct {
		Rows []struct {
			UUID        []string        `json:"_uuid"`
			ExternalIDs json.RawMessage `json:"external_ids"`
		} `json:"rows"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(result, &answers); err != nil {
		return nil, fmt.Errorf("reading logical flows: %w", err)
	}
	for _, a := range answers {
		if a.Error != "" {
			return nil, fmt.Errorf("reading logical flows: %s", a.Error)
		}
		for _, row := range a.Rows {
			if len(row.UUID) != 2 || len(row.UUID[1]) < 8 {
				continue
			}
			ids, err := decodeStringMap(row.ExternalIDs)
			if err != nil {
				return nil, err
			}
			if h := ids["stage-hint"]; h != "" {
				hints[row.UUID[1][:8]] = h
			}
		}
	}
	return hints, nil
}
