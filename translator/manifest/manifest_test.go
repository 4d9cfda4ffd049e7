package manifest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// The same four objects (a router, two NADs, a VMI) in every format a user
// may hand us.

const routerYAML = `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: router1
spec:
  name: router1
  mac: "fa:16:3e:00:00:01"
  description: edge router of net-a
  enableSnat: true
  internal:
    - net-a
    - net-b
  external:
    ip: 172.16.0.100
    network: public
  peerRouter:
    ip: 172.16.0.1
    mac: "00:00:00:00:ee:01"
  gateway: gw1
`

const nadAYAML = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-a
  namespace: tenant
  annotations:
    network-config: '{"type": "Geneve", "mtu": 1450, "segmentId": "100", "gatewayIp": "10.10.0.1", "cidr": "10.10.0.0/24", "hostRoutes": [{"destination": "192.168.0.0/16", "nexthop": "10.10.0.254"}], "ipPool": {"start": "10.10.0.10", "end": "10.10.0.200"}, "dnses": ["8.8.8.8", "1.1.1.1"]}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-a"}'
`

const nadPublicYAML = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: public
  annotations:
    network-config: '{"type": "flat", "mtu": 1500, "segmentId": 100, "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1", "defaultRoute": false}'
`

const vmiYAML = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-a
  namespace: tenant
spec:
  networks:
    - name: default
      pod: {}
    - name: eth1
      multus:
        networkName: net-a
status:
  nodeName: hv1
  interfaces:
    - name: default
      mac: "50:54:00:00:00:01"
      ipAddress: 10.244.0.7
    - name: eth1
      mac: "50:54:00:00:00:05"
      ipAddress: 10.10.0.5
