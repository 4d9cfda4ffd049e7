package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// The objects the general path decodes, by kind: the header every object is
// first read into, then each kind's type.
var decodedKinds = []struct {
	obj  any // a pointer to the kind's type, with its apiVersion and kind
	kind string
}{
	{&VirtualRouter{TypeMeta: metav1.TypeMeta{APIVersion: KubevirtV1, Kind: KindRouter}}, KindRouter},
	{&NetworkAttachmentDefinition{TypeMeta: metav1.TypeMeta{APIVersion: CNCFV1, Kind: KindNAD}}, KindNAD},
	{&VirtualMachineInstance{TypeMeta: metav1.TypeMeta{APIVersion: KubevirtV1, Kind: KindVMI}}, KindVMI},
	{&FloatingIP{TypeMeta: metav1.TypeMeta{APIVersion: KubevirtV1, Kind: KindFloatingIP}}, KindFloatingIP},
	{&FloatingIP{TypeMeta: metav1.TypeMeta{APIVersion: KubevirtV1, Kind: KindFloatingIPUpper}}, KindFloatingIPUpper},
}

// leaf tells a struct type encoding/json decodes with its own UnmarshalJSON
// (metav1.Time): a table entry decodes it whole.
func leaf(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
}

func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

// TestFastPath_TablesCoverDecodedTypes walks the types the general path
// decodes and fails when a JSON field has no entry in the fast reader's table
// for its type: a field added to VirtualRouterSpec, the VMI types or
// ObjectMeta (a Kubernetes upgrade) must be decoded by the fast reader, or
// marked as left to the general path, before the tests pass. A table entry
// that names no field fails too.
func TestFastPath_TablesCoverDecodedTypes(t *testing.T) {
	visited := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		if visited[typ] {
			return
		}
		visited[typ] = true
		table, ok := fastTables[typ]
		if !assert.True(t, ok, "%s (%s) has no fieldTable in decodefast.go", path, typ) {
			return
		}
		fields := map[string]bool{}
		for _, jf := range jsonFields(typ) {
			fields[jf.name] = true
			how, ok := table[jf.name]
			assert.True(t, ok, "%s.%s (%s) has no entry in the fast reader's table for %s (decodefast.go): decode it there, or leave it to the general path with toGeneral",
				path, jf.name, jf.typ, typ)
			if ft := elemType(jf.typ); ok && how == fieldDecoded && ft.Kind() == reflect.Struct && !leaf(ft) {
				walk(ft, path+"."+jf.name)
			}
		}
		for name := range table {
			assert.True(t, fields[name], "the fast reader's table for %s has an entry %q, which is no field of it", typ, name)
		}
	}
	walk(reflect.TypeFor[header](), "object")
	for _, k := range decodedKinds {
		walk(reflect.TypeOf(k.obj).Elem(), k.kind)
	}
	for typ := range fastTables {
		assert.True(t, visited[typ], "the fast reader has a table for %s, which no decoded type reaches", typ)
	}
}

// fill sets every field of v the fast reader decodes to a value that names
// its path; fields it leaves to the general path stay empty.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), fmt.Sprintf("%s.%d", path, i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf(path+".key"), reflect.ValueOf(path))
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC))))
			return
		}
		table := fastTables[v.Type()]
		for _, jf := range jsonFields(v.Type()) {
			if table[jf.name] == fieldToGeneral || jf.name == "apiVersion" || jf.name == "kind" {
				continue
			}
			fill(v.FieldByIndex(jf.index), path+"."+jf.name)
		}
	default:
		panic(fmt.Sprintf("fill: no value for a %s at %s", v.Type(), path))
	}
}

// TestFastPath_ReadsEveryFieldAsGeneral writes each kind with every field
// the fast reader decodes set to its own value, as block YAML, and requires
// that the fast reader reads it (no fallback) into the object the general
// path decodes: an entry that decodes a field into the wrong place, or a new
// field it does not read, fails.
func TestFastPath_ReadsEveryFieldAsGeneral(t *testing.T) {
	for _, k := range decodedKinds {
		t.Run(k.kind, func(t *testing.T) {
			typ := reflect.TypeOf(k.obj).Elem()
			filled := reflect.New(typ)
			filled.Elem().Set(reflect.ValueOf(k.obj).Elem())
			fill(filled.Elem(), k.kind)
			js, err := json.Marshal(filled.Interface())
			require.NoError(t, err)
			doc, err := sigsyaml.JSONToYAML(js)
			require.NoError(t, err)

			general := reflect.New(typ)
			require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096).Decode(general.Interface()))

			var fast []any
			f := &fastDecoder{onObject: func(obj any) { fast = append(fast, reflect.ValueOf(obj).Elem().Interface()) }}
			_, err = f.decode("in.yaml", doc)
			require.NoError(t, err, "the fast reader leaves this to the general path:\n%s", doc)
			require.Len(t, fast, 1)
			assert.Equal(t, general.Elem().Interface(), fast[0], "the fast reader reads differently:\n%s", doc)
			again, err := json.Marshal(fast[0])
			require.NoError(t, err)
			assert.JSONEq(t, string(js), string(again), "a value did not arrive:\n%s", doc)
			requireSameAsGeneral(t, k.kind, doc)
		})
	}
}
