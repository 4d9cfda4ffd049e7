package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// published is one publication.
type published struct {
	zone, node string
	chassis    []tr.Chassis
	foreign    []tr.ForeignKey
	collisions []tr.KeyMismatch
}

// fakeZone is a zone's SB and NB as the publisher reads them, and the
// store it publishes to: every attempt is sent on attempts.
type fakeZone struct {
	mu       sync.Mutex
	chassis  []tr.Chassis
	keys     ovn.ZoneKeys
	failures int // publications that fail before one succeeds
	attempts chan published
}

func (z *fakeZone) publication() ZonePublication {
	return ZonePublication{
		Zone: "hv1", Node: "node-hv1",
		Chassis: func(context.Context) ([]tr.Chassis, error) {
			z.mu.Lock()
			defer z.mu.Unlock()
			return z.chassis, nil
		},
		Keys: func(context.Context) (ovn.ZoneKeys, error) {
			z.mu.Lock()
			defer z.mu.Unlock()
			return z.keys, nil
		},
		Publish: func(_ context.Context, zone, node string, st ZoneState) error {
			z.attempts <- published{zone, node, st.Chassis, st.Foreign, st.Collisions}
			z.mu.Lock()
			defer z.mu.Unlock()
			if z.failures > 0 {
				z.failures--
				return errors.New("the API server refused it")
			}
			return nil
		},
		Resync: time.Hour, Retry: time.Millisecond, MaxRetry: 4 * time.Millisecond,
		Log: logr.Discard(),
	}
}

func next(t *testing.T, ch <-chan published) published {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no publication")
		return published{}
	}
}

// The agent publishes its zone at start, again when a chassis changes
// (Kick) and when its collisions change, with what it reads then.
func TestZonePublisherPublishesOnStartKickAndCollisions(t *testing.T) {
	hv1 := tr.Chassis{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"}
	z := &fakeZone{chassis: []tr.Chassis{hv1}, keys: ovn.ZoneKeys{Foreign: []tr.ForeignKey{{Key: 16711000, Holder: "Logical_Switch other"}}, MaxTunID: 16711680},
		attempts: make(chan published, 10)}
	p := NewZonePublisher(z.publication())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()

	first := next(t, z.attempts)
	assert.Equal(t, published{"hv1", "node-hv1", []tr.Chassis{hv1}, z.keys.Foreign, []tr.KeyMismatch{}}, first)

	hv2 := tr.Chassis{Name: "hv2", Zone: "hv1"}
	z.mu.Lock()
	z.chassis = []tr.Chassis{hv1, hv2}
	z.mu.Unlock()
	p.Kick()
	assert.Equal(t, []tr.Chassis{hv1, hv2}, next(t, z.attempts).chassis)

	ms := []tr.KeyMismatch{{Zone: "hv1", KeyRequest: tr.KeyRequest{Network: "net-a", Switch: "kv-net-a", Key: 16711680}, Actual: 5}}
	p.SetCollisions(ms)
	assert.Equal(t, ms, next(t, z.attempts).collisions)

	cancel()
	<-done
}

// A publication that fails is tried again, without an event, until one
// succeeds; the publisher then goes on publishing on events.
func TestZonePublisherRetriesUntilPublished(t *testing.T) {
	z := &fakeZone{failures: 3, attempts: make(chan published, 10)}
	p := NewZonePublisher(z.publication())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	for range 4 {
		next(t, z.attempts)
	}
	z.mu.Lock()
	assert.Zero(t, z.failures, "three failures, then published")
	z.mu.Unlock()
	p.Kick()
	next(t, z.attempts)
	cancel()
	<-done
}
