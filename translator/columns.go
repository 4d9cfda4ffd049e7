package translator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// columns collects the columns of a row that differ from what is wanted:
// the model fields to update and a "column: old -> new" line for people.
// Each table's diff lists the columns kubevirt-ovn manages, explicitly;
// columns other writers own (up, dynamic_addresses, ...) are never touched.
type columns struct {
	fields []any
	desc   []string
}

func (c *columns) changed(name string, field any, old, new string) {
	c.fields = append(c.fields, field)
	c.desc = append(c.desc, fmt.Sprintf("%s: %s -> %s", name, old, new))
}

func (c *columns) str(name, have, want string, field *string) {
	if have != want {
		c.changed(name, field, strconv.Quote(have), strconv.Quote(want))
	}
}

func (c *columns) strPtr(name string, have, want *string, field **string) {
	if deref(have) != deref(want) || (have == nil) != (want == nil) {
		c.changed(name, field, fmtPtr(have), fmtPtr(want))
	}
}

func (c *columns) int(name string, have, want int, field *int) {
	if have != want {
		c.changed(name, field, strconv.Itoa(have), strconv.Itoa(want))
	}
}

func (c *columns) intPtr(name string, have, want *int, field **int) {
	if (have == nil) != (want == nil) || (have != nil && *have != *want) {
		f := func(p *int) string {
			if p == nil {
				return "[]"
			}
			return strconv.Itoa(*p)
		}
		c.changed(name, field, f(have), f(want))
	}
}

func (c *columns) bool(name string, have, want bool, field *bool) {
	if have != want {
		c.changed(name, field, strconv.FormatBool(have), strconv.FormatBool(want))
	}
}

func (c *columns) strSlice(name string, have, want []string, field *[]string) {
	if !slices.Equal(sortedCopy(have), sortedCopy(want)) {
		c.changed(name, field, fmtSlice(have), fmtSlice(want))
	}
}

func (c *columns) strMap(name string, have, want map[string]string, field *map[string]string) {
	if len(have) == 0 && len(want) == 0 {
		return
	}
	if !maps.Equal(have, want) {
		c.changed(name, field, fmtMap(have), fmtMap(want))
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func fmtPtr(p *string) string {
	if p == nil {
		return "[]"
	}
	return strconv.Quote(*p)
}

func fmtSlice(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func fmtMap(m map[string]string) string {
	var kv []string
	for _, k := range sortedKeys(m) {
		kv = append(kv, k+"="+strconv.Quote(m[k]))
	}
	return "{" + strings.Join(kv, ", ") + "}"
}

func describeLSP(p *nbmodel.LogicalSwitchPort) string {
	var parts []string
	if p.Type != "" {
		parts = append(parts, "type="+p.Type)
	}
	parts = append(parts, "addresses="+fmtSlice(p.Addresses))
	if len(p.Options) > 0 {
		parts = append(parts, "options="+fmtMap(p.Options))
	}
	if p.Tag != nil {
		parts = append(parts, "tag="+strconv.Itoa(*p.Tag))
	}
	return strings.Join(parts, " ")
}

func describeLRP(p *nbmodel.LogicalRouterPort) string {
	return "mac=" + p.MAC + " networks=" + fmtSlice(p.Networks)
}

func describeLR(r *nbmodel.LogicalRouter) string {
	return "options=" + fmtMap(r.Options)
}
