package controller

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Every router reconcile asks whether its networks' switches are in the
// NB cache, and a shared external network's switch holds a port per
// router: the answer comes from the switches the cache's events noted,
// without a copy of the row (at 10,000 routers a copy was 160 kB per
// reconcile, 922 MB of a start's 6 GB of allocations).
func TestHasSwitchCopiesNoSwitch(t *testing.T) {
	c, nbc := newTestController(t)
	ctx := context.Background()
	c.watchNB()
	const ports = 2000
	var ops []ovsdb.Operation
	ls := &nbmodel.LogicalSwitch{UUID: "ls", Name: "kv-public", ExternalIDs: tr.OwnerIDs(instance, public)}
	for i := range ports {
		lsp := &nbmodel.LogicalSwitchPort{UUID: fmt.Sprintf("lsp%d", i), Name: fmt.Sprintf("kv-public-r%d", i)}
		op, err := nbc.Create(lsp)
		require.NoError(t, err)
		ops = append(ops, op...)
		ls.Ports = append(ls.Ports, lsp.UUID)
	}
	op, err := nbc.Create(ls)
	require.NoError(t, err)
	_, err = nbc.Transact(ctx, append(ops, op...)...)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.switches[public.Name]) == 1
	}, 10*time.Second, 10*time.Millisecond, "the switch noted from its event")

	const calls = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		c.mu.Lock()
		ok := c.hasSwitch(ctx, public.Name)
		c.mu.Unlock()
		require.True(t, ok)
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / calls
	assert.Less(t, perCall, uint64(ports*16/4), "bytes allocated per call: a copy of the switch is %d bytes of port UUIDs alone", ports*16)

	c.mu.Lock()
	assert.False(t, c.hasSwitch(ctx, "net-a"), "no switch of net-a")
	c.mu.Unlock()
}