`

const routerJSON = `{
  "apiVersion": "kubevirt.io/v1",
  "kind": "VirtualRouter",
  "metadata": {"name": "router1"},
  "spec": {
    "name": "router1",
    "mac": "fa:16:3e:00:00:01",
    "description": "edge router of net-a",
    "enableSnat": true,
    "internal": ["net-a", "net-b"],
    "external": {"ip": "172.16.0.100", "network": "public"},
    "peerRouter": {"ip": "172.16.0.1", "mac": "00:00:00:00:ee:01"},
    "gateway": "gw1"
  }
}`

const nadAJSON = `{
  "apiVersion": "k8s.cni.cncf.io/v1",
  "kind": "NetworkAttachmentDefinition",
  "metadata": {
    "name": "net-a",
    "namespace": "tenant",
    "annotations": {
      "network-config": "{\"type\": \"Geneve\", \"mtu\": 1450, \"segmentId\": \"100\", \"gatewayIp\": \"10.10.0.1\", \"cidr\": \"10.10.0.0/24\", \"hostRoutes\": [{\"destination\": \"192.168.0.0/16\", \"nexthop\": \"10.10.0.254\"}], \"ipPool\": {\"start\": \"10.10.0.10\", \"end\": \"10.10.0.200\"}, \"dnses\": [\"8.8.8.8\", \"1.1.1.1\"]}"
    }
  },
  "spec": {"config": "{\"cniVersion\": \"0.3.1\", \"type\": \"kubevirt-ovn\", \"name\": \"net-a\"}"}
}`

const nadPublicJSON = `{
  "apiVersion": "k8s.cni.cncf.io/v1",
  "kind": "NetworkAttachmentDefinition",
  "metadata": {
    "name": "public",
    "annotations": {
      "network-config": "{\"type\": \"flat\", \"mtu\": 1500, \"segmentId\": 100, \"physicalNetworkName\": \"physnet1\", \"cidr\": \"172.16.0.0/24\", \"gatewayIp\": \"172.16.0.1\", \"defaultRoute\": false}"
    }
  }
}`

const vmiJSON = `{
  "apiVersion": "kubevirt.io/v1",
  "kind": "VirtualMachineInstance",
  "metadata": {"name": "vm-a", "namespace": "tenant"},
  "spec": {
    "networks": [
      {"name": "default", "pod": {}},
      {"name": "eth1", "multus": {"networkName": "net-a"}}
    ]
  },
  "status": {
    "nodeName": "hv1",
    "interfaces": [
      {"name": "default", "mac": "50:54:00:00:00:01", "ipAddress": "10.244.0.7"},
      {"name": "eth1", "mac": "50:54:00:00:00:05", "ipAddress": "10.10.0.5"}
    ]
  }
}`

// indent prefixes every non-empty line of s with prefix.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// yamlListItem turns a YAML document into an item of a YAML sequence.
func yamlListItem(doc string) string {
	ind := indent(doc, "    ")
	return "  - " + strings.TrimPrefix(ind, "    ")
}

func wantFullObjects() translator.Objects {
	return translator.Objects{
		Routers: []translator.Router{{
			Name:        "router1",
			MAC:         "fa:16:3e:00:00:01",
			Description: "edge router of net-a",
			EnableSNAT:  true,
			Internal:    []string{"net-a", "net-b"},
			External:    &translator.External{IP: "172.16.0.100", Network: "public"},
			PeerRouter:  &translator.PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"},
			Gateway:     "gw1",
		}},
		Networks: []translator.Network{
			{
				Name:       "net-a",
				Namespace:  "tenant",
				Type:       "Geneve",
				MTU:        1450,
				SegmentID:  "100",
				GatewayIP:  "10.10.0.1",
				CIDR:       "10.10.0.0/24",
				HostRoutes: []translator.HostRoute{{Destination: "192.168.0.0/16", Nexthop: "10.10.0.254"}},
				IPPool:     &translator.IPPool{Start: "10.10.0.10", End: "10.10.0.200"},
				DNSes:      []string{"8.8.8.8", "1.1.1.1"},
				// defaultRoute absent: false, as ONOS had it.
				DefaultRoute: false,
			},
			{
				Name:                "public",
				Namespace:           "default",
				Type:                "flat",
				MTU:                 1500,
				SegmentID:           "100",
				GatewayIP:           "172.16.0.1",
				CIDR:                "172.16.0.0/24",
				PhysicalNetworkName: "physnet1",
				DefaultRoute:        false,
			},
		},
		VMs: []translator.VMInterface{{
			Namespace:        "tenant",
			VMI:              "vm-a",
			Interface:        "eth1",
			Network:          "net-a",
			NetworkNamespace: "tenant",
			MAC:              "50:54:00:00:00:05",
			IP:               "10.10.0.5",
			Node:             "hv1",
		}},
	}
}

func addString(t *testing.T, source, data string) (*Set, error) {
	t.Helper()
	s := &Set{}
	err := s.Add(source, []byte(data))
	return s, err
}

func mustAdd(t *testing.T, source, data string) *Set {
	t.Helper()
	s, err := addString(t, source, data)
	require.NoError(t, err)
	return s
}

func TestAdd_Formats(t *testing.T) {
	yamlStream := "# objects as ONOS kubevirt-networking users keep them\n---\n" +
		routerYAML + "---\n" + nadAYAML + "---\n# an empty document\n---\n" +
		nadPublicYAML + "---\n" + vmiYAML + "---\n"
	jsonStream := strings.Join([]string{routerJSON, nadAJSON, nadPublicJSON, vmiJSON}, "\n")
	jsonList := `{"apiVersion": "v1", "kind": "List", "items": [` +
		strings.Join([]string{routerJSON, nadAJSON, nadPublicJSON, vmiJSON}, ",\n") + `]}`
	yamlList := "apiVersion: v1\nkind: List\nitems:\n" +
		yamlListItem(routerYAML) + yamlListItem(nadAYAML) + yamlListItem(nadPublicYAML) + yamlListItem(vmiYAML)
	// A typed list of NADs in its own document, then the rest.
	yamlTypedList := routerYAML + "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinitionList\nitems:\n" +
		yamlListItem(nadAYAML) + yamlListItem(nadPublicYAML) + "---\n" + vmiYAML

	tests := []struct {
		name   string
		source string
		data   string
	}{
		{"yaml multi-document", "objects.yaml", yamlStream},
		{"json stream", "objects.json", jsonStream},
		{"json List", "list.json", jsonList},
		{"yaml List", "list.yaml", yamlList},
		{"yaml typed List", "typed-list.yaml", yamlTypedList},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustAdd(t, tc.source, tc.data)
			assert.Equal(t, wantFullObjects(), s.Objects)
			assert.Empty(t, s.Notes)
		})
	}
}

func TestAdd_AccumulatesAcrossCalls(t *testing.T) {
	s := &Set{}
	require.NoError(t, s.Add("router.yaml", []byte(routerYAML)))
	require.NoError(t, s.Add("nets.yaml", []byte(nadAYAML+"---\n"+nadPublicYAML)))
	require.NoError(t, s.Add("vmi.json", []byte(vmiJSON)))
	assert.Equal(t, wantFullObjects(), s.Objects)
	assert.Empty(t, s.Notes)
}

// nadDoc is a NAD as a JSON document whose network-config annotation is cfg.
func nadDoc(t *testing.T, namespace, name, cfg string) string {
	t.Helper()
	meta := map[string]any{
		"name":        name,
		"annotations": map[string]string{NetworkConfigAnnotation: cfg},
	}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": CNCFV1,
		"kind":       KindNAD,
		"metadata":   meta,
	})
	require.NoError(t, err)
	return string(b)
}

func TestAdd_NetworkConfig(t *testing.T) {
	base := func(mod func(n *translator.Network)) translator.Network {
		n := translator.Network{Name: "net", Namespace: "tenant"}
		mod(&n)
		return n
	}
	tests := []struct {
		name string
		cfg  string
		want translator.Network
	}{
		{"type upper", `{"type": "VXLAN"}`, base(func(n *translator.Network) { n.Type = "VXLAN" })},
		{"type lower passed through", `{"type": "vlan"}`, base(func(n *translator.Network) { n.Type = "vlan" })},
		{"type mixed passed through", `{"type": "Geneve"}`, base(func(n *translator.Network) { n.Type = "Geneve" })},
		{"segmentId string", `{"type": "VXLAN", "segmentId": "100"}`, base(func(n *translator.Network) {
			n.Type, n.SegmentID = "VXLAN", "100"
		})},
		{"segmentId number", `{"type": "VXLAN", "segmentId": 100}`, base(func(n *translator.Network) {
			n.Type, n.SegmentID = "VXLAN", "100"
		})},
		{"segmentId string with spaces", `{"type": "VXLAN", "segmentId": " 100 "}`, base(func(n *translator.Network) {
			n.Type, n.SegmentID = "VXLAN", "100"
		})},
		{"segmentId null", `{"type": "FLAT", "segmentId": null}`, base(func(n *translator.Network) { n.Type = "FLAT" })},
		{"mtu number", `{"type": "FLAT", "mtu": 1500}`, base(func(n *translator.Network) {
			n.Type, n.MTU = "FLAT", 1500
		})},
		{"mtu string", `{"type": "FLAT", "mtu": "9000"}`, base(func(n *translator.Network) {
			n.Type, n.MTU = "FLAT", 9000
		})},
		{"ipPool", `{"type": "GENEVE", "ipPool": {"start": "10.0.0.10", "end": "10.0.0.20"}}`, base(func(n *translator.Network) {
			n.Type, n.IPPool = "GENEVE", &translator.IPPool{Start: "10.0.0.10", End: "10.0.0.20"}
		})},
		{"hostRoutes", `{"type": "GENEVE", "hostRoutes": [{"destination": "0.0.0.0/0", "nexthop": "10.0.0.1"}, {"destination": "192.168.1.0/24", "nexthop": "10.0.0.2"}]}`,
			base(func(n *translator.Network) {
				n.Type = "GENEVE"
				n.HostRoutes = []translator.HostRoute{
					{Destination: "0.0.0.0/0", Nexthop: "10.0.0.1"},
					{Destination: "192.168.1.0/24", Nexthop: "10.0.0.2"},
				}
			})},
		{"dnses", `{"type": "GENEVE", "dnses": ["8.8.8.8", "8.8.4.4"]}`, base(func(n *translator.Network) {
			n.Type, n.DNSes = "GENEVE", []string{"8.8.8.8", "8.8.4.4"}
		})},
		{"defaultRoute absent: false, as ONOS had it", `{"type": "GENEVE"}`, base(func(n *translator.Network) { n.Type = "GENEVE" })},
		{"defaultRoute false", `{"type": "GENEVE", "defaultRoute": false}`, base(func(n *translator.Network) { n.Type = "GENEVE" })},
		{"defaultRoute true", `{"type": "GENEVE", "defaultRoute": true}`, base(func(n *translator.Network) {
			n.Type, n.DefaultRoute = "GENEVE", true
		})},
		{"everything", `{"type": "vlan", "mtu": 1400, "segmentId": 42, "gatewayIp": "10.1.0.1", "cidr": "10.1.0.0/16", "physicalNetworkName": "physnet2", "hostRoutes": [{"destination": "10.2.0.0/16", "nexthop": "10.1.0.254"}], "ipPool": {"start": "10.1.0.100", "end": "10.1.0.200"}, "dnses": ["10.1.0.2"], "defaultRoute": true}`,
			translator.Network{
				Name:                "net",
				Namespace:           "tenant",
				Type:                "vlan",
				MTU:                 1400,
				SegmentID:           "42",
				GatewayIP:           "10.1.0.1",
				CIDR:                "10.1.0.0/16",
				PhysicalNetworkName: "physnet2",
				HostRoutes:          []translator.HostRoute{{Destination: "10.2.0.0/16", Nexthop: "10.1.0.254"}},
				IPPool:              &translator.IPPool{Start: "10.1.0.100", End: "10.1.0.200"},
				DNSes:               []string{"10.1.0.2"},
				DefaultRoute:        true,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustAdd(t, "nad.json", nadDoc(t, "tenant", "net", tc.cfg))
			require.Len(t, s.Objects.Networks, 1)
			assert.Equal(t, tc.want, s.Objects.Networks[0])
			assert.Empty(t, s.Notes)
			assert.Empty(t, s.Objects.Routers)
			assert.Empty(t, s.Objects.VMs)
		})
	}

	t.Run("namespace defaults to default", func(t *testing.T) {
		s := mustAdd(t, "nad.json", nadDoc(t, "", "net", `{"type": "FLAT"}`))
		require.Len(t, s.Objects.Networks, 1)
		assert.Equal(t, "default", s.Objects.Networks[0].Namespace)
	})
}

func TestNetworkFrom_NoAnnotation(t *testing.T) {
	nad := &NetworkAttachmentDefinition{}
	nad.Name = "plain"
	nad.Annotations = map[string]string{"k8s.v1.cni.cncf.io/resourceName": "x"}
	n, ok, err := NetworkFrom(nad)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, translator.Network{}, n)
}

func TestAdd_IgnoredObjects(t *testing.T) {
	data := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
spec:
  replicas: 2
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  key: value
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: plain
  namespace: tenant
  annotations:
    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov
spec:
  config: '{"cniVersion": "0.3.1", "type": "bridge"}'
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata:
      name: svc
---
` + routerYAML

	s := mustAdd(t, "mixed.yaml", data)

	// The router is still read.
	require.Len(t, s.Objects.Routers, 1)
	assert.Equal(t, "router1", s.Objects.Routers[0].Name)
	assert.Empty(t, s.Objects.Networks)
	assert.Empty(t, s.Objects.VMs)

	require.Len(t, s.Notes, 4)
	wantParts := [][]string{
		{"mixed.yaml", "document 1", "apps/v1", "Deployment", "web", "ignored"},
		{"mixed.yaml", "document 2", "ConfigMap", "settings", "ignored"},
		{"mixed.yaml", "document 3", KindNAD, "tenant/plain", NetworkConfigAnnotation, "ignored"},
		{"mixed.yaml", "document 4", "items[0]", "Service", "svc", "ignored"},
	}
	for i, parts := range wantParts {
		for _, p := range parts {
			assert.Contains(t, s.Notes[i], p, "note %d", i)
		}
	}
}

