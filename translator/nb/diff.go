package nb

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Change is one row the diff creates, updates or deletes, for people to
// read: dry runs print them and sync reports them.
type Change struct {
	Action string // Create, Update or Delete
	Table  string
	Name   string // the row's key: its name, "snat 10.0.0.0/24", a prefix
	Detail string // columns set (create) or "column: old -> new" (update)
}

func (c Change) String() string {
	s := c.Action + " " + c.Table + " " + c.Name
	if c.Detail != "" {
		s += " (" + c.Detail + ")"
	}
	return s
}

// Change actions.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
)

// Desired is what one unit should own: its rows (none: the unit is gone
// from the input and everything it owns goes) and the switch ports left as
// they are whatever they hold (VM interfaces whose input is invalid).
type Desired struct {
	Unit translator.Unit
	Rows []translator.Row
	Keep []string
	// Tables, when set, limits the diff to the unit's rows of these
	// tables: the unit's other rows are left as they are (kubevirt-ovn
	// rebalance rewrites only Gateway_Chassis rows).
	Tables []string
}

// UnitDiff is what brings one unit's rows to its desired rows: changes for
// people and, kept abstract until a transaction is assembled, the rows to
// insert (whose parents may be inserted by another unit of the same
// transaction) and the references to add to or remove from existing rows.
type UnitDiff struct {
	Unit    translator.Unit
	Changes []Change
	// Notes say what another tool added to the unit's rows (left alone),
	// or why a desired row is not written.
	Notes []string

	inserts []*insert
	refs    []refChange
	ops     []ovsdb.Operation // updates and deletions of root rows
}

// Empty says whether the diff writes nothing.
func (u *UnitDiff) Empty() bool {
	return len(u.inserts) == 0 && len(u.refs) == 0 && len(u.ops) == 0
}

// insert is a row to insert under a named UUID.
type insert struct {
	t   *Table
	m   model.Model
	key string
	// parentKey names the parent row (a child row); parentUUID is that row
	// when it exists, parentNew when this unit inserts it too. With
	// neither, the parent is looked up among the transaction's other
	// inserts, else by name in the NB.
	parentKey  string
	parentUUID string
	parentNew  *insert
}

// refChange adds an existing child row's UUID to, or removes it from, a
// reference column of a parent row: an existing one (parentUUID), one this
// unit inserts (parentInsert), or one found by name when the transaction is
// assembled (parentName).
type refChange struct {
	parent       *Table
	column       string
	child        string
	remove       bool
	parentUUID   string
	parentInsert *insert
	parentName   string
}

// Differ compares desired rows with the rows one instance owns in a
// client's cache and produces the operations. It reads only the cache. One
// Differ serves one sync (named UUIDs are unique across its units) or one
// reconcile.
type Differ struct {
	// ctx bounds the cache reads: libovsdb holds them while the NB is
	// reconnecting, and a stopped sync must not wait for it.
	ctx      context.Context
	c        client.Client
	instance string
	seq      int
	// parentScan maps a child row to its parent, per child table, built
	// from a whole parent table when a row's parent is not where the plan
	// puts it (a move, a removal).
	parentScan map[string]map[string]string
	// byName caches parent rows looked up by name.
	byName map[string]model.Model
	// arena holds the JSON of the values the inserts write.
	arena arena
	// parents, when given, says which row holds a child row.
	parents *ParentIndex
}

// NewDiffer returns a Differ reading c's cache, for rows of instance, as
// long as ctx lasts.
func NewDiffer(ctx context.Context, c client.Client, instance string) *Differ {
	return &Differ{ctx: ctx, c: c, instance: instance, byName: map[string]model.Model{}}
}

func (d *Differ) named() string {
	d.seq++
	return fmt.Sprintf("kvrow%d", d.seq)
}

// has says whether the client model holds table t.
func (d *Differ) has(t *Table) bool {
	_, ok := d.c.Cache().DatabaseModel().Types()[t.Name]
	return ok
}

