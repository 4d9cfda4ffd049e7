package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

func sgVMFile(groups string) string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-sg
  namespace: default
  annotations:
    securityGroups: '%s'
spec:
  networks:
    - name: eth1
      multus:
        networkName: net-1-0
status:
  interfaces:
    - name: eth1
      mac: "52:54:00:aa:00:01"
      ipAddress: 10.1.0.50
`, groups)
}

func sgFile(port int) string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-web}
spec: {id: sg-web, name: web}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web}
spec: {id: web-in, securityGroupId: sg-web, direction: ingress, protocol: tcp, portRangeMin: %d, portRangeMax: %d}
`, port, port)
}

// TestFileSecurityGroup: a group read from manifest files is its
// Port_Group with the bound VM's port and its ACLs; a rule edit
// reconciles that group only and updates its ACL in place; the VM's
// annotation dropping the group takes its port out of the Port_Group.
func TestFileSecurityGroup(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("public.yaml", incPublic)
	write("r1.yaml", incRouterFile(1, "172.16.1.11", 0))
	write("vm.yaml", sgVMFile(`["sg-web"]`))
	write("sg.yaml", sgFile(80))

	nbc, ctx, take, idle := startFileController(t, dir)

	pgName := tr.PortGroupName("sg-web")
	port := tr.VMPortName("net-1-0", "default", "vm-sg", "eth1")
	group := func() *nbmodel.PortGroup {
		var rows []*nbmodel.PortGroup
		require.NoError(t, nbc.List(ctx, &rows))
		for _, p := range rows {
			if p.Name == pgName {
				return p
			}
		}
		return nil
	}
	portUUID := func() string {
		var rows []*nbmodel.LogicalSwitchPort
		require.NoError(t, nbc.List(ctx, &rows))
		for _, p := range rows {
			if p.Name == port {
				return p.UUID
			}
		}
		return ""
	}
	ruleACL := func() *nbmodel.ACL {
		var rows []*nbmodel.ACL
		require.NoError(t, nbc.List(ctx, &rows))
		for _, a := range rows {
			if a.ExternalIDs[tr.KeySecurityACL] == tr.ACLKeyRule("web-in") {
				return a
			}
		}
		return nil
	}
	require.Eventually(t, func() bool {
		g := group()
		return g != nil && len(g.Ports) == 1 && g.Ports[0] == portUUID() && ruleACL() != nil && idle()
	}, 60*time.Second, 10*time.Millisecond)
	first := ruleACL()
	assert.Equal(t, "outport == @"+pgName+" && ip4 && tcp && tcp.dst == 80", first.Match)
	assert.Len(t, group().ACLs, 5)
	take()

	write("sg.yaml", sgFile(443))
	require.Eventually(t, func() bool { a := ruleACL(); return a != nil && strings.HasSuffix(a.Match, "tcp.dst == 443") && idle() }, 60*time.Second, 10*time.Millisecond)
	assert.Equal(t, first.UUID, ruleACL().UUID, "updated in place")
	got := take()
	assert.Contains(t, got, tr.Unit{Kind: tr.KindSecurityGroup, Name: "sg-web"})
	assert.NotContains(t, got, tr.Unit{Kind: tr.KindRouter, Name: "r1"}, "only its group is reconciled")

	write("vm.yaml", sgVMFile(`[]`))
	require.Eventually(t, func() bool { g := group(); return g != nil && len(g.Ports) == 0 && idle() }, 60*time.Second, 10*time.Millisecond)
	assert.NotEmpty(t, portUUID(), "the port stays")
}

// sgStatuses records the security groups' reported states.
type sgStatuses struct{ got []SecurityGroupStatus }

func (s *sgStatuses) Prepare(context.Context, string) error                              { return nil }
func (s *sgStatuses) Report(context.Context, string, RouterStatus) error                 { return nil }
func (s *sgStatuses) Removed(context.Context, string) error                              { return nil }
func (s *sgStatuses) ReportFloatingIPs(context.Context, []tr.FloatingIPStatus) error     { return nil }
func (s *sgStatuses) ReportLoadBalancers(context.Context, []tr.LoadBalancerStatus) error { return nil }
func (s *sgStatuses) ReportSecurityGroup(_ context.Context, st SecurityGroupStatus) error {
	s.got = append(s.got, st)
	return nil
}