func TestAdd_IgnoresWrongAPIVersion(t *testing.T) {
	// A VirtualRouter under another group is not ours.
	s := mustAdd(t, "r.yaml", strings.Replace(routerYAML, "kubevirt.io/v1", "example.com/v1", 1))
	assert.Empty(t, s.Objects.Routers)
	require.Len(t, s.Notes, 1)
	assert.Contains(t, s.Notes[0], "example.com/v1 VirtualRouter router1")
}

func TestAdd_VMI(t *testing.T) {
	iface := func(mod func(v *translator.VMInterface)) translator.VMInterface {
		v := translator.VMInterface{
			Namespace:        "tenant",
			VMI:              "vm",
			Interface:        "eth1",
			Network:          "net",
			NetworkNamespace: "tenant",
			MAC:              "50:54:00:00:00:05",
			IP:               "10.0.0.5",
			Node:             "hv1",
		}
		mod(&v)
		return v
	}
	same := func(*translator.VMInterface) {}

	tests := []struct {
		name string
		doc  string
		want []translator.VMInterface
		// notes are checked by the substrings each must contain.
		notes [][]string
	}{
		{
			name: "networkName resolves to the VMI namespace",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`,
			want: []translator.VMInterface{iface(same)},
		},
		{
			name: "namespace/networkName",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: other/net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) { v.NetworkNamespace = "other" })},
		},
		{
			name: "no namespace means default",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) {
				v.Namespace, v.NetworkNamespace = "default", "default"
			})},
		},
		{
			name: "ipAddresses[0] when ipAddress empty",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - name: eth1
      mac: "50:54:00:00:00:05"
      ipAddresses: [10.0.0.6, "fd00::6"]
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) { v.IP, v.IPv6 = "10.0.0.6", "fd00::6" })},
		},
		{
			name: "ipAddress preferred over ipAddresses",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - name: eth1
      mac: "50:54:00:00:00:05"
      ipAddress: 10.0.0.5
      ipAddresses: [10.0.0.6]
`,
			want: []translator.VMInterface{iface(same)},
		},
		{
			name: "no nodeName",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) { v.Node = "" })},
		},
		{
			name: "pod network skipped silently",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: default
      pod: {}
    - name: empty
      multus: {networkName: ""}
status:
  nodeName: hv1
  interfaces:
    - {name: default, mac: "50:54:00:00:00:01", ipAddress: 10.244.0.5}
    - {name: empty, mac: "50:54:00:00:00:02", ipAddress: 10.244.0.6}
`,
		},
		{
			// One without an IPv4 address is passed on: on an IPv6-only
			// network it needs none, elsewhere the planner leaves it out.
			name: "interfaces without status are skipped with notes",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: default
      pod: {}
    - name: nomac
      multus: {networkName: net}
    - name: noip
      multus: {networkName: net}
    - name: eth1
      multus: {networkName: net}
    - name: nostatus
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: default, mac: "50:54:00:00:00:01", ipAddress: 10.244.0.5}
    - {name: nomac, ipAddress: 10.0.0.7}
    - {name: noip, mac: "50:54:00:00:00:08"}
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`,
			want: []translator.VMInterface{
				iface(func(v *translator.VMInterface) { v.Interface, v.MAC, v.IP = "noip", "50:54:00:00:00:08", "" }),
				iface(same),
			},
			notes: [][]string{
				{"vmi.yaml: document 1", KindVMI, "tenant/vm", "interface nomac", "no MAC yet"},
				{"vmi.yaml: document 1", KindVMI, "tenant/vm", "interface nostatus", "no MAC yet"},
			},
		},
		{
			name: "several interfaces in spec order",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth2
      multus: {networkName: other/net-b}
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
    - {name: eth2, mac: "50:54:00:00:00:06", ipAddress: 10.1.0.6}
`,
			want: []translator.VMInterface{
				iface(func(v *translator.VMInterface) {
					v.Interface, v.Network, v.NetworkNamespace = "eth2", "net-b", "other"
					v.MAC, v.IP = "50:54:00:00:00:06", "10.1.0.6"
				}),
				iface(same),
			},
		},
		{
			name: "before boot: the IP from the interfaces annotation, the MAC from the spec",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
  namespace: tenant
  annotations:
    interfaces: '[{"network": "net", "ipAddress": "10.0.0.5"}, {"network": "other", "ipAddress": "10.9.0.9"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: default, masquerade: {}}
        - {name: eth1, bridge: {}, macAddress: "50:54:00:00:00:05"}
  networks:
    - name: default
      pod: {}
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) {
				v.MACField = "spec.domain.devices.interfaces[eth1].macAddress"
				v.IPField = "metadata.annotations[interfaces][net].ipAddress"
			})},
		},
		{
			name: "an IPv6 address declared (ipv6Address) in place of status's, its link-local ones kept",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
  namespace: tenant
  annotations:
    interfaces: '[{"network": "net", "ipAddress": "10.0.0.5", "ipv6Address": "fd00:10::5"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: eth1, macAddress: "50:54:00:00:00:05"}
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5, ipAddresses: [10.0.0.5, "fd00:10::99", "fe80::1"]}
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) {
				v.MACField = "spec.domain.devices.interfaces[eth1].macAddress"
				v.IPField = "metadata.annotations[interfaces][net].ipAddress"
				v.StatusMAC, v.StatusIP = "50:54:00:00:00:05", "10.0.0.5"
				v.IPv6, v.IPv6Field = "fd00:10::5,fe80::1", "metadata.annotations[interfaces][net].ipv6Address"
			})},
		},
		{
			name: "declared and in status: both kept for the planner to compare",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
  namespace: tenant
  annotations:
    interfaces: '[{"network": "net", "ipAddress": "10.0.0.5"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: eth1, macAddress: "50:54:00:00:00:05"}
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:99", ipAddress: 10.0.0.9}
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) {
				v.MACField = "spec.domain.devices.interfaces[eth1].macAddress"
				v.IPField = "metadata.annotations[interfaces][net].ipAddress"
				v.StatusMAC, v.StatusIP = "50:54:00:00:00:99", "10.0.0.9"
			})},
		},
		{
			name: "declared; status has only the guest's link-local and IPv6 addresses before DHCP: nothing to compare",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
  namespace: tenant
  annotations:
    interfaces: '[{"network": "net", "ipAddress": "10.0.0.5"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: eth1, macAddress: "50:54:00:00:00:05"}
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: "fe80::5054:ff:fe00:5", ipAddresses: ["fe80::5054:ff:fe00:5", 169.254.3.4]}
`,
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) {
				v.MACField = "spec.domain.devices.interfaces[eth1].macAddress"
				v.IPField = "metadata.annotations[interfaces][net].ipAddress"
				v.StatusMAC = "50:54:00:00:00:05"
				v.IPv6 = "fe80::5054:ff:fe00:5" // the port's on a dual stack network
			})},
		},
		{
			name: "status: the first IPv4 address that is not link-local",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: "fd00::5", ipAddresses: ["fd00::5", 169.254.3.4, 10.0.0.5, 10.0.0.6]}