// owned lists the rows of table t that unit u owns, through the client
// indexes (owner name in external_ids, or logical_port), lowest UUID first.
func (d *Differ) owned(t *Table, u translator.Unit) ([]model.Model, error) {
	probe := t.New()
	switch {
	case t.ByPort:
		if u.Kind != translator.KindRouter {
			return nil, nil
		}
		field(probe, "logical_port").SetString(translator.GatewayPortName(u.Name))
	default:
		field(probe, "external_ids").Set(reflect.ValueOf(map[string]string{translator.KeyOwner: u.Name}))
	}
	rows, err := d.lookup(t, probe)
	if err != nil {
		return nil, err
	}
	rows = slices.DeleteFunc(rows, func(r model.Model) bool {
		o, ok := t.owner(r, d.instance)
		return !ok || o != u
	})
	slices.SortFunc(rows, func(a, b model.Model) int { return strings.Compare(uuidOf(a), uuidOf(b)) })
	return rows, nil
}

// lookup returns copies of the cached rows of table t that an index finds
// for probe: a schema index, else a client index, whose columns probe sets.
func (d *Differ) lookup(t *Table, probe model.Model) ([]model.Model, error) {
	if err := d.ctx.Err(); err != nil {
		return nil, err
	}
	rc := d.c.Cache().Table(t.Name)
	if rc == nil {
		return nil, nil
	}
	found, err := rc.RowsByModels([]model.Model{probe})
	if err != nil {
		return nil, fmt.Errorf("looking up %s rows: %w", t.Name, err)
	}
	out := make([]model.Model, 0, len(found))
	for _, m := range found {
		out = append(out, m)
	}
	return out, nil
}

// rowByName is our row of table t named name (the lowest UUID of several),
// nil when the cache has none.
func (d *Differ) rowByName(t *Table, name string) (model.Model, error) {
	k := t.Name + "\x00" + name
	if m, ok := d.byName[k]; ok {
		return m, nil
	}
	// An explicit condition, evaluated on the name index's candidates: a
	// probe model would also match a row whose owner keys are missing
	// through the first index whose key it lacks.
	m := t.New()
	slice := reflect.New(reflect.SliceOf(reflect.TypeOf(m)))
	cond := model.Condition{Field: fieldPtr(m, "name"), Function: ovsdb.ConditionEqual, Value: name}
	if err := d.c.WhereAll(m, cond).List(d.ctx, slice.Interface()); err != nil {
		return nil, err
	}
	var best model.Model
	for i := 0; i < slice.Elem().Len(); i++ {
		r := slice.Elem().Index(i).Interface().(model.Model)
		if ids := externalIDs(r); ids[translator.KeyManagedBy] != d.instance || field(r, "name").String() != name {
			continue
		}
		if best == nil || uuidOf(r) < uuidOf(best) {
			best = r
		}
	}
	d.byName[k] = best
	return best, nil
}

// scanParent finds the row of table t's parent table that references
// child, "" if none of ours does.
func (d *Differ) scanParent(t *Table, child string) string {
	if d.parentScan == nil {
		d.parentScan = map[string]map[string]string{}
	}
	idx, ok := d.parentScan[t.Name]
	if !ok {
		idx = map[string]string{}
		if rc := d.c.Cache().Table(t.Parent); rc != nil {
			for uuid, p := range rc.RowsShallow() {
				for _, ref := range refs(p, t.ParentColumn) {
					idx[ref] = uuid
				}
			}
		}
		d.parentScan[t.Name] = idx
	}
	return idx[child]
}

// unitState is one unit's rows as the diff goes: what exists, what is
// kept, what goes.
type unitState struct {
	cur     map[*Table][]model.Model
	kept    map[*Table]map[string]model.Model // by key
	parent  map[string]string                 // child UUID -> parent UUID, from the unit's own rows
	deleted map[string]bool
	newRows map[string]*insert // table + key -> insert
}

