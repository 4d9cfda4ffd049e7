package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// transactions counts the NB transactions the controller sent.
func transactions(t *testing.T, c *Controller) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.opts.Metrics.txn.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

// A batch commits a router with the networks it hangs from, in one
// transaction: the router is not parked for switches the batch writes.
func TestBatchWritesARouterWithItsNetworks(t *testing.T) {
	c, nb := newTestController(t)
	errs := c.reconcile(context.Background(), []tr.Unit{router1, public, netA, netB})
	for i, err := range errs {
		require.NoError(t, err, "unit %d", i)
	}
	assert.Equal(t, 1, routers(t, nb))
	assert.Zero(t, testutil.ToFloat64(c.opts.Metrics.parked))
	assert.Equal(t, uint64(1), transactions(t, c))
	assert.Empty(t, drain(c), "nothing to do again")
}

// A router whose network is neither in the NB nor in its batch waits for
// it; the batch's networks are written.
func TestBatchParksARouterWhoseSwitchIsNotInIt(t *testing.T) {
	c, nb := newTestController(t)
	errs := c.reconcile(context.Background(), []tr.Unit{router1, public, netA})
	for i, err := range errs {
		require.NoError(t, err, "unit %d", i)
	}
	assert.Zero(t, routers(t, nb))
	assert.Equal(t, 1.0, testutil.ToFloat64(c.opts.Metrics.parked))
	var switches []*nbmodel.LogicalSwitch
	require.NoError(t, nb.List(context.Background(), &switches))
	assert.Len(t, switches, 2)
	assert.Equal(t, []tr.Unit{netB}, drain(c), "only the network it waits for")
}

// One unit the NB refuses fails alone, named; the others of its batch are
// written.
func TestBatchUnitRefusedAlone(t *testing.T) {
	c, nb := newTestController(t)
	ctx := context.Background()
	foreign := &nbmodel.LogicalSwitch{UUID: "foreign", Name: tr.SwitchName("net-b")}
	ops, err := nb.Create(foreign)
	require.NoError(t, err)
	_, err = nb.Transact(ctx, ops...)
	require.NoError(t, err)

	errs := c.reconcile(ctx, []tr.Unit{public, netA, netB})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Error(t, errs[2])
	assert.Contains(t, errs[2].Error(), tr.SwitchName("net-b"))
	assert.Contains(t, errs[2].Error(), "not this kubevirt-ovn instance's row")
	var switches []*nbmodel.LogicalSwitch
	require.NoError(t, nb.List(ctx, &switches))
	assert.Len(t, switches, 3, "public's and net-a's, and the foreign one")
}

// A worker takes every unit queued, in queue order, up to BatchUnits; a
// worker waiting for work while a source enqueues one change's units
// takes them all, not the first alone.
func TestTakeTakesWhatIsQueued(t *testing.T) {
	c, _ := newTestController(t)
	c.opts.BatchUnits = 10
	unit := func(i int) tr.Unit { return tr.Unit{Kind: tr.KindNetwork, Name: fmt.Sprintf("n%02d", i)} }
	done := func(units []tr.Unit) {
		for _, u := range units {
			c.queue.Done(u)
		}
	}
	for i := range 25 {
		c.Enqueue(unit(i))
	}
	got, quit := c.take()
	require.False(t, quit)
	assert.Len(t, got, 10)
	assert.Equal(t, unit(0), got[0], "in queue order")
	got2, _ := c.take()
	assert.Len(t, got2, 10)
	assert.Equal(t, unit(10), got2[0])
	got3, _ := c.take()
	assert.Equal(t, []tr.Unit{unit(20), unit(21), unit(22), unit(23), unit(24)}, got3)
	done(slices.Concat(got, got2, got3))

	taken := make(chan []tr.Unit)
	go func() {
		units, _ := c.take()
		taken <- units
	}()
	// The taker is in Get, or about to be: either way it gets the change's
	// units together.
	change := []tr.Unit{unit(30), unit(31), unit(32), unit(33), unit(34)}
	c.EnqueueUnits(change)
	assert.Equal(t, change, <-taken)
}

// echoesAwaited counts the insertions of the controller's writes the NB
// has not announced yet.
func echoesAwaited(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ids := range c.echoes {
		for _, k := range ids {
			n += k
		}
	}
	return n
}

