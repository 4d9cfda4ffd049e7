package nb

import (
	"slices"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Affected are the units that an NB cache event of a row of table concerns
// (old is nil for an insert, cur for a deletion), by the Default registry:
// the row's owner, from its external_ids or, for a table owned through
// another row, that row's (looked up by key in c's cache); and, of each
// reference column whose value changed, the owners of the rows it referred
// to and refers to now (a root row that no row of ours refers to any more
// goes with its owner's next diff); and when an update changed what a
// reference to the row resolves to (its key or owner), the owners of our
// rows referring to it.
func Affected(c client.Client, table string, old, cur model.Model, instance string) []translator.Unit {
	return Default.Affected(c, table, old, cur, instance)
}

// Affected is the package function for registry r.
func (r *Registry) Affected(c client.Client, table string, old, cur model.Model, instance string) []translator.Unit {
	t := r.Lookup(table)
	if t == nil {
		return nil
	}
	var out []translator.Unit
	add := func(u translator.Unit, ok bool) {
		if ok && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	var v *view
	lazy := func() view {
		if v == nil {
			taken := takeView(c, r)
			v = &taken
		}
		return *v
	}
	for _, m := range []model.Model{cur, old} {
		if m == nil {
			continue
		}
		if t.OwnerKeys() {
			add(translator.OwnerOf(externalIDs(m), instance))
		} else {
			add(lazy().owner(t, m, instance))
		}
	}
	if old != nil && cur != nil && len(r.referrers[t]) > 0 && identityChanged(t, old, cur, instance) {
		// What a reference to the row resolves to changed (a RefMemo
		// may hold what it was): the owners of our rows referring to it.
		uuid := uuidOf(cur)
		for _, rf := range r.referrers[t] {
			for _, m := range lazy().rows(rf.t) {
				if slices.Contains(refs(m, rf.ref.Column), uuid) {
					add(lazy().owner(rf.t, m, instance))
				}
			}
		}
	}
	for _, ref := range t.References {
		var before, after []string
		if old != nil {
			before = refs(old, ref.Column)
		}
		if cur != nil {
			after = refs(cur, ref.Column)
		}
		target := r.byName[ref.Table]
		for _, uuid := range symmetricDifference(before, after) {
			if row := lazy().row(target, uuid); row != nil {
				add(lazy().owner(target, row, instance))
			}
		}
	}
	return out
}

// symmetricDifference are the elements of a or b that are not in both.
// A port group's ports are thousands: they are compared through sets.
func symmetricDifference(a, b []string) []string {
	var out []string
	if len(a) <= 8 && len(b) <= 8 {
		for _, x := range a {
			if !slices.Contains(b, x) {
				out = append(out, x)
			}
		}
		for _, x := range b {
			if !slices.Contains(a, x) {
				out = append(out, x)
			}
		}
		return out
	}
	inA, inB := setOf(a), setOf(b)
	for _, x := range a {
		if !inB[x] {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !inA[x] {
			out = append(out, x)
		}
	}
	return out
}

// setOf is the set of the strings of list.
func setOf(list []string) map[string]bool {
	out := make(map[string]bool, len(list))
	for _, x := range list {
		out[x] = true
	}
	return out
}

// KeyOf is the key of row m of table, as Change.Name says it; ok is false
// for a table outside the registry.
func KeyOf(table string, m model.Model) (key string, ok bool) {
	return Default.KeyOf(table, m)
}

// KeyOf is the package function for registry r.
func (r *Registry) KeyOf(table string, m model.Model) (string, bool) {
	t := r.Lookup(table)
	if t == nil {
		return "", false
	}
	return t.Key(m), true
}
