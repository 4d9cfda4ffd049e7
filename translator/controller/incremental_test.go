package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

const incPublic = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: public
  namespace: default
  annotations:
    network-config: '{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/16", "gatewayIp": "172.16.0.1"}'
`

// incRouterFile is router r<i> with its two internal networks and one VM
// on each (vms adds VMs on the first), in one manifest file.
func incRouterFile(i int, snatIP string, vms int) string {
	var docs []string
	for k := 0; k < 2; k++ {
		net := fmt.Sprintf("net-%d-%d", i, k)
		docs = append(docs, fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "cidr": "10.%d.%d.0/24", "gatewayIp": "10.%d.%d.1"}'
`, net, i, k, i, k))
		n := 1
		if k == 0 {
			n += vms
		}
		for v := 0; v < n; v++ {
			docs = append(docs, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-%d-%d-%d
  namespace: default
spec:
  networks:
    - name: eth1
      multus:
        networkName: %s
status:
  interfaces:
    - name: eth1
      mac: "52:54:00:%02x:%02x:%02x"
      ipAddress: 10.%d.%d.%d
`, i, k, v, net, i, k, v+10, i, k, v+10))
		}
	}
	docs = append(docs, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: r%d
spec:
  enableSnat: true
  internal: [net-%d-0, net-%d-1]
  external:
    ip: %s
    network: public
  gateway: gw1
`, i, i, i, snatIP))
	return strings.Join(docs, "---\n")
}

// TestOneEditReconcilesOnlyItsUnits: with 40 routers (121 units) in 41
// files, changing one router's SNAT IP reconciles that router only, and
// adding a VM reconciles that VM's network only — not every unit, as a
// reload of the whole input did. It counts the reconciles.
func TestOneEditReconcilesOnlyItsUnits(t *testing.T) {
	const n = 40
	dir := t.TempDir()
	write := func(name, content string) {
		// Written aside and renamed, as a ConfigMap update is: a poll sees
		// the old file or the new one.
		tmp := filepath.Join(dir, "."+name)
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
	}
	write("public.yaml", incPublic)
	snat := func(i int) string { return fmt.Sprintf("172.16.1.%d", i+10) }
	for i := 0; i < n; i++ {
		write(fmt.Sprintf("r%02d.yaml", i), incRouterFile(i, snat(i), 0))
	}
	nbc := ctrlNB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The NB is already right when the controller starts: its first
	// reconcile of each unit writes nothing, so no monitor echo follows.
	set, err := manifest.LoadPaths([]string{dir})
	require.NoError(t, err)
	res, err := nb.Sync(ctx, nbc, tr.Build(set.Objects.Snapshot(), instance), nb.SyncOptions{Instance: instance})
	require.NoError(t, err)
	require.Empty(t, res.Failed())

	files, err := NewFileSource([]string{dir}, logr.Discard(), FileOptions{})
	require.NoError(t, err)
	c := New(nbc, nil, files, nil, Options{Instance: instance, Log: logr.Discard(), Resync: time.Hour})
	var mu sync.Mutex
	var seen []tr.Unit
	c.onReconcile = func(u tr.Unit) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, u)
	}
	take := func() []tr.Unit {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
	distinct := func(us []tr.Unit) []tr.Unit {
		out := slices.Clone(us)
		slices.SortFunc(out, func(a, b tr.Unit) int { return strings.Compare(a.String(), b.String()) })
		return slices.Compact(out)
	}
	idle := func() bool { return c.queue.Len() == 0 && c.active.Load() == 0 }
	go func() { _ = c.Run(ctx) }()
	go files.Watch(ctx, 10*time.Millisecond, c.EnqueueUnits)

	units := 3*n + 1
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(distinct(seen)) == units && idle()
	}, 60*time.Second, 10*time.Millisecond, "every unit reconciled once at start")
	start := take()
	t.Logf("start: %d reconciles of %d units", len(start), units)

	gatewayIP := func(router string) string {
		var rows []*nbmodel.LogicalRouterPort
		require.NoError(t, nbc.List(ctx, &rows))
		for _, p := range rows {
			if p.Name == tr.GatewayPortName(router) && len(p.Networks) > 0 {
				return p.Networks[0]
			}
		}
		return ""
	}
	write("r07.yaml", incRouterFile(7, "172.16.2.7", 0))
	require.Eventually(t, func() bool { return gatewayIP("r7") == "172.16.2.7/16" && idle() }, 60*time.Second, 10*time.Millisecond)
	got := take()
	t.Logf("SNAT IP of r7 changed: %d reconciles: %v", len(got), got)
	assert.Equal(t, []tr.Unit{{Kind: tr.KindRouter, Name: "r7"}}, distinct(got), "only the edited router is reconciled")
	assert.LessOrEqual(t, len(got), 3, "the edit and the echo of its commit")

	vmPort := tr.VMPortName("net-3-0", "default", "vm-3-0-1", "eth1")
	hasPort := func() bool {
		var rows []*nbmodel.LogicalSwitchPort
		require.NoError(t, nbc.List(ctx, &rows))
		return slices.ContainsFunc(rows, func(p *nbmodel.LogicalSwitchPort) bool { return p.Name == vmPort })
	}
	write("r03.yaml", incRouterFile(3, snat(3), 1))
	require.Eventually(t, func() bool { return hasPort() && idle() }, 60*time.Second, 10*time.Millisecond)
	got = take()
	t.Logf("VM added on net-3-0: %d reconciles: %v", len(got), got)
	assert.Equal(t, []tr.Unit{{Kind: tr.KindNetwork, Name: "net-3-0"}}, distinct(got), "only the VM's network is reconciled")
	assert.LessOrEqual(t, len(got), 3)

	// A router's file removed: its router and its networks go, nothing
	// else is reconciled but public, whose switch lost the router's port
	// (the monitor's echo of that commit enqueues the switch's owner).
	require.NoError(t, os.Remove(filepath.Join(dir, "r05.yaml")))
	require.Eventually(t, func() bool { return gatewayIP("r5") == "" && idle() }, 60*time.Second, 10*time.Millisecond)
	got = take()
	t.Logf("r5's file removed: %d reconciles: %v", len(got), got)
	assert.Subset(t, []tr.Unit{{Kind: tr.KindNetwork, Name: "net-5-0"}, {Kind: tr.KindNetwork, Name: "net-5-1"}, {Kind: tr.KindNetwork, Name: "public"}, {Kind: tr.KindRouter, Name: "r5"}}, distinct(got))
	assert.Contains(t, got, tr.Unit{Kind: tr.KindRouter, Name: "r5"})
}
