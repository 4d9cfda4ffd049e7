package nb

import (
	"sync"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
)

// ParentIndex remembers which of our rows references each child row (the
// switch of a port, the router of a NAT), kept up to date from the NB
// cache's events, for a controller: finding the switch a deleted router's
// port is on would otherwise walk every switch. It trails the cache by the
// events not yet delivered, so the diff checks what it says against the
// cache, and walks the parent table when it is wrong.
type ParentIndex struct {
	mu     sync.RWMutex
	parent map[string]string // child UUID -> parent UUID
}

// NewParentIndex indexes c's cache: its rows now and every change after.
func NewParentIndex(c client.Client) *ParentIndex {
	p := &ParentIndex{parent: map[string]string{}}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { p.update(table, nil, m) },
		UpdateFunc: func(table string, old, m model.Model) { p.update(table, old, m) },
		DeleteFunc: func(table string, m model.Model) { p.update(table, m, nil) },
	})
	v := takeView(c, Default)
	for _, t := range Default.tables {
		if len(Default.children[t]) == 0 {
			continue
		}
		for _, m := range v.rows(t) {
			p.update(t.Name, nil, m)
		}
	}
	return p
}

func (p *ParentIndex) update(table string, old, cur model.Model) {
	t := Default.Lookup(table)
	if t == nil {
		return
	}
	children := Default.children[t]
	if len(children) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range children {
		var now []string
		if cur != nil {
			now = refs(cur, c.ParentColumn)
			for _, ref := range now {
				p.parent[ref] = uuidOf(cur)
			}
		}
		if old != nil {
			// A set of the new references: a shared switch holds a port
			// per router, and is updated on each router's commit.
			kept := make(map[string]bool, len(now))
			for _, ref := range now {
				kept[ref] = true
			}
			for _, ref := range refs(old, c.ParentColumn) {
				if p.parent[ref] == uuidOf(old) && !kept[ref] {
					delete(p.parent, ref)
				}
			}
		}
	}
}

// ParentOf is the row last seen referencing child, "" if none.
func (p *ParentIndex) ParentOf(child string) string {
	if p == nil {
		return ""
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.parent[child]
}
