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
	// externalCIDR6 is the external network's IPv6 prefix in the dual
	// stack variant: router i's external IPv6 address at snatBase+i, the
	// peer at 1 (externalIPv6).
	externalCIDR6 = "2001:db8:ff::/64"
)

// externalIPv6 is the address at offset off of externalCIDR6.
func externalIPv6(off int) string { return fmt.Sprintf("2001:db8:ff::%x", off) }

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
	// sgs says the VMs are bound to security groups; rebound are the
	// VMs (by name) whose second group an event moved on by one.
	sgs     bool
	rebound map[string]bool
	// migrating are the VMs (by name) whose live migration from hv1 to
	// hv2 runs (migrations.go).
	migrating map[string]bool
	// v6: the dual stack variant (its networks' and router's IPv6 side).
	v6 bool
	// gateway is the router's spec.gateway and nodeOf a VM's node, in the
	// zones bench (zones.go); "" and nil: gw1 and hv1.
	gateway string
	nodeOf  func(vmSpec) string
}

func (s *routerState) gatewayNode() string {
	if s.gateway == "" {
		return "gw1"
	}
	return s.gateway
}

func (s *routerState) node(v vmSpec) string {
	if s.nodeOf == nil {
		return "hv1"
	}
	return s.nodeOf(v)
}

type vmSpec struct {
	name, network, mac, ip string
	serial                 int
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
		serial:  serial,
	}
}

// The security groups of the variant with them.
const (
	sgCount = 5
	sgRules = 10
	// sgEditedRule is the rule of each group that sg-rule events edit: its
	// TCP port moves between sgPort and sgAltPort plus the group's index.
	sgEditedRule = sgRules - 1
	sgPort       = 8000
	sgAltPort    = 9000
)

func sgID(g int) string { return fmt.Sprintf("sg%d", g) }

// sgRow is group g's Port_Group name (kv_sg_<id>: the id is a plain word).
func sgRow(g int) string { return "kv_sg_" + sgID(g) }

func sgRuleID(g, q int) string { return fmt.Sprintf("sg%d-r%d", g, q) }

