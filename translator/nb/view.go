package nb

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// view is one consistent reading of a client's cache: the row cache of each
// registry table the client model holds, taken at once.
//
// A reconnection replaces libovsdb's row caches: it empties the cache
// (Purge makes a new row cache per table) and, for a client with monitors,
// refills the new ones from the monitors' first reply; a client without
// (a one-shot sync) stays empty until ReadOwned fills it again. A reader
// that fetches the row caches one lookup at a time can thus read a router
// from the old cache and its ports from the new, still empty one, and take
// our own ports for another tool's. A view reads only the row caches it
// took: the old ones are left as they were when replaced, so it keeps
// reading one whole state of the NB. The operations computed from it are
// sent only while its row caches are still the client's (current).
type view struct {
	reg    *Registry
	tables map[*Table]*cache.RowCache
}

// takeView takes c's row caches of reg's tables. libovsdb purges and
// refills a cache under the lock Cache() takes: when a second Cache()
// returns and the row caches are still those taken, each of them is whole
// (it was not purged, or was refilled before that second call returned).
func takeView(c client.Client, reg *Registry) view {
	v := view{reg: reg, tables: map[*Table]*cache.RowCache{}}
	for attempt := 0; ; attempt++ {
		tc := c.Cache()
		if tc == nil {
			return v
		}
		types := tc.DatabaseModel().Types()
		clear(v.tables)
		for _, t := range reg.tables {
			if _, ok := types[t.Name]; ok {
				v.tables[t] = tc.Table(t.Name)
			}
		}
		// A reconnection between the two calls: take them again.
		if v.current(c) || attempt == 10 {
			return v
		}
	}
}

// current says whether the row caches of v are still c's: no reconnection
// replaced them since v was taken.
func (v view) current(c client.Client) bool {
	tc := c.Cache()
	if tc == nil {
		return len(v.tables) == 0
	}
	for t, rc := range v.tables {
		if tc.Table(t.Name) != rc {
			return false
		}
	}
	return true
}

// has says whether the client model holds table t.
func (v view) has(t *Table) bool { return v.tables[t] != nil }

// rows are the rows of t, in place: the caller must not keep or change
// them.
func (v view) rows(t *Table) map[string]model.Model {
	if rc := v.tables[t]; rc != nil {
		return rc.RowsShallow()
	}
	return nil
}

// row is a copy of t's row uuid, nil when v has none.
func (v view) row(t *Table, uuid string) model.Model {
	if rc := v.tables[t]; rc != nil {
		return rc.Row(uuid)
	}
	return nil
}

// hasRow says whether v holds t's row uuid.
func (v view) hasRow(t *Table, uuid string) bool {
	rc := v.tables[t]
	return rc != nil && rc.HasRow(uuid)
}

// byColumn returns copies of t's rows whose column col equals value (in
// OVSDB notation), through an index on col when there is one, lowest UUID
// first.
func (v view) byColumn(t *Table, col string, value any) ([]model.Model, error) {
	return v.byColumnWith(t, col, ovsdb.ConditionEqual, value)
}

// byColumnWith is byColumn for condition function fn: ConditionIncludes
// finds the rows whose map column col holds every pair of map value.
func (v view) byColumnWith(t *Table, col string, fn ovsdb.ConditionFunction, value any) ([]model.Model, error) {
	rc := v.tables[t]
	if rc == nil {
		return nil, nil
	}
	found, err := rc.RowsByCondition([]ovsdb.Condition{{Column: col, Function: fn, Value: value}})
	if err != nil {
		return nil, fmt.Errorf("looking up %s rows by %s: %w", t.Name, col, err)
	}
	out := make([]model.Model, 0, len(found))
	for _, m := range found {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b model.Model) int { return strings.Compare(uuidOf(a), uuidOf(b)) })
	return out, nil
}

// byKey is the row of ours of t (identified by one column) whose key is
// key: the lowest UUID of several, which is the one every diff keeps. nil
// when v has none.
func (v view) byKey(t *Table, key, instance string) (model.Model, error) {
	col, mapKey := identityColumn(t.Identity[0])
	fn, value := ovsdb.ConditionEqual, any(key)
	if mapKey != "" {
		// The rows whose map has key mapKey with value key: an includes
		// condition, which the client index on that key answers.
		fn, value = ovsdb.ConditionIncludes, ovsdb.OvsMap{GoMap: map[any]any{mapKey: key}}
	}
	rows, err := v.byColumnWith(t, col, fn, value)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if _, ok := v.owner(t, r, instance); ok {
			return r, nil
		}
	}
	return nil, nil
}

// owner returns the unit owning row m of table t, from its external_ids or,
// for a table owned through another row, from that row's.
func (v view) owner(t *Table, m model.Model, instance string) (translator.Unit, bool) {
	if o := t.OwnedThrough; o != nil {
		target := v.reg.byName[o.Table]
		via, err := v.byKey(target, field(m, o.Column).String(), instance)
		if err != nil || via == nil {
			return translator.Unit{}, false
		}
		return v.owner(target, via, instance)
	}
	return translator.OwnerOf(externalIDs(m), instance)
}

// ownerOfKey maps the key of each row of ours of t to its owner (of
// several rows with one key, the lowest UUID's): the owners of the rows of
// the tables owned through t, for a walk over all of them, without a lookup
// per row.
func (v view) ownerOfKey(t *Table, instance string) map[string]translator.Unit {
	out := map[string]translator.Unit{}
	lowest := map[string]string{}
	for uuid, m := range v.rows(t) {
		u, ok := v.owner(t, m, instance)
		if !ok {
			continue
		}
		k := t.Key(m)
		if l, seen := lowest[k]; !seen || uuid < l {
			lowest[k], out[k] = uuid, u
		}
	}
	return out
}
