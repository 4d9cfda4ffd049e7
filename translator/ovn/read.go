package ovn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// ReadOwned fills c's cache, emptied first, with the rows instance owns in
// the registry's tables (all rows of a table owned through another row),
// read as one transaction of selects: one consistent snapshot, as a
// monitor's first reply is, but without a monitor. It is a one-shot sync's
// read: a monitor would also send back every row the sync writes, and
// libovsdb decodes OVSDB's JSON notation through generic maps, which at
// thousands of routers costs more than the sync itself; the rows are read
// here with a decoder that knows the models' column types.
//
// The read uses a connection of its own to the endpoint c is connected
// to (the leader of a cluster), with c's TLS settings. A reconnection of
// c empties its cache (libovsdb purges the cache of a client without
// monitors): when one does while the rows are being put in, they are read
// again, so that the cache never holds a part of them.
func ReadOwned(ctx context.Context, c client.Client, instance string) error {
	return readOwned(ctx, c, instance, nb.Default)
}

func readOwned(ctx context.Context, c client.Client, instance string, reg *nb.Registry) error {
	for attempt := 1; ; attempt++ {
		err := readOwnedOnce(ctx, c, instance, reg)
		if !errors.Is(err, errRefilled) {
			return err
		}
		if attempt == 5 {
			return fmt.Errorf("reading our rows: %w", nb.ErrNotConnected)
		}
	}
}

// errRefilled says that a reconnection replaced the cache being filled.
var errRefilled = errors.New("the cache was replaced while it was being filled")

func readOwnedOnce(ctx context.Context, c client.Client, instance string, reg *nb.Registry) error {
	cc, ok := c.(*conn)
	if !ok {
		return fmt.Errorf("ReadOwned needs a client of package ovn, not %T", c)
	}
	addr := c.CurrentEndpoint()
	if addr == "" {
		return fmt.Errorf("reading the NB: %w", nb.ErrNotConnected)
	}
	var tables []*nb.Table
	var ops []ovsdb.Operation
	mine := []any{"includes", "external_ids", []any{"map", [][2]string{{translator.KeyManagedBy, instance}}}}
	for _, t := range reg.Tables() {
		if !nb.HasTable(c, t.Name) {
			continue
		}
		op := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: t.Name, Where: []ovsdb.Condition{}}
		tables = append(tables, t)
		ops = append(ops, op)
	}
	req, err := selectRequest(ops, func(i int) []any {
		if !tables[i].OwnerKeys() {
			return nil
		}
		return []any{[]any{mine[1], mine[0], mine[2]}}
	}, func(i int) []string { return reg.ReadColumns(tables[i]) })
	if err != nil {
		return err
	}
	results, err := cc.rawTransact(ctx, addr, req)
	if err != nil {
		return fmt.Errorf("reading our rows from NB %s: %w", addr, err)
	}
	if len(results) != len(tables) {
		return fmt.Errorf("reading our rows from NB %s: %d results for %d selects", addr, len(results), len(tables))
	}
	tc := c.Cache()
	tc.Purge(tc.DatabaseModel())
	filled := map[string]*cache.RowCache{}
	for i, t := range tables {
		r := results[i]
		if r.Error != "" {
			return fmt.Errorf("reading %s from NB %s: %s: %s", t.Name, addr, r.Error, r.Details)
		}
		rc := tc.Table(t.Name)
		filled[t.Name] = rc
		for _, raw := range r.Rows {
			m, uuid, err := decodeRow(t, raw)
			if err != nil {
				return fmt.Errorf("reading %s from NB %s: %w", t.Name, addr, err)
			}
			if err := rc.Create(uuid, m, false); err != nil {
				return fmt.Errorf("reading %s row %s from NB %s: %w", t.Name, uuid, addr, err)
			}
		}
	}
	// Purge replaces every row cache: the ones filled above are still the
	// cache's unless a reconnection purged it meanwhile.
	now := c.Cache()
	for name, rc := range filled {
		if now != tc || now.Table(name) != rc {
			return errRefilled
		}
	}
	return nil
}

