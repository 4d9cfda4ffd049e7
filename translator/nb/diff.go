package nb

import (
	"context"
	"fmt"
	"maps"
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

// MovedTo begins the detail of an Update that moves a child row to
// another parent: the parents' containment columns change, not the row.
const MovedTo = "moved to "

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
// insert (whose parents or referenced rows may be inserted by another unit
// of the same transaction), the references to add to or remove from
// existing parents, and the reference columns to set.
type UnitDiff struct {
	Unit    translator.Unit
	Changes []Change
	// Notes say what another tool added to the unit's rows (left alone),
	// why a desired row is not written, or why a row stays.
	Notes []string

	inserts []*insert
	refs    []refChange
	sets    []*refSet
	ops     []ovsdb.Operation // updates, and deletions of root rows
	orphans []*orphan
	// err fails the unit before anything is sent (Differ.Settle).
	err error
}

// orphan is the deletion of a row owned through a key no row of ours has
// (Table.OrphanKeys): sent only when the NB holds no row of that key at
// all, read before the transaction (Differ.confirmOrphans) and waited for
// in it.
type orphan struct {
	target *Table
	key    string
	ops    []ovsdb.Operation
	change Change
	// skip: the NB holds a row of that key that is not ours (another
	// instance's port): the row is not ours either.
	skip bool
}

// Empty says whether the diff writes nothing.
func (u *UnitDiff) Empty() bool {
	return len(u.inserts) == 0 && len(u.refs) == 0 && len(u.sets) == 0 && len(u.ops) == 0 && len(u.orphans) == 0
}

// rowKey names a row by its table and key: a parent, a referenced row, a
// row inserted in a transaction.
type rowKey struct {
	table string
	key   string
}

func (k rowKey) String() string { return k.table + " " + k.key }

// refSlot is one reference column of one row.
type refSlot struct {
	uuid   string
	column string
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
	// refs are the keys each reference column refers to, resolved when
	// the transaction is assembled.
	refs map[string][]string
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

// refSet brings reference column column of existing row uuid of t to the
// rows keys name: of a column holding one reference, its value; of a set,
// ours (the references to rows of ours it holds now) out and the wanted
// ones in, another tool's left.
type refSet struct {
	t      *Table
	uuid   string
	key    string
	ref    Reference
	single bool
	// keys: of a column holding one reference, the wanted key (none:
	// empty it).
	keys []string
	// Of a set: the wanted keys it does not hold (resolved when the
	// transaction is assembled), the references of ours that go, and
	// those that stay (one that a unit of the transaction deletes is
	// replaced by its key's row then).
	add  []string
	out  []string
	kept []heldRef
}

// heldRef is a reference a set column holds to a row of ours, and that
// row's key.
type heldRef struct {
	uuid string
	key  string
}

// pendingRoot is a root row that others may refer to and that its owner no
// longer wants: it goes at Settle unless a row of ours still refers to it.
type pendingRoot struct {
	ud  *UnitDiff
	t   *Table
	row model.Model
	why string
}

// wantRef is a reference a desired row makes, for Settle.
type wantRef struct {
	ud   *UnitDiff
	from string // the referring row, for messages
	ref  Reference
	key  string
	// resolved: the referenced row exists in the view.
	resolved bool
}

// MissingRowError is a unit's failure to refer to a row of ours that is
// neither in the NB nor created in the same transaction: most often one
// that another unit is about to create (a security group's new member
// port, while its network's unit commits it).
type MissingRowError struct {
	Unit   translator.Unit
	From   string // the referring row: its table and key
	Column string
	Table  string // the row referred to: its table and key
	Key    string
}

func (e *MissingRowError) Error() string {
	return fmt.Sprintf("%s: %s %s: no %s row of this kubevirt-ovn instance has key %s, and none is created with it",
		e.Unit, e.From, e.Column, e.Table, e.Key)
}

// Differ compares desired rows with the rows one instance owns in a
// client's cache and produces the operations. It reads one view of the
// cache, taken when it is made. One Differ serves one sync (named UUIDs are
// unique across its units) or one reconcile.
type Differ struct {
	ctx      context.Context
	c        client.Client
	reg      *Registry
	v        view
	instance string
	seq      int
	// parentScan maps a child row to its parent, per child table, built
	// from a whole parent table when a row's parent is not where the plan
	// puts it (a move, a removal).
	parentScan map[*Table]map[string]string
	// refScan maps a referenced row to the rows referring to it, per
	// reference column holding a set (which no index can hold).
	refScan map[referrer]map[string][]string
	// byKey caches our rows looked up by key.
	byKey map[rowKey]model.Model
	// bulk holds the tables read whole for a row that refers to many of
	// their rows (bulkRows).
	bulk map[*Table]*bulkRows
	// arena holds the JSON of the values the inserts write.
	arena arena
	// parents, when given, says which row holds a child row.
	parents *ParentIndex
	// memo, when given, remembers what big reference sets held.
	memo *RefMemo
	// committed are the UUIDs of rows an earlier transaction of the same
	// sync inserted, by key (SyncResult.committed): a one-shot sync's
	// cache never holds them.
	committed map[rowKey]string

	// What the units diffed so far do, for the roots whose fate depends on
	// every unit (Settle): the rows they delete and the reference columns
	// they rewrite (by the unit doing it), the references their desired
	// rows make, the roots that go unless referred to, and the keys they
	// insert.
	gone      map[string]*UnitDiff
	rewritten map[refSlot]*UnitDiff
	wanted    []wantRef
	pending   []*pendingRoot
	inserting map[rowKey]bool
}

// NewDiffer returns a Differ reading c's cache with the Default registry,
// for rows of instance, as long as ctx lasts.
func NewDiffer(ctx context.Context, c client.Client, instance string) *Differ {
	return newDiffer(ctx, c, Default, instance)
}

func newDiffer(ctx context.Context, c client.Client, reg *Registry, instance string) *Differ {
	return &Differ{ctx: ctx, c: c, reg: reg, v: takeView(c, reg), instance: instance, byKey: map[rowKey]model.Model{},
		gone: map[string]*UnitDiff{}, rewritten: map[refSlot]*UnitDiff{}, inserting: map[rowKey]bool{}}
}

func (d *Differ) named() string {
	d.seq++
	return fmt.Sprintf("kvrow%d", d.seq)
}

// owned lists the rows of table t that unit u owns, through the client
// indexes, lowest UUID first: by the owner name in external_ids, or, for a
// table owned through another, by the keys of the unit's rows of that
// table, and of the rows of it the unit wants that no other unit has (a
// port deleted by hand: its binding is still the unit's, and the unique
// index on the binding's port would refuse a second one).
func (d *Differ) owned(st *unitState, t *Table, u translator.Unit, want map[*Table][]translator.Row) ([]model.Model, error) {
	if o := t.OwnedThrough; o != nil {
		target := d.reg.byName[o.Table]
		keys := map[string]bool{}
		for _, r := range st.cur[target] {
			keys[target.Key(r)] = true
		}
		var rows []model.Model
		for k := range keys {
			found, err := d.v.byColumn(t, o.Column, k)
			if err != nil {
				return nil, err
			}
			rows = append(rows, found...)
		}
		for _, r := range want[target] {
			k := target.Key(r.Model)
			if keys[k] {
				continue
			}
			keys[k] = true
			found, err := d.unclaimed(t, target, k)
			if err != nil {
				return nil, err
			}
			rows = append(rows, found...)
		}
		if t.OrphanKeys != nil {
			orphans, err := d.orphans(st, t, u, keys)
			if err != nil {
				return nil, err
			}
			rows = append(rows, orphans...)
		}
		slices.SortFunc(rows, func(a, b model.Model) int { return strings.Compare(uuidOf(a), uuidOf(b)) })
		return slices.CompactFunc(rows, func(a, b model.Model) bool { return uuidOf(a) == uuidOf(b) }), nil
	}
	// An includes condition on the owner key, which the client index on
	// that key answers exactly (an empty set for a unit with no rows yet).
	// A probe model would not: libovsdb falls through to the next index
	// whose value the probe has, and a probe's nil reference column (an
	// LSP's dhcpv4_options) finds every port without one: at a cold start,
	// every unit's lookup copied every such port.
	rows, err := d.v.byColumnWith(t, "external_ids", ovsdb.ConditionIncludes, ovsdb.OvsMap{GoMap: map[any]any{translator.KeyOwner: u.Name}})
	if err != nil {
		return nil, err
	}
	rows = slices.DeleteFunc(rows, func(r model.Model) bool {
		o, ok := translator.OwnerOf(externalIDs(r), d.instance)
		return !ok || o != u
	})
	slices.SortFunc(rows, func(a, b model.Model) int { return strings.Compare(uuidOf(a), uuidOf(b)) })
	return rows, nil
}

// unclaimed are the rows of t, owned through target, that name key k when
// no row of ours of target has it (a row that has it owns them). The rows
// naming k are looked up first: a key no row names adds none, whoever has
// its row. That is every port of a full sync, where looking each one's
// row up by key (a copy of what an index finds, a cache entry) was about
// 5% of the diff's CPU.
func (d *Differ) unclaimed(t, target *Table, k string) ([]model.Model, error) {
	found, err := d.v.byColumn(t, t.OwnedThrough.Column, k)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	other, err := d.rowByKey(target, k)
	if err != nil || other != nil {
		return nil, err
	}
	return found, nil
}

// orphans are the rows of t, a table owned through another, that name a
// key unit u's row would have by our naming (t.OrphanKeys) when no row of
// ours has that key: the unit's port deleted by hand. Whether the NB holds
// a row of that key that is not ours (another instance's) is read when
// the deletion is committed (Differ.confirmOrphans). keys are the keys the
// unit has or wants.
func (d *Differ) orphans(st *unitState, t *Table, u translator.Unit, keys map[string]bool) ([]model.Model, error) {
	target := d.reg.byName[t.OwnedThrough.Table]
	var out []model.Model
	for _, k := range t.OrphanKeys(u) {
		if keys[k] {
			continue
		}
		found, err := d.unclaimed(t, target, k)
		if err != nil {
			return nil, err
		}
		for _, r := range found {
			st.orphans[uuidOf(r)] = k
		}
		out = append(out, found...)
	}
	return out, nil
}

// rowByKey is our row of table t whose key is key (the lowest UUID of
// several), nil when the view has none. The row is read only.
func (d *Differ) rowByKey(t *Table, key string) (model.Model, error) {
	if b := d.bulk[t]; b != nil && b.byKey != nil {
		return b.ours(key, d.instance), nil
	}
	k := rowKey{t.Name, key}
	if m, ok := d.byKey[k]; ok {
		return m, nil
	}
	m, err := d.v.byKey(t, key, d.instance)
	if err != nil {
		return nil, err
	}
	d.byKey[k] = m
	return m, nil
}

// bulkRows are a table's rows, in place (read only), and by key once
// asked (withKeys): a port group refers to thousands of switch ports, and
// looking each up (an index lookup and a copy of the row) cost more than
// one walk of the table.
type bulkRows struct {
	t      *Table
	byUUID map[string]model.Model
	byKey  map[string][]model.Model
}

// withKeys indexes b by key: walking the table and computing every row's
// key costs more than reading the rows a set holds, so only a diff that
// looks many keys up asks for it (an insert of a big set, a big change).
func (b *bulkRows) withKeys() {
	if b.byKey != nil {
		return
	}
	b.byKey = make(map[string][]model.Model, len(b.byUUID))
	for _, m := range b.byUUID {
		k := b.t.Key(m)
		b.byKey[k] = append(b.byKey[k], m)
	}
}

// ours is our row of key (the lowest UUID of several), as view.byKey
// finds it.
func (b *bulkRows) ours(key, instance string) model.Model {
	var found model.Model
	for _, m := range b.byKey[key] {
		if _, ok := translator.OwnerOf(externalIDs(m), instance); ok && (found == nil || uuidOf(m) < uuidOf(found)) {
			found = m
		}
	}
	return found
}

// bulkFor reads table t whole for a row that refers to refs of its rows,
// when that is cheaper than looking each up: refs is at least an eighth
// of the table's rows (and 64). nil when it is not, or when t's key is
// not one string column of its own rows.
func (d *Differ) bulkFor(t *Table, refs int) *bulkRows {
	if b := d.bulk[t]; b != nil {
		return b
	}
	rc := d.v.tables[t]
	if rc == nil || refs < 64 || refs*8 < rc.Len() || !t.OwnerKeys() || t.IdentityOf != nil || len(t.Identity) != 1 {
		return nil
	}
	if col, mapKey := identityColumn(t.Identity[0]); mapKey != "" || field(t.New(), col).Kind() != reflect.String {
		return nil
	}
	b := &bulkRows{t: t, byUUID: d.v.rows(t)}
	if d.bulk == nil {
		d.bulk = map[*Table]*bulkRows{}
	}
	d.bulk[t] = b
	return b
}

// uniqueKey says whether no two rows of table t can have one key: its
// key is one column of its own that the NB schema indexes alone. A
// reference a set holds to a row of ours with a wanted key is then the
// reference that key resolves to, without looking the key up.
func (d *Differ) uniqueKey(t *Table) bool {
	if t.IdentityOf != nil || len(t.Identity) != 1 {
		return false
	}
	col, mapKey := identityColumn(t.Identity[0])
	if mapKey != "" {
		return false
	}
	tc := d.c.Cache()
	if tc == nil {
		return false
	}
	ts := tc.DatabaseModel().Schema.Table(t.Name)
	if ts == nil {
		return false
	}
	for _, idx := range ts.Indexes {
		if len(idx) == 1 && idx[0] == col {
			return true
		}
	}
	return false
}

// scanParent finds the row of table t's parent table that references
// child, "" if none of ours does.
func (d *Differ) scanParent(t *Table, child string) string {
	if d.parentScan == nil {
		d.parentScan = map[*Table]map[string]string{}
	}
	idx, ok := d.parentScan[t]
	if !ok {
		idx = map[string]string{}
		for uuid, p := range d.v.rows(d.reg.byName[t.Parent]) {
			for _, ref := range refs(p, t.ParentColumn) {
				idx[ref] = uuid
			}
		}
		d.parentScan[t] = idx
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
	newRows map[rowKey]*insert
	// orphans are the rows owned through a key no row of ours has, by the
	// unit's naming (Table.OrphanKeys): UUID -> that key.
	orphans map[string]string
}

// Unit diffs one unit: its current rows in the view against want.
func (d *Differ) Unit(want Desired) (*UnitDiff, error) {
	u := want.Unit
	if err := d.ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	ud := &UnitDiff{Unit: u}
	st := &unitState{
		cur: map[*Table][]model.Model{}, kept: map[*Table]map[string]model.Model{},
		parent: map[string]string{}, deleted: map[string]bool{}, newRows: map[rowKey]*insert{},
		orphans: map[string]string{},
	}
	byTable := map[*Table][]translator.Row{}
	for _, r := range want.Rows {
		t, err := d.reg.TableOf(r.Model)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		byTable[t] = append(byTable[t], r)
	}
	for _, t := range d.reg.tables {
		if !d.v.has(t) {
			continue
		}
		rows, err := d.owned(st, t, u, byTable)
		if err != nil {
			return nil, fmt.Errorf("%s: reading its %s rows: %w", u, t.Name, err)
		}
		st.cur[t] = rows
		for _, r := range rows {
			for _, c := range d.reg.children[t] {
				for _, ref := range refs(r, c.ParentColumn) {
					st.parent[ref] = uuidOf(r)
				}
			}
		}
	}

	for _, t := range d.reg.tables {
		rows := byTable[t]
		if len(want.Tables) > 0 && !slices.Contains(want.Tables, t.Name) {
			if len(rows) > 0 {
				return nil, fmt.Errorf("%s: %d %s rows desired but only %v diffed", u, len(rows), t.Name, want.Tables)
			}
			continue
		}
		if !d.v.has(t) {
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
		if row := d.v.row(d.reg.byName[t.Parent], p); row != nil && slices.Contains(refs(row, t.ParentColumn), uuid) {
			return p
		}
	}
	return d.scanParent(t, uuid)
}

// tableDiff is one table of one unit's diff. The unit's state and the rows
// not claimed yet are passed along, not held: what td holds leaks to the
// heap with the rows it records, and they stay on the stack.
type tableDiff struct {
	d  *Differ
	ud *UnitDiff
	t  *Table
	// parent is t's parent table, nil for a root table.
	parent *Table
}

// wantedParent is the row a desired child row hangs from: one of the
// unit's rows, kept (uuid and row) or inserted by this diff (ins), or
// another unit's row found by key (uuid and row); none when no row of
// ours has the key.
type wantedParent struct {
	uuid string
	row  model.Model
	ins  *insert
}

// diffTable diffs one table of a unit: the unit's current rows against
// want, in the plan's order; then the current rows nobody wants go.
func (d *Differ) diffTable(ud *UnitDiff, st *unitState, t *Table, want []translator.Row, keep []string) error {
	td := tableDiff{d: d, ud: ud, t: t}
	if !t.Root() {
		td.parent = d.reg.byName[t.Parent]
	}
	// unmatched are the kept rows no desired row has claimed yet.
	unmatched := map[string]model.Model{}
	if err := td.keepOnePerKey(st, unmatched); err != nil {
		return err
	}
	for _, w := range want {
		if err := td.diffRow(st, w, unmatched); err != nil {
			return err
		}
	}
	return td.removeUnwanted(st, unmatched, keep)
}

// keepOnePerKey indexes the unit's live rows of the table by key, in
// st.kept and unmatched: a child row whose parent goes goes with it; of two
// rows with one key the lowest UUID is kept, the other deleted, so that
// every writer keeps the same one.
func (td *tableDiff) keepOnePerKey(st *unitState, unmatched map[string]model.Model) error {
	t := td.t
	kept := map[string]model.Model{}
	var dups []model.Model
	for _, r := range st.cur[t] {
		if !t.Root() {
			if p, ok := st.parent[uuidOf(r)]; ok && st.deleted[p] {
				st.deleted[uuidOf(r)] = true
				td.d.gone[uuidOf(r)] = td.ud
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
		if err := td.d.remove(td.ud, st, t, r, "duplicate "+uuidOf(r)); err != nil {
			return err
		}
	}
	return nil
}

// diffRow brings the unit's row with desired row w's key to w: an insert
// when there is none, else an update in place and, for a child row held
// elsewhere, a move to the parent the plan puts it under.
func (td *tableDiff) diffRow(st *unitState, w translator.Row, unmatched map[string]model.Model) error {
	k := td.t.Key(w.Model)
	refKeys, err := td.d.wantRefs(td.ud, td.t, k, w)
	if err != nil {
		return err
	}
	parent, err := td.findParent(st, w.Parent)
	if err != nil {
		return err
	}
	have, ok := unmatched[k]
	if !ok {
		if err := td.d.resolveWanted(td.ud, td.t, k, refKeys); err != nil {
			return err
		}
		td.insertRow(st, w, k, parent, refKeys)
		return nil
	}
	delete(unmatched, k)
	if err := td.updateRow(have, w.Model, k, refKeys); err != nil {
		return err
	}
	if td.parent == nil {
		if td.t.Guard {
			td.ud.Notes = append(td.ud.Notes, td.d.foreignNotes(td.t, have)...)
		}
		return nil
	}
	td.moveToParent(st, have, w.Parent, k, parent)
	return nil
}

// findParent finds the parent row of key key (see wantedParent); none
// for a root table.
func (td *tableDiff) findParent(st *unitState, key string) (wantedParent, error) {
	if td.parent == nil {
		return wantedParent{}, nil
	}
	if p, ok := st.kept[td.parent][key]; ok && !st.deleted[uuidOf(p)] {
		return wantedParent{uuid: uuidOf(p), row: p}, nil
	}
	if p, ok := st.newRows[rowKey{td.parent.Name, key}]; ok {
		return wantedParent{ins: p}, nil
	}
	p, err := td.d.rowByKey(td.parent, key)
	if err != nil || p == nil {
		return wantedParent{}, err
	}
	return wantedParent{uuid: uuidOf(p), row: p}, nil
}

// insertRow inserts desired row w, of key key, under a named UUID.
func (td *tableDiff) insertRow(st *unitState, w translator.Row, key string, parent wantedParent, refKeys map[string][]string) {
	t, ud := td.t, td.ud
	m := model.Clone(w.Model)
	setUUID(m, td.d.named())
	ins := &insert{t: t, m: m, key: key, parentKey: w.Parent, parentUUID: parent.uuid, parentNew: parent.ins, refs: refKeys}
	ud.inserts = append(ud.inserts, ins)
	st.newRows[rowKey{t.Name, key}] = ins
	// Settle asks only about keys of referenced tables. A full sync
	// inserts every row (72,000 at 3,000 routers), none of a referenced
	// table in the default registry: a map of all of them grew and
	// hashed for nothing, about a tenth of the diff's CPU.
	if len(td.d.reg.referrers[t]) > 0 {
		td.d.inserting[rowKey{t.Name, key}] = true
	}
	ud.Changes = append(ud.Changes, Change{Action: Create, Table: t.Name, Name: key, Detail: td.d.createDetail(t, m, refKeys)})
}

// createDetail says what a new row of t holds: its description and the
// rows it refers to.
func (d *Differ) createDetail(t *Table, m model.Model, refKeys map[string][]string) string {
	detail := ""
	if t.Describe != nil {
		detail = t.Describe(m)
	}
	for _, ref := range t.References {
		if keys := refKeys[ref.Column]; len(keys) > 0 {
			detail = strings.TrimSpace(detail + " " + ref.Column + "=" + d.formatKeys(ref, keys))
		}
	}
	return detail
}

// updateRow brings existing row have's managed columns and references to
// desired row want's, in place.
func (td *tableDiff) updateRow(have, want model.Model, key string, refKeys map[string][]string) error {
	desc, err := td.d.update(td.ud, td.t, have, want, key)
	if err != nil {
		return err
	}
	refDesc, err := td.d.diffRefs(td.ud, td.t, have, key, refKeys)
	if err != nil {
		return err
	}
	desc = append(desc, refDesc...)
	if len(desc) > 0 {
		td.ud.Changes = append(td.ud.Changes, Change{Action: Update, Table: td.t.Name, Name: key, Detail: strings.Join(desc, "; ")})
	}
	return nil
}

// moveToParent moves existing child row have, of key key, to the parent
// of key parentKey when another row holds it (a router's external network
// changed), keeping the row.
func (td *tableDiff) moveToParent(st *unitState, have model.Model, parentKey, key string, parent wantedParent) {
	t, ud := td.t, td.ud
	cur := td.d.currentParent(st, t, have, parent.row)
	if cur != "" && cur == parent.uuid {
		return
	}
	if cur != "" && !st.deleted[cur] {
		ud.refs = append(ud.refs, refChange{parent: td.parent, parentUUID: cur, column: t.ParentColumn, child: uuidOf(have), remove: true})
	}
	rc := refChange{parent: td.parent, column: t.ParentColumn, child: uuidOf(have)}
	switch {
	case parent.ins != nil:
		rc.parentInsert = parent.ins
	case parent.uuid == "":
		rc.parentName = parentKey
	default:
		rc.parentUUID = parent.uuid
	}
	ud.refs = append(ud.refs, rc)
	ud.Changes = append(ud.Changes, Change{Action: Update, Table: t.Name, Name: key, Detail: MovedTo + parentKey})
}

// removeUnwanted removes the unit's rows no desired row claimed
// (unmatched), but for the switch ports to keep.
func (td *tableDiff) removeUnwanted(st *unitState, unmatched map[string]model.Model, keep []string) error {
	for _, k := range slices.Sorted(maps.Keys(unmatched)) {
		if slices.Contains(keep, k) {
			continue
		}
		if err := td.d.remove(td.ud, st, td.t, unmatched[k], ""); err != nil {
			return err
		}
	}
	return nil
}

// wantRefs are desired row w's references by column, checked against the
// registry and recorded for Settle.
func (d *Differ) wantRefs(ud *UnitDiff, t *Table, key string, w translator.Row) (map[string][]string, error) {
	if len(w.Refs) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	// A port group refers to thousands of ports, planned sorted: a
	// reference equal to its column's last one is a duplicate, and only
	// when the references come unsorted is a set built.
	var seen map[translator.Ref]bool
	for _, r := range w.Refs {
		i := slices.IndexFunc(t.References, func(ref Reference) bool { return ref.Column == r.Column })
		if i < 0 {
			return nil, fmt.Errorf("%s %s: %s is not a reference column of %s in the registry", t.Name, key, r.Column, t.Name)
		}
		ref := t.References[i]
		if r.Key == "" {
			return nil, fmt.Errorf("%s %s: %s: a reference to %s without a key", t.Name, key, r.Column, ref.Table)
		}
		col := out[r.Column]
		switch {
		case seen != nil:
			if seen[r] {
				continue
			}
			seen[r] = true
		case len(col) == 0 || col[len(col)-1] < r.Key:
		case col[len(col)-1] == r.Key:
			continue
		default:
			seen = map[translator.Ref]bool{}
			for c, keys := range out {
				for _, k := range keys {
					seen[translator.Ref{Column: c, Key: k}] = true
				}
			}
			if seen[r] {
				continue
			}
			seen[r] = true
		}
		out[r.Column] = append(col, r.Key)
	}
	for col := range out {
		slices.Sort(out[col])
		if len(out[col]) > 1 && field(t.New(), col).Kind() == reflect.Pointer {
			return nil, fmt.Errorf("%s %s: %s holds one reference, not %d (%s)", t.Name, key, col, len(out[col]), strings.Join(out[col], ", "))
		}
	}
	return out, nil
}

// resolveWanted records, for Settle, the references of a new row of t
// (of key key): whether each key has a row of ours.
func (d *Differ) resolveWanted(ud *UnitDiff, t *Table, key string, refKeys map[string][]string) error {
	for _, ref := range t.References {
		keys := refKeys[ref.Column]
		if len(keys) == 0 {
			continue
		}
		target := d.reg.byName[ref.Table]
		if b := d.bulkFor(target, len(keys)); b != nil {
			b.withKeys()
		}
		for _, k := range keys {
			m, err := d.rowByKey(target, k)
			if err != nil {
				return err
			}
			d.want(ud, t, key, ref, k, m != nil)
		}
	}
	return nil
}

// want records a reference a desired row of t (of key key) makes, for
// Settle; resolved: a row of ours has key k. Settle reads a resolved
// reference only to keep a root row that may go (pendingRoot): one to a
// row of another kind (a port group's thousands of ports) is not kept.
func (d *Differ) want(ud *UnitDiff, t *Table, key string, ref Reference, k string, resolved bool) {
	if resolved && !d.mayPend(ref.Table) {
		return
	}
	d.wanted = append(d.wanted, wantRef{ud: ud, from: t.Name + " " + key, ref: ref, key: k, resolved: resolved})
}

// mayPend says whether a row of table name may wait for Settle when it
// goes (remove): a root that rows refer to.
func (d *Differ) mayPend(name string) bool {
	t := d.reg.byName[name]
	return t != nil && t.Root() && len(d.reg.referrers[t]) > 0
}

// formatKeys renders referenced rows by key: [DHCP_Options 10.0.0.0/24].
func (d *Differ) formatKeys(ref Reference, keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = ref.Table + " " + k
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// diffRefs compares the reference columns of row have with the keys
// wanted, and records the wanted references for Settle. A reference to a
// row of ours is compared by the row it resolves to; a reference to
// another tool's row is left, with a note, unless the column holds one
// reference and ours must take its place.
func (d *Differ) diffRefs(ud *UnitDiff, t *Table, have model.Model, key string, want map[string][]string) ([]string, error) {
	var desc []string
	for _, ref := range t.References {
		diff := d.diffRefSet
		if field(have, ref.Column).Kind() == reflect.Pointer {
			diff = d.diffSingleRef
		}
		s, err := diff(ud, t, have, key, ref, want[ref.Column])
		if err != nil {
			return nil, err
		}
		if s != "" {
			desc = append(desc, s)
		}
	}
	return desc, nil
}

// diffSingleRef compares column ref of have, which holds one reference,
// with keys (one, or none); it says what changes.
func (d *Differ) diffSingleRef(ud *UnitDiff, t *Table, have model.Model, key string, ref Reference, keys []string) (string, error) {
	target := d.reg.byName[ref.Table]
	var ours, foreign, curKeys []string
	for _, uuid := range refs(have, ref.Column) {
		if row := d.v.row(target, uuid); row != nil {
			if _, ok := d.v.owner(target, row, d.instance); ok {
				ours = append(ours, uuid)
				curKeys = append(curKeys, ref.Table+" "+target.Key(row))
				continue
			}
		}
		foreign = append(foreign, uuid)
	}
	same := len(keys) == len(ours) && (len(foreign) == 0 || len(keys) == 0)
	for _, k := range keys {
		m, err := d.rowByKey(target, k)
		if err != nil {
			return "", err
		}
		d.want(ud, t, key, ref, k, m != nil)
		if m == nil || !slices.Contains(ours, uuidOf(m)) {
			same = false
		}
	}
	if len(foreign) > 0 && len(keys) == 0 {
		ud.Notes = append(ud.Notes, foreignRefsNote(t, key, ref, foreign))
	}
	if same {
		return "", nil
	}
	ud.sets = append(ud.sets, &refSet{t: t, uuid: uuidOf(have), key: key, ref: ref, keys: keys, single: true})
	d.rewritten[refSlot{uuidOf(have), ref.Column}] = ud
	cur := curKeys
	for _, f := range foreign {
		cur = append(cur, f+" (not kubevirt-ovn's)")
	}
	return ref.Column + ": [" + strings.Join(cur, ", ") + "] -> " + d.formatKeys(ref, keys), nil
}

// diffRefSet compares set column ref of have with keys: the references it
// holds to rows of ours are matched with the keys by their rows' keys,
// and only the keys left are looked up. A port group refers to thousands
// of ports, and a change adds or removes a few: the diff reads each held
// row once, in place, and the mutation and the change it reports are the
// references added and removed.
func (d *Differ) diffRefSet(ud *UnitDiff, t *Table, have model.Model, key string, ref Reference, keys []string) (string, error) {
	target := d.reg.byName[ref.Table]
	held := refs(have, ref.Column)
	// What the set held when last diffed (RefMemo): only the references
	// it did not hold then are read.
	slot := refSlot{uuidOf(have), ref.Column}
	rc := d.v.tables[target]
	memoize := d.memo != nil && len(held) >= 64
	var stamp uint64
	var memo *heldSet
	if memoize {
		stamp = d.memo.stampOf(target)
		memo = d.memo.held(slot, target, rc)
	}
	unknown := held
	if memo != nil {
		unknown = nil
		for _, uuid := range held {
			if _, ok := memo.ours[uuid]; !ok && !memo.foreign[uuid] {
				unknown = append(unknown, uuid)
			}
		}
	}
	bulk := d.bulkFor(target, max(len(unknown), len(keys)-len(held)+len(unknown)))
	// A held row of ours stands for its key's row when no two rows can
	// have one key (byKey, by key).
	unique := d.uniqueKey(target)
	var ours, byKey map[string]string // held UUID -> key, of our rows; and back
	var foreign []string
	classify := held
	if memo != nil && len(held)-len(unknown) == len(memo.ours)+len(memo.foreign) && (memo.byKey != nil) == unique {
		// The set holds all it held then (the references it holds and
		// the memo knows are as many as the memo knows), and more: the
		// memo's maps are this diff's, the new references added.
		ours, byKey, classify = memo.ours, memo.byKey, unknown
		for f := range memo.foreign {
			foreign = append(foreign, f)
		}
		slices.Sort(foreign)
		memo = nil
	} else {
		ours = make(map[string]string, len(held))
		if unique {
			byKey = make(map[string]string, len(held))
		}
	}
	for _, uuid := range classify {
		var row model.Model
		switch {
		case memo == nil:
		case memo.foreign[uuid]:
			foreign = append(foreign, uuid)
			continue
		default:
			if k, ok := memo.ours[uuid]; ok {
				ours[uuid] = k
				if unique {
					byKey[k] = uuid
				}
				continue
			}
		}
		if bulk != nil {
			row = bulk.byUUID[uuid]
		} else {
			row = d.v.row(target, uuid)
		}
		if row != nil {
			if _, ok := d.v.owner(target, row, d.instance); ok {
				k := target.Key(row)
				ours[uuid] = k
				if unique {
					byKey[k] = uuid
				}
				continue
			}
		}
		foreign = append(foreign, uuid)
	}
	kept := make(map[string]bool, len(keys))
	d.wanted = slices.Grow(d.wanted, len(keys))
	var lookup []string
	for _, k := range keys {
		if u, ok := byKey[k]; ok {
			kept[u] = true
			d.want(ud, t, key, ref, k, true)
			continue
		}
		lookup = append(lookup, k)
	}
	if bulk != nil && len(lookup) >= 64 && len(lookup)*8 >= len(bulk.byUUID) {
		bulk.withKeys()
	}
	var add []string
	added := map[string]string{} // of add, the rows of ours in the NB: UUID -> key
	for _, k := range lookup {
		m, err := d.rowByKey(target, k)
		if err != nil {
			return "", err
		}
		d.want(ud, t, key, ref, k, m != nil)
		if m != nil {
			if _, ok := ours[uuidOf(m)]; ok {
				kept[uuidOf(m)] = true
				continue
			}
			added[uuidOf(m)] = k
		}
		add = append(add, k)
	}
	var out []string
	var stay []heldRef
	var outKeys []string
	for _, uuid := range held {
		k, ok := ours[uuid]
		switch {
		case !ok:
		case kept[uuid]:
			stay = append(stay, heldRef{uuid: uuid, key: k})
		default:
			out = append(out, uuid)
			outKeys = append(outKeys, k)
		}
	}
	if len(foreign) > 0 {
		ud.Notes = append(ud.Notes, foreignRefsNote(t, key, ref, foreign))
	}
	if memoize {
		// What the set holds once this diff is committed, as far as it
		// is known (a row inserted with it is read next time): if the
		// commit fails, the set holds what the memo does not know and
		// lacks what it does, and the next diff reads it whole.
		for i, uuid := range out {
			delete(ours, uuid)
			if unique && byKey[outKeys[i]] == uuid {
				delete(byKey, outKeys[i])
			}
		}
		for uuid, k := range added {
			ours[uuid] = k
			if unique {
				byKey[k] = uuid
			}
		}
		d.memo.keep(slot, target, rc, stamp, ours, byKey, foreign)
	}
	if len(add) == 0 && len(out) == 0 {
		return "", nil
	}
	ud.sets = append(ud.sets, &refSet{t: t, uuid: uuidOf(have), key: key, ref: ref, add: add, out: out, kept: stay})
	d.rewritten[refSlot{uuidOf(have), ref.Column}] = ud
	var parts []string
	if len(add) > 0 {
		parts = append(parts, "added "+d.formatKeys(ref, add))
	}
	if len(out) > 0 {
		slices.Sort(outKeys)
		parts = append(parts, "removed "+d.formatKeys(ref, outKeys))
	}
	return ref.Column + ": " + strings.Join(parts, ", "), nil
}

// foreignRefsNote says that column ref of row key of t holds references
// to other tools' rows, left as they are.
func foreignRefsNote(t *Table, key string, ref Reference, foreign []string) string {
	return fmt.Sprintf("%s %s: %s holds %d reference(s) to %s rows that are not kubevirt-ovn's (%s); left as they are",
		t.Name, key, ref.Column, len(foreign), ref.Table, strings.Join(foreign, ", "))
}

// update writes the managed columns of have that differ from want, in
// place, and says what changed.
func (d *Differ) update(ud *UnitDiff, t *Table, have, want model.Model, key string) ([]string, error) {
	var cols, partial []string
	var desc []string
	for _, col := range t.Columns {
		a, b := t.managed(have, col), t.managed(want, col)
		if equalValue(a, b) {
			continue
		}
		if _, ok := t.PartialMaps[col]; ok {
			partial = append(partial, col)
		} else {
			cols = append(cols, col)
		}
		desc = append(desc, col+": "+format(a)+" -> "+format(b))
	}
	if len(cols)+len(partial) == 0 {
		return nil, nil
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
			return nil, fmt.Errorf("building the update of %s %s: %w", t.Name, key, err)
		}
		ud.ops = append(ud.ops, ops...)
	}
	for _, col := range partial {
		// Our keys out, then our keys in (an insert does not replace a
		// key's value); the others' keys stay.
		var mutations []model.Mutation
		if keys := field(have, col); keys.Len() > 0 {
			mutations = append(mutations, model.Mutation{Field: fieldPtr(m, col), Mutator: ovsdb.MutateOperationDelete, Value: slices.Clone(t.PartialMaps[col])})
		}
		if v := t.managed(want, col); v.Len() > 0 {
			mutations = append(mutations, model.Mutation{Field: fieldPtr(m, col), Mutator: ovsdb.MutateOperationInsert, Value: v.Interface()})
		}
		ops, err := d.c.Where(m).Mutate(m, mutations...)
		if err != nil {
			return nil, fmt.Errorf("building the update of %s %s %s: %w", t.Name, key, col, err)
		}
		ud.ops = append(ud.ops, ops...)
	}
	return desc, nil
}

// remove deletes row r of table t: a root by a delete, a child by removing
// it from its parent (the database collects it), nothing for a child whose
// parent goes in this diff. A root that rows may refer to waits for Settle.
// why is the Change detail.
func (d *Differ) remove(ud *UnitDiff, st *unitState, t *Table, r model.Model, why string) error {
	uuid := uuidOf(r)
	if t.Root() && len(d.reg.referrers[t]) > 0 {
		d.pending = append(d.pending, &pendingRoot{ud: ud, t: t, row: r, why: why})
		return nil
	}
	st.deleted[uuid] = true
	d.gone[uuid] = ud
	if k, ok := st.orphans[uuid]; ok {
		return d.deleteOrphan(ud, t, r, k)
	}
	if t.Root() {
		if why == "" {
			why = d.childCounts(t, r)
			if t.Guard {
				ud.Notes = append(ud.Notes, d.deletedForeignNote(t, r)...)
			}
		}
		return d.deleteRow(ud, t, r, why)
	}
	p := d.currentParent(st, t, r, nil)
	switch {
	case p != "" && st.deleted[p]:
		return nil
	case p != "":
		ud.refs = append(ud.refs, refChange{parent: d.reg.byName[t.Parent], parentUUID: p, column: t.ParentColumn, child: uuid, remove: true})
	default:
		// Held by no row of ours: delete it outright.
		return d.deleteRow(ud, t, r, why)
	}
	ud.Changes = append(ud.Changes, Change{Action: Delete, Table: t.Name, Name: t.Key(r), Detail: why})
	return nil
}

// deleteRow deletes row r of table t outright: a root, or a child no row
// of ours holds.
func (d *Differ) deleteRow(ud *UnitDiff, t *Table, r model.Model, why string) error {
	ops, err := d.c.Where(r).Delete()
	if err != nil {
		return fmt.Errorf("building the deletion of %s %s: %w", t.Name, t.Key(r), err)
	}
	ud.ops = append(ud.ops, ops...)
	ud.Changes = append(ud.Changes, Change{Action: Delete, Table: t.Name, Name: t.Key(r), Detail: why})
	return nil
}

// deleteOrphan deletes row r of table t, an orphan naming key of t's
// owning table, once the NB is read to hold no row of that key
// (confirmOrphans): the operations wait for that in the same transaction.
// Its change is the unit's once confirmed.
func (d *Differ) deleteOrphan(ud *UnitDiff, t *Table, r model.Model, key string) error {
	ops, err := d.c.Where(r).Delete()
	if err != nil {
		return fmt.Errorf("building the deletion of %s %s: %w", t.Name, t.Key(r), err)
	}
	target := d.reg.byName[t.OwnedThrough.Table]
	ud.orphans = append(ud.orphans, &orphan{target: target, key: key, ops: ops,
		change: Change{Action: Delete, Table: t.Name, Name: t.Key(r), Detail: fmt.Sprintf("%s %s is gone", target.Name, key)}})
	return nil
}

// Settle finishes what depends on every unit this Differ diffed:
//
//   - A root row that rows of ours may refer to lives while its owner wants
//     it or a row of ours refers to it: with a strong reference deleting it
//     would fail the owner's transaction, with a weak one the server would
//     empty another unit's column behind its back. Its owner's diff leaves
//     it here; it goes now unless a desired row refers to it or a row of
//     ours that stays does (its owner's next diff deletes it once none
//     does: a controller reconciles that owner when a reference to the row
//     goes). Rows of other tools do not keep it: the monitor does not show
//     them, and a weak reference of theirs is emptied by the server.
//   - A desired reference to a key that no row of ours has and no unit
//     diffed here inserts fails its unit, named, before anything is sent.
func (d *Differ) Settle() error {
	for _, w := range d.wanted {
		if w.resolved || d.inserting[rowKey{w.ref.Table, w.key}] || w.ud.err != nil {
			continue
		}
		w.ud.err = &MissingRowError{Unit: w.ud.Unit, From: w.from, Column: w.ref.Column, Table: w.ref.Table, Key: w.key}
	}
	for _, p := range d.pending {
		holders, err := d.holders(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.ud.Unit, err)
		}
		key := p.t.Key(p.row)
		if len(holders) > 0 {
			p.ud.Notes = append(p.ud.Notes, fmt.Sprintf("%s %s is kept while rows of ours refer to it (%s); it goes once none does",
				p.t.Name, key, strings.Join(holders, ", ")))
			continue
		}
		d.gone[uuidOf(p.row)] = p.ud
		why := p.why
		if why == "" {
			why = d.childCounts(p.t, p.row)
		}
		if err := d.deleteRow(p.ud, p.t, p.row, why); err != nil {
			return fmt.Errorf("%s: %w", p.ud.Unit, err)
		}
	}
	d.pending = nil
	return nil
}

// holders names the rows of ours that refer to pending root p once every
// diff of this Differ is applied: the desired rows whose reference resolves
// to it, and the cached rows referring to it that no diff here deletes or
// rewrites (a unit that fails before anything is sent changes nothing).
func (d *Differ) holders(p *pendingRoot) ([]string, error) {
	uuid := uuidOf(p.row)
	var out []string
	for _, w := range d.wanted {
		if w.ref.Table != p.t.Name || w.ud.err != nil {
			continue
		}
		if m, err := d.rowByKey(p.t, w.key); err == nil && m != nil && uuidOf(m) == uuid {
			out = append(out, fmt.Sprintf("%s of %s", w.from, w.ud.Unit))
		}
	}
	for _, rf := range d.reg.referrers[p.t] {
		rows, err := d.referring(rf, uuid)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if by := d.gone[uuidOf(r)]; by != nil && by.err == nil {
				continue
			}
			if by := d.rewritten[refSlot{uuidOf(r), rf.ref.Column}]; by != nil && by.err == nil {
				continue
			}
			u, ok := d.v.owner(rf.t, r, d.instance)
			if !ok {
				continue
			}
			out = append(out, fmt.Sprintf("%s %s of %s", rf.t.Name, rf.t.Key(r), u))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// referring are the cached rows whose column rf refers to row uuid: by the
// column's client index when it holds one reference, else from one walk of
// the table per Differ.
func (d *Differ) referring(rf referrer, uuid string) ([]model.Model, error) {
	if field(rf.t.New(), rf.ref.Column).Kind() == reflect.Pointer {
		return d.v.byColumn(rf.t, rf.ref.Column, ovsdb.UUID{GoUUID: uuid})
	}
	if d.refScan == nil {
		d.refScan = map[referrer]map[string][]string{}
	}
	idx, ok := d.refScan[rf]
	if !ok {
		idx = map[string][]string{}
		for u, r := range d.v.rows(rf.t) {
			for _, ref := range refs(r, rf.ref.Column) {
				idx[ref] = append(idx[ref], u)
			}
		}
		d.refScan[rf] = idx
	}
	var out []model.Model
	for _, u := range idx[uuid] {
		if r := d.v.row(rf.t, u); r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// childCounts says what goes with a root row, e.g. "3 ports".
func (d *Differ) childCounts(t *Table, r model.Model) string {
	var parts []string
	for _, c := range d.reg.children[t] {
		if n := len(refs(r, c.ParentColumn)); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c.ParentColumn))
		}
	}
	return strings.Join(parts, "; ")
}

// foreignNotes say what another tool added to root row r: columns kubevirt-ovn
// does not set that hold values, and rows in its containment columns that
// are not ours. Both are left as they are.
func (d *Differ) foreignNotes(t *Table, r model.Model) []string {
	var notes []string
	managed := slices.Clone(t.Columns)
	children := d.reg.children[t]
	for _, c := range children {
		managed = append(managed, c.ParentColumn)
	}
	for _, ref := range t.References {
		managed = append(managed, ref.Column)
	}
	v := reflect.ValueOf(r).Elem()
	var cols []string
	for col, i := range columnFields(v.Type()) {
		if _, ok := t.PartialMaps[col]; ok && t.foreignKeys(r, col) {
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
	for _, c := range sortedTables(d.reg.children[t]) {
		if foreign := d.foreignRefs(c, refs(r, c.ParentColumn)); len(foreign) > 0 {
			notes = append(notes, fmt.Sprintf("%s %s is deleted with %d %s row(s) that are not kubevirt-ovn's (%s): they are deleted with it",
				t.Name, t.Key(r), len(foreign), c.Name, strings.Join(foreign, ", ")))
		}
	}
	return notes
}

// foreignRefs are the referenced UUIDs that are not rows of ours: the view
// holds every row we own (our monitor's, or ReadOwned's), so a row it lacks
// is another tool's. The view is one whole state of the cache: a
// reconnection refilling the cache meanwhile does not make ours look
// foreign.
func (d *Differ) foreignRefs(t *Table, uuids []string) []string {
	var out []string
	for _, u := range uuids {
		if !d.v.hasRow(t, u) {
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