`,
			// Its IPv6 address once, for a dual stack network.
			want: []translator.VMInterface{iface(func(v *translator.VMInterface) { v.IPv6 = "fd00::5" })},
		},
		{
			name: "an interfaces annotation that is not JSON is noted and ignored",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
  namespace: tenant
  annotations:
    interfaces: 'net=10.0.0.7'
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`,
			want: []translator.VMInterface{iface(same)},
			notes: [][]string{
				{"vmi.yaml: document 1", KindVMI, "tenant/vm", "metadata.annotations[interfaces] is not a JSON list"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustAdd(t, "vmi.yaml", tc.doc)
			assert.Equal(t, tc.want, s.Objects.VMs)
			require.Len(t, s.Notes, len(tc.notes), "notes: %q", s.Notes)
			for i, parts := range tc.notes {
				for _, p := range parts {
					assert.Contains(t, s.Notes[i], p, "note %d", i)
				}
			}
		})
	}
}

func TestAdd_Router(t *testing.T) {
	created := time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name string
		doc  string
		want translator.Router
	}{
		{
			name: "metadata.name only",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: r1}
spec: {enableSnat: false}
`,
			want: translator.Router{Name: "r1"},
		},
		{
			name: "spec.name only",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {}
spec: {name: r2, mac: "fa:16:3e:00:00:02"}
`,
			want: translator.Router{Name: "r2", MAC: "fa:16:3e:00:00:02"},
		},
		{
			name: "same name in both",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: r3}