// selectRequest is the JSON of a transact request of ops (selects), with
// each op's where clause given by where.
func selectRequest(ops []ovsdb.Operation, where func(int) []any, columns func(int) []string) ([]byte, error) {
	params := []any{nbmodel.Schema().Name}
	for i, op := range ops {
		w := where(i)
		if w == nil {
			w = []any{}
		}
		params = append(params, map[string]any{"op": op.Op, "table": op.Table, "where": w, "columns": columns(i)})
	}
	return json.Marshal(map[string]any{"id": "read", "method": "transact", "params": params})
}

// selectResult is one select's result, its rows left as raw JSON.
type selectResult struct {
	Rows    []map[string]json.RawMessage `json:"rows"`
	Error   string                       `json:"error"`
	Details string                       `json:"details"`
}

// rawTransact sends req on a connection of its own to addr and returns the
// results, answering the server's echo requests meanwhile.
func (c *conn) rawTransact(ctx context.Context, addr string, req []byte) ([]selectResult, error) {
	nc, err := dialEndpoint(ctx, addr, c.tls, c.timeout)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	if _, err := nc.Write(req); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(nc)
	for {
		var msg struct {
			ID     any             `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result []selectResult  `json:"result"`
			Error  any             `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if msg.Method == "echo" {
			reply, _ := json.Marshal(map[string]any{"id": msg.ID, "result": msg.Params, "error": nil})
			if _, err := nc.Write(reply); err != nil {
				return nil, err
			}
			continue
		}
		if msg.ID != "read" {
			continue
		}
		if msg.Error != nil {
			return nil, fmt.Errorf("%v", msg.Error)
		}
		return msg.Result, nil
	}
}

// decodeRow decodes one selected row into a model of table t, and returns
// its UUID.
func decodeRow(t *nb.Table, raw map[string]json.RawMessage) (model.Model, string, error) {
	m := t.New()
	v := reflect.ValueOf(m).Elem()
	var uuid string
	for i := 0; i < v.NumField(); i++ {
		col := v.Type().Field(i).Tag.Get("ovsdb")
		b, ok := raw[col]
		if !ok || col == "" {
			continue
		}
		if err := decodeValue(b, v.Field(i)); err != nil {
			return nil, "", fmt.Errorf("column %s: %w", col, err)
		}
		if col == "_uuid" {
			uuid = v.Field(i).String()
		}
	}
	if uuid == "" {
		return nil, "", errors.New("a row without _uuid")
	}
	return m, uuid, nil
}

// decodeValue decodes a value in OVSDB's JSON notation into f, a model
// field: an atom (string, integer, boolean, ["uuid", u]), a set
// (["set", [...]] or one atom) into a slice or an optional pointer, a map
// (["map", [[k, v], ...]]) into a map of strings.
func decodeValue(b []byte, f reflect.Value) error {
	switch f.Kind() {
	case reflect.Slice:
		elems, err := setElems(b)
		if err != nil {
			return err
		}
		s := reflect.MakeSlice(f.Type(), len(elems), len(elems))
		for i, e := range elems {
			if err := decodeAtom(e, s.Index(i)); err != nil {
				return err
			}
		}
		f.Set(s)
	case reflect.Pointer:
		elems, err := setElems(b)
		if err != nil {
			return err
		}
		if len(elems) == 0 {
			return nil
		}
		p := reflect.New(f.Type().Elem())
		if err := decodeAtom(elems[0], p.Elem()); err != nil {
			return err
		}
		f.Set(p)
	case reflect.Map:
		tag, body, err := tagged(b)
		if err != nil || tag != "map" {
			return fmt.Errorf("%s is not a map", b)
		}
		pairs, err := arrayElems(body)
		if err != nil {
			return err
		}
		m := reflect.MakeMapWithSize(f.Type(), len(pairs))
		for _, p := range pairs {
			kv, err := arrayElems(p)
			if err != nil || len(kv) != 2 {
				return fmt.Errorf("%s is not a map pair", p)
			}
			k, v := reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem()
			if err := decodeAtom(kv[0], k); err != nil {
				return err
			}
			if err := decodeAtom(kv[1], v); err != nil {
				return err
			}
			m.SetMapIndex(k, v)
		}
		f.Set(m)
	default:
		return decodeAtom(b, f)
	}
	return nil
}

// setElems are the elements of a set: ["set", [...]], or a single atom.
func setElems(b []byte) ([][]byte, error) {
	if tag, body, err := tagged(b); err == nil && tag == "set" {
		return arrayElems(body)
	}
	return [][]byte{b}, nil
}

func decodeAtom(b []byte, f reflect.Value) error {
	switch f.Kind() {
	case reflect.String:
		if len(b) > 0 && b[0] == '[' {
			tag, body, err := tagged(b)
			if err != nil || (tag != "uuid" && tag != "named-uuid") {
				return fmt.Errorf("%s is not a string or a UUID", b)
			}
			b = body
		}
		s, err := jsonString(b)
		if err != nil {
			return err
		}
		f.SetString(s)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			fl, ferr := strconv.ParseFloat(string(b), 64)
			if ferr != nil {
				return fmt.Errorf("%s is not an integer", b)
			}
			n = int64(fl)
		}
		f.SetInt(n)
	case reflect.Float64:
		fl, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return fmt.Errorf("%s is not a number", b)
		}
		f.SetFloat(fl)
	case reflect.Bool:
		switch string(b) {
		case "true":
			f.SetBool(true)
		case "false":
			f.SetBool(false)
		default:
			return fmt.Errorf("%s is not a boolean", b)
		}
	default:
		return fmt.Errorf("no decoding of %s into %s", b, f.Type())
	}
	return nil
}

