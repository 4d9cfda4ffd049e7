package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// ctrlLeaseRouters: enough routers that the leader is still busy creating
// them when it loses the Lease, in batches committed ctrlLeaseBatchOps
// operations at a time (a router is about 10).
const (
	ctrlLeaseRouters  = 300
	ctrlLeaseBatchOps = "50"
)

// The leader loses its Lease while it is busy (another identity holds it,
// freshly renewed): from the moment it sees that, it writes nothing more to
// the NB (at most the transactions in flight land), it leaves the Lease to
// the new holder, and it exits non-zero. Its --renew-deadline is long (45s):
// client-go alone would keep it leading, and writing, that long.
func TestCtrlLeaseLostStopsWritingAndExits(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	k := startKubeAPI(t)
	ctrlCreate(t, k, ctrlLeaseRouters)
	p := startController(t, "ctrl-leader", "--nb", c.NBTCP, "--kubeconfig", k.kubeconfig, "--workers", "2",
		"--lease-duration", "60s", "--renew-deadline", "45s", "--retry-period", "500ms", "--resync", "1h", "--batch-ops", ctrlLeaseBatchOps)

	leases := k.dyn.Resource(leaseGVR).Namespace("kube-system")
	holder := func() string {
		l, err := leases.Get(context.Background(), "kubevirt-ovn", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		h, _, _ := unstructured.NestedString(l.Object, "spec", "holderIdentity")
		return h
	}
	require.NoError(t, sandbox.Poll(60*time.Second, "ctrl-leader leading and busy writing", func() (bool, error) {
		return holder() == "ctrl-leader" && ctrlNBCfg(t, c) >= 20, nil
	}))
	requireBatches(t, p)

	// Another replica takes the Lease (as one would after a partition).
	const thief = "ctrl-thief"
	atSteal := 0
	k.takeLease(t, 10*time.Second, "", thief, 60, func() { atSteal = ctrlNBCfg(t, c) })
	stolen := time.Now()

	// The moment the leader says it lost the Lease, and the NB then.
	const lostLine = "lost the Lease to another replica"
	atLoss := -1
	exited := false
	err := sandbox.Poll(20*time.Second, "ctrl-leader noticing it lost the Lease", func() (bool, error) {
		select {
		case <-p.done:
			exited = true
		default:
		}
		if strings.Contains(p.out.String(), lostLine) {
			atLoss = ctrlNBCfg(t, c)
			return true, nil
		}
		return exited, nil
	})
	noticed := time.Since(stolen)
	require.NoError(t, err, "the old leader kept leading: %d NB commits since another replica took the Lease", ctrlNBCfg(t, c)-atSteal)
	require.NotEqual(t, -1, atLoss, "the old leader exited without saying it lost the Lease:\n%s", p.out.String())

	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the old leader is still running 20s after it noticed the loss",
			"%d NB commits since it noticed", ctrlNBCfg(t, c)-atLoss)
	}
	gone := time.Since(stolen)
	after := ctrlNBCfg(t, c)
	t.Logf("Lease taken at nb_cfg %d; loss noticed after %s at nb_cfg %d; exited after %s at nb_cfg %d",
		atSteal, noticed, atLoss, gone, after)
	assert.LessOrEqual(t, after-atLoss, ctrlWorkers+1, "NB commits after the leader noticed the loss: only those in flight may land")
	assert.NotEqual(t, 0, ctrlExitCode(p), "a replica that lost the Lease exits non-zero")
	assert.Contains(t, p.out.String(), "lost the leader election Lease")
	assert.Equal(t, thief, holder(), "the old leader leaves the Lease to its new holder")
	assert.Less(t, after, 2*ctrlLeaseRouters+1, "the test took the Lease before the leader converged")
}

// takeLease gives kubevirt-ovn's Lease to thief for seconds, as another
// replica would take it after a partition, once holder holds it ("" any
// holder), retrying on conflicts with the leader's renewals; before runs
// just before the write.
func (k *kubeAPI) takeLease(t *testing.T, timeout time.Duration, holder, thief string, seconds int64, before func()) {
	t.Helper()
	leases := k.dyn.Resource(leaseGVR).Namespace("kube-system")
	what := "taking the Lease"
	if holder != "" {
		what = holder + " leading, then " + what
	}
	require.NoError(t, sandbox.Poll(timeout, what, func() (bool, error) {
		l, err := leases.Get(context.Background(), "kubevirt-ovn", metav1.GetOptions{})
		if err != nil {
			return false, nil // not created yet
		}
		if h, _, _ := unstructured.NestedString(l.Object, "spec", "holderIdentity"); holder != "" && h != holder {
			return false, nil
		}
		now := metav1.NowMicro().Format(metav1.RFC3339Micro)
		require.NoError(t, unstructured.SetNestedField(l.Object, thief, "spec", "holderIdentity"))
		require.NoError(t, unstructured.SetNestedField(l.Object, now, "spec", "acquireTime"))
		require.NoError(t, unstructured.SetNestedField(l.Object, now, "spec", "renewTime"))
		require.NoError(t, unstructured.SetNestedField(l.Object, seconds, "spec", "leaseDurationSeconds"))
		if before != nil {
			before()
		}
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil // the leader renewed meanwhile
		}
		return err == nil, err
	}))
}
