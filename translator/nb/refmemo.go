package nb

import (
	"sync"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// RefMemo remembers, across the reconciles of one controller, which rows
// the reference sets of our rows hold: of each set column (a port group's
// ports), the held references to rows of ours with those rows' keys, and
// those to other tools' rows. A security group's Port_Group holds
// thousands of ports, and an event adds or removes a few: without it each
// diff reads every held row again (the whole switch port table, then each
// row's owner and key) to tell which references stay.
//
// What it remembers of a row is its key and owner, which only an update
// of that row changes. The controller shows it every NB event (Observe)
// before it acts on it: an update that changes a referenced row's key or
// owner forgets what was remembered of that row's table, and the units
// whose rows refer to the row are reconciled again (Registry.Affected),
// so that a diff that ran from a memo the NB had already outrun before
// the event arrived is redone. A row inserted is in no memo yet; a row
// deleted leaves the sets holding it (the database removes a weak
// reference, and refuses to delete a row a strong one holds).
type RefMemo struct {
	reg      *Registry
	instance string

	mu    sync.Mutex
	stamp map[*Table]uint64 // bumped by each update of a key or an owner
	sets  map[refSlot]*heldSet
}

// heldSet is what one set column held when last diffed.
type heldSet struct {
	rc      *cache.RowCache // the referenced table's row cache it was read from
	stamp   uint64
	ours    map[string]string // held UUID -> key, of rows of ours
	byKey   map[string]string // key -> held UUID, of rows of ours, when no two rows can have one key
	foreign map[string]bool   // held UUIDs of other tools' rows
}

// NewRefMemo is an empty memo of the rows of instance in the tables of
// reg (Default when nil).
func NewRefMemo(reg *Registry, instance string) *RefMemo {
	if reg == nil {
		reg = Default
	}
	return &RefMemo{reg: reg, instance: instance, stamp: map[*Table]uint64{}, sets: map[refSlot]*heldSet{}}
}

// Observe takes an NB event (old and cur: the row before and after; nil
// for an insert or a delete): an update that changes the key or owner of
// a row other rows may refer to invalidates what is remembered of its
// table.
func (m *RefMemo) Observe(table string, old, cur model.Model) {
	if m == nil || old == nil {
		return
	}
	t := m.reg.Lookup(table)
	if t == nil {
		return
	}
	if cur == nil {
		m.forget(t, uuidOf(old))
		return
	}
	if len(m.reg.referrers[t]) == 0 || !identityChanged(t, old, cur, m.instance) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stamp[t]++
}

// identityChanged says whether an update of a row of t changed what a
// reference to it resolves to: its key, or whether (and by whom) it is
// owned.
func identityChanged(t *Table, old, cur model.Model, instance string) bool {
	if t.Key(old) != t.Key(cur) {
		return true
	}
	a, aOK := translator.OwnerOf(externalIDs(old), instance)
	b, bOK := translator.OwnerOf(externalIDs(cur), instance)
	return a != b || aOK != bOK
}

// held is what set slot held when last diffed, if that is still true of
// the rows it names: read from the row cache rc of its referenced table t
// and no key or owner of t changed since. A memo serves tables whose rows
// carry their owner (OwnerKeys).
func (m *RefMemo) held(slot refSlot, t *Table, rc *cache.RowCache) *heldSet {
	if m == nil || !t.OwnerKeys() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.sets[slot]
	if h == nil || h.rc != rc || h.stamp != m.stamp[t] {
		return nil
	}
	return h
}

// stampOf is table t's stamp now: a memo taken before a diff reads the
// view and stored after holds no update that the view may hold.
func (m *RefMemo) stampOf(t *Table) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stamp[t]
}

// keep remembers what slot holds, read from rc at stamp. The next diff of
// slot takes its maps (there is one diff of a row at a time: its unit's).
func (m *RefMemo) keep(slot refSlot, t *Table, rc *cache.RowCache, stamp uint64, ours, byKey map[string]string, foreign []string) {
	if m == nil || !t.OwnerKeys() {
		return
	}
	h := &heldSet{rc: rc, stamp: stamp, ours: ours, byKey: byKey}
	if len(foreign) > 0 {
		h.foreign = make(map[string]bool, len(foreign))
		for _, f := range foreign {
			h.foreign[f] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sets[slot] = h
}

// forget drops what is remembered of the set columns of row uuid of t,
// deleted.
func (m *RefMemo) forget(t *Table, uuid string) {
	if len(t.References) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ref := range t.References {
		delete(m.sets, refSlot{uuid: uuid, column: ref.Column})
	}
}
