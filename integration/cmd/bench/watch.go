package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// nbWatch mirrors the tables the events touch from a libovsdb monitor of the
// NB, and wakes waiters on every update: an event's latency is the time
// until the condition on the mirror holds.
type nbWatch struct {
	c client.Client

	mu     sync.Mutex
	ls     map[string]*nbmodel.LogicalSwitch // by UUID
	lsp    map[string]*nbmodel.LogicalSwitchPort
	lr     map[string]*nbmodel.LogicalRouter
	lrp    map[string]*nbmodel.LogicalRouterPort
	nat    map[string]*nbmodel.NAT
	pg     map[string]*nbmodel.PortGroup
	acl    map[string]*nbmodel.ACL
	wakeup chan struct{}
	// goneAt is when the monitor said a row was deleted, by UUID.
	goneAt map[string]time.Time
}

func watchNB(ctx context.Context, endpoint string) (*nbWatch, error) {
	dbModel, err := nbmodel.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	c, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint), client.WithLogger(ptr(logr.Discard())))
	if err != nil {
		return nil, err
	}
	w := &nbWatch{c: c, ls: map[string]*nbmodel.LogicalSwitch{}, lsp: map[string]*nbmodel.LogicalSwitchPort{},
		lr: map[string]*nbmodel.LogicalRouter{}, lrp: map[string]*nbmodel.LogicalRouterPort{}, nat: map[string]*nbmodel.NAT{},
		pg: map[string]*nbmodel.PortGroup{}, acl: map[string]*nbmodel.ACL{}, wakeup: make(chan struct{}, 1)}
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("watching the NB at %s: %w", endpoint, err)
	}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { w.put(m, false) },
		UpdateFunc: func(_ string, _, m model.Model) { w.put(m, false) },
		DeleteFunc: func(_ string, m model.Model) { w.put(m, true) },
	})
	if _, err := c.Monitor(ctx, c.NewMonitor(
		client.WithTable(&nbmodel.LogicalSwitch{}), client.WithTable(&nbmodel.LogicalSwitchPort{}),
		client.WithTable(&nbmodel.LogicalRouter{}), client.WithTable(&nbmodel.LogicalRouterPort{}),
		client.WithTable(&nbmodel.NAT{}), client.WithTable(&nbmodel.PortGroup{}), client.WithTable(&nbmodel.ACL{}))); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring the NB at %s: %w", endpoint, err)
	}
	return w, nil
}

func ptr[T any](v T) *T { return &v }

func (w *nbWatch) Close() { w.c.Close() }

func (w *nbWatch) put(m model.Model, del bool) {
	w.mu.Lock()
	if del {
		if w.goneAt == nil {
			w.goneAt = map[string]time.Time{}
		}
		if u, ok := m.(interface{ GetUUID() string }); ok {
			w.goneAt[u.GetUUID()] = time.Now()
		}
	}
	switch r := m.(type) {
	case *nbmodel.LogicalSwitch:
		setOrDelete(w.ls, r.UUID, r, del)
	case *nbmodel.LogicalSwitchPort:
		setOrDelete(w.lsp, r.UUID, r, del)
	case *nbmodel.LogicalRouter:
		setOrDelete(w.lr, r.UUID, r, del)
	case *nbmodel.LogicalRouterPort:
		setOrDelete(w.lrp, r.UUID, r, del)
	case *nbmodel.NAT:
		setOrDelete(w.nat, r.UUID, r, del)
	case *nbmodel.PortGroup:
		setOrDelete(w.pg, r.UUID, r, del)
	case *nbmodel.ACL:
		setOrDelete(w.acl, r.UUID, r, del)
	}
	w.mu.Unlock()
	select {
	case w.wakeup <- struct{}{}:
	default:
	}
}

func setOrDelete[T any](m map[string]*T, uuid string, v *T, del bool) {
	if del {
		delete(m, uuid)
	} else {
		m[uuid] = v
	}
}

// view is what a condition reads: the mirror, under its lock.
type view struct{ w *nbWatch }

func (v view) switchNamed(name string) *nbmodel.LogicalSwitch {
	for _, s := range v.w.ls {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (v view) routerNamed(name string) *nbmodel.LogicalRouter {
	for _, r := range v.w.lr {
		if r.Name == name {
			return r
		}
	}
	return nil
}

func (v view) portNamed(name string) *nbmodel.LogicalSwitchPort {
	for _, p := range v.w.lsp {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (v view) routerPortNamed(name string) *nbmodel.LogicalRouterPort {
	for _, p := range v.w.lrp {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (v view) groupNamed(name string) *nbmodel.PortGroup {
	for _, g := range v.w.pg {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// nats are a router's NAT rows that the mirror holds.
func (v view) nats(r *nbmodel.LogicalRouter) []*nbmodel.NAT {
	var out []*nbmodel.NAT
	for _, u := range r.Nat {
		if n := v.w.nat[u]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// fipNAT is router s's dnat_and_snat row of its floating IP; nil if it
// has none or more than one.
func (v view) fipNAT(s *routerState) *nbmodel.NAT {
	r := v.routerNamed(routerRow(routerName(s.index)))
	if r == nil {
		return nil
	}
	var found *nbmodel.NAT
	for _, n := range v.nats(r) {
		if n.Type == nbmodel.NATTypeDNATAndSNAT && n.ExternalIP == fipIP(s.index) {
			if found != nil {
				return nil
			}
			found = n
		}
	}
	return found
}

// until waits for cond to hold on the mirror, at most timeout; it returns
// when it held.
func (w *nbWatch) until(cond func(view) bool, timeout time.Duration) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok := cond(view{w})
		w.mu.Unlock()
		if ok {
			return time.Now(), nil
		}
		select {
		case <-w.wakeup:
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("the NB did not reach the expected state within %s", timeout)
		}
	}
}

// deletedAt is when the monitor said row uuid was deleted; zero if it has
// not.
func (w *nbWatch) deletedAt(uuid string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.goneAt[uuid]
}
