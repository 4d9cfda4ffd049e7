package nb

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// arena encodes column values in OVSDB's JSON notation into chunks of one
// buffer: a full sync's inserts are tens of thousands of small values.
type arena struct {
	buf []byte
}

const arenaChunk = 64 << 10

// encode returns value v of column cs in OVSDB's JSON notation: an atom, a
// set ["set", [...]] (a single element as the atom), a map ["map",
// [[k, v], ...]], a reference ["uuid", u] or, to a row of the same
// transaction, ["named-uuid", u].
func (a *arena) encode(cs *ovsdb.ColumnSchema, v reflect.Value) (json.RawMessage, error) {
	if cap(a.buf)-len(a.buf) < 1024 {
		a.buf = make([]byte, 0, arenaChunk)
	}
	start := len(a.buf)
	var err error
	a.buf, err = appendValue(a.buf, cs, v)
	if err != nil {
		return nil, err
	}
	out := a.buf[start:len(a.buf):len(a.buf)]
	return json.RawMessage(out), nil
}

func appendValue(b []byte, cs *ovsdb.ColumnSchema, v reflect.Value) ([]byte, error) {
	t := cs.TypeObj
	if t == nil {
		return appendAtom(b, cs.Type, v)
	}
	switch v.Kind() {
	case reflect.Map:
		b = append(b, `["map",[`...)
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int {
			if x.String() < y.String() {
				return -1
			}
			if x.String() > y.String() {
				return 1
			}
			return 0
		})
		var err error
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			if b, err = appendAtom(b, t.Key.Type, k); err != nil {
				return nil, err
			}
			b = append(b, ',')
			if b, err = appendAtom(b, t.Value.Type, v.MapIndex(k)); err != nil {
				return nil, err
			}
			b = append(b, ']')
		}
		return append(b, "]]"...), nil
	case reflect.Slice:
		if v.Len() == 1 {
			return appendAtom(b, t.Key.Type, v.Index(0))
		}
		b = append(b, `["set",[`...)
		var err error
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendAtom(b, t.Key.Type, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, "]]"...), nil
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, `["set",[]]`...), nil
		}
		return appendAtom(b, t.Key.Type, v.Elem())
	}
	return appendAtom(b, t.Key.Type, v)
}

// appendAtom appends an atom of OVSDB type typ.
func appendAtom(b []byte, typ string, v reflect.Value) ([]byte, error) {
	switch typ {
	case ovsdb.TypeString:
		return appendString(b, v.String()), nil
	case ovsdb.TypeUUID:
		tag := "uuid"
		if ovsdb.IsNamedUUID(v.String()) {
			tag = "named-uuid"
		}
		b = append(b, `["`...)
		b = append(b, tag...)
		b = append(b, `",`...)
		return append(appendString(b, v.String()), ']'), nil
	case ovsdb.TypeInteger:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case ovsdb.TypeReal:
		return strconv.AppendFloat(b, v.Float(), 'g', -1, 64), nil
	case ovsdb.TypeBoolean:
		return strconv.AppendBool(b, v.Bool()), nil
	}
	return nil, fmt.Errorf("no notation for OVSDB type %s", typ)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