spec: {name: r3}
`,
			want: translator.Router{Name: "r3"},
		},
		{
			name: "creationTimestamp copied",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: r4
  creationTimestamp: "2024-03-04T05:06:07Z"
spec:
  internal: [net-a]
`,
			want: translator.Router{Name: "r4", Internal: []string{"net-a"}, Created: created},
		},
		{
			name: "empty external and peerRouter are absent",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: r5}
spec:
  external: {}
  peerRouter: {ip: "", mac: ""}
`,
			want: translator.Router{Name: "r5"},
		},
		{
			name: "external network only",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: r6}
spec:
  external: {network: public}
  peerRouter: {mac: "00:00:00:00:ee:01"}
`,
			want: translator.Router{
				Name:       "r6",
				External:   &translator.External{Network: "public"},
				PeerRouter: &translator.PeerRouter{MAC: "00:00:00:00:ee:01"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustAdd(t, "router.yaml", tc.doc)
			require.Len(t, s.Objects.Routers, 1)
			got := s.Objects.Routers[0]
			// metav1.Time decodes into the local zone: compare the instant.
			assert.True(t, tc.want.Created.Equal(got.Created), "Created %v, want %v", got.Created, tc.want.Created)
			got.Created = tc.want.Created
			assert.Equal(t, tc.want, got)
			assert.Empty(t, s.Notes)
		})
	}
}