// insertForeignSwitch inserts a switch that names unit u its owner, as a
// tool copying our keys would.
func insertForeignSwitch(t *testing.T, nb client.Client, u tr.Unit, name string) {
	t.Helper()
	ops, err := nb.Create(&nbmodel.LogicalSwitch{UUID: "foreign", Name: name, ExternalIDs: tr.OwnerIDs(instance, u)})
	require.NoError(t, err)
	_, err = nb.Transact(context.Background(), ops...)
	require.NoError(t, err)
}

// The NB announcing the rows a reconcile inserted reconciles nothing again;
// a row of a unit that another writer inserts does.
func TestOwnInsertionsReconcileNothingAgain(t *testing.T) {
	c, nb := newTestController(t)
	c.watchNB()
	errs := c.reconcile(context.Background(), []tr.Unit{public, netA, netB, router1})
	for i, err := range errs {
		require.NoError(t, err, "unit %d", i)
	}
	require.Eventually(t, func() bool { return echoesAwaited(c) == 0 }, 10*time.Second, 5*time.Millisecond, "every insertion announced")
	assert.Empty(t, drain(c), "our own insertions")

	insertForeignSwitch(t, nb, netA, "kv-net-a-copy")
	require.Eventually(t, func() bool { return c.queue.Len() > 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []tr.Unit{netA}, drain(c))
}

// A row of a unit inserted by another writer while the unit is being
// written reconciles it again.
func TestForeignInsertionDuringAWriteReconciles(t *testing.T) {
	c, nb := newTestController(t)
	c.watchNB()
	once := false
	c.nb = beforeTransact{Client: nb, f: func() {
		if !once {
			once = true
			insertForeignSwitch(t, nb, netA, "kv-net-a-copy")
		}
	}}
	require.NoError(t, c.reconcile(context.Background(), []tr.Unit{netA})[0])
	require.Eventually(t, func() bool { return echoesAwaited(c) == 0 && c.queue.Len() > 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []tr.Unit{netA}, drain(c))
}

// beforeTransact calls f before each transaction it forwards.
type beforeTransact struct {
	client.Client
	f func()
}

func (b beforeTransact) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	b.f()
	return b.Client.Transact(ctx, ops...)
}

// setRouterOptions sets router1's options by hand, as another tool would.
func setRouterOptions(t *testing.T, nbc client.Client, opts map[string]string) {
	t.Helper()
	var rows []*nbmodel.LogicalRouter
	require.NoError(t, nbc.List(context.Background(), &rows))
	i := slices.IndexFunc(rows, func(r *nbmodel.LogicalRouter) bool { return r.Name == tr.RouterName("router1") })
	require.GreaterOrEqual(t, i, 0)
	r := rows[i]
	r.Options = opts
	ops, err := nbc.Where(r).Update(r, &r.Options)
	require.NoError(t, err)
	_, err = nbc.Transact(context.Background(), ops...)
	require.NoError(t, err)
}

// The NB announcing a row a reconcile updated (another tool's edit
// undone) or deleted reconciles nothing again; another tool's update of
// it does.
func TestOwnUpdatesReconcileNothingAgain(t *testing.T) {
	c, nbc := newTestController(t)
	c.watchNB()
	for i, err := range c.reconcile(context.Background(), []tr.Unit{public, netA, netB, router1}) {
		require.NoError(t, err, "unit %d", i)
	}
	require.Eventually(t, func() bool { return echoesAwaited(c) == 0 }, 10*time.Second, 5*time.Millisecond)
	drain(c)

	setRouterOptions(t, nbc, map[string]string{"foreign": "x"})
	require.Eventually(t, func() bool { return c.queue.Len() > 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []tr.Unit{router1}, drain(c), "another tool's edit")

	require.NoError(t, c.reconcile(context.Background(), []tr.Unit{router1})[0], "undoes it: an update")
	require.Eventually(t, func() bool { return echoesAwaited(c) == 0 }, 10*time.Second, 5*time.Millisecond, "the update announced")
	assert.Empty(t, drain(c), "our own update")

	setRouterOptions(t, nbc, map[string]string{"foreign": "y"})
	require.Eventually(t, func() bool { return c.queue.Len() > 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []tr.Unit{router1}, drain(c), "another tool's edit, after ours")
}