// A security group reconciled before its new members' ports exist (two
// workers reconciling the group and the ports' network at once) waits for
// them, its status untouched: no failure, no CommitFailed flapping on
// every VM added. The NB announcing a port it waits for reconciles it
// again; a port that does not come fails it after awaitTries waits, and
// its status says which; once the ports are there its Port_Group holds
// them.
func TestSecurityGroupWaitsForItsNewMemberPorts(t *testing.T) {
	s := example()
	vm := func(name, network, mac, ip string) tr.VMInterface {
		return tr.VMInterface{Namespace: "default", VMI: name, Interface: "eth1", Network: network, NetworkNamespace: "default", MAC: mac, IP: ip, SecurityGroups: "sg-web"}
	}
	s.VMs = []tr.VMInterface{vm("vm-a", "net-a", "50:54:00:00:00:05", "10.10.0.5"), vm("vm-b", "net-b", "50:54:00:00:00:06", "10.20.0.6")}
	s.SecurityGroups = []tr.SecurityGroup{{Name: "sg-web", ID: "sg-web"}}
	nbc := ctrlNB(t)
	status := &sgStatuses{}
	c := New(nbc, nil, staticSource{s}, status, Options{Instance: instance, Log: logr.Discard(), Metrics: NewMetrics(nil, instance)})
	t.Cleanup(c.queue.ShutDown)
	c.watchNB()
	ctx := context.Background()
	group := tr.Unit{Kind: tr.KindSecurityGroup, Name: "sg-web"}
	portA, portB := tr.VMPortName("net-a", "default", "vm-a", "eth1"), tr.VMPortName("net-b", "default", "vm-b", "eth1")

	var w *awaitError
	require.ErrorAs(t, reconcileOne(ctx, c, group), &w, "waiting, not failed")
	assert.Equal(t, portA, w.Key)
	assert.Empty(t, status.got, "no status while it waits")
	assert.Zero(t, testutil.ToFloat64(c.opts.Metrics.reconcileErr.WithLabelValues(string(tr.KindSecurityGroup))))

	require.NoError(t, reconcileOne(ctx, c, netA))
	require.Eventually(t, func() bool { return slices.Contains(drain(c), group) }, 10*time.Second, 10*time.Millisecond,
		"the port's insertion brings the group back")
	require.ErrorAs(t, reconcileOne(ctx, c, group), &w)
	assert.Equal(t, portB, w.Key)

	// net-b's port does not come: after awaitTries waits, a failure its
	// status says.
	for c.queue.NumRequeues(group) < awaitTries {
		c.queue.AddRateLimited(group)
	}
	err := reconcileOne(ctx, c, group)
	require.Error(t, err)
	assert.False(t, errors.As(err, &w), "failed, not waiting: %v", err)
	require.Len(t, status.got, 1)
	assert.ErrorContains(t, status.got[0].Err, portB)

	// Its retries with backoff may come long after the port (its backoff
	// grows with every failure while net-b waits, say, for the
	// allocator's keys: in the interconnect soak 41 s, or not within 2
	// minutes). The port's arrival brings it back at once: checked on a
	// queue without those retries, where nothing else can.
	c.queue.ShutDown()
	c.queue = newUnitQueue("units")
	t.Cleanup(c.queue.ShutDown)
	takeGroup := func() bool {
		for c.queue.Len() > 0 {
			u, _ := c.queue.Get()
			c.queue.Done(u)
			if u == group {
				return true
			}
		}
		return false
	}
	require.NoError(t, reconcileOne(ctx, c, netB))
	require.Eventually(t, takeGroup, 10*time.Second, 10*time.Millisecond, "the port's insertion brings the failed group back")
	require.NoError(t, reconcileOne(ctx, c, group))
	require.Len(t, status.got, 2)
	assert.NoError(t, status.got[1].Err)
	assert.Empty(t, c.awaiting, "a unit that no longer waits leaves nothing behind")
	assert.Empty(t, c.awaits)
	var pgs []*nbmodel.PortGroup
	require.NoError(t, nbc.List(ctx, &pgs))
	require.Len(t, pgs, 1)
	assert.Len(t, pgs[0].Ports, 2)
}
