package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// The generated input: N routers, each with two internal networks of five
// VMs, all on one shared FLAT external network "public". Every network has a
// gatewayIp, so every network has DHCP (one DHCP_Options row, which its VM
// ports refer to; the external network's has no VM port). In the floating IP
// variant every router also has one floating IP, bound to a VM of its first
// network. One file per router (its two NADs, the router, its VMIs, its
// floating IP) and one for the external network, so that an edit of one
// router rewrites one file.
const (
	netsPerRouter = 2
	vmsPerNet     = 5
	externalNet   = "public"
	namespace     = "default"
	peerIP        = "172.16.0.1" // also the external network's gatewayIp, as ONOS users declared it
	peerMAC       = "00:00:00:00:ee:01"
)

// The external network's addresses (172.16.0.0/16, 65,536), by offset from
// its start: router i's SNAT IP at snatBase+i, the one events switch it to at
// altSNATBase+i, its floating IP at fipBase+i: three ranges of maxRouters,
// apart from each other and from the gateway (the peer router, offset 1),
// all inside the CIDR.
const (
	externalCIDR = "172.16.0.0/16"
	maxRouters   = 20000
	snatBase     = 10
	altSNATBase  = snatBase + maxRouters
	fipBase      = altSNATBase + maxRouters
)

// The row names kubevirt-ovn gives (its documented, user-facing naming).
func routerRow(r string) string          { return "kv-" + r }
func switchRow(n string) string          { return "kv-" + n }
func etorRow(r string) string            { return "kv-etor-" + r }
func rtoeRow(r string) string            { return "kv-rtoe-" + r }
func vmPortRow(n, vm, ifc string) string { return "kv-" + n + "_" + namespace + "_" + vm + "_" + ifc }

// routerState is what a router's file holds; events change it.
type routerState struct {
	index   int
	removed bool
	altSNAT bool // SNAT IP switched to the alternate address
	// fip says the router has its floating IP; fipVM is the VM of its
	// first network it is bound to (events move it).
	fip   bool
	fipVM int
	// extra are VMs added by events, per internal network.
	extra [netsPerRouter][]vmSpec
}

type vmSpec struct {
	name, network, mac, ip string
}

func routerName(i int) string { return fmt.Sprintf("r%d", i) }
func netName(i, j int) string { return fmt.Sprintf("net-%d-%d", i, j) }

// netPrefix is internal network j of router i: 10.x.y.0/24.
func netPrefix(i, j int) (a, b int) {
	k := i*netsPerRouter + j
	return k >> 8, k & 255
}

// externalIP is the address at offset n of the external network.
func externalIP(n int) string {
	return netip.AddrFrom4([4]byte{172, 16, byte(n >> 8), byte(n)}).String()
}

// snatIP is router i's SNAT IP; alt is the one events switch to.
func snatIP(i int, alt bool) string {
	if alt {
		return externalIP(altSNATBase + i)
	}
	return externalIP(snatBase + i)
}

// fipIP is router i's floating IP.
func fipIP(i int) string { return externalIP(fipBase + i) }

func fipName(i int) string { return "fip-" + routerName(i) }

func vmMAC(serial int) string {
	return fmt.Sprintf("50:54:%02x:%02x:%02x:%02x", byte(serial>>24), byte(serial>>16), byte(serial>>8), byte(serial))
}

// vm is the v-th VM of network j of router i (v >= vmsPerNet: added by an event).
func vm(i, j, v int) vmSpec {
	a, b := netPrefix(i, j)
	serial := (i*netsPerRouter+j)*256 + v
	return vmSpec{
		name:    fmt.Sprintf("vm-%d-%d-%d", i, j, v),
		network: netName(i, j),
		mac:     vmMAC(serial),
		ip:      fmt.Sprintf("10.%d.%d.%d", a, b, 10+v),
	}
}

