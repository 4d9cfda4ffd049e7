package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
