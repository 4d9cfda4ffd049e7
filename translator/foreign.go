package translator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"
)

// Another tool may add to a row we own: a port on our switch, a policy or a
// load balancer on our router, a column we never set. Such additions are not
// ours: the diff leaves them alone and says so in the unit's notes, rather
// than silently treating them as part of the row.

// foreignColumns names the columns of row, other than managed ones, that
// hold a value.
func (d *Differ) foreignColumns(row model.Model, managed ...string) []string {
	info, err := d.c.Cache().DatabaseModel().NewModelInfo(row)
	if err != nil {
		return nil
	}
	var cols []string
	for col := range info.Metadata.TableSchema.Columns {
		if col == "_uuid" || col == "_version" || slices.Contains(managed, col) {
			continue
		}
		if v, err := info.FieldByColumn(col); err == nil && !emptyValue(v) {
			cols = append(cols, col)
		}
	}
	slices.Sort(cols)
	return cols
}

func emptyValue(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice:
		return rv.Len() == 0
	case reflect.Invalid:
		return true
	}
	return rv.IsZero()
}

// foreignRefs returns the UUIDs of refs that are not rows of ours: our
// monitor holds every row we own, so a referenced row it lacks is another
// tool's.
func (d *Differ) foreignRefs(refs []string, newRow func(uuid string) model.Model) []string {
	var out []string
	for _, uuid := range refs {
		if err := d.c.Get(d.ctx, newRow(uuid)); err != nil {
			out = append(out, uuid)
		}
	}
	return out
}

// foreignNote says what another tool added to row (table name) and that it
// is left as it is.
func foreignNote(table, name string, cols []string, refs map[string][]string) []string {
	var notes []string
	if len(cols) > 0 {
		notes = append(notes, fmt.Sprintf("%s %s: column(s) %s hold values kubevirt-ovn did not write; left as they are", table, name, strings.Join(cols, ", ")))
	}
	for _, refTable := range sortedKeys(refs) {
		if uuids := refs[refTable]; len(uuids) > 0 {
			notes = append(notes, fmt.Sprintf("%s %s holds %d %s row(s) that are not kubevirt-ovn's (%s); left as they are",
				table, name, len(uuids), refTable, strings.Join(uuids, ", ")))
		}
	}
	return notes
}