func (s *routerState) vms(j int) []vmSpec {
	var out []vmSpec
	for v := 0; v < vmsPerNet; v++ {
		out = append(out, vm(s.index, j, v))
	}
	return append(out, s.extra[j]...)
}

func (s *routerState) snat() string { return snatIP(s.index, s.altSNAT) }

// fipFixed is the VM the router's floating IP is bound to.
func (s *routerState) fipFixed() vmSpec { return vm(s.index, 0, s.fipVM) }

func (s *routerState) file(dir string) string {
	return filepath.Join(dir, routerName(s.index)+".yaml")
}

// manifest is the router's file.
func (s *routerState) manifest() []byte {
	var b strings.Builder
	i := s.index
	for j := 0; j < netsPerRouter; j++ {
		a, c := netPrefix(i, j)
		fmt.Fprintf(&b, `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: %s
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1450, "segmentId": "%d", "cidr": "10.%d.%d.0/24", "gatewayIp": "10.%d.%d.1"}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "%s"}'
---
`, netName(i, j), namespace, 1000+i*netsPerRouter+j, a, c, a, c, netName(i, j))
	}
	fmt.Fprintf(&b, `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: %s
spec:
  name: %s
  mac: "%s"
  enableSnat: true
  internal:
    - %s
    - %s
  external:
    ip: %s
    network: %s
  peerRouter:
    ip: %s
    mac: "%s"
  gateway: gw1
`, routerName(i), routerName(i), fmt.Sprintf("fa:16:3e:%02x:%02x:%02x", byte(i>>16), byte(i>>8), byte(i)),
		netName(i, 0), netName(i, 1), s.snat(), externalNet, peerIP, peerMAC)
	for j := 0; j < netsPerRouter; j++ {
		for _, v := range s.vms(j) {
			fmt.Fprintf(&b, `---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: %s
spec:
  networks:
    - name: eth1
      multus:
        networkName: %s
status:
  nodeName: hv1
  interfaces:
    - name: eth1
      mac: "%s"
      ipAddress: %s
`, v.name, namespace, v.network, v.mac, v.ip)
		}
	}
	if s.fip {
		v := s.fipFixed()
		fmt.Fprintf(&b, `---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: %s
spec:
  id: %s
  routerName: %s
  networkName: %s
  floatingIp: %s
  fixedIp: %s
  vmName: %s
`, fipName(i), fipName(i), routerName(i), externalNet, fipIP(i), v.ip, v.name)
	}
	return []byte(b.String())
}

var externalManifest = fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: %s
  annotations:
    network-config: '{"type": "FLAT", "mtu": 1500, "physicalNetworkName": "physnet1", "cidr": "%s", "gatewayIp": "%s"}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "%s"}'
`, externalNet, namespace, externalCIDR, peerIP, externalNet)

// input is the generated manifests of N routers in dir.
type input struct {
	dir, tmp string
	routers  []*routerState
	fips     bool // every router has a floating IP
}

// generate writes N routers' files and the external network's into
// dir/manifests; with fips, every router has a floating IP.
func generate(dir string, n int, fips bool) (*input, error) {
	if n > maxRouters {
		return nil, fmt.Errorf("%d routers: the external network %s holds the SNAT and floating IPs of at most %d", n, externalCIDR, maxRouters)
	}
	in := &input{dir: filepath.Join(dir, "manifests"), tmp: filepath.Join(dir, "manifests.tmp"), fips: fips}
	for _, d := range []string{in.dir, in.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(in.dir, "external.yaml"), []byte(externalManifest), 0o644); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		s := &routerState{index: i, fip: fips}
		in.routers = append(in.routers, s)
		if err := os.WriteFile(s.file(in.dir), s.manifest(), 0o644); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// write replaces a router's file at once (written aside, then renamed), so
// that the controller never reads half of it.
func (in *input) write(s *routerState) error {
	tmp := filepath.Join(in.tmp, filepath.Base(s.file(in.dir)))
	if err := os.WriteFile(tmp, s.manifest(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.file(in.dir))
}
