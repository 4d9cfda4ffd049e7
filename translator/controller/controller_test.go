package controller

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

const instance = "test"

// ctrlNB connects kubevirt-ovn's NB client to an empty OVN_Northbound
// served by libovsdb's in-process server.
func ctrlNB(t *testing.T) client.Client {
	t.Helper()
	sock := nbtest.Serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nb, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: "unix:" + sock}, instance, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(nb.Close)
	return nb
}

// staticSource is an input that never changes.
type staticSource struct{ snap *tr.Snapshot }

func (s staticSource) Input() *tr.Input { return tr.NewInputFrom(s.snap) }
func (s staticSource) HasSynced() bool  { return true }

// example is deploy/examples: router1 on net-a and net-b, external network
// public.
func example() *tr.Snapshot {
	return &tr.Snapshot{
		Networks: []tr.Network{
			{Name: "public", Namespace: "default", Type: "FLAT", PhysicalNetworkName: "physnet1", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
			{Name: "net-a", Namespace: "default", Type: "GENEVE", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
			{Name: "net-b", Namespace: "default", Type: "VXLAN", CIDR: "10.20.0.0/24", GatewayIP: "10.20.0.1"},
		},
		Routers: []tr.Router{{
			Name: "router1", MAC: "fa:16:3e:00:00:01", EnableSNAT: true,
			Internal:   []string{"net-a", "net-b"},
			External:   &tr.External{IP: "172.16.0.100", Network: "public"},
			PeerRouter: &tr.PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"},
			Gateway:    "gw1",
		}},
	}
}

var (
	router1 = tr.Unit{Kind: tr.KindRouter, Name: "router1"}
	public  = tr.Unit{Kind: tr.KindNetwork, Name: "public"}
	netA    = tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}
	netB    = tr.Unit{Kind: tr.KindNetwork, Name: "net-b"}
)

func newTestController(t *testing.T) (*Controller, client.Client) {
	nb := ctrlNB(t)
	c := New(nb, nil, staticSource{example()}, nil, Options{Instance: instance, Log: logr.Discard(), Metrics: NewMetrics(nil, instance)})
	t.Cleanup(c.queue.ShutDown)
	return c, nb
}

func routers(t *testing.T, nb client.Client) int {
	var rows []*nbmodel.LogicalRouter
	require.NoError(t, nb.List(context.Background(), &rows))
	return len(rows)
}

// drain takes every queued unit, in order.
func drain(c *Controller) []tr.Unit {
	var got []tr.Unit
	for c.queue.Len() > 0 {
		u, _ := c.queue.Get()
		c.queue.Done(u)
		c.queue.Forget(u)
		got = append(got, u)
	}
	return got
}

func TestEnqueueAllNetworksFirst(t *testing.T) {
	c, _ := newTestController(t)
	c.EnqueueAll(context.Background())
	got := drain(c)
	require.Len(t, got, 4)
	assert.Equal(t, router1, got[3], "routers after the networks they hang from")
}

// A router reconciled before its networks' switches exist is parked, not
// failed (no backoff); each network's successful reconcile brings it back.
func TestRouterParkedUntilItsNetworksExist(t *testing.T) {
	c, nb := newTestController(t)
	ctx := context.Background()

	require.NoError(t, reconcileOne(ctx, c, router1), "parked is not failed")
	assert.Zero(t, routers(t, nb), "nothing written for a parked router")
	assert.Equal(t, 1.0, testutil.ToFloat64(c.opts.Metrics.parked))
	assert.ElementsMatch(t, []tr.Unit{public, netA, netB}, drain(c), "its networks are reconciled (again)")

	require.NoError(t, reconcileOne(ctx, c, netA))
	require.NoError(t, reconcileOne(ctx, c, public))
	assert.Equal(t, []tr.Unit{router1}, drain(c), "a network's switch brings its routers back")
	require.NoError(t, reconcileOne(ctx, c, router1))
	assert.Zero(t, routers(t, nb), "still waiting for net-b")
	assert.Empty(t, drain(c), "net-b is not enqueued twice for one wait")

	require.NoError(t, reconcileOne(ctx, c, netB))
	assert.Equal(t, []tr.Unit{router1}, drain(c))
	require.NoError(t, reconcileOne(ctx, c, router1))
	assert.Equal(t, 1, routers(t, nb))
	assert.Equal(t, 2.0, testutil.ToFloat64(c.opts.Metrics.parked))
	assert.Zero(t, testutil.ToFloat64(c.opts.Metrics.reconcileErr.WithLabelValues(string(tr.KindRouter))))
}

// A stopped controller reconciles nothing more, although the workqueue
// still hands out what is queued after ShutDown.
func TestStoppedControllerWritesNothing(t *testing.T) {
	c, nb := newTestController(t)
	c.EnqueueAll(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.queue.ShutDown()
	require.Positive(t, c.queue.Len())
	assert.False(t, c.processNext(ctx), "a worker stops at the first unit after the stop")
	assert.Equal(t, context.Canceled, reconcileOne(ctx, c, public), "a reconcile in progress starts no transaction")
	require.NoError(t, c.Run(ctx))
	var switches []*nbmodel.LogicalSwitch
	require.NoError(t, nb.List(context.Background(), &switches))
	assert.Empty(t, switches)
}

// Once the context has ended, no transaction leaves: not even SyncUnits'
// retry of a batch abandoned in flight.
func TestFencedClientSendsNothingOnceStopped(t *testing.T) {
	nb := ctrlNB(t)
	ls := &nbmodel.LogicalSwitch{UUID: "new", Name: "x"}
	ops, err := nb.Create(ls)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = fenced{nb}.Transact(ctx, ops...)
	require.ErrorIs(t, err, context.Canceled)
	_, err = nb.Transact(context.Background(), ops...)
	require.NoError(t, err, "the operations were fine")
	var switches []*nbmodel.LogicalSwitch
	require.NoError(t, nb.List(context.Background(), &switches))
	assert.Len(t, switches, 1, "only the unfenced transaction wrote")
}

// SB binding events: a gateway port's chassisredirect binding brings its
// router back (its status says where it is active); a remote port's
// (interconnect), even one named like a gateway port's, reconciles nothing.
func TestSBBindingEventsEnqueueOnlyGatewayRouters(t *testing.T) {
	c, _ := newTestController(t)
	ctx := context.Background()
	cr := "cr-" + tr.GatewayPortName("router1")
	c.onSB(ctx, sbmodel.PortBindingTable, &sbmodel.PortBinding{LogicalPort: "kv-net-a_default_vm-a_eth1", Type: ovn.RemotePortType})
	c.onSB(ctx, sbmodel.PortBindingTable, &sbmodel.PortBinding{LogicalPort: cr, Type: ovn.RemotePortType})
	assert.Empty(t, drain(c), "remote port bindings")
	c.onSB(ctx, sbmodel.PortBindingTable, &sbmodel.PortBinding{LogicalPort: cr, Type: ovn.RedirectPortType})
	assert.Equal(t, []tr.Unit{router1}, drain(c))
}

// reconcileOne reconciles u alone, as a worker does when the queue is short.
func reconcileOne(ctx context.Context, c *Controller, u tr.Unit) error {
	return c.reconcile(ctx, []tr.Unit{u})[0]
}
