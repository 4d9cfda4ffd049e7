package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// condition is the router's status condition of type typ, nil if none.
func condition(st map[string]any, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(st, "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// A collision on a router's network is its TunnelKeys condition, False
// with the collision's line, and a Warning Event; it turns True when the
// last zone's collision clears, and a router that never collided gets no
// condition.
func TestTunnelKeysCondition(t *testing.T) {
	s, client, rec := startSource(t, router("r1"), router("r2"))
	ctx := context.Background()
	m := translator.KeyMismatch{Zone: "hv1", KeyRequest: translator.KeyRequest{Network: "net-a", Switch: "kv-net-a", Key: 16711680}, Actual: 4, Holder: "other"}

	require.NoError(t, s.TunnelKeys(ctx, "r2", "hv1", nil))
	assert.Nil(t, condition(status(t, client, "r2"), ConditionTunnelKeys))

	require.NoError(t, s.TunnelKeys(ctx, "r1", "hv1", []translator.KeyMismatch{m}))
	c := condition(status(t, client, "r1"), ConditionTunnelKeys)
	require.NotNil(t, c)
	assert.Equal(t, "False", c["status"])
	assert.Equal(t, ReasonTunnelKeyCollision, c["reason"])
	assert.Equal(t, m.String(), c["message"])
	assert.Equal(t, "Warning TunnelKeyCollision "+m.String(), <-rec.Events)

	// Another zone without a collision leaves it False.
	waitCondition(t, s, "r1", "False")
	require.NoError(t, s.TunnelKeys(ctx, "r1", "hv2", nil))
	assert.Equal(t, "False", condition(status(t, client, "r1"), ConditionTunnelKeys)["status"])

	require.NoError(t, s.TunnelKeys(ctx, "r1", "hv1", nil))
	c = condition(status(t, client, "r1"), ConditionTunnelKeys)
	assert.Equal(t, "True", c["status"])
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}

	// It collides again, then a second collision joins: an Event each.
	waitCondition(t, s, "r1", "True")
	require.NoError(t, s.TunnelKeys(ctx, "r1", "hv1", []translator.KeyMismatch{m}))
	assert.Equal(t, "Warning TunnelKeyCollision "+m.String(), nextEvent(t, rec))
	waitCondition(t, s, "r1", "False")
	m2 := m
	m2.Zone = "hv2"
	require.NoError(t, s.TunnelKeys(ctx, "r1", "hv2", []translator.KeyMismatch{m2}))
	assert.Equal(t, m.String()+"\n"+m2.String(), condition(status(t, client, "r1"), ConditionTunnelKeys)["message"])
	assert.Equal(t, "Warning TunnelKeyCollision "+m2.String(), nextEvent(t, rec))
}

// nextEvent is the next event recorded, "" after 5 s without one.
func nextEvent(t *testing.T, rec *record.FakeRecorder) string {
	t.Helper()
	select {
	case e := <-rec.Events:
		return e
	case <-time.After(5 * time.Second):
		t.Error("no Event")
		return ""
	}
}

// waitCondition waits until the informer's copy of router has its
// TunnelKeys condition with status.
func waitCondition(t *testing.T, s *Source, router, status string) {
	t.Helper()
	require.Eventually(t, func() bool {
		u, _ := s.current(router)
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		c := condition(st, ConditionTunnelKeys)
		return c != nil && c["status"] == status
	}, settle, 10*time.Millisecond)
}
