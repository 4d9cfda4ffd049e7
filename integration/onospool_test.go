package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// ONOS manifests are accepted as they are (issue 30): ONOS's ipPool was an
// IPAM object nothing in kubevirt-networking allocated from, so a VM's
// address anywhere in its network's CIDR worked, and operators keep
// static addresses outside the dynamic range.

// onosNetworks are the examples' internal networks as ONOS users declare
// them: every field ONOS required (mtu, gatewayIp, ipPool), with a pool
// that holds neither VM's address.
const onosNetworks = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: public
  namespace: default
  annotations:
    network-config: '{"type": "FLAT", "mtu": 1500, "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1", "ipPool": {"start": "172.16.0.100", "end": "172.16.0.200"}}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "public"}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-a
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1450, "segmentId": "100", "cidr": "10.10.0.0/24", "gatewayIp": "10.10.0.1", "defaultRoute": true, "ipPool": {"start": "10.10.0.100", "end": "10.10.0.200"}}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-a"}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-b
  namespace: default
  annotations:
    network-config: '{"type": "VXLAN", "mtu": 1450, "segmentId": "200", "cidr": "10.20.0.0/24", "gatewayIp": "10.20.0.1", "ipPool": {"start": "10.20.0.100", "end": "10.20.0.200"}}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-b"}'
`

// onosVMIs: vm-a's address (10.10.0.5, below net-a's pool) reported in
// its status; vm-b's (10.20.0.6, below net-b's pool) declared in the ONOS
// interfaces annotation before it boots, its MAC in the spec.
const onosVMIs = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-a, namespace: default}
spec:
  networks:
    - {name: eth1, multus: {networkName: net-a}}
status:
  nodeName: hv1
  interfaces:
    - {name: eth1, mac: "50:54:00:00:00:05", ipAddress: 10.10.0.5}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-b
  namespace: default
  annotations:
    interfaces: '[{"network": "net-b", "ipAddress": "10.20.0.6"}]'
spec:
  domain:
    devices:
      interfaces:
        - {name: eth1, bridge: {}, macAddress: "50:54:00:00:00:06"}
  networks:
    - {name: eth1, multus: {networkName: net-b}}
status:
  nodeName: hv2
`

// TestONOSAddressesOutsideThePool: VMs whose addresses lie outside their
// networks' ipPool, one from status and one from the interfaces
// annotation, get their ports, are offered their own addresses by DHCP,
// and leave SNATed through the gateway; the reply comes back to each.
func TestONOSAddressesOutsideThePool(t *testing.T) {
	e := newEnv(t)
	e.write("networks.yaml", onosNetworks)
	e.write("vmis.yaml", onosVMIs)
	out := e.sync()
	assert.Contains(t, out, "create Logical_Switch_Port "+vmAPort)
	assert.Contains(t, out, "create Logical_Switch_Port "+vmBPort)
	e.ready("gw1", "hv1", "hv2")

	e.exchange(vmA, "net-a", netAGateway, 0x5000)
	e.exchange(vmB, "net-b", netBGateway, 0x5100)

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40501, 5501)
	a := waitFor(t, e.wire("gw1"), "vm-a's UDP leaving SNATed", 0, snated(5501))
	e.unSNATed("gw1", a, vmA, 40501, vmB)
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40502, 5502)
	b := waitFor(t, e.wire("gw1"), "vm-b's UDP leaving SNATed", 0, snated(5502))
	e.unSNATed("gw1", b, vmB, 40502, vmA)
}
