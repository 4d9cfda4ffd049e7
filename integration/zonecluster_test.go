package integration

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// icNamespace is kubevirt-ovn's namespace in the cluster tests.
const icNamespace = "kubevirt-ovn"

// startInterconnect runs, against the Kubernetes API k, the allocator and
// one agent per zone of e, as deploy/interconnect does in a cluster.
func startInterconnect(t *testing.T, e *zoneEnv, k *kubeAPI) map[string]*controllerProc {
	t.Helper()
	k.installCRDs(t, []string{filepath.Join("..", "deploy", "interconnect", "crd-interconnect.yaml")})
	procs := map[string]*controllerProc{}
	procs["allocator"] = startController(t, "allocator", "--interconnect", "--kubeconfig", k.kubeconfig, "--namespace", icNamespace)
	for _, zdb := range e.z.List() {
		procs[zdb.Name] = startController(t, "agent-"+zdb.Name, "--zone-nb", zdb.NBTCP, "--zone-sb", zdb.SBTCP,
			"--kubeconfig", k.kubeconfig, "--namespace", icNamespace, "--leader-elect=false")
	}
	return procs
}

// allocations are the OVNAllocations by name.
func (k *kubeAPI) allocations(t *testing.T) map[string]map[string]any {
	t.Helper()
	list, err := k.dyn.Resource(kube.AllocationGVR).Namespace(icNamespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for _, u := range list.Items {
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		out[u.GetName()] = spec
	}
	return out
}

// TestInterconnectClusterAllocatorAndAgents: the cluster roles on the four
// zones, no central NB: the allocator schedules and allocates from the
// Kubernetes objects and the zones the agents publish; each agent writes
// its own zone's NB. vm-a (zone hv1) reaches the outside SNATed on gw1,
// and its reply comes back. A file-mode sync over every zone from the same
// manifests afterwards writes nothing: both modes agree on every row and
// tunnel key. kv-net-a deleted in zone hv1 as ovn-kubernetes' syncNodes
// deletes a stale node's switch comes back, as it was, from hv1's agent.
func TestInterconnectClusterAllocatorAndAgents(t *testing.T) {
	e := newZoneEnv(t)
	k := startKubeAPI(t)
	startInterconnect(t, e, k)
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(e.manifests, f))
	}
	waitNB(t, "router1 in zone gw1, its remote port in zone hv1", func() bool {
		return e.owned("Logical_Router")["gw1"] == "kv-router1" &&
			strings.Contains(e.owned("Logical_Switch_Port")["hv1"], "kv-stor-net-a_router1")
	})
	vr := k.waitStatus(t, "router1", "router1 Ready (allocated)", func(u *unstructured.Unstructured) bool {
		r := condition(u, "Ready")
		return r != nil && r["status"] == "True" && r["reason"] == "Allocated"
	})
	primary, _, _ := unstructured.NestedString(vr.Object, "status", "gateway", "primary")
	assert.Equal(t, "gw1", primary)
	assert.Empty(t, vr.GetFinalizers(), "the allocator sets no finalizer")
	allocs := k.allocations(t)
	assert.Contains(t, allocs, "virtualrouter-router1")
	assert.Contains(t, allocs, "network-net-a")
	// router1 needs only zones gw1, hv1 and hv2: it can be allocated
	// before gw2's agent has published its zone. Every agent publishes.
	var published int
	require.NoError(t, sandbox.Poll(90*time.Second, "every agent published its zone", func() (bool, error) {
		zones, err := k.dyn.Resource(kube.ZoneGVR).Namespace(icNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		published = len(zones.Items)
		return published >= 4, nil
	}))
	assert.Equal(t, 4, published, "every agent published its zone, once")

	e.ready("gw1")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40101, 5101)
	got := waitFor(t, e.wire("gw1"), "vm-a's UDP (zone hv1) leaving SNATed on gw1", 0, snated(5101))
	assert.GreaterOrEqual(t, got.SPort, uint16(1025))
	e.unSNATed("gw1", got, vmA, 40101, vmB)

	// ovn-kubernetes deletes kv-net-a in zone hv1 as a stale node's
	// switch: hv1's agent puts it back from its monitor, a new row with
	// the same ports and tunnel keys, and vm-a's traffic flows again.
	old := e.switchUUID("hv1", "kv-net-a")
	before, deleted := e.deleteAsStaleNode("hv1", "kv-net-a")
	var back time.Duration
	waitNB(t, "kv-net-a back in zone hv1 as it was", func() bool {
		if maps.Equal(before, e.switchKeys("hv1", "kv-net-a")) {
			back = time.Since(deleted)
		}
		return back > 0
	})
	report(t, fmt.Sprintf("interconnect in a cluster: kv-net-a deleted in zone hv1 as ovn-kubernetes' syncNodes deletes a stale node's switch -> the zone's agent recreated its rows (%d, same tunnel keys) after %s",
		len(before), back.Round(time.Millisecond)))
	assert.NotEqual(t, old, e.switchUUID("hv1", "kv-net-a"), "kv-net-a is a new row")
	// The NB rows are back; hv1's ovn-controller binds the new switch's
	// ports a moment later: probe (each its own flow) until one crosses.
	dport := uint16(5102)
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-a's UDP leaving SNATed on gw1 after kv-net-a came back", func() (bool, error) {
		dport++
		e.send("hv1", "vm-a", vmAMAC, vmAIP, 40102, dport)
		ps, err := e.z.Capture("gw1", sandbox.ExternalPort)
		return slices.ContainsFunc(ps, func(s seen) bool { return s.DPort > 5102 && s.DPort <= dport && snated(s.DPort)(s) }), err
	}))
	e.converged()
}

