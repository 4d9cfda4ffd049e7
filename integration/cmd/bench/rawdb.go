package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"time"
)

// rawDB is a bare OVSDB JSON-RPC client on a unix socket: no cache, no
// models, so that the floor measures the server and the wire alone.
type rawDB struct {
	conn net.Conn
	dec  *json.Decoder
	w    *bufio.Writer
	id   int
}

func dialRaw(endpoint string) (*rawDB, error) {
	path, ok := strings.CutPrefix(endpoint, "unix:")
	if !ok {
		return nil, fmt.Errorf("raw OVSDB client: %s is not a unix: endpoint", endpoint)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &rawDB{conn: c, dec: json.NewDecoder(bufio.NewReaderSize(c, 1<<20)), w: bufio.NewWriterSize(c, 1<<20)}, nil
}

func (r *rawDB) Close() error { return r.conn.Close() }

type rpcMsg struct {
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	ID     json.RawMessage `json:"id"`
}

// call sends one request and returns its result, answering echo requests
// meanwhile.
func (r *rawDB) call(method string, params any, timeout time.Duration) (json.RawMessage, error) {
	req, err := r.request(method, params)
	if err != nil {
		return nil, err
	}
	return r.send(req, timeout)
}

// request encodes a request, to be sent by send.
func (r *rawDB) request(method string, params any) (rawRequest, error) {
	r.id++
	b, err := json.Marshal(map[string]any{"method": method, "params": params, "id": r.id})
	return rawRequest{method: method, id: r.id, body: b}, err
}

type rawRequest struct {
	method string
	id     int
	body   []byte
}

// send writes an encoded request and reads its reply.
func (r *rawDB) send(req rawRequest, timeout time.Duration) (json.RawMessage, error) {
	method, id := req.method, req.id
	_ = r.conn.SetDeadline(time.Now().Add(timeout))
	defer r.conn.SetDeadline(time.Time{})
	if _, err := r.w.Write(req.body); err != nil {
		return nil, err
	}
	if err := r.w.Flush(); err != nil {
		return nil, err
	}
	for {
		var m rpcMsg
		if err := r.dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("OVSDB %s: reading the reply: %w", method, err)
		}
		if m.Method == "echo" {
			if err := json.NewEncoder(r.w).Encode(map[string]any{"result": m.Params, "error": nil, "id": m.ID}); err != nil {
				return nil, err
			}
			if err := r.w.Flush(); err != nil {
				return nil, err
			}
			continue
		}
		if string(m.ID) != fmt.Sprint(id) {
			continue
		}
		if len(m.Error) > 0 && string(m.Error) != "null" {
			return nil, fmt.Errorf("OVSDB %s: %s", method, m.Error)
		}
		return m.Result, nil
	}
}

// schemaTables is the server's schema reduced to what the floor needs: the
// tables and the tables each one references.
type schemaTables map[string]map[string]bool

