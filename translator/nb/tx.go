package nb

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// parentMut gathers the references a transaction adds to and removes from
// one parent row: one mutate per parent, whatever the number of children.
type parentMut struct {
	t       *Table
	uuid    string // the row, or
	name    string // the row of ours of that name
	add     map[string][]string
	remove  map[string][]string
	columns []string
}

func (p *parentMut) ref(col, child string, remove bool) {
	if !slices.Contains(p.columns, col) {
		p.columns = append(p.columns, col)
	}
	if remove {
		p.remove[col] = append(p.remove[col], child)
	} else {
		p.add[col] = append(p.add[col], child)
	}
}

// parentMutKey names a parent row that a transaction mutates: by UUID, or
// by name.
type parentMutKey struct {
	table, uuid, name string
}

// txAssembly is one transaction as Ops assembles it.
type txAssembly struct {
	d      *Differ
	batch  []*UnitDiff
	guards map[string][]string
	// inserted are the rows the transaction inserts, by table and key.
	inserted map[rowKey]*insert
	// extra are the references each new row holds besides its desired
	// columns, by column: its children and the rows it refers to.
	extra map[*insert]map[string][]string
	// muts are the existing parents the transaction mutates, in order.
	muts  map[parentMutKey]*parentMut
	order []parentMutKey
	ops   []ovsdb.Operation
}

// Ops assembles the operations of units committed in one transaction,
// shaped like the floor: every new row is one insert; a child of a new
// parent is in the parent's insert row; the references added to or removed
// from an existing row are one mutate of that row; a wait guards only a
// new name-keyed root. A parent that neither exists nor is inserted in the
// transaction (another unit's, committed alone) is found by name, after a
// wait that exactly one row of ours has that name.
//
// guards holds, per table, the names of the rows of that table that are
// not ours, as read just before (Differ.Guards): a table in it gets one wait
// that those rows are still exactly these instead of a wait per new root
// (each wait is a scan of the table on the server).
func (d *Differ) Ops(batch []*UnitDiff, guards map[string][]string) ([]ovsdb.Operation, error) {
	tx := d.newTxAssembly(batch, guards)
	if err := tx.placeReferences(); err != nil {
		return nil, err
	}
	tx.ops = make([]ovsdb.Operation, 0, tx.opCount())
	if err := tx.addInserts(); err != nil {
		return nil, err
	}
	if err := tx.addUnitOps(); err != nil {
		return nil, err
	}
	if err := tx.addParentMutations(); err != nil {
		return nil, err
	}
	return tx.ops, nil
}

func (d *Differ) newTxAssembly(batch []*UnitDiff, guards map[string][]string) *txAssembly {
	tx := &txAssembly{d: d, batch: batch, guards: guards, inserted: map[rowKey]*insert{},
		extra: map[*insert]map[string][]string{}, muts: map[parentMutKey]*parentMut{}}
	for _, ud := range batch {
		for _, ins := range ud.inserts {
			tx.inserted[rowKey{ins.t.Name, ins.key}] = ins
		}
	}
	return tx
}

// resolve is the UUID of the row of table t with key: the named UUID of
// the row this transaction inserts, else the UUID of our row.
func (tx *txAssembly) resolve(t *Table, key string) (string, error) {
	if ins := tx.inserted[rowKey{t.Name, key}]; ins != nil {
		return uuidOf(ins.m), nil
	}
	m, err := tx.d.rowByKey(t, key)
	if err != nil {
		return "", err
	}
	if m == nil {
		if u, ok := tx.d.committed[rowKey{t.Name, key}]; ok {
			return u, nil
		}
	}
	if m == nil || tx.d.gone[uuidOf(m)] != nil {
		return "", fmt.Errorf("no %s row of this kubevirt-ovn instance has key %s, and this transaction creates none", t.Name, key)
	}
	return uuidOf(m), nil
}

// placeReferences puts every reference the batch adds or removes where it
// is written: in a new row's insert (its references, a new parent's
// children) or in the mutate of an existing parent.
func (tx *txAssembly) placeReferences() error {
	for _, ud := range tx.batch {
		for _, ins := range ud.inserts {
			if err := tx.resolveReferences(ud, ins); err != nil {
				return err
			}
			if ins.parentKey == "" {
				continue
			}
			tx.place(refChange{parent: tx.d.reg.byName[ins.t.Parent], column: ins.t.ParentColumn, child: uuidOf(ins.m),
				parentInsert: ins.parentNew, parentUUID: ins.parentUUID, parentName: ins.parentKey})
		}
		for _, rc := range ud.refs {
			tx.place(rc)
		}
	}
	return nil
}

