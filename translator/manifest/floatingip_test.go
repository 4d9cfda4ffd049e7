package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

func TestAdd_FloatingIP(t *testing.T) {
	created := time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)
	full := translator.FloatingIP{Name: "fip-web-1", ID: "fip-web-1", Router: "router1", Network: "public",
		IP: "172.16.0.50", FixedIP: "10.10.0.5", VMName: "vm-web-1", PodName: "pod-1", Created: created}
	tests := []struct {
		name string
		doc  string
		want translator.FloatingIP
	}{
		{
			name: "kind FloatingIp, every field",
			doc: `apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip-web-1
  creationTimestamp: "2024-03-04T05:06:07Z"
spec:
  id: fip-web-1
  routerName: router1
  networkName: public
  floatingIp: 172.16.0.50
  fixedIp: 10.10.0.5
  vmName: vm-web-1
  podName: pod-1
`,
			want: full,
		},
		{
			name: "kind FloatingIP, JSON",
			doc: `{"apiVersion": "kubevirt.io/v1", "kind": "FloatingIP",
 "metadata": {"name": "fip-web-1", "creationTimestamp": "2024-03-04T05:06:07Z", "generation": 3},
 "spec": {"id": "fip-web-1", "routerName": "router1", "networkName": "public", "floatingIp": "172.16.0.50",
  "fixedIp": "10.10.0.5", "vmName": "vm-web-1", "podName": "pod-1"}}`,
			want: func() translator.FloatingIP { f := full; f.Generation = 3; return f }(),
		},
		{
			name: "unbound",
			doc: `apiVersion: kubevirt.io/v1
kind: FloatingIP
metadata: {name: fip-2}
spec: {id: f2, routerName: r1, networkName: public, floatingIp: 172.16.0.51}
`,
			want: translator.FloatingIP{Name: "fip-2", ID: "f2", Router: "r1", Network: "public", IP: "172.16.0.51"},
		},
		{
			// Checked when planning, as the floating IP's own error (its
			// status), not the load's.
			name: "id, networkName and floatingIp missing",
			doc: `apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: fip-3}
spec: {routerName: r1}
`,
			want: translator.FloatingIP{Name: "fip-3", Router: "r1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Set{}
			require.NoError(t, s.Add("fip.yaml", []byte(tc.doc)))
			require.Len(t, s.Objects.FloatingIPs, 1)
			got := s.Objects.FloatingIPs[0]
			assert.True(t, tc.want.Created.Equal(got.Created), "created %v", got.Created)
			got.Created = tc.want.Created
			assert.Equal(t, tc.want, got)
			assert.Empty(t, s.Objects.Routers)
			assert.Empty(t, s.Notes)
			requireSameAsGeneral(t, tc.name, []byte(tc.doc))
		})
	}
}

func TestAdd_FloatingIPErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{
			name: "no router",
			doc: `apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: fip-1}
spec: {id: fip-1, networkName: public, floatingIp: 172.16.0.50}
`,
			want: "fip.yaml: document 1: FloatingIp fip-1: spec.routerName is required",
		},
		{
			name: "no name",
			doc: `apiVersion: kubevirt.io/v1
kind: FloatingIP
metadata: {}
spec: {id: fip-1, routerName: r1}
`,
			want: "fip.yaml: document 1: FloatingIp (unnamed): metadata.name is empty",
		},
		{
			name: "field of the wrong type",
			doc: `apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: fip-1}
spec: {id: fip-1, routerName: r1, floatingIp: [172.16.0.50]}
`,
			want: "fip.yaml: document 1: FloatingIp fip-1: json: cannot unmarshal array into Go struct field FloatingIPSpec.spec.floatingIp of type string",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Set{}
			err := s.Add("fip.yaml", []byte(tc.doc))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
