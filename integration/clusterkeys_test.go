package integration

import (
	"context"
	"fmt"
	"path/filepath"
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

// collisionEvents are the messages of the TunnelKeyCollision Events the
// allocator recorded on VirtualRouter name, read from its log: the test's
// API server (apiextensions-apiserver) serves no core/v1, and klog prints
// each Event it rejects in full.
func collisionEvents(allocator *controllerProc, name string) []string {
	var out []string
	for _, line := range strings.Split(allocator.out.String(), "\n") {
		if !strings.Contains(line, "InvolvedObject:ObjectReference{Kind:VirtualRouter,Namespace:,Name:"+name+",") {
			continue
		}
		_, msg, ok := strings.Cut(line, "Reason:"+kube.ReasonTunnelKeyCollision+",Message:")
		if !ok || !strings.Contains(line, "Type:Warning") {
			continue
		}
		msg, _, _ = strings.Cut(msg, ",Source:EventSource{")
		out = append(out, msg)
	}
	return out
}

// TestInterconnectClusterKeyCollision: in the cluster roles, a tunnel key
// collision in zone hv1 (another datapath holds the key kv-net-a requests,
// and vm-a's port has another key than its own, written in hv1's SB as
// ovn-northd writes a collision, ovn-northd paused so that it does not
// undo them) is published by hv1's agent in its OVNZone, and the
// allocator reports it on router1, attached to net-a: its TunnelKeys
// condition turns False naming both, with a Warning Event each (read from
// the allocator's log: the test's API server has no Events). Once the
// other datapath is gone and ovn-northd gives the keys back, the OVNZone
// lists none and the condition turns True, with no other Event.
func TestInterconnectClusterKeyCollision(t *testing.T) {
	e := newZoneEnv(t)
	hv1 := e.z.Zone("hv1")
	nbctl(t, hv1, "--wait=sb", "ls-add", foreignSwitch)
	k := startKubeAPI(t)
	allocator := startInterconnect(t, e, k)["allocator"]
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(e.manifests, f))
	}
	requested := func(table, row, column string) string {
		return strings.Trim(strings.TrimSpace(nbctl(t, hv1, "--if-exists", "get", table, row, column+":requested-tnl-key")), `"`)
	}
	var key, portKey string
	waitNB(t, "kv-net-a and vm-a's port bound in zone hv1 with the keys they request", func() bool {
		key, portKey = requested("Logical_Switch", keySwitch, "other_config"), requested("Logical_Switch_Port", keyPort, "options")
		return key != "" && portKey != "" && sbKey(t, hv1.Central, keySwitch) == key &&
			strings.TrimSpace(sbctl(t, hv1, "--bare", "--columns=tunnel_key", "find", "Port_Binding", "logical_port="+keyPort)) == portKey
	})
	k.waitStatus(t, "router1", "router1 Ready (allocated)", func(u *unstructured.Unstructured) bool {
		r := condition(u, "Ready")
		return r != nil && r["status"] == "True" && r["reason"] == "Allocated"
	})
	assert.Nil(t, condition(k.router(t, "router1"), kube.ConditionTunnelKeys), "no collision, no condition")

	// The collisions, as ovn-northd writes them: the other datapath holds
	// our key, ours has its key; our port has another key.
	northd(t, hv1.Central, "pause")
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			northd(t, hv1.Central, "resume")
		}
	})
	actual := sbKey(t, hv1.Central, foreignSwitch)
	require.NotEqual(t, "100", portKey)
	uuid := func(name string) string {
		return strings.TrimSpace(sbctl(t, hv1, "--bare", "--columns=_uuid", "find", "Datapath_Binding", "external_ids:name="+name))
	}
	sbctl(t, hv1, "set", "Datapath_Binding", uuid(keySwitch), "tunnel_key="+actual, "--", "set", "Datapath_Binding", uuid(foreignSwitch), "tunnel_key="+key,
		"--", "set", "Port_Binding", keyPort, "tunnel_key=100")
	swLine := fmt.Sprintf("zone hv1: switch %s of network net-a requests tunnel key %s but the SB gave it %s: another datapath (%s) in zone hv1 requests the same key", keySwitch, key, actual, foreignSwitch)
	portLine := fmt.Sprintf("zone hv1: port %s of switch %s (network net-a) requests tunnel key %s but the SB gave it 100", keyPort, keySwitch, portKey)
	vr := k.waitStatus(t, "router1", "router1's TunnelKeys condition False naming both collisions", func(u *unstructured.Unstructured) bool {
		c := condition(u, kube.ConditionTunnelKeys)
		if c == nil || c["status"] != "False" {
			return false
		}
		msg, _ := c["message"].(string)
		return strings.Contains(msg, swLine) && strings.Contains(msg, portLine)
	})
	c := condition(vr, kube.ConditionTunnelKeys)
	assert.Equal(t, kube.ReasonTunnelKeyCollision, c["reason"])
	assert.Len(t, strings.Split(c["message"].(string), "\n"), 2, "one line per collision")
	zone, err := k.dyn.Resource(kube.ZoneGVR).Namespace(icNamespace).Get(context.Background(), "zone-hv1", metav1.GetOptions{})
	require.NoError(t, err)
	published, _, _ := unstructured.NestedSlice(zone.Object, "spec", "keyCollisions")
	assert.Len(t, published, 2, "hv1's OVNZone lists both collisions: %v", published)
	var evs []string
	require.NoError(t, sandbox.Poll(30*time.Second, "a TunnelKeyCollision Event per collision on router1", func() (bool, error) {
		evs = collisionEvents(allocator, "router1")
		return len(evs) >= 2, nil
	}), "events: %q", evs)
	assert.Len(t, evs, 2, "%q", evs)
	for _, line := range []string{swLine, portLine} {
		assert.True(t, strings.Contains(strings.Join(evs, "\n"), line), "an Event says %q: %q", line, evs)
	}

	// The other datapath gone, ovn-northd gives the keys back.
	nbctl(t, hv1, "ls-del", foreignSwitch)
	northd(t, hv1.Central, "resume")
	resumed = true
	nbctl(t, hv1, "--timeout=30", "--wait=sb", "sync")
	k.waitStatus(t, "router1", "router1's TunnelKeys condition True", func(u *unstructured.Unstructured) bool {
		c := condition(u, kube.ConditionTunnelKeys)
		return c != nil && c["status"] == "True"
	})
	assert.Equal(t, key, sbKey(t, hv1.Central, keySwitch))
	require.NoError(t, sandbox.Poll(30*time.Second, "hv1's OVNZone lists no collision", func() (bool, error) {
		zone, err := k.dyn.Resource(kube.ZoneGVR).Namespace(icNamespace).Get(context.Background(), "zone-hv1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		published, _, _ = unstructured.NestedSlice(zone.Object, "spec", "keyCollisions")
		return len(published) == 0, nil
	}))
	assert.Len(t, collisionEvents(allocator, "router1"), 2, "no Event when the collisions clear")
}
