package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// allocations is a zone agent's store: the allocator's decisions
// (Claims) and every zone's chassis.
type allocations struct {
	tr.Claims
	chassis []tr.Chassis
}

func (a *allocations) Chassis() []tr.Chassis                         { return a.chassis }
func (a *allocations) OfflineMembers() map[string][]tr.OfflineMember { return nil }
func (a *allocations) Activations() map[string][]tr.PortActivation   { return nil }
func (a *allocations) HeldSwitchKey(sw string) int                   { return a.Keys.Switches[sw] }
func (a *allocations) HeldPortKey(port string) int                   { return a.Keys.Ports[port] }
func (a *allocations) HeldTunnelKeys() tr.TunnelKeys                 { return a.Keys }
func (a *allocations) HeldGateways(router string) []string           { return a.Gateways[router] }

// A zone agent's unit whose allocation is not written yet waits for it
// without retries: the allocation's arrival enqueues it (the store's
// Notify). Retried with backoff, every unit of a starting agent came back
// ten times a second, long after the allocator had decided (the 50-zone
// bench). A unit that fails for another reason is still retried.
func TestZoneAgentWaitsForTheAllocatorWithoutRetries(t *testing.T) {
	chassis := []tr.Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw1"},
		{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"},
	}
	in, store := agentInput(chassis)
	agent := NewZoneAgent(ctrlNB(t), zoneSB(t, chassis[1]), "hv1", inputSource{in}, store, Options{Instance: instance, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	netA := tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}
	agent.EnqueueUnits([]tr.Unit{netA})
	require.True(t, agent.processNext(ctx))
	assert.Zero(t, agent.queue.NumRequeues(netA), "net-a waits for its keys without backoff retries")
	assert.Zero(t, agent.queue.Len())
}

// agentInput is the example with a VM of net-a on node-hv1, over chassis,
// and an allocator's store with those chassis and no decision yet.
func agentInput(chassis []tr.Chassis) (*tr.Input, *allocations) {
	snap := example()
	snap.VMs = []tr.VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default",
		MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1"}}
	in := tr.NewInputFrom(snap)
	in.SetChassis(chassis, true)
	return in, &allocations{chassis: chassis}
}

func TestWaitingOnly(t *testing.T) {
	waiting := &tr.InputError{Kind: tr.ObjNAD, Object: "net-a", Field: "tunnel keys", Msg: "1 of 2 not allocated yet by the allocator", Reason: tr.ReasonWaiting}
	other := &tr.InputError{Kind: tr.ObjNAD, Object: "net-a", Field: "cidr", Msg: "is not a CIDR"}
	assert.True(t, waitingOnly(waiting))
	assert.True(t, waitingOnly(errors.Join(waiting, waiting)))
	assert.False(t, waitingOnly(errors.Join(waiting, other)))
	assert.False(t, waitingOnly(other))
	assert.False(t, waitingOnly(nil))
	assert.False(t, waitingOnly(errors.New("transaction failed")))
}

// A zone agent leaves alone a network whose switch is neither in its zone
// nor in its NB: every agent sees every VM's change and every allocator
// decision, and planned and diffed the network for nothing (the 50-zone
// bench). So does it a router with no row in its zone. One whose rows its
// NB holds is still taken: they go.
func TestZoneAgentLeavesTheUnitsOfOtherZones(t *testing.T) {
	chassis := []tr.Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw1"},
		{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"},
		{Name: "hv2", Hostname: "node-hv2", Zone: "hv2"},
	}
	in, store := agentInput(chassis)
	store.Gateways = map[string][]string{"router1": {"gw1"}}
	netA := tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}
	agent := func(zone string, nbc client.Client) *Controller {
		a := NewZoneAgent(nbc, zoneSB(t, chassis[1]), zone, inputSource{in}, store, Options{Instance: instance, Workers: 1})
		a.watchNB()
		return a
	}

	hv1 := agent("hv1", ctrlNB(t))
	hv1.EnqueueUnits([]tr.Unit{netA})
	assert.Equal(t, 1, hv1.queue.Len(), "net-a has a VM in zone hv1")
	hv1.EnqueueUnits([]tr.Unit{router1})
	assert.Equal(t, 2, hv1.queue.Len(), "router1's port on net-a has its remote twin in zone hv1")

	nb2 := ctrlNB(t)
	hv2 := agent("hv2", nb2)
	hv2.EnqueueUnits([]tr.Unit{netA, router1})
	assert.Zero(t, hv2.queue.Len(), "nothing of net-a or router1 in zone hv2")

	// A router's row in hv2's NB: taken, to go.
	ops, err := nb2.Create(&nbmodel.LogicalRouter{UUID: "lr", Name: "kv-router1", ExternalIDs: tr.OwnerIDs(instance, router1)})
	require.NoError(t, err)
	_, err = nb2.Transact(context.Background(), ops...)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		hv2.EnqueueUnits([]tr.Unit{router1})
		return hv2.queue.Len() == 1
	}, 10*time.Second, 10*time.Millisecond, "router1's row in hv2's NB: taken, to go")
	drain(hv2)

	ops, err = nb2.Create(&nbmodel.LogicalSwitch{UUID: "ls", Name: "kv-net-a", ExternalIDs: tr.OwnerIDs(instance, netA)})
	require.NoError(t, err)
	_, err = nb2.Transact(context.Background(), ops...)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		hv2.EnqueueUnits([]tr.Unit{netA})
		return hv2.queue.Len() == 1
	}, 10*time.Second, 10*time.Millisecond, "net-a's switch in hv2's NB: taken, to go")
}

// gatedChassis is a zone agent's store whose first read of the chassis
// waits for gate (or a while): a refresh in progress while the others
// arrive.
type gatedChassis struct {
	*allocations
	gate  chan struct{}
	mu    sync.Mutex
	reads int
	last  int // how many chassis the last read returned
}

func (s *gatedChassis) set(chassis []tr.Chassis) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chassis = chassis
}

func (s *gatedChassis) Chassis() []tr.Chassis {
	s.mu.Lock()
	s.reads++
	first := s.reads == 1
	s.mu.Unlock()
	if first {
		select {
		case <-s.gate:
		case <-time.After(2 * time.Second):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = len(s.chassis)
	return slices.Clone(s.chassis)
}

func (s *gatedChassis) seen() (reads, last int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, s.last
}

// A zone agent hears of every zone's OVNZone change, and its informer
// lists every zone's at its start: each change read the chassis again and
// re-planned what they change, a square in the cluster's zones. A burst
// of changes is read once, and the last change is always read.
func TestZoneAgentReadsABurstOfChassisChangesOnce(t *testing.T) {
	chassis := []tr.Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw1"},
		{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"},
	}
	in, allocs := agentInput(chassis)
	store := &gatedChassis{allocations: allocs, gate: make(chan struct{})}
	agent := NewZoneAgent(ctrlNB(t), zoneSB(t, chassis[1]), "hv1", inputSource{in}, store, Options{Instance: instance, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	const zones = 50
	for i := range zones {
		chassis = append(chassis, tr.Chassis{Name: fmt.Sprintf("hv-%d", i), Hostname: fmt.Sprintf("node-hv-%d", i), Zone: fmt.Sprintf("hv-%d", i)})
		store.set(slices.Clone(chassis))
		agent.ChassisChanged(ctx)
	}
	close(store.gate)
	require.Eventually(t, func() bool {
		_, last := store.seen()
		return last == len(chassis)
	}, 5*time.Second, 5*time.Millisecond, "the last change is read")
	reads, _ := store.seen()
	assert.LessOrEqual(t, reads, 2, "%d changes, read %d times", zones, reads)
}