// jsonString decodes a JSON string literal; one without escapes costs a
// copy.
func jsonString(b []byte) (string, error) {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && bytes.IndexByte(b, '\\') < 0 {
		return string(b[1 : len(b)-1]), nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", b)
	}
	return s, nil
}

// tagged splits ["tag", body] into the tag and body.
func tagged(b []byte) (string, []byte, error) {
	elems, err := arrayElems(b)
	if err != nil || len(elems) != 2 {
		return "", nil, fmt.Errorf("%s is not [tag, value]", b)
	}
	tag, err := jsonString(elems[0])
	return tag, elems[1], err
}

// arrayElems splits a JSON array into its elements, without decoding them.
func arrayElems(b []byte) ([][]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, fmt.Errorf("%s is not an array", b)
	}
	var out [][]byte
	depth, start, inString := 0, 1, false
	for i := 1; i < len(b)-1; i++ {
		switch c := b[i]; {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, bytes.TrimSpace(b[start:i]))
			start = i + 1
		}
	}
	if last := bytes.TrimSpace(b[start : len(b)-1]); len(last) > 0 {
		out = append(out, last)
	}
	return out, nil
}

// Realization reads the NB's NB_Global nb_cfg and hv_cfg: the chassis
// have every commit that asked for it once hv_cfg reaches nb_cfg. Both
// are -1 when the NB has no NB_Global yet (no ovn-northd has run).
func Realization(ctx context.Context, c client.Client) (nbCfg, hvCfg int, err error) {
	cc, ok := c.(*conn)
	if !ok {
		return 0, 0, fmt.Errorf("Realization needs a client of package ovn, not %T", c)
	}
	addr := c.CurrentEndpoint()
	if addr == "" {
		return 0, 0, fmt.Errorf("reading NB_Global: %w", nb.ErrNotConnected)
	}
	req, err := selectRequest([]ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: nbmodel.NBGlobalTable}},
		func(int) []any { return nil }, func(int) []string { return []string{"nb_cfg", "hv_cfg"} })
	if err != nil {
		return 0, 0, err
	}
	results, err := cc.rawTransact(ctx, addr, req)
	if err != nil {
		return 0, 0, fmt.Errorf("reading NB_Global from NB %s: %w", addr, err)
	}
	if len(results) != 1 {
		return 0, 0, fmt.Errorf("reading NB_Global from NB %s: %d results for 1 select", addr, len(results))
	}
	if len(results[0].Rows) == 0 {
		return -1, -1, nil
	}
	row := results[0].Rows[0]
	if err := json.Unmarshal(row["nb_cfg"], &nbCfg); err != nil {
		return 0, 0, err
	}
	return nbCfg, hvCfg, json.Unmarshal(row["hv_cfg"], &hvCfg)
}