// resolveReferences adds to new row ins the UUIDs of the rows its
// reference columns name by key.
func (tx *txAssembly) resolveReferences(ud *UnitDiff, ins *insert) error {
	for _, ref := range ins.t.References {
		for _, key := range ins.refs[ref.Column] {
			uuid, err := tx.resolve(tx.d.reg.byName[ref.Table], key)
			if err != nil {
				return fmt.Errorf("%s: %s %s: %s: %w", ud.Unit, ins.t.Name, ins.key, ref.Column, err)
			}
			tx.addExtra(ins, ref.Column, uuid)
		}
	}
	return nil
}

// place writes reference change rc in its parent's insert when the
// transaction inserts the parent, else in the mutate of the parent: by
// UUID, or by name.
func (tx *txAssembly) place(rc refChange) {
	switch {
	case rc.parentInsert != nil:
		tx.addExtra(rc.parentInsert, rc.column, rc.child)
	case rc.parentUUID != "":
		tx.mut(rc.parent, rc.parentUUID, "").ref(rc.column, rc.child, rc.remove)
	case tx.inserted[rowKey{rc.parent.Name, rc.parentName}] != nil:
		tx.addExtra(tx.inserted[rowKey{rc.parent.Name, rc.parentName}], rc.column, rc.child)
	case tx.d.committed[rowKey{rc.parent.Name, rc.parentName}] != "":
		tx.mut(rc.parent, tx.d.committed[rowKey{rc.parent.Name, rc.parentName}], "").ref(rc.column, rc.child, rc.remove)
	default:
		tx.mut(rc.parent, "", rc.parentName).ref(rc.column, rc.child, rc.remove)
	}
}

func (tx *txAssembly) addExtra(p *insert, col string, uuids ...string) {
	if tx.extra[p] == nil {
		tx.extra[p] = map[string][]string{}
	}
	tx.extra[p][col] = append(tx.extra[p][col], uuids...)
}

// mut is the mutate of existing parent row uuid (or, without it, the row
// of ours named name) of table t.
func (tx *txAssembly) mut(t *Table, uuid, name string) *parentMut {
	k := parentMutKey{t.Name, uuid, name}
	p, ok := tx.muts[k]
	if !ok {
		p = &parentMut{t: t, uuid: uuid, name: name, add: map[string][]string{}, remove: map[string][]string{}}
		tx.muts[k] = p
		tx.order = append(tx.order, k)
	}
	return p
}

// opCount is the transaction's operations at most, for its capacity.
func (tx *txAssembly) opCount() int {
	n := len(tx.order) + 2*len(tx.guards)
	for _, ud := range tx.batch {
		n += ud.opCount()
	}
	return n
}

// addInserts adds the inserts, children before parents so that a parent's
// insert row names children already inserted, and referenced rows before
// the rows that refer to them; each guarded table's wait follows its new
// rows.
func (tx *txAssembly) addInserts() error {
	for _, t := range tx.d.reg.insertOrder {
		for _, ud := range tx.batch {
			for _, ins := range ud.inserts {
				if ins.t != t {
					continue
				}
				if err := tx.addInsert(ud, ins); err != nil {
					return err
				}
			}
		}
		if foreign, ok := tx.guards[t.Name]; ok {
			// After the table's new rows, so that the rows it expects are
			// never none, which a wait operation cannot say.
			tx.ops = append(tx.ops, tx.d.tableGuard(t, tx.d.guardNames(t, foreign, tx.batch)))
		}
	}
	return nil
}

// addInsert adds the insert of new row ins with its extra references,
// after a wait that no row has its name when it is a name-keyed root whose
// table has no table-wide wait.
func (tx *txAssembly) addInsert(ud *UnitDiff, ins *insert) error {
	t := ins.t
	m := tx.withExtra(ins)
	if _, bulk := tx.guards[t.Name]; t.Guard && !bulk {
		guard, err := tx.d.nameGuard(m, ovsdb.WaitConditionNotEqual, false)
		if err != nil {
			return err
		}
		tx.ops = append(tx.ops, guard...)
	}
	op, err := tx.d.insertOp(t, m)
	if err != nil {
		return fmt.Errorf("%s: building the insert of %s %s: %w", ud.Unit, t.Name, ins.key, err)
	}
	tx.ops = append(tx.ops, op)
	return nil
}

