package leader

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

const (
	ns   = "kube-system"
	name = "kubevirt-ovn"
)

var leases = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// leaseAPI is a fake clientset whose Leases have resource versions, as the
// API server's do: an update from a stale read is refused (Conflict), so a
// leader whose Lease was taken finds out on its next renewal. failUpdates
// makes every Lease update fail (an API server the leader cannot reach).
type leaseAPI struct {
	*fake.Clientset
	mu          sync.Mutex
	version     int
	failUpdates atomic.Bool
}

func newLeaseAPI(t *testing.T) *leaseAPI {
	api := &leaseAPI{Clientset: fake.NewClientset()}
	api.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		api.mu.Lock()
		defer api.mu.Unlock()
		// Create and update actions both carry the object.
		obj, ok := a.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		switch a.GetVerb() {
		case "create":
			l := obj.GetObject().(*coordinationv1.Lease).DeepCopy()
			api.version++
			l.ResourceVersion = strconv.Itoa(api.version)
			if err := api.Tracker().Create(leases, l, l.Namespace); err != nil {
				return true, nil, err
			}
			return true, l, nil
		case "update":
			if api.failUpdates.Load() {
				return true, nil, errors.New("the API server does not answer")
			}
			l := obj.GetObject().(*coordinationv1.Lease).DeepCopy()
			cur, err := api.Tracker().Get(leases, l.Namespace, l.Name)
			if err != nil {
				return true, nil, err
			}
			if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
				return true, nil, apierrors.NewConflict(leases.GroupResource(), l.Name, errors.New("the object has been modified"))
			}
			api.version++
			l.ResourceVersion = strconv.Itoa(api.version)
			if err := api.Tracker().Update(leases, l, l.Namespace); err != nil {
				return true, nil, err
			}
			return true, l, nil
		}
		return false, nil, nil
	})
	return api
}

func (api *leaseAPI) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := api.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

func (api *leaseAPI) holder(t *testing.T) string {
	t.Helper()
	return ptr.Deref(api.lease(t).Spec.HolderIdentity, "")
}

// role records when it runs and when its context ends.
type role struct {
	started, stopped chan struct{}
	ignoreStop       bool // keeps running after its context ends
}

func newRole() *role { return &role{started: make(chan struct{}), stopped: make(chan struct{})} }

func (r *role) Run(ctx context.Context) error {
	close(r.started)
	<-ctx.Done()
	close(r.stopped)
	if r.ignoreStop {
		select {}
	}
	return nil
}

// run runs Run in the background; the returned channel has its error.
func run(t *testing.T, ctx context.Context, api *leaseAPI, cfg Config, r Runner) <-chan error {
	t.Helper()
	lock, err := NewLock(api, cfg, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, lock, cfg, r, logr.Discard()) }()
	return done
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		require.FailNow(t, "timed out waiting for "+what)
	}
	var zero T
	return zero
}

func config(id string) Config {
	return Config{Namespace: ns, Name: name, Identity: id, LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
}

// A replica leads once it holds the Lease; when its context ends the role
// stops, the Lease is released and Run returns nil.
func TestRunLeadsAndReleasesOnStop(t *testing.T) {
	api := newLeaseAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := newRole()
	done := run(t, ctx, api, config("a"), r)
	wait(t, r.started, "the role to start")
	assert.Equal(t, "a", api.holder(t))
	cancel()
	assert.NoError(t, wait(t, done, "Run to return"))
	wait(t, r.stopped, "the role to stop")
	assert.Empty(t, api.holder(t), "the Lease is released")
}

// A replica that sees another holder in the Lease while it leads stops
// its role at once, long before its renew deadline, and Run returns an
// error naming the Lease and the new holder.
func TestRunStopsAtOnceWhenAnotherReplicaHoldsTheLease(t *testing.T) {
	api := newLeaseAPI(t)
	cfg := config("a")
	cfg.LeaseDuration, cfg.RenewDeadline = 20*time.Minute, 10*time.Minute
	r := newRole()
	done := run(t, context.Background(), api, cfg, r)
	wait(t, r.started, "the role to start")

	l := api.lease(t)
	l.Spec.HolderIdentity = ptr.To("b")
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err := api.CoordinationV1().Leases(ns).Update(context.Background(), l, metav1.UpdateOptions{})
	require.NoError(t, err)

	wait(t, r.stopped, "the role to stop (within the test's timeout, not the 10 minute renew deadline)")
	err = wait(t, done, "Run to return")
	require.Error(t, err)
	assert.Equal(t, "lost the leader election Lease kube-system/kubevirt-ovn to b", err.Error())
	assert.Equal(t, "b", api.holder(t), "the other replica's Lease is left alone")
}

// A leader that cannot renew stops when its renew deadline passes, and Run
// says so.
func TestRunStopsWhenTheLeaseCannotBeRenewed(t *testing.T) {
	api := newLeaseAPI(t)
	r := newRole()
	done := run(t, context.Background(), api, config("a"), r)
	wait(t, r.started, "the role to start")
	api.failUpdates.Store(true)
	wait(t, r.stopped, "the role to stop")
	err := wait(t, done, "Run to return")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lost the leader election Lease kube-system/kubevirt-ovn: not renewed within the renew deadline (1.5s)")
}

// A replica whose Lease another holds stands by: its role never runs, and
// Run returns nil when its context ends.
func TestRunStandsByWhileAnotherLeads(t *testing.T) {
	api := newLeaseAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader := newRole()
	run(t, ctx, api, config("a"), leader)
	wait(t, leader.started, "the leader's role to start")

	standby := newRole()
	sctx, stop := context.WithCancel(context.Background())
	done := run(t, sctx, api, config("b"), standby)
	stop()
	assert.NoError(t, wait(t, done, "the standby's Run to return"))
	select {
	case <-standby.started:
		t.Fatal("the standby's role ran")
	default:
	}
	assert.Equal(t, "a", api.holder(t))
}

// A role that does not stop when it loses the Lease does not keep Run from
// returning past the grace period.
func TestRunReturnsAfterTheGraceWhenTheRoleDoesNotStop(t *testing.T) {
	api := newLeaseAPI(t)
	cfg := config("a")
	cfg.Grace = 50 * time.Millisecond
	r := newRole()
	r.ignoreStop = true
	ctx, cancel := context.WithCancel(context.Background())
	done := run(t, ctx, api, cfg, r)
	wait(t, r.started, "the role to start")
	cancel()
	wait(t, r.stopped, "the role's context to end")
	assert.NoError(t, wait(t, done, "Run to return"))
}