// TestInterconnectClusterGatewayGone: an unpinned router in the cluster
// roles; its gateway's node goes (chassis killed and removed from every
// SB): its zone's agent publishes the zone without it, the allocator
// moves the router to the other gateway, whose agent creates it; traffic
// flows again. The outage is printed.
func TestInterconnectClusterGatewayGone(t *testing.T) {
	e := newZoneEnv(t)
	e.edit("router.yaml", "  gateway: gw1\n", "")
	k := startKubeAPI(t)
	startInterconnect(t, e, k)
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(e.manifests, f))
	}
	var home string
	waitNB(t, "router1 in a gateway's zone", func() bool {
		for zone, lr := range e.owned("Logical_Router") {
			if lr == "kv-router1" {
				home = zone
			}
		}
		return home != ""
	})
	other := map[string]string{"gw1": "gw2", "gw2": "gw1"}[home]
	require.NotEmpty(t, other)
	e.ready(home)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40110, 5110)
	waitFor(t, e.wire(home), "vm-a's UDP leaving SNATed via "+home, 0, snated(5110))

	_, err := e.z.KillChassis(home)
	require.NoError(t, err)
	gone := time.Now()
	require.NoError(t, e.z.RemoveChassis(home))
	var moved time.Duration
	require.NoError(t, sandbox.Poll(90*time.Second, "vm-a's UDP leaving SNATed via "+other, func() (bool, error) {
		e.send("hv1", "vm-a", vmAMAC, vmAIP, 40111, 5111)
		ps, err := e.z.Capture(other, sandbox.ExternalPort)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if snated(5111)(p) {
				moved = time.Since(gone)
				return true, nil
			}
		}
		return false, nil
	}))
	report(t, fmt.Sprintf("interconnect in a cluster (allocator + agents): gateway %s's node gone -> router1 in zone %s, first SNATed packet there after %s", home, other, moved.Round(time.Millisecond)))
	assert.Equal(t, "", e.owned("Logical_Router")[home])
	k.waitStatus(t, "router1", "router1's primary is "+other, func(u *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedString(u.Object, "status", "gateway", "primary")
		return p == other
	})
	e.converged()
}