// Unit diffs one unit: its current rows in the cache against want.
func (d *Differ) Unit(want Desired) (*UnitDiff, error) {
	u := want.Unit
	ud := &UnitDiff{Unit: u}
	st := &unitState{
		cur: map[*Table][]model.Model{}, kept: map[*Table]map[string]model.Model{},
		parent: map[string]string{}, deleted: map[string]bool{}, newRows: map[string]*insert{},
	}
	for _, t := range Registry {
		if !d.has(t) {
			continue
		}
		rows, err := d.owned(t, u)
		if err != nil {
			return nil, fmt.Errorf("%s: reading its %s rows: %w", u, t.Name, err)
		}
		st.cur[t] = rows
		for _, r := range rows {
			for _, c := range t.children() {
				for _, ref := range refs(r, c.ParentColumn) {
					st.parent[ref] = uuidOf(r)
				}
			}
		}
	}
	byTable := map[*Table][]translator.Row{}
	for _, r := range want.Rows {
		t, err := tableOf(r.Model)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		byTable[t] = append(byTable[t], r)
	}

	for _, t := range Registry {
		rows := byTable[t]
		if len(want.Tables) > 0 && !slices.Contains(want.Tables, t.Name) {
			if len(rows) > 0 {
				return nil, fmt.Errorf("%s: %d %s rows desired but only %v diffed", u, len(rows), t.Name, want.Tables)
			}
			continue
		}
		if !d.has(t) {
			for _, r := range rows {
				if t.Absent != nil {
					ud.Notes = append(ud.Notes, t.Absent(r.Model))
				}
			}
			continue
		}
		if err := d.diffTable(ud, st, t, rows, want.Keep); err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
	}
	return ud, nil
}

// currentParent is the UUID of the row holding child row r of table t: the
// unit's own parent rows, the parent the plan names, or any row of ours.
func (d *Differ) currentParent(st *unitState, t *Table, r model.Model, wantParent model.Model) string {
	uuid := uuidOf(r)
	if p, ok := st.parent[uuid]; ok {
		return p
	}
	if wantParent != nil && slices.Contains(refs(wantParent, t.ParentColumn), uuid) {
		return uuidOf(wantParent)
	}
	if p := d.parents.ParentOf(uuid); p != "" {
		if rc := d.c.Cache().Table(t.Parent); rc != nil {
			if row := rc.Row(p); row != nil && slices.Contains(refs(row, t.ParentColumn), uuid) {
				return p
			}
		}
	}
	return d.scanParent(t, uuid)
}

// diffTable diffs one table of a unit: the unit's current rows against
// want, in the plan's order; then the current rows nobody wants go.
func (d *Differ) diffTable(ud *UnitDiff, st *unitState, t *Table, want []translator.Row, keep []string) error {
	var parentTable *Table
	if !t.Root() {
		parentTable = Lookup(t.Parent)
	}
	// Live rows by key: a child row whose parent goes goes with it; of two
	// rows with one key the lowest UUID is kept, the other deleted, so that
	// every writer keeps the same one.
	kept := map[string]model.Model{}
	var dups []model.Model
	// unmatched are the kept rows no desired row has claimed yet.
	unmatched := map[string]model.Model{}
	for _, r := range st.cur[t] {
		if !t.Root() {
			if p, ok := st.parent[uuidOf(r)]; ok && st.deleted[p] {
				st.deleted[uuidOf(r)] = true
				continue
			}
		}
		k := t.Key(r)
		if _, ok := kept[k]; ok {
			dups = append(dups, r)
			continue
		}
		kept[k] = r
		unmatched[k] = r
	}
	st.kept[t] = kept
	for _, r := range dups {
		if err := d.remove(ud, st, t, r, "duplicate "+uuidOf(r)); err != nil {
			return err
		}
	}

	for _, w := range want {
		k := t.Key(w.Model)
		// The parent: one of this unit's rows (kept, or inserted above),
		// or another unit's row (a network's switch) found by name.
		var parentUUID string
		var parentNew *insert
		var parentRow model.Model
		if parentTable != nil {
			if p, ok := st.kept[parentTable][w.Parent]; ok && !st.deleted[uuidOf(p)] {
				parentUUID, parentRow = uuidOf(p), p
			} else if p, ok := st.newRows[parentTable.Name+"\x00"+w.Parent]; ok {
				parentNew = p
			} else {
				p, err := d.rowByName(parentTable, w.Parent)
				if err != nil {
					return err
				}
				if p != nil {
					parentUUID, parentRow = uuidOf(p), p
				}
			}
		}

		have, ok := unmatched[k]
		if !ok {
			m := model.Clone(w.Model)
			setUUID(m, d.named())
			ins := &insert{t: t, m: m, key: k, parentKey: w.Parent, parentUUID: parentUUID, parentNew: parentNew}
			ud.inserts = append(ud.inserts, ins)
			st.newRows[t.Name+"\x00"+k] = ins
			detail := ""
			if t.Describe != nil {
				detail = t.Describe(m)
			}
			ud.Changes = append(ud.Changes, Change{Action: Create, Table: t.Name, Name: k, Detail: detail})
			continue
		}
		delete(unmatched, k)
		if err := d.update(ud, t, have, w.Model, k); err != nil {
			return err
		}
		if parentTable == nil {
			if t.Guard {
				ud.Notes = append(ud.Notes, d.foreignNotes(t, have)...)
			}
			continue
		}
		cur := d.currentParent(st, t, have, parentRow)
		if cur != "" && cur == parentUUID {
			continue
		}
		// Not where the plan puts it (a router's external network changed):
		// move it, keeping the row.
		if cur != "" && !st.deleted[cur] {
			ud.refs = append(ud.refs, refChange{parent: parentTable, parentUUID: cur, column: t.ParentColumn, child: uuidOf(have), remove: true})
		}
		rc := refChange{parent: parentTable, column: t.ParentColumn, child: uuidOf(have)}
		switch {
		case parentNew != nil:
			rc.parentInsert = parentNew
		case parentUUID == "":
			rc.parentName = w.Parent
		default:
			rc.parentUUID = parentUUID
		}
		ud.refs = append(ud.refs, rc)
		ud.Changes = append(ud.Changes, Change{Action: Update, Table: t.Name, Name: k, Detail: "moved to " + w.Parent})
	}

	for _, k := range sortedKeys(unmatched) {
		if slices.Contains(keep, k) {
			continue
		}
		if err := d.remove(ud, st, t, unmatched[k], ""); err != nil {
			return err
		}
	}
	return nil
}

