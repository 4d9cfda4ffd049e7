package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestAdd_LoadBalancer: ONOS's LoadBalancer as its users wrote it (NOTES
// §7.1), ports as numbers or strings; a file with one is read by the
// general path (the fast one declines it) together with its other objects.
func TestAdd_LoadBalancer(t *testing.T) {
	doc := `apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: lb-web, generation: 2}
spec:
  name: lb-web
  description: web tier
  networkId: net-a
  vip: 10.10.0.100
  members: [10.10.0.5, 10.10.0.6]
  rules:
  - {protocol: tcp, portRangeMin: 80, portRangeMax: 80}
  - {protocol: udp, portRangeMin: "53"}
  - {protocol: icmp}
  healthCheck: {sourceIp: 10.10.0.250, interval: 2, failureCount: "2"}
---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: fip-lb-web}
spec: {id: fip-lb-web, routerName: router1, networkName: public, floatingIp: 172.16.0.60, fixedIp: 10.10.0.100}
`
	s := &Set{}
	require.NoError(t, s.Add("lb.yaml", []byte(doc)))
	require.Len(t, s.Objects.LoadBalancers, 1)
	assert.Equal(t, translator.LoadBalancer{Name: "lb-web", ID: "lb-web", Description: "web tier", Network: "net-a", VIP: "10.10.0.100",
		Members: []string{"10.10.0.5", "10.10.0.6"}, Generation: 2,
		Rules:       []translator.LBRule{{Protocol: "tcp", PortMin: 80, PortMax: 80}, {Protocol: "udp", PortMin: 53}, {Protocol: "icmp"}},
		HealthCheck: &translator.LBHealthCheck{SourceIP: "10.10.0.250", Interval: 2, FailureCount: 2}},
		s.Objects.LoadBalancers[0])
	require.Len(t, s.Objects.FloatingIPs, 1, "the file's other objects are read too")
	assert.Empty(t, s.Notes)
}

// TestAdd_LoadBalancerErrors: what fails the load names the object and
// the field.
func TestAdd_LoadBalancerErrors(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"no name": {`{"apiVersion": "kubevirt.io/v1", "kind": "LoadBalancer", "spec": {"networkId": "n"}}`,
			"LoadBalancer (unnamed): metadata.name is empty"},
		"no network": {`{"apiVersion": "kubevirt.io/v1", "kind": "LoadBalancer", "metadata": {"name": "lb"}, "spec": {"vip": "10.0.0.9"}}`,
			"LoadBalancer lb: spec.networkId is required"},
		"health check count not a number": {`{"apiVersion": "kubevirt.io/v1", "kind": "LoadBalancer", "metadata": {"name": "lb"}, "spec": {"networkId": "n", "healthCheck": {"timeout": "soon"}}}`,
			`LoadBalancer lb: spec.healthCheck.timeout "soon" is not a number`},
		"port not a number": {`{"apiVersion": "kubevirt.io/v1", "kind": "LoadBalancer", "metadata": {"name": "lb"}, "spec": {"networkId": "n", "rules": [{"protocol": "tcp", "portRangeMin": "http"}]}}`,
			`LoadBalancer lb: spec.rules[0].portRangeMin "http" is not a number`},
	} {
		t.Run(name, func(t *testing.T) {
			err := (&Set{}).Add("lb.yaml", []byte(c.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