// withExtra is new row ins's model holding its extra references: a copy
// when there are any.
func (tx *txAssembly) withExtra(ins *insert) model.Model {
	ex := tx.extra[ins]
	if ex == nil {
		return ins.m
	}
	m := model.Clone(ins.m)
	for _, col := range slices.Sorted(maps.Keys(ex)) {
		f := field(m, col)
		if f.Kind() == reflect.Pointer {
			v := ex[col][0]
			f.Set(reflect.ValueOf(&v))
			continue
		}
		f.Set(reflect.AppendSlice(f, reflect.ValueOf(ex[col])))
	}
	return m
}

// addUnitOps adds each unit's updates and deletions and the reference
// columns it sets.
func (tx *txAssembly) addUnitOps() error {
	for _, ud := range tx.batch {
		tx.ops = append(tx.ops, ud.ops...)
		for _, o := range ud.orphans {
			if !o.skip {
				tx.ops = append(tx.ops, tx.d.absent(o.target, o.key))
				tx.ops = append(tx.ops, o.ops...)
			}
		}
		for _, s := range ud.sets {
			op, err := tx.d.setOps(s, tx.resolve)
			if err != nil {
				return fmt.Errorf("%s: %s %s: %s: %w", ud.Unit, s.t.Name, s.key, s.ref.Column, err)
			}
			tx.ops = append(tx.ops, op...)
		}
	}
	return nil
}

// addParentMutations adds one mutate per existing parent, in the order
// the parents were first met.
func (tx *txAssembly) addParentMutations() error {
	for _, k := range tx.order {
		if err := tx.addParentMutation(tx.muts[k]); err != nil {
			return err
		}
	}
	return nil
}

// addParentMutation adds the mutate of parent p: of the row by UUID, or of
// the row of ours by name after a wait that exactly one has that name.
func (tx *txAssembly) addParentMutation(p *parentMut) error {
	d := tx.d
	m := p.t.New()
	var mutations []model.Mutation
	for _, col := range p.columns {
		if add := p.add[col]; len(add) > 0 {
			mutations = append(mutations, model.Mutation{Field: fieldPtr(m, col), Mutator: ovsdb.MutateOperationInsert, Value: add})
		}
		if rm := p.remove[col]; len(rm) > 0 {
			mutations = append(mutations, model.Mutation{Field: fieldPtr(m, col), Mutator: ovsdb.MutateOperationDelete, Value: rm})
		}
	}
	var op []ovsdb.Operation
	var err error
	if p.uuid != "" {
		setUUID(m, p.uuid)
		op, err = d.c.Where(m).Mutate(m, mutations...)
	} else {
		field(m, "name").SetString(p.name)
		var guard []ovsdb.Operation
		if guard, err = d.nameGuard(m, ovsdb.WaitConditionEqual, true); err == nil {
			tx.ops = append(tx.ops, guard...)
			op, err = d.c.WhereAll(m, d.ourName(m)...).Mutate(m, mutations...)
		}
	}
	if err != nil {
		return fmt.Errorf("building the references of %s %s%s: %w", p.t.Name, p.uuid, p.name, err)
	}
	tx.ops = append(tx.ops, op...)
	return nil
}

// setOps write refSet s: an update of a column holding one reference, a
// mutation of a set (ours out, the wanted in; another tool's stay). Of a
// set only the added keys are resolved: a kept reference stays, but for
// one to a row that a unit of the transaction deletes, replaced by its
// key's row (another unit may insert it anew).
func (d *Differ) setOps(s *refSet, resolve func(*Table, string) (string, error)) ([]ovsdb.Operation, error) {
	target := d.reg.byName[s.ref.Table]
	m := s.t.New()
	setUUID(m, s.uuid)
	if s.single {
		if len(s.keys) > 0 {
			u, err := resolve(target, s.keys[0])
			if err != nil {
				return nil, err
			}
			field(m, s.ref.Column).Set(reflect.ValueOf(&u))
		}
		return d.c.Where(m).Update(m, fieldPtr(m, s.ref.Column))
	}
	out, addKeys := slices.Clone(s.out), slices.Clone(s.add)
	held := make(map[string]bool, len(s.kept))
	for _, h := range s.kept {
		if d.gone[h.uuid] != nil {
			out = append(out, h.uuid)
			addKeys = append(addKeys, h.key)
			continue
		}
		held[h.uuid] = true
	}
	var in []string
	for _, k := range addKeys {
		u, err := resolve(target, k)
		if err != nil {
			return nil, err
		}
		if !held[u] {
			in = append(in, u)
		}
	}
	var mutations []model.Mutation
	if len(out) > 0 {
		mutations = append(mutations, model.Mutation{Field: fieldPtr(m, s.ref.Column), Mutator: ovsdb.MutateOperationDelete, Value: out})
	}
	if len(in) > 0 {
		mutations = append(mutations, model.Mutation{Field: fieldPtr(m, s.ref.Column), Mutator: ovsdb.MutateOperationInsert, Value: in})
	}
	if len(mutations) == 0 {
		return nil, nil
	}
	return d.c.Where(m).Mutate(m, mutations...)
}

