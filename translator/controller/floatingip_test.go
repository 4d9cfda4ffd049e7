package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

func fipFile(kind, router, fixed string) string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: %s
metadata:
  name: fip-1
spec:
  id: fip-1
  routerName: %s
  networkName: public
  floatingIp: 172.16.9.1
  fixedIp: %s
`, kind, router, fixed)
}

// TestFileFloatingIP: a floating IP read from a manifest file is the NAT
// row of its router; an edit moving it to another VM reconciles its router
// only and updates the row in place; its file removed, the row goes.
func TestFileFloatingIP(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("public.yaml", incPublic)
	write("r1.yaml", incRouterFile(1, "172.16.1.11", 1))
	write("r2.yaml", incRouterFile(2, "172.16.1.12", 0))
	write("fip.yaml", fipFile("FloatingIp", "r1", "10.1.0.10"))

	nbc, ctx, take, idle := startFileController(t, dir)

	dnat := func() *nbmodel.NAT {
		var rows []*nbmodel.NAT
		require.NoError(t, nbc.List(ctx, &rows))
		for _, n := range rows {
			if n.Type == nbmodel.NATTypeDNATAndSNAT {
				return n
			}
		}
		return nil
	}
	require.Eventually(t, func() bool { n := dnat(); return n != nil && n.LogicalIP == "10.1.0.10" && idle() }, 60*time.Second, 10*time.Millisecond)
	first := dnat()
	assert.Equal(t, "172.16.9.1", first.ExternalIP)
	assert.Equal(t, "fip-1", first.ExternalIDs[tr.KeyFloatingIP])
	assert.Equal(t, "r1", first.ExternalIDs[tr.KeyOwner])
	take()

	write("fip.yaml", fipFile("FloatingIP", "r1", "10.1.0.11"))
	require.Eventually(t, func() bool { n := dnat(); return n != nil && n.LogicalIP == "10.1.0.11" && idle() }, 60*time.Second, 10*time.Millisecond)
	assert.Equal(t, first.UUID, dnat().UUID, "moved in place")
	// (A late echo of the start may reconcile a network too.)
	got := take()
	assert.Contains(t, got, tr.Unit{Kind: tr.KindRouter, Name: "r1"})
	assert.NotContains(t, got, tr.Unit{Kind: tr.KindRouter, Name: "r2"}, "only its router is reconciled")

	require.NoError(t, os.Remove(filepath.Join(dir, "fip.yaml")))
	require.Eventually(t, func() bool { return dnat() == nil && idle() }, 60*time.Second, 10*time.Millisecond)
	assert.NotContains(t, take(), tr.Unit{Kind: tr.KindRouter, Name: "r2"})
}
