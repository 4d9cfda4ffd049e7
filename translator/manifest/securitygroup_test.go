package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

func ptr(n int) *int { return &n }

// TestAdd_SecurityGroups: ONOS's SecurityGroup (with embedded rules) and
// SecurityGroupRule objects, protocol and ports by name, number or string,
// and the VMI's securityGroups annotation on every multus port.
func TestAdd_SecurityGroups(t *testing.T) {
	doc := `apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-web, generation: 2}
spec:
  id: sg-web
  name: web
  description: web servers
  rules:
  - {id: web-ssh, direction: ingress, protocol: 6, portRangeMin: "22", portRangeMax: 22}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-icmp}
spec: {id: web-icmp, securityGroupId: sg-web, direction: INGRESS, etherType: IPv4, protocol: icmp, portRangeMin: 0, remoteGroupId: sg-db}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-out}
spec: {id: web-out, securityGroupId: sg-web, direction: egress, remoteIpPrefix: 10.0.0.0/8}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-1
  namespace: ns1
  annotations:
    securityGroups: '["sg-web", "sg-db", "sg-web"]'
    interfaces: '[{"network": "net-a", "ipAddress": "10.10.0.5"}]'
spec:
  domain: {devices: {interfaces: [{name: eth1, macAddress: "02:00:00:00:00:05"}]}}
  networks: [{name: eth1, multus: {networkName: net-a}}]
`
	s := &Set{}
	require.NoError(t, s.Add("sg.yaml", []byte(doc)))
	assert.Equal(t, []translator.SecurityGroup{{Name: "sg-web", ID: "sg-web", DisplayName: "web", Description: "web servers", Generation: 2,
		Rules: []translator.SecurityGroupRule{{ID: "web-ssh", SecurityGroupID: "sg-web", Direction: "ingress", Protocol: "6", PortRangeMin: ptr(22), PortRangeMax: ptr(22)}}}},
		s.Objects.SecurityGroups)
	assert.Equal(t, []translator.SecurityGroupRule{
		{Name: "sgr-web-icmp", ID: "web-icmp", SecurityGroupID: "sg-web", Direction: "INGRESS", EtherType: "IPv4", Protocol: "icmp", PortRangeMin: ptr(0), RemoteGroupID: "sg-db"},
		{Name: "sgr-web-out", ID: "web-out", SecurityGroupID: "sg-web", Direction: "egress", RemoteIPPrefix: "10.0.0.0/8"},
	}, s.Objects.SecurityGroupRules)
	require.Len(t, s.Objects.VMs, 1)
	assert.Equal(t, "sg-db,sg-web", s.Objects.VMs[0].SecurityGroups)
	assert.Equal(t, []string{"sg-db", "sg-web"}, s.Objects.VMs[0].Groups())
}

// TestAdd_SecurityGroupErrors: what names a group's unit is required, and
// a port that is no number is refused, each error naming object and field.
func TestAdd_SecurityGroupErrors(t *testing.T) {
	tests := []struct{ name, doc, err string }{
		{"group without id", "apiVersion: kubevirt.io/v1\nkind: SecurityGroup\nmetadata: {name: g}\nspec: {name: web}\n",
			"SecurityGroup g: spec.id is required"},
		{"rule without group", "apiVersion: kubevirt.io/v1\nkind: SecurityGroupRule\nmetadata: {name: r}\nspec: {id: r, direction: ingress}\n",
			"SecurityGroupRule r: spec.securityGroupId is required"},
		{"port not a number", "apiVersion: kubevirt.io/v1\nkind: SecurityGroupRule\nmetadata: {name: r}\nspec: {id: r, securityGroupId: g, portRangeMin: http}\n",
			`SecurityGroupRule r: spec.portRangeMin "http" is not a number`},
		{"embedded port not a number", "apiVersion: kubevirt.io/v1\nkind: SecurityGroup\nmetadata: {name: g}\nspec: {id: g, rules: [{id: a, portRangeMax: x}]}\n",
			`SecurityGroup g: spec.rules[0].portRangeMax "x" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Set{}).Add("f.yaml", []byte(tt.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}

// TestAdd_SecurityGroupsAnnotationInvalid: an annotation that is no JSON
// list binds no group and says so.
func TestAdd_SecurityGroupsAnnotationInvalid(t *testing.T) {
	doc := `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-1, namespace: ns1, annotations: {securityGroups: "sg-web"}}
spec:
  networks: [{name: eth1, multus: {networkName: net-a}}]
status:
  interfaces: [{name: eth1, mac: "02:00:00:00:00:05", ipAddress: 10.10.0.5}]
`
	s := &Set{}
	require.NoError(t, s.Add("vm.yaml", []byte(doc)))
	require.Len(t, s.Objects.VMs, 1)
	assert.Empty(t, s.Objects.VMs[0].SecurityGroups)
	require.Len(t, s.Notes, 1)
	assert.Contains(t, s.Notes[0], "VirtualMachineInstance ns1/vm-1: metadata.annotations[securityGroups] is not a JSON list")
}