// ourName selects the rows named like m that carry our managed-by key.
func (d *Differ) ourName(m model.Model) []model.Condition {
	return []model.Condition{
		{Field: fieldPtr(m, "name"), Function: ovsdb.ConditionEqual, Value: field(m, "name").String()},
		{Field: fieldPtr(m, "external_ids"), Function: ovsdb.ConditionIncludes, Value: map[string]string{translator.KeyManagedBy: d.instance}},
	}
}

// nameGuard waits, with timeout 0, until the rows named like m (with ours,
// only those carrying our managed-by key), projected on name, are not
// [m's name] (none: NotEqual) or are exactly [m's name] (one: Equal). A
// failed wait fails the transaction.
func (d *Differ) nameGuard(m model.Model, until ovsdb.WaitCondition, ours bool) ([]ovsdb.Operation, error) {
	zero := 0
	probe := reflect.New(reflect.TypeOf(m).Elem()).Interface().(model.Model)
	field(probe, "name").SetString(field(m, "name").String())
	conds := d.ourName(probe)
	if !ours {
		conds = conds[:1]
	}
	return d.c.WhereAll(probe, conds...).Wait(until, &zero, probe, fieldPtr(probe, "name"))
}

// opCount estimates the operations of a unit, for batching.
func (u *UnitDiff) opCount() int {
	n := len(u.ops) + len(u.refs) + len(u.sets)
	for _, o := range u.orphans {
		n += 1 + len(o.ops)
	}
	for _, ins := range u.inserts {
		n++
		if ins.t.Guard {
			n++
		}
	}
	return n
}

// insertOp is the insert of new row m (its _uuid a named UUID): the
// columns that hold a value, each already in OVSDB's JSON notation. It is
// libovsdb's Create without its per-row reflection, validation and
// generic notation values: a full sync inserts tens of thousands of rows.
func (d *Differ) insertOp(t *Table, m model.Model) (ovsdb.Operation, error) {
	ts := d.c.Cache().DatabaseModel().Schema.Table(t.Name)
	if ts == nil {
		return ovsdb.Operation{}, fmt.Errorf("the NB schema has no table %s", t.Name)
	}
	v := reflect.ValueOf(m).Elem()
	row := ovsdb.Row{}
	for col, i := range columnFields(v.Type()) {
		f := v.Field(i)
		if col == "_uuid" || emptyValue(f) {
			continue
		}
		cs := ts.Column(col)
		if cs == nil {
			return ovsdb.Operation{}, fmt.Errorf("the NB schema's %s table has no column %s", t.Name, col)
		}
		b, err := d.arena.encode(cs, f)
		if err != nil {
			return ovsdb.Operation{}, fmt.Errorf("%s.%s: %w", t.Name, col, err)
		}
		row[col] = b
	}
	return ovsdb.Operation{Op: ovsdb.OperationInsert, Table: t.Name, Row: row, UUIDName: uuidOf(m)}, nil
}

// bulkGuard is how many new roots of one table a transaction inserts
// before one wait over the table's names replaces a wait per root.
const bulkGuard = 16

// notOursCond selects the rows that are not this instance's.
func (d *Differ) notOursCond() ovsdb.Condition {
	return ovsdb.Condition{Column: "external_ids", Function: ovsdb.ConditionExcludes,
		Value: ovsdb.OvsMap{GoMap: map[any]any{translator.KeyManagedBy: d.instance}}}
}

// tableGuard waits, with timeout 0, until the names in table t are exactly
// names: no row of another writer appeared (with a name we insert or any
// other) since they were read.
func (d *Differ) tableGuard(t *Table, names []string) ovsdb.Operation {
	zero := 0
	rows := make([]ovsdb.Row, len(names))
	for i, n := range names {
		rows[i] = ovsdb.Row{"name": n}
	}
	// Every row: a wait needs a where clause, and libovsdb leaves out an
	// empty one.
	every := ovsdb.Condition{Column: "_uuid", Function: ovsdb.ConditionNotEqual, Value: ovsdb.UUID{GoUUID: "00000000-0000-0000-0000-000000000000"}}
	return ovsdb.Operation{Op: ovsdb.OperationWait, Table: t.Name, Where: []ovsdb.Condition{every},
		Columns: []string{"name"}, Until: string(ovsdb.WaitConditionEqual), Rows: rows, Timeout: &zero}
}