func (r *rawDB) schema(db string) (schemaTables, error) {
	res, err := r.call("get_schema", []string{db}, time.Minute)
	if err != nil {
		return nil, err
	}
	var s struct {
		Tables map[string]struct {
			Columns map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"columns"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(res, &s); err != nil {
		return nil, err
	}
	refRE := regexp.MustCompile(`"refTable"\s*:\s*"([^"]+)"`)
	out := schemaTables{}
	for name, t := range s.Tables {
		refs := map[string]bool{}
		for _, c := range t.Columns {
			for _, m := range refRE.FindAllStringSubmatch(string(c.Type), -1) {
				refs[m[1]] = true
			}
		}
		out[name] = refs
	}
	return out, nil
}

// order lists the tables children first: a table comes after every table
// it references (cycles, if any, are broken by name order).
func (s schemaTables) order() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	done := map[string]bool{}
	var out []string
	var visit func(n string, path map[string]bool)
	visit = func(n string, path map[string]bool) {
		if done[n] || path[n] {
			return
		}
		path[n] = true
		refs := make([]string, 0, len(s[n]))
		for r := range s[n] {
			refs = append(refs, r)
		}
		sort.Strings(refs)
		for _, r := range refs {
			visit(r, path)
		}
		delete(path, n)
		done[n] = true
		out = append(out, n)
	}
	for _, n := range names {
		visit(n, map[string]bool{})
	}
	return out
}

// row is one row as the server sends it (OVSDB JSON notation).
type row map[string]any

// dumpTable is one table's rows.
type dumpTable struct {
	name string
	rows []row
}

// dump reads every row of every table but skip, children first.
func (r *rawDB) dump(db string, skip ...string) ([]dumpTable, error) {
	s, err := r.schema(db)
	if err != nil {
		return nil, err
	}
	var tables []string
	for _, t := range s.order() {
		if !contains(skip, t) {
			tables = append(tables, t)
		}
	}
	params := []any{db}
	for _, t := range tables {
		params = append(params, map[string]any{"op": "select", "table": t, "where": []any{}})
	}
	res, err := r.call("transact", params, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	var results []struct {
		Rows  []row  `json:"rows"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(res, &results); err != nil {
		return nil, err
	}
	var out []dumpTable
	for i, t := range tables {
		if i >= len(results) || results[i].Error != "" {
			return nil, fmt.Errorf("dumping %s: select failed", t)
		}
		if len(results[i].Rows) > 0 {
			out = append(out, dumpTable{name: t, rows: results[i].Rows})
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// floorOps turns a dump into one transaction's inserts: every row keeps
// its columns (empty sets and maps left out), and every reference to a
// dumped row becomes a named-UUID reference, so children are referenced
// from their parents' insert rows.
func floorOps(db string, tables []dumpTable) ([]any, int) {
	known := map[string]bool{}
	for _, t := range tables {
		for _, r := range t.rows {
			if u, ok := uuidOf(r["_uuid"]); ok {
				known[u] = true
			}
		}
	}
	ops := []any{db}
	n := 0
	for _, t := range tables {
		for _, r := range t.rows {
			u, _ := uuidOf(r["_uuid"])
			ins := map[string]any{}
			for col, v := range r {
				if col == "_uuid" || col == "_version" || isEmpty(v) {
					continue
				}
				ins[col] = renameRefs(v, known)
			}
			ops = append(ops, map[string]any{"op": "insert", "table": t.name, "row": ins, "uuid-name": namedUUID(u)})
			n++
		}
	}
	return ops, n
}

func namedUUID(u string) string { return "r" + strings.ReplaceAll(u, "-", "_") }

func uuidOf(v any) (string, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 || a[0] != "uuid" {
		return "", false
	}
	s, ok := a[1].(string)
	return s, ok
}

func isEmpty(v any) bool {
	a, ok := v.([]any)
	if !ok || len(a) != 2 || (a[0] != "set" && a[0] != "map") {
		return false
	}
	inner, ok := a[1].([]any)
	return ok && len(inner) == 0
}

func renameRefs(v any, known map[string]bool) any {
	if u, ok := uuidOf(v); ok {
		if known[u] {
			return []any{"named-uuid", namedUUID(u)}
		}
		return v
	}
	a, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(a))
	for i, x := range a {
		out[i] = renameRefs(x, known)
	}
	return out
}

// transact sends ops as one transaction and fails on any operation error;
// it returns the time from the first byte sent to the reply read, the
// request's encoding and the reply's checks left out.
func (r *rawDB) transact(ops []any, timeout time.Duration) (time.Duration, error) {
	req, err := r.request("transact", ops)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	res, err := r.send(req, timeout)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	return took, checkResults(res, len(ops)-1)
}

func checkResults(res json.RawMessage, nops int) error {
	var results []map[string]any
	if err := json.Unmarshal(res, &results); err != nil {
		return err
	}
	for i, x := range results {
		if e, ok := x["error"]; ok && e != nil {
			return fmt.Errorf("OVSDB transact: operation %d: %v: %v", i, e, x["details"])
		}
	}
	if len(results) < nops {
		return fmt.Errorf("OVSDB transact: %d results for %d operations", len(results), nops)
	}
	return nil
}
