// Package leader runs a role of kubevirt-ovn (the controller, the
// allocator) only while this replica holds a coordination.k8s.io Lease,
// and stops it at once when the Lease is lost: when a renewal fails for
// the renew deadline, as client-go's leader election does, and also as
// soon as a read of the Lease shows another holder (the tripwire), where
// client-go alone would keep leading, and the role writing, until the
// renew deadline passed.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// DefaultGrace is how long a replica that stops leading waits for its
// role to return before Run returns anyway.
const DefaultGrace = 10 * time.Second

// Config is the Lease and its timings.
type Config struct {
	// Namespace and Name are the Lease's.
	Namespace, Name string
	// Identity is this replica's in the Lease ("": hostname_pid).
	Identity string
	// LeaseDuration is how long a Lease is valid without renewal,
	// RenewDeadline how long the leader keeps leading while it cannot
	// renew, RetryPeriod how often it tries to acquire or renew.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Grace bounds how long Run waits for the role to return once it
	// stops leading (0: DefaultGrace).
	Grace time.Duration
}

// Runner is a role that runs while this replica leads: Run returns once
// its context ends.
type Runner interface{ Run(context.Context) error }

// NewLock returns the Lease lock of cfg, read and written with kc;
// recorder (may be nil) records the leader changes as Events.
func NewLock(kc kubernetes.Interface, cfg Config, recorder record.EventRecorder) (resourcelock.Interface, error) {
	id := cfg.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		nil, kc.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
}

// Run runs r while this replica holds lock. It returns nil when ctx ends
// (the Lease released), and an error when the Lease is lost or the
// election ends before this replica led: the caller exits, and the
// replica starts over as a candidate with fresh state. Either way r has
// stopped (or had cfg.Grace to stop) when Run returns.
func Run(ctx context.Context, lock resourcelock.Interface, cfg Config, r Runner, log logr.Logger) error {
	grace := cfg.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	id := lock.Identity()
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	watch := &tripwire{Interface: lock}
	watch.lost = func(holder string) {
		log.Info("lost the Lease to another replica: stopping NB writes", "identity", id, "holder", holder)
		// Ends the leader's context, so the role writes nothing more, and
		// the election: this replica no longer holds the Lease, so it
		// releases nothing.
		stopElecting()
	}
	stopped := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            watch,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(stopped)
				watch.leading.Store(true)
				log.Info("leading: this replica writes", "identity", id)
				if err := r.Run(ctx); err != nil {
					log.Error(err, "stopped with an error while leading")
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				if leader != id {
					log.Info("another replica leads; standing by", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(electCtx)
	if watch.leading.Load() {
		select {
		case <-stopped:
			log.Info("not leading: this replica stopped writing", "identity", id)
		case <-time.After(grace):
			log.Info("not leading: still running after the grace period; returning anyway", "identity", id, "grace", grace)
		}
	}
	switch {
	case watch.lostTo.Load() != nil:
		return fmt.Errorf("lost the leader election Lease %s/%s to %s", cfg.Namespace, cfg.Name, *watch.lostTo.Load())
	case ctx.Err() != nil:
		return nil
	case watch.leading.Load():
		return fmt.Errorf("lost the leader election Lease %s/%s: not renewed within the renew deadline (%s)", cfg.Namespace, cfg.Name, cfg.RenewDeadline)
	}
	return errors.New("leader election ended before this replica led")
}

// tripwire is a lock that calls lost at once when a read of the Lease
// shows another holder while this replica leads.
type tripwire struct {
	resourcelock.Interface
	leading atomic.Bool
	lostTo  atomic.Pointer[string]
	lost    func(holder string)
}

func (l *tripwire) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && l.leading.Load() && rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() {
		if l.lostTo.CompareAndSwap(nil, &rec.HolderIdentity) {
			l.lost(rec.HolderIdentity)
		}
	}
	return rec, raw, err
}