// guardNames are the names table t holds once batch's new rows of it are
// inserted: the rows that are not ours (foreign, read just before), ours
// in the cache, and the new ones.
func (d *Differ) guardNames(t *Table, foreign []string, batch []*UnitDiff) []string {
	set := map[string]bool{}
	for _, n := range foreign {
		set[n] = true
	}
	for _, m := range d.v.rows(t) {
		set[field(m, "name").String()] = true
	}
	for _, ud := range batch {
		for _, ins := range ud.inserts {
			if ins.t == t {
				set[ins.key] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Guards reads, for each guarded table in which batch inserts many roots,
// the names of the rows that are not ours, and splits off the units that
// would insert a root with one of those names: they fail now, named, and
// the others commit with one wait per such table (see Ops).
func (d *Differ) Guards(ctx context.Context, c client.Client, batch []*UnitDiff) (map[string][]string, []*UnitDiff, map[*UnitDiff]error, error) {
	count := map[*Table]int{}
	for _, ud := range batch {
		for _, ins := range ud.inserts {
			if ins.t.Guard {
				count[ins.t]++
			}
		}
	}
	var tables []*Table
	var ops []ovsdb.Operation
	for _, t := range d.reg.tables {
		if count[t] >= bulkGuard {
			tables = append(tables, t)
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: t.Name, Where: []ovsdb.Condition{d.notOursCond()}, Columns: []string{"name"}})
		}
	}
	if len(ops) == 0 {
		return nil, batch, nil, nil
	}
	results, err := c.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, ops)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the names of the rows that are not ours: %w", err)
	}
	guards := map[string][]string{}
	taken := map[rowKey]bool{}
	for i, t := range tables {
		names := []string{}
		for _, r := range results[i].Rows {
			if n, ok := r["name"].(string); ok {
				names = append(names, n)
				taken[rowKey{t.Name, n}] = true
			}
		}
		guards[t.Name] = names
	}
	var keep []*UnitDiff
	failed := map[*UnitDiff]error{}
	for _, ud := range batch {
		var clash error
		for _, ins := range ud.inserts {
			if ins.t.Guard && taken[rowKey{ins.t.Name, ins.key}] {
				clash = fmt.Errorf("%s %s %s", ins.t.Name, ins.key, notOurs)
				break
			}
		}
		if clash != nil {
			failed[ud] = fmt.Errorf("%s: NB transaction not sent: %w", ud.Unit, clash)
			continue
		}
		keep = append(keep, ud)
	}
	return guards, keep, failed, nil
}

// absent waits, with timeout 0, until table t holds no row of key: the
// guard of an orphan's deletion (another writer may have created a port of
// that name since confirmOrphans read none).
func (d *Differ) absent(t *Table, key string) ovsdb.Operation {
	zero := 0
	return ovsdb.Operation{Op: ovsdb.OperationWait, Table: t.Name, Where: []ovsdb.Condition{{Column: t.Identity[0], Function: ovsdb.ConditionEqual, Value: key}},
		Columns: []string{t.Identity[0]}, Until: string(ovsdb.WaitConditionEqual), Rows: []ovsdb.Row{}, Timeout: &zero}
}

// confirmOrphans reads, in one transaction of selects, whether the NB
// holds a row of each orphan's key (rows not ours are not in the cache):
// an orphan whose key some row has is not ours, and is skipped.
func (d *Differ) confirmOrphans(ctx context.Context, c client.Client, diffs []*UnitDiff) error {
	var ops []ovsdb.Operation
	var of []*orphan
	for _, ud := range diffs {
		for _, o := range ud.orphans {
			col := o.target.Identity[0]
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: o.target.Name,
				Where: []ovsdb.Condition{{Column: col, Function: ovsdb.ConditionEqual, Value: o.key}}, Columns: []string{col}})
			of = append(of, o)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	results, err := c.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, ops)
	}
	if err != nil {
		return fmt.Errorf("reading whether the ports its bindings name exist: %w", err)
	}
	for i, o := range of {
		o.skip = len(results[i].Rows) > 0
	}
	return nil
}