// update writes the managed columns of have that differ from want, in
// place.
func (d *Differ) update(ud *UnitDiff, t *Table, have, want model.Model, key string) error {
	var cols, keyCols []string
	var desc []string
	for _, col := range t.Columns {
		a, b := t.managed(have, col), t.managed(want, col)
		if equalValue(a, b) {
			continue
		}
		if _, ok := t.Keys[col]; ok {
			keyCols = append(keyCols, col)
		} else {
			cols = append(cols, col)
		}
		desc = append(desc, col+": "+format(a)+" -> "+format(b))
	}
	if len(cols)+len(keyCols) == 0 {
		return nil
	}
	m := model.Clone(want)
	setUUID(m, uuidOf(have))
	if len(cols) > 0 {
		ptrs := make([]any, len(cols))
		for i, col := range cols {
			ptrs[i] = fieldPtr(m, col)
		}
		ops, err := d.c.Where(m).Update(m, ptrs...)
		if err != nil {
			return fmt.Errorf("building the update of %s %s: %w", t.Name, key, err)
		}
		ud.ops = append(ud.ops, ops...)
	}
	for _, col := range keyCols {
		// Our keys out, then our keys in (an insert does not replace a
		// key's value); the others' keys stay.
		var mutations []model.Mutation
		if keys := field(have, col); keys.Len() > 0 {
			mutations = append(mutations, model.Mutation{Field: fieldPtr(m, col), Mutator: ovsdb.MutateOperationDelete, Value: slices.Clone(t.Keys[col])})
		}
		if v := t.managed(want, col); v.Len() > 0 {
			mutations = append(mutations, model.Mutation{Field: fieldPtr(m, col), Mutator: ovsdb.MutateOperationInsert, Value: v.Interface()})
		}
		ops, err := d.c.Where(m).Mutate(m, mutations...)
		if err != nil {
			return fmt.Errorf("building the update of %s %s %s: %w", t.Name, key, col, err)
		}
		ud.ops = append(ud.ops, ops...)
	}
	ud.Changes = append(ud.Changes, Change{Action: Update, Table: t.Name, Name: key, Detail: strings.Join(desc, "; ")})
	return nil
}

