package gatewaystate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/syncer"
)

const instance = "test"

// databases are an in-process NB and SB: gateway chassis gw1 and gw2
// mapping physnet1, chassis hv1, and routers ra..rd synced into the NB
// (ra pinned to gw1), their gateway ports cr-ra bound to gw1 and cr-rb to
// gw2.
type databases struct {
	nb, sb ovn.Endpoint
}

func newDatabases(t *testing.T) databases {
	t.Helper()
	gw := func(name string) *sbmodel.Chassis {
		return &sbmodel.Chassis{Name: name, Hostname: name, OtherConfig: map[string]string{"ovn-cms-options": "enable-chassis-as-gw", "ovn-bridge-mappings": "physnet1:br-ex"}}
	}
	sbSock := nbtest.ServeSB(t, gw("gw1"), gw("gw2"), &sbmodel.Chassis{Name: "hv1", Hostname: "hv1"})
	nbtest.BindPorts(t, sbSock, "chassisredirect", map[string]string{redirect("ra"): "gw1", redirect("rb"): "gw2"})
	d := databases{nb: ovn.Endpoint{Address: "unix:" + nbtest.Serve(t)}, sb: ovn.Endpoint{Address: "unix:" + sbSock}}

	var b strings.Builder
	b.WriteString(`kind: NetworkAttachmentDefinition
apiVersion: k8s.cni.cncf.io/v1
metadata: {name: public, namespace: default, annotations: {network-config: '{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1"}'}}
`)
	for i, r := range []string{"ra", "rb", "rc", "rd"} {
		pin := ""
		if r == "ra" {
			pin = "\n  gateway: gw1"
		}
		fmt.Fprintf(&b, `---
kind: VirtualRouter
apiVersion: kubevirt.io/v1
metadata: {name: %s}
spec:
  enableSnat: true
  external: {ip: 172.16.0.%d, network: public}
  peerRouter: {ip: 172.16.0.1, mac: "00:00:00:00:ee:01"}%s
`, r, 10+i, pin)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "routers.yaml"), []byte(b.String()), 0o644))
	report, err := syncer.Run(context.Background(), syncer.Options{
		Paths: []string{dir}, Targets: []syncer.Target{{NB: d.nb, SB: d.sb}}, Instance: instance, Log: logr.Discard()})
	require.NoError(t, err)
	require.Empty(t, report.Failures)
	return d
}

func redirect(router string) string { return "cr-" + translator.GatewayPortName(router) }

func (d databases) read(t *testing.T) *State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Read(ctx, d.nb, d.sb, instance, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func orders(s *State) map[string][]string {
	out := map[string][]string{}
	for _, a := range s.Routers {
		out[a.Router] = a.Order
	}
	return out
}

func loads(s *State) map[string][2]int {
	out := map[string][2]int{}
	for _, l := range s.Loads() {
		out[l.Name] = [2]int{l.Primaries, l.Active}
	}
	return out
}

// Read gives each router's gateway order as the NB holds it (pinned or
// not), its SNAT IP, the SB's chassis and where each gateway port is
// bound; Loads count the primaries and bound ports per gateway chassis.
func TestRead(t *testing.T) {
	s := newDatabases(t).read(t)
	require.Len(t, s.Routers, 4)
	var names []string
	for _, a := range s.Routers {
		names = append(names, a.Router)
		assert.Equal(t, "physnet1", a.Physnet, a.Router)
		assert.Equal(t, a.Router == "ra", a.Pinned, a.Router)
		assert.ElementsMatch(t, []string{"gw1", "gw2"}, a.Order, a.Router)
	}
	assert.Equal(t, []string{"ra", "rb", "rc", "rd"}, names, "sorted by router")
	assert.Equal(t, "gw1", s.Routers[0].Order[0], "ra's pin")
	assert.Equal(t, map[string]string{"ra": "172.16.0.10", "rb": "172.16.0.11", "rc": "172.16.0.12", "rd": "172.16.0.13"}, s.SNATIP)
	var chassis []string
	for _, c := range s.Chassis {
		chassis = append(chassis, c.Name)
	}
	assert.Equal(t, []string{"gw1", "gw2", "hv1"}, chassis)
	assert.Equal(t, map[string]string{"ra": "gw1", "rb": "gw2"}, s.Active)

	primaries := map[string]int{}
	for _, a := range s.Routers {
		primaries[a.Order[0]]++
	}
	assert.Equal(t, map[string][2]int{"gw1": {primaries["gw1"], 1}, "gw2": {primaries["gw2"], 1}}, loads(s), "gateway chassis only")
}

// Move commits a router's new order; with every primary on gw1,
// Rebalance moves the unpinned routers, first by name, until gw1 and gw2
// serve two each, and then finds nothing to move.
func TestMoveAndRebalance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := newDatabases(t)
	s := d.read(t)
	for _, r := range []string{"rb", "rc", "rd"} {
		require.NoError(t, s.Move(ctx, translator.Move{Router: r, To: "gw1", Order: []string{"gw1", "gw2"}}))
	}
	s = d.read(t)
	assert.Equal(t, map[string][]string{"ra": {"gw1", "gw2"}, "rb": {"gw1", "gw2"}, "rc": {"gw1", "gw2"}, "rd": {"gw1", "gw2"}}, orders(s))
	assert.Equal(t, map[string][2]int{"gw1": {4, 1}, "gw2": {0, 1}}, loads(s))

	moves := s.Rebalance()
	assert.Equal(t, []translator.Move{
		{Router: "rb", From: "gw1", To: "gw2", Order: []string{"gw2", "gw1"}},
		{Router: "rc", From: "gw1", To: "gw2", Order: []string{"gw2", "gw1"}},
	}, moves)
	for _, m := range moves {
		require.NoError(t, s.Move(ctx, m))
	}
	s = d.read(t)
	assert.Equal(t, map[string][]string{"ra": {"gw1", "gw2"}, "rb": {"gw2", "gw1"}, "rc": {"gw2", "gw1"}, "rd": {"gw1", "gw2"}}, orders(s))
	assert.Equal(t, map[string][2]int{"gw1": {2, 1}, "gw2": {2, 1}}, loads(s))
	assert.Empty(t, s.Rebalance(), "balanced")
}

// A router the NB holds no gateway port of cannot move.
func TestMoveOfAnUnknownRouterFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newDatabases(t).read(t)
	err := s.Move(ctx, translator.Move{Router: "nope", To: "gw1", Order: []string{"gw1"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "VirtualRouter nope: ")
}

// notes collects what FinishMoves says.
type notes struct {
	mu  sync.Mutex
	all []string
}

func (n *notes) note(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.all = append(n.all, s)
}

// FinishMoves finishes the committed moves only: a failed one is not
// waited for (rc's port is bound nowhere) nor counted.
func TestFinishMovesLeavesTheFailedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newDatabases(t).read(t)
	moves := []translator.Move{{Router: "rb", From: "gw1", To: "gw2"}, {Router: "rc", From: "gw1", To: "gw2"}}
	var n notes
	s.FinishMoves(ctx, moves, []string{"rc"}, n.note)
	require.Len(t, n.all, 1)
	assert.Contains(t, n.all[0], "after 1 gateway moves", "rb's only")
	assert.NotContains(t, n.all[0], "not bound", "rb's port is bound on gw2")

	n = notes{}
	s.FinishMoves(ctx, moves, []string{"rb", "rc"}, n.note)
	assert.Empty(t, n.all, "nothing moved: nothing said")
}