// TestAdd_SpecNameDiffersIsThatRoutersError: a router whose spec.name
// contradicts its metadata.name fails alone (its rows stay, the others
// sync), with an error naming it, the fields and where it was read.
func TestAdd_SpecNameDiffersIsThatRoutersError(t *testing.T) {
	s, err := addString(t, "router.yaml", `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: router-meta}
spec: {name: router-spec}
---
`+routerYAML)
	require.NoError(t, err)
	require.Len(t, s.Objects.Routers, 1, "the other router is read")
	u := translator.Unit{Kind: translator.KindRouter, Name: "router-meta"}
	require.Contains(t, s.Objects.Invalid, u)
	assert.Equal(t, "VirtualRouter router-meta: spec.name router-spec differs from metadata.name router-meta (router.yaml: document 1)", s.Objects.Invalid[u].Error())
}

func TestAdd_RouterNameErrors(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		parts []string
	}{
		{
			name: "no name at all",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {}
spec: {mac: "fa:16:3e:00:00:02"}
`,
			parts: []string{"router.yaml", "document 1", KindRouter, "metadata.name is empty"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := addString(t, "router.yaml", tc.doc)
			require.Error(t, err)
			for _, p := range tc.parts {
				assert.Contains(t, err.Error(), p)
			}
			assert.Empty(t, s.Objects.Routers)
		})
	}
}

func TestRouterFrom_DoesNotAliasInternal(t *testing.T) {
	vr := &VirtualRouter{}
	vr.Name = "r"
	vr.Spec.Internal = []string{"a", "b"}
	r, err := RouterFrom(vr)
	require.NoError(t, err)
	vr.Spec.Internal[0] = "changed"
	assert.Equal(t, []string{"a", "b"}, r.Internal)
}

func TestAdd_Errors(t *testing.T) {
	tests := []struct {
		name   string
		source string
		data   string
		parts  []string
	}{
		{
			name:   "malformed yaml in second document",
			source: "bad.yaml",
			data:   routerYAML + "---\napiVersion: v1\nkind: [unclosed\n",
			parts:  []string{"bad.yaml", "document 2"},
		},
		{
			name:   "malformed yaml in first document",
			source: "bad.yml",
			data:   "apiVersion: v1\n  kind: : x\n\tbroken\n",
			parts:  []string{"bad.yml", "document 1"},
		},
		{
			name:   "truncated json in second object",
			source: "bad.json",
			data:   routerJSON + "\n" + `{"apiVersion": "v1", "kind": `,
			parts:  []string{"bad.json", "document 2"},
		},
		{
			name:   "invalid network-config json",
			source: "nads.yaml",
			data: `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: broken
  namespace: tenant
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1450,'
`,
			parts: []string{"nads.yaml", "document 1", KindNAD, "tenant/broken", "network-config"},
		},
		{
			name:   "network-config mtu not a number",
			source: "nads.json",
			data:   nadDoc(t, "tenant", "badmtu", `{"type": "GENEVE", "mtu": "big"}`),
			parts:  []string{"nads.json", KindNAD, "tenant/badmtu", "mtu", "big"},
		},
		{
			name:   "network-config mtu not an integer",
			source: "nads.json",
			data:   nadDoc(t, "tenant", "fracmtu", `{"type": "GENEVE", "mtu": 1450.5}`),
			parts:  []string{"nads.json", KindNAD, "tenant/fracmtu", "mtu"},
		},
		{
			name:   "network-config segmentId a bool",
			source: "nads.json",
			data:   nadDoc(t, "tenant", "boolseg", `{"type": "VXLAN", "segmentId": true}`),
			parts:  []string{"nads.json", KindNAD, "tenant/boolseg", "network-config", "string or a number"},
		},
		{
			name:   "network-config field of the wrong type",
			source: "nads.json",
			data:   nadDoc(t, "tenant", "baddns", `{"type": "GENEVE", "dnses": "8.8.8.8"}`),
			parts:  []string{"nads.json", KindNAD, "tenant/baddns", "network-config"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := addString(t, tc.source, tc.data)
			require.Error(t, err)
			for _, p := range tc.parts {
				assert.Contains(t, err.Error(), p)
			}
		})
	}
}

// A field of the wrong type must fail the load with an error that says which
// object is at fault, not only which document.
func TestAdd_WrongFieldTypeNamesObject(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		parts []string
	}{
		{
			name: "VirtualRouter enableSnat as string",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: router1}
spec:
  enableSnat: "yes"
`,
			parts: []string{"objects.yaml", "document 1", KindRouter, "enableSnat", "router1"},
		},
		{
			name: "VirtualMachineInstance ipAddresses as string",
			doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-a, namespace: tenant}
spec:
  networks:
    - name: eth1
      multus: {networkName: net}
status:
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddresses: 10.0.0.5}
`,
			parts: []string{"objects.yaml", "document 1", KindVMI, "ipAddresses", "vm-a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := addString(t, "objects.yaml", tc.doc)
			require.Error(t, err)
			for _, p := range tc.parts {
				assert.Contains(t, err.Error(), p)
			}
			assert.Empty(t, s.Objects.Routers)
			assert.Empty(t, s.Objects.VMs)
		})
	}
}

func writeFile(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func namedRouter(name string) string {
	return "apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: " + name + "\n"
}

func routerNames(s *Set) []string {
	var names []string
	for _, r := range s.Objects.Routers {
		names = append(names, r.Name)
	}
	return names
}

func TestLoadPaths_Directory(t *testing.T) {
	dir := t.TempDir()
	// Written out of order; read in name order.
	writeFile(t, dir, "n.YAML", namedRouter("fourth"))
	writeFile(t, dir, "b.yaml", namedRouter("second"))
	writeFile(t, dir, "a.yml", namedRouter("first")+"---\n"+nadAYAML)
	writeFile(t, dir, "m/c.json", vmiJSON)
	writeFile(t, dir, "m/d.yaml", namedRouter("third")+"---\n"+nadPublicYAML)
	// Not manifests: would fail the load if they were read.
	writeFile(t, dir, "m/README.md", "# Manifests\n\nkey: [unclosed\n---\n{\n")
	writeFile(t, dir, "notes.txt", "key: [unclosed\n")

	s, err := LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "second", "third", "fourth"}, routerNames(s))

	want := wantFullObjects()
	require.Len(t, s.Objects.Networks, 2)
	assert.Equal(t, want.Networks, s.Objects.Networks)
	assert.Equal(t, want.VMs, s.Objects.VMs)
	assert.Empty(t, s.Notes)
}

func TestLoadPaths_FilesInArgumentOrder(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", namedRouter("ra"))
	b := writeFile(t, dir, "b.yaml", namedRouter("rb"))
	sub := filepath.Join(dir, "sub")
	writeFile(t, dir, "sub/c.json", `{"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter", "metadata": {"name": "rc"}}`)

	s, err := LoadPaths([]string{b, sub, a})
	require.NoError(t, err)
	assert.Equal(t, []string{"rb", "rc", "ra"}, routerNames(s))
}

func TestLoadPaths_Empty(t *testing.T) {
	s, err := LoadPaths(nil)
	require.NoError(t, err)
	assert.Equal(t, &Set{}, s)

	s, err = LoadPaths([]string{t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, &Set{}, s)
}

func TestLoadPaths_Errors(t *testing.T) {
	t.Run("missing path", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "ok.yaml", routerYAML)
		missing := filepath.Join(dir, "missing.yaml")
		s, err := LoadPaths([]string{dir, missing})
		require.Error(t, err)
		assert.Nil(t, s)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.Contains(t, err.Error(), "missing.yaml")
	})
	t.Run("malformed file fails the whole load", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "a.yaml", routerYAML)
		bad := writeFile(t, dir, "b.yaml", nadAYAML+"---\n"+nadPublicYAML+"---\nkind: [unclosed\n")
		writeFile(t, dir, "c.yaml", vmiYAML)
		s, err := LoadPaths([]string{dir})
		require.Error(t, err)
		assert.Nil(t, s)
		assert.Contains(t, err.Error(), bad)
		assert.Contains(t, err.Error(), "document 3")
	})
	t.Run("invalid network-config fails the whole load", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "a.yaml", routerYAML)
		writeFile(t, dir, "b.json", nadDoc(t, "tenant", "broken", `{"type": `))
		s, err := LoadPaths([]string{dir})
		require.Error(t, err)
		assert.Nil(t, s)
		assert.Contains(t, err.Error(), "tenant/broken")
		assert.Contains(t, err.Error(), "network-config")
	})
}

func TestLoadPaths_DeployExamples(t *testing.T) {
	s, err := LoadPaths([]string{"../../deploy/examples"})
	require.NoError(t, err)
	assert.Empty(t, s.Notes)

	require.Len(t, s.Objects.Routers, 1)
	require.Len(t, s.Objects.Networks, 3)
	require.Len(t, s.Objects.VMs, 2)

	r := s.Objects.Routers[0]
	assert.Equal(t, "router1", r.Name)
	assert.True(t, r.EnableSNAT)
	assert.Equal(t, []string{"net-a", "net-b"}, r.Internal)
	assert.Equal(t, &translator.External{IP: "172.16.0.100", Network: "public"}, r.External)
	assert.Equal(t, "gw1", r.Gateway)

	byName := map[string]translator.Network{}
	for _, n := range s.Objects.Networks {
		byName[n.Name] = n
	}
	require.Contains(t, byName, "public")
	require.Contains(t, byName, "net-a")
	require.Contains(t, byName, "net-b")
	assert.Equal(t, "physnet1", byName["public"].PhysicalNetworkName)
	assert.Equal(t, "100", byName["net-a"].SegmentID)
	assert.Equal(t, "200", byName["net-b"].SegmentID)
	assert.Equal(t, translator.NetworkType("vxlan"), byName["net-b"].Type)

	assert.Equal(t, []translator.VMInterface{
		{Namespace: "default", VMI: "vm-a", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "hv1"},
		{Namespace: "default", VMI: "vm-b", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6", Node: "hv2"},
	}, s.Objects.VMs)
}

// TestVMIMigrationState: status.migrationState is read on both paths; a
// running migration moves the port from its source to its target, a
// completed one leaves it on the target, a failed or aborted one on the
// source (KubeVirt keeps the last migration's state after it ended).
func TestVMIMigrationState(t *testing.T) {
	const doc = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm, namespace: tenant}
spec:
  networks:
    - {name: eth1, multus: {networkName: net}}
status:
  nodeName: %s
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
  migrationState:
    sourceNode: hv1
    targetNode: hv2
    migrationUid: c0a8e1f2-7d3b-4e5f-9a6b-1c2d3e4f5a6b
    targetPod: virt-launcher-vm-x2
%s
`
	tests := []struct {
		name, node, state           string
		wantNode, wantTarget, wantU string
	}{
		{"running", "hv1", "    mode: PreCopy", "hv1", "hv2", "c0a8e1f2-7d3b-4e5f-9a6b-1c2d3e4f5a6b"},
		{"abort requested, still running", "hv1", "    abortStatus: Aborting", "hv1", "hv2", "c0a8e1f2-7d3b-4e5f-9a6b-1c2d3e4f5a6b"},
		{"completed, nodeName not yet the target", "hv1", "    completed: true", "hv2", "", ""},
		{"completed", "hv2", "    completed: true", "hv2", "", ""},
		{"failed", "hv1", "    completed: true\n    failed: true", "hv1", "", ""},
		{"aborted", "hv1", "    abortStatus: Succeeded", "hv1", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := fmt.Sprintf(doc, tc.node, tc.state)
			for _, path := range []string{"general", "fast"} {
				s := &Set{}
				if path == "fast" {
					var err error
					s, err = decodeFast("vmi.yaml", []byte(text))
					require.NoError(t, err, "the fast path reads migrationState")
				} else {
					require.NoError(t, s.addGeneral("vmi.yaml", []byte(text)))
				}
				require.Len(t, s.Objects.VMs, 1, path)
				v := s.Objects.VMs[0]
				assert.Equal(t, tc.wantNode, v.Node, path)
				assert.Equal(t, tc.wantTarget, v.MigrationTarget, path)
				assert.Equal(t, tc.wantU, v.MigrationUID, path)
			}
		})
	}
}

// TestVMIMigrationActivation: the migration-activation annotation, any
// case; an unknown value is noted and read as rarp.
func TestVMIMigrationActivation(t *testing.T) {
	const doc = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
  namespace: tenant
  annotations: {kubevirt-ovn.io/migration-activation: %s}
spec:
  networks:
    - {name: eth1, multus: {networkName: net}}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.0.0.5}
`
	for value, want := range map[string]bool{"none": true, "None": true, "rarp": false, "garp": false} {
		s := mustAdd(t, "vmi.yaml", fmt.Sprintf(doc, value))
		require.Len(t, s.Objects.VMs, 1)
		assert.Equal(t, want, s.Objects.VMs[0].NoActivation, value)
		if value == "garp" {
			require.Len(t, s.Notes, 1)
			assert.Contains(t, s.Notes[0], `metadata.annotations[kubevirt-ovn.io/migration-activation] "garp" is neither rarp nor none: rarp`)
		} else {
			assert.Empty(t, s.Notes, value)
		}
	}
}