// remove deletes row r of table t: a root by a delete, a child by removing
// it from its parent (the database collects it), nothing for a child whose
// parent goes in this diff. why is the Change detail.
func (d *Differ) remove(ud *UnitDiff, st *unitState, t *Table, r model.Model, why string) error {
	uuid := uuidOf(r)
	st.deleted[uuid] = true
	if t.Root() {
		ops, err := d.c.Where(r).Delete()
		if err != nil {
			return fmt.Errorf("building the deletion of %s %s: %w", t.Name, t.Key(r), err)
		}
		ud.ops = append(ud.ops, ops...)
		if why == "" {
			why = d.childCounts(t, r)
			if t.Guard {
				ud.Notes = append(ud.Notes, d.deletedForeignNote(t, r)...)
			}
		}
		ud.Changes = append(ud.Changes, Change{Action: Delete, Table: t.Name, Name: t.Key(r), Detail: why})
		return nil
	}
	p := d.currentParent(st, t, r, nil)
	switch {
	case p != "" && st.deleted[p]:
		return nil
	case p != "":
		ud.refs = append(ud.refs, refChange{parent: Lookup(t.Parent), parentUUID: p, column: t.ParentColumn, child: uuid, remove: true})
	default:
		// Held by no row of ours: delete it outright.
		ops, err := d.c.Where(r).Delete()
		if err != nil {
			return fmt.Errorf("building the deletion of %s %s: %w", t.Name, t.Key(r), err)
		}
		ud.ops = append(ud.ops, ops...)
	}
	ud.Changes = append(ud.Changes, Change{Action: Delete, Table: t.Name, Name: t.Key(r), Detail: why})
	return nil
}

// childCounts says what goes with a root row, e.g. "3 ports".
func (d *Differ) childCounts(t *Table, r model.Model) string {
	var parts []string
	for _, c := range t.children() {
		if n := len(refs(r, c.ParentColumn)); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c.ParentColumn))
		}
	}
	return strings.Join(parts, "; ")
}

// foreignNotes say what another tool added to root row r: columns kubevirt-ovn
// does not set that hold values, and rows in its reference columns that
// are not ours. Both are left as they are.
func (d *Differ) foreignNotes(t *Table, r model.Model) []string {
	var notes []string
	managed := slices.Clone(t.Columns)
	children := t.children()
	for _, c := range children {
		managed = append(managed, c.ParentColumn)
	}
	v := reflect.ValueOf(r).Elem()
	var cols []string
	for col, i := range columnFields(v.Type()) {
		if _, ok := t.Keys[col]; ok && t.foreignKeys(r, col) {
			cols = append(cols, col)
			continue
		}
		if col == "_uuid" || col == "_version" || slices.Contains(managed, col) {
			continue
		}
		if !emptyValue(v.Field(i)) {
			cols = append(cols, col)
		}
	}
	slices.Sort(cols)
	name := t.Key(r)
	if len(cols) > 0 {
		notes = append(notes, fmt.Sprintf("%s %s: column(s) %s hold values kubevirt-ovn did not write; left as they are", t.Name, name, strings.Join(cols, ", ")))
	}
	for _, c := range sortedTables(children) {
		if foreign := d.foreignRefs(c, refs(r, c.ParentColumn)); len(foreign) > 0 {
			notes = append(notes, fmt.Sprintf("%s %s holds %d %s row(s) that are not kubevirt-ovn's (%s); left as they are",
				t.Name, name, len(foreign), c.Name, strings.Join(foreign, ", ")))
		}
	}
	return notes
}

// deletedForeignNote says that a deleted root takes rows of others with it.
func (d *Differ) deletedForeignNote(t *Table, r model.Model) []string {
	var notes []string
	for _, c := range sortedTables(t.children()) {
		if foreign := d.foreignRefs(c, refs(r, c.ParentColumn)); len(foreign) > 0 {
			notes = append(notes, fmt.Sprintf("%s %s is deleted with %d %s row(s) that are not kubevirt-ovn's (%s): they are deleted with it",
				t.Name, t.Key(r), len(foreign), c.Name, strings.Join(foreign, ", ")))
		}
	}
	return notes
}

// foreignRefs are the referenced UUIDs that are not rows of ours: our
// monitor holds every row we own, so a row it lacks is another tool's.
func (d *Differ) foreignRefs(t *Table, uuids []string) []string {
	rc := d.c.Cache().Table(t.Name)
	var out []string
	for _, u := range uuids {
		if rc == nil || !rc.HasRow(u) {
			out = append(out, u)
		}
	}
	return out
}

func sortedTables(ts []*Table) []*Table {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b *Table) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
