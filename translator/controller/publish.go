package controller

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// ZonePublication is what a zone agent publishes about its zone for the
// allocator (kube.Store.PublishZone writes it in the zone's OVNZone), and
// where it reads it.
type ZonePublication struct {
	// Zone is the zone's name, Node the node that owns its OVNZone ("":
	// none).
	Zone, Node string
	// Chassis reads the zone's local chassis (ovn.ZoneChassis of its SB).
	Chassis func(context.Context) ([]translator.Chassis, error)
	// Keys reads the tunnel keys other tools' rows request in the zone's
	// NB (ovn.ReadZoneKeys).
	Keys func(context.Context) (ovn.ZoneKeys, error)
	// Offline reads the load balancer members the zone's own health
	// checks find offline (ovn.OfflineMembers of its SB); nil: none.
	Offline func(context.Context) ([]translator.OfflineMember, error)
	// Activated reads the migrating VM ports the zone's SB showed
	// activated on their target while their migration runs
	// (translator.Input.Activations); nil: none.
	Activated func() []translator.PortActivation
	// Publish writes the publication.
	Publish func(ctx context.Context, zone, node string, st ZoneState) error
	// Resync is how often it is read and published again whatever the
	// events (the foreign keys have no event).
	Resync time.Duration
	// Retry is the first wait after a failed publication, doubled after
	// each failure up to MaxRetry (0: one second and 30 seconds).
	Retry, MaxRetry time.Duration
	Log             logr.Logger
}

// ZoneState is what a zone agent publishes of its zone: its local
// chassis, the tunnel keys other tools' rows request in its NB (Foreign),
// its tunnel key collisions, the load balancer members its health checks
// find offline, and the migrating VM ports activated on their target in
// it.
type ZoneState struct {
	Chassis    []translator.Chassis
	Foreign    []translator.ForeignKey
	Collisions []translator.KeyMismatch
	Offline    []translator.OfflineMember
	Activated  []translator.PortActivation
}

// ZonePublisher keeps a zone's publication current: once at start, again
// on Kick (a chassis, a health check's status or an activation changed), when the collisions change, on every
// resync, and after a failure until it succeeds.
type ZonePublisher struct {
	pub        ZonePublication
	kick       chan struct{}
	collisions atomic.Pointer[[]translator.KeyMismatch]
}

// NewZonePublisher returns the publisher of pub; Run starts it.
func NewZonePublisher(pub ZonePublication) *ZonePublisher {
	if pub.Retry == 0 {
		pub.Retry = time.Second
	}
	if pub.MaxRetry == 0 {
		pub.MaxRetry = 30 * time.Second
	}
	if pub.Resync == 0 {
		pub.Resync = Options{}.withDefaults().Resync
	}
	p := &ZonePublisher{pub: pub, kick: make(chan struct{}, 1)}
	p.collisions.Store(&[]translator.KeyMismatch{})
	return p
}

// Kick asks for a publication soon; kicks while one is pending are one.
func (p *ZonePublisher) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// SetCollisions records the zone's tunnel key collisions (as the zone's
// controller finds them: Options.KeysChanged) and publishes them.
func (p *ZonePublisher) SetCollisions(ms []translator.KeyMismatch) {
	p.collisions.Store(&ms)
	p.Kick()
}

// Run publishes until ctx ends.
func (p *ZonePublisher) Run(ctx context.Context) {
	retry := p.pub.Retry
	resync := time.NewTicker(p.pub.Resync)
	defer resync.Stop()
	for {
		err := p.publish(ctx)
		var again <-chan time.Time
		if err != nil && ctx.Err() == nil {
			p.pub.Log.Info("publishing the zone's chassis, foreign keys and key collisions; trying again", "error", err.Error(), "in", retry)
			again = time.After(retry)
			retry = min(2*retry, p.pub.MaxRetry)
		} else {
			retry = p.pub.Retry
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-again:
		case <-resync.C:
		}
	}
}

// publish reads the zone and publishes it once. A zone under VXLAN is
// published anyway (its agent refused to start; this is its state now)
// and logged.
func (p *ZonePublisher) publish(ctx context.Context) error {
	chassis, err := p.pub.Chassis(ctx)
	if err != nil {
		return err
	}
	zk, err := p.pub.Keys(ctx)
	if err != nil {
		return err
	}
	if gerr := zk.CheckGeneve(p.pub.Zone); gerr != nil {
		p.pub.Log.Error(gerr, "the zone's tunnel keys")
	}
	st := ZoneState{Chassis: chassis, Foreign: zk.Foreign, Collisions: *p.collisions.Load()}
	if p.pub.Offline != nil {
		if st.Offline, err = p.pub.Offline(ctx); err != nil {
			return err
		}
	}
	if p.pub.Activated != nil {
		st.Activated = p.pub.Activated()
	}
	return p.pub.Publish(ctx, p.pub.Zone, p.pub.Node, st)
}
