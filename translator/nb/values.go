package nb

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/model"
)

// Column access through the models' ovsdb tags: which struct field holds
// which column, computed once per model type.

var fieldIndexes sync.Map // reflect.Type -> map[string]int

func columnFields(t reflect.Type) map[string]int {
	if v, ok := fieldIndexes.Load(t); ok {
		return v.(map[string]int)
	}
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if col := t.Field(i).Tag.Get("ovsdb"); col != "" {
			out[col] = i
		}
	}
	fieldIndexes.Store(t, out)
	return out
}

// field is the struct field of column col in model m (a pointer to a
// generated struct); it panics on a column the model lacks, which the
// registry test rules out.
func field(m model.Model, col string) reflect.Value {
	v := reflect.ValueOf(m).Elem()
	i, ok := columnFields(v.Type())[col]
	if !ok {
		panic(fmt.Sprintf("model %T has no column %s", m, col))
	}
	return v.Field(i)
}

// hasColumn says whether model m has column col.
func hasColumn(m model.Model, col string) bool {
	_, ok := columnFields(reflect.TypeOf(m).Elem())[col]
	return ok
}

// fieldPtr is a pointer to column col's field, as libovsdb's Update and
// Mutate take them.
func fieldPtr(m model.Model, col string) any { return field(m, col).Addr().Interface() }

// uuidOf is a row's _uuid.
func uuidOf(m model.Model) string { return field(m, "_uuid").String() }

func setUUID(m model.Model, uuid string) { field(m, "_uuid").SetString(uuid) }

// refs are the UUIDs in a reference column.
func refs(m model.Model, col string) []string {
	switch v := field(m, col).Interface().(type) {
	case []string:
		return v
	case *string:
		if v != nil {
			return []string{*v}
		}
	}
	return nil
}

// equalValue compares two values of one column as OVSDB does: sets
// regardless of order, an empty map or set as no value, optional values
// by what they hold.
func equalValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 {
			return true
		}
		if x, ok := a.Interface().([]string); ok {
			y := b.Interface().([]string)
			if slices.Equal(x, y) {
				return true
			}
			return slices.Equal(sortedStrings(x), sortedStrings(y))
		}
		return reflect.DeepEqual(a.Interface(), b.Interface())
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 {
			return true
		}
		return reflect.DeepEqual(a.Interface(), b.Interface())
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValue(a.Elem(), b.Elem())
	}
	return a.Interface() == b.Interface()
}

func sortedStrings(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// formatValue renders a column's value for Change lines: strings quoted,
// sets in brackets, maps in braces by key, an empty optional value as [].
func formatValue(x any) string { return format(reflect.ValueOf(x)) }

func format(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Pointer:
		if v.IsNil() {
			return "[]"
		}
		return format(v.Elem())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = format(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k.String() + "=" + format(v.MapIndex(k))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// emptyValue says whether a column holds no value.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return v.IsZero()
}
