package syncer

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// examplePlan plans deploy/examples.
func examplePlan(t *testing.T) *translator.Plan {
	t.Helper()
	set, err := manifest.LoadPaths([]string{examples})
	require.NoError(t, err)
	snap := set.Objects.Snapshot()
	snap.Held = translator.Claims{}
	return translator.Build(snap, instance)
}

// dial connects to nb through a proxy that can cut the connection, and
// reads our rows, as a sync does.
func dial(t *testing.T, ctx context.Context) (client.Client, *nbtest.Proxy, func(context.Context) error) {
	t.Helper()
	proxy := nbtest.NewProxy(t, nbtest.Serve(t))
	nb, err := ovn.DialNB(ctx, ovn.Endpoint{Address: proxy.Endpoint(), Timeout: time.Second}, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(nb.Close)
	read := func(ctx context.Context) error { return ovn.ReadOwned(ctx, nb, instance) }
	require.NoError(t, read(ctx))
	return nb, proxy, read
}

func unitErrors(r *kvnb.SyncResult) []error {
	var errs []error
	for _, u := range r.Units {
		if u.Err != nil {
			errs = append(errs, u.Err)
		}
	}
	return errs
}

// An NB lost before the sync's transaction and back within the sync's
// context: the sync waits for it, says so, syncs again from what it
// holds, and reports every unit synced with the changes of every pass.
func TestSurvivingReconnectsWaitsForTheNB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nb, proxy, read := dial(t, ctx)
	plan := examplePlan(t)
	proxy.Down()
	require.Eventually(t, func() bool { return !kvnb.Connected(nb) }, 10*time.Second, 10*time.Millisecond)

	var n notes
	done := make(chan *kvnb.SyncResult, 1)
	go func() {
		res, err := SurvivingReconnects(ctx, nb, read, plan, kvnb.SyncOptions{Instance: instance}, n.note)
		assert.NoError(t, err)
		done <- res
	}()
	require.Eventually(t, func() bool { return n.has("lost the NB connection during pass 1") }, 30*time.Second, 10*time.Millisecond, "notes: %q", n.all)
	proxy.Up()
	var res *kvnb.SyncResult
	select {
	case res = <-done:
	case <-ctx.Done():
		require.FailNow(t, "the sync did not finish once the NB was back")
	}
	assert.Empty(t, unitErrors(res))
	assert.True(t, n.has("reconnected to the NB at "+proxy.Endpoint()), "notes: %q", n.all)
	assert.NotEmpty(t, res.Changes(), "the changes of the pass that wrote")

	var routers []*nbmodel.LogicalRouter
	require.NoError(t, nb.List(ctx, &routers))
	assert.Len(t, routers, 1, "the router is written")
}

// An NB that does not come back before the context ends: the units not
// synced keep their error, and the sync says the NB did not come back.
func TestSurvivingReconnectsGivesUpWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nb, proxy, read := dial(t, ctx)
	plan := examplePlan(t)
	proxy.Down()
	require.Eventually(t, func() bool { return !kvnb.Connected(nb) }, 10*time.Second, 10*time.Millisecond)

	var n notes
	syncCtx, stop := context.WithCancel(ctx)
	done := make(chan *kvnb.SyncResult, 1)
	go func() {
		res, err := SurvivingReconnects(syncCtx, nb, read, plan, kvnb.SyncOptions{Instance: instance}, n.note)
		assert.NoError(t, err)
		done <- res
	}()
	require.Eventually(t, func() bool { return n.has("lost the NB connection") }, 30*time.Second, 10*time.Millisecond)
	stop()
	res := <-done
	errs := unitErrors(res)
	require.NotEmpty(t, errs)
	for _, err := range errs {
		assert.ErrorIs(t, err, kvnb.ErrNotConnected)
	}
	assert.True(t, n.has("the NB did not come back before --timeout"), "notes: %q", n.all)
}

// A sync still running at its deadline says whether the NB was away: the
// 50-zone bench's dry run, connected all along beside 50 busy agents, said
// the connection "did not come back".
func TestTimeoutSaysWhetherTheNBWasAway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nb, proxy, _ := dial(t, ctx)
	assert.EqualError(t, timeoutError(nb, context.DeadlineExceeded), "not done before --timeout, the NB connection up: context deadline exceeded")
	proxy.Down()
	require.Eventually(t, func() bool { return !kvnb.Connected(nb) }, 10*time.Second, 10*time.Millisecond)
	assert.EqualError(t, timeoutError(nb, context.DeadlineExceeded), "the NB connection did not come back before --timeout: context deadline exceeded")
}