// groups are the two security groups VM v is bound to: two neighbours by
// its serial, the second moved on by one when rebound.
func (s *routerState) groups(v vmSpec) []int {
	g := v.serial % sgCount
	h := (g + 1) % sgCount
	if s.rebound[v.name] {
		h = (g + 2) % sgCount
	}
	return []int{g, h}
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
		v6 := ""
		if s.v6 {
			v6 = fmt.Sprintf(`, "ipv6Cidr": "fd00:%x:%x::/64", "ipv6GatewayIp": "fd00:%x:%x::1"`, a, c, a, c)
		}
		fmt.Fprintf(&b, `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: %s
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1450, "segmentId": "%d", "cidr": "10.%d.%d.0/24", "gatewayIp": "10.%d.%d.1"%s}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "%s"}'
---
`, netName(i, j), namespace, 1000+i*netsPerRouter+j, a, c, a, c, v6, netName(i, j))
	}
	ext6, peer6 := "", ""
	if s.v6 {
		ext6 = fmt.Sprintf("\n    ipv6: \"%s\"", externalIPv6(snatBase+i))
		peer6 = fmt.Sprintf("\n    ipv6: \"%s\"", externalIPv6(1))
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
    network: %s%s
  peerRouter:
    ip: %s
    mac: "%s"%s
  gateway: %s
`, routerName(i), routerName(i), fmt.Sprintf("fa:16:3e:%02x:%02x:%02x", byte(i>>16), byte(i>>8), byte(i)),
		netName(i, 0), netName(i, 1), s.snat(), externalNet, ext6, peerIP, peerMAC, peer6, s.gatewayNode())
	for j := 0; j < netsPerRouter; j++ {
		for _, v := range s.vms(j) {
			ann := ""
			if s.sgs {
				g := s.groups(v)
				ann = fmt.Sprintf("\n  annotations:\n    securityGroups: '[\"%s\", \"%s\"]'", sgID(g[0]), sgID(g[1]))
			}
			fmt.Fprintf(&b, `---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: %s%s
spec:
  networks:
    - name: eth1
      multus:
        networkName: %s
status:
  nodeName: %s%s
  interfaces:
    - name: eth1
      mac: "%s"
      ipAddress: %s
`, v.name, namespace, ann, v.network, s.node(v), s.migrationState(v), v.mac, v.ip)
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
	sgs      bool // the security groups, every VM in two
	v6       bool // dual stack: every network and router has its IPv6 side
	// sgAlt says group g's edited rule is on its alternate port.
	sgAlt [sgCount]bool
}

// variant is one input measured at an N: with a floating IP per router,
// or with security groups, or neither.
type variant struct{ fips, sgs, v6 bool }

// generate writes N routers' files and the external network's into
// dir/manifests, and the security groups' with v.sgs; with v.fips, every
// router has a floating IP.
func generate(dir string, n int, v variant) (*input, error) {
	fips := v.fips
	if n > maxRouters {
		return nil, fmt.Errorf("%d routers: the external network %s holds the SNAT and floating IPs of at most %d", n, externalCIDR, maxRouters)
	}
	in := &input{dir: filepath.Join(dir, "manifests"), tmp: filepath.Join(dir, "manifests.tmp"), fips: fips, sgs: v.sgs, v6: v.v6}
	for _, d := range []string{in.dir, in.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	external := externalManifest
	if v.v6 {
		external = strings.Replace(external, `"gatewayIp": "`+peerIP+`"}`, `"gatewayIp": "`+peerIP+`", "ipv6Cidr": "`+externalCIDR6+`"}`, 1)
	}
	if err := os.WriteFile(filepath.Join(in.dir, "external.yaml"), []byte(external), 0o644); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		s := &routerState{index: i, fip: fips, sgs: v.sgs, v6: v.v6, rebound: map[string]bool{}}
		in.routers = append(in.routers, s)
		if err := os.WriteFile(s.file(in.dir), s.manifest(), 0o644); err != nil {
			return nil, err
		}
	}
	if in.sgs {
		if err := os.WriteFile(in.sgFile(in.dir), in.sgManifest(), 0o644); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func (in *input) sgFile(dir string) string { return filepath.Join(dir, "securitygroups.yaml") }

// sgRulePort is the TCP port of group g's edited rule.
func (in *input) sgRulePort(g int) int {
	if in.sgAlt[g] {
		return sgAltPort + g
	}
	return sgPort + g
}

// sgManifest is the security groups' file: sgCount groups, each with
// sgRules SecurityGroupRule objects of every kind of match (ports, a port
// range, ICMP, a remote prefix, a remote group, egress).
func (in *input) sgManifest() []byte {
	var docs []string
	for g := 0; g < sgCount; g++ {
		docs = append(docs, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata:
  name: %s
spec:
  id: %s
  name: group %d
`, sgID(g), sgID(g), g))
		specs := [sgRules]string{
			"direction: ingress, protocol: tcp, portRangeMin: 22, portRangeMax: 22, remoteIpPrefix: 0.0.0.0/0",
			"direction: ingress, protocol: tcp, portRangeMin: 80, portRangeMax: 90, remoteIpPrefix: 10.0.0.0/8",
			"direction: ingress, protocol: udp, portRangeMin: 53",
			"direction: ingress, protocol: icmp, portRangeMin: 8, portRangeMax: 0",
			fmt.Sprintf("direction: ingress, protocol: tcp, portRangeMin: 443, remoteGroupId: %s", sgID((g+1)%sgCount)),
			"direction: egress, etherType: IPv4",
			"direction: egress, protocol: tcp, portRangeMin: 5432, remoteIpPrefix: 172.16.0.0/16",
			fmt.Sprintf("direction: ingress, protocol: udp, portRangeMin: 5000, portRangeMax: 5100, remoteGroupId: %s", sgID(g)),
			"direction: ingress, protocol: sctp, portRangeMin: 9999",
			fmt.Sprintf("direction: ingress, protocol: tcp, portRangeMin: %d", in.sgRulePort(g)),
		}
		for q, spec := range specs {
			docs = append(docs, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata:
  name: %s
spec: {id: %s, securityGroupId: %s, %s}
`, sgRuleID(g, q), sgRuleID(g, q), sgID(g), spec))
		}
	}
	return []byte(strings.Join(docs, "---\n"))
}

// writeSGs replaces the security groups' file at once.
func (in *input) writeSGs() error {
	tmp := in.sgFile(in.tmp)
	if err := os.WriteFile(tmp, in.sgManifest(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, in.sgFile(in.dir))
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
