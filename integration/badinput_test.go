package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownedRows lists, sorted, every row of ours in the tables we write (all
// columns, _uuid included), except lines naming one of skip.
func ownedRows(t *testing.T, c nbCtler, skip ...string) string {
	t.Helper()
	var rows []string
	for _, table := range []string{"Logical_Router", "Logical_Router_Port", "Logical_Switch", "Logical_Switch_Port",
		"NAT", "Logical_Router_Static_Route", "Logical_Router_Policy", "Gateway_Chassis", "Static_MAC_Binding", "DHCP_Options", "Port_Group", "ACL",
		"Load_Balancer", "Load_Balancer_Health_Check"} {
		for _, line := range strings.Split(nbctl(t, c, "--format=csv", "--no-headings", "list", table), "\n") {
			if !strings.Contains(line, "kubevirt-ovn/owner") && !(table == "Static_MAC_Binding" && strings.Contains(line, "kv-rtoe-")) {
				continue
			}
			if !slices.ContainsFunc(skip, func(s string) bool { return strings.Contains(line, s) }) {
				rows = append(rows, table+" "+line)
			}
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n")
}

// TestBadInputRejectedWhileManagingHealthyRouters feeds the bad inputs of
// issue 7 (and the old ones, issue 20's floating IPs and VM addresses, and
// issue 22's security groups and load balancers) into a running controller that manages 50
// healthy routers: each is rejected with an error naming its object, field
// and reason, and the rows of every other router and network, and the
// ovn-kubernetes-like rows, stay byte-identical.
func TestBadInputRejectedWhileManagingHealthyRouters(t *testing.T) {
	c := startCentral(t)
	foreign := seedForeignRows(t, c)
	dir := manyRouters(t, 50)
	p := startController(t, "bad-input", "--nb", c.NBTCP, "--from-file", dir, "--file-poll", "100ms")
	count := func(table string) int {
		return len(strings.Fields(nbctl(t, c, "--bare", "--columns=_uuid", "find", table, "external_ids:kubevirt-ovn/managed-by=kubevirt-ovn")))
	}
	waitNB(t, "50 healthy routers with their NAT and VM ports", func() bool {
		return count("Logical_Router") == 50 && count("NAT") == 50 && count("Logical_Switch_Port") == 50*3+1
	})
	// northd sets the up column of router-type ports: let it finish.
	nbctl(t, c, "--wait=sb", "sync")
	healthy := ownedRows(t, c)

	const newRouter = `---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: %s}
spec: %s
`
	const newNetwork = `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "cidr": "%s", "gatewayIp": "%s"}'
`
	const newVMI = `---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: %s, namespace: default}
spec:
  networks: [{name: eth1, multus: {networkName: %s}}]
status:
  interfaces: [{name: eth1, mac: "%s", ipAddress: %s}]
`
	const newFIP = `---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: %s}
spec: {id: %s, routerName: %s, networkName: public, floatingIp: %s, fixedIp: %s}
`
	const newLB = `---
apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: %s}
spec: {name: %s, networkId: %s, vip: %s, members: [%s], rules: [%s]%s}
`
	const newVMIDeclared = `---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: default
  annotations: {interfaces: '[{"network": "%s", "ipAddress": "%s"}]'}
spec:
  networks: [{name: eth1, multus: {networkName: %s}}]
  domain: {devices: {interfaces: [{name: eth1, macAddress: "%s"}]}}
status:
  interfaces: [{name: eth1, mac: "%s", ipAddress: %s}]
`
	const newSG = `---
apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: %s}
spec: {id: %s, name: x}
`
	const newSGRule = `---
apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: %s}
spec: {id: %s, securityGroupId: %s, %s}
`
	const poolNetwork = `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-pool
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "cidr": "10.5.0.0/24", "gatewayIp": "10.5.0.1", "ipPool": {"start": "10.5.0.20", "end": "10.5.0.10"}}'
`
	long := strings.Repeat("r", 255)
	tests := []struct {
		name  string
		setup func() // foreign rows the case needs
		input string
		// want are parts of the one error that must be reported.
		want []string
		// extra are names of valid objects of the case whose rows may
		// appear meanwhile.
		extra []string
	}{
		{name: "SNAT IP of another router, claimed by a name that sorts first",
			input: fmt.Sprintf(newRouter, "a-thief", "{external: {ip: "+manySNAT(1)+", network: public}, gateway: gw1}"),
			want:  []string{"VirtualRouter a-thief: spec.external.ip " + manySNAT(1) + " is already the SNAT IP of VirtualRouter rt-001"}},
		{name: "internal network of another router",
			input: fmt.Sprintf(newRouter, "a-thief", `{internal: [net-002]}`),
			want:  []string{"VirtualRouter a-thief: spec.internal[0] network net-002 is already an internal network of VirtualRouter rt-002"}},
		{name: "router name with an underscore",
			input: fmt.Sprintf(newRouter, "r_x", `{internal: [net-x]}`),
			want:  []string{"VirtualRouter r_x: metadata.name", "is not a valid name: a lowercase RFC 1123 subdomain"}},
		{name: "router name of 255 characters",
			input: fmt.Sprintf(newRouter, long, `{}`),
			want:  []string{"VirtualRouter " + long + ": metadata.name", "must be no more than 253 characters"}},
		{name: "network name with an underscore",
			input: fmt.Sprintf(newNetwork, "net_x", "10.2.0.0/24", "10.2.0.1"),
			want:  []string{"NetworkAttachmentDefinition default/net_x: metadata.name", "is not a valid name"}},
		{name: "VM IP used twice on a network, by a VMI whose port sorts first",
			input: fmt.Sprintf(newVMI, "a-vm", "net-003", "50:54:00:00:02:01", "10.100.3.5"),
			want:  []string{"VirtualMachineInstance default/a-vm: status.interfaces[eth1].ipAddress 10.100.3.5 is already the IP of VirtualMachineInstance default/vm-003 interface eth1 on network net-003"}},
		{name: "VM MAC used twice on a network",
			input: fmt.Sprintf(newVMI, "a-vm", "net-004", "50:54:00:00:00:04", "10.100.4.9"),
			want:  []string{"VirtualMachineInstance default/a-vm: status.interfaces[eth1].mac 50:54:00:00:00:04 is already the MAC of VirtualMachineInstance default/vm-004 interface eth1 on network net-004"}},
		{name: "spec.name differs from metadata.name",
			input: fmt.Sprintf(newRouter, "a-named", `{name: other-name, internal: [net-x]}`),
			want:  []string{"VirtualRouter a-named: spec.name other-name differs from metadata.name a-named"}},
		{name: "router declared twice",
			input: fmt.Sprintf(newRouter, "rt-005", `{internal: [net-005]}`),
			want:  []string{"VirtualRouter rt-005: metadata.name is declared 2 times"}},
		{name: "unknown network",
			input: fmt.Sprintf(newRouter, "r-lost", `{internal: [nope]}`),
			want:  []string{"VirtualRouter r-lost: spec.internal[0] network nope is unknown"}},
		{name: "floating IP that is another router's SNAT IP",
			input: fmt.Sprintf(newFIP, "fip-x", "fip-x", "rt-001", manySNAT(2), "10.100.1.5"),
			want:  []string{"FloatingIp fip-x: spec.floatingIp " + manySNAT(2) + " is the SNAT IP of VirtualRouter rt-002"}},
		{name: "floating IP outside the external network",
			input: fmt.Sprintf(newFIP, "fip-x", "fip-x", "rt-001", "172.30.0.5", "10.100.1.5"),
			want:  []string{"FloatingIp fip-x: spec.floatingIp 172.30.0.5 is outside network public (172.16.0.0/16)"}},
		{name: "floating IP bound to an address on another router's network",
			input: fmt.Sprintf(newFIP, "fip-x", "fip-x", "rt-001", "172.16.200.5", "10.100.2.5"),
			want:  []string{"FloatingIp fip-x: spec.fixedIp 10.100.2.5 is on none of VirtualRouter rt-001's internal networks"}},
		{name: "floating IP of an undeclared router",
			input: fmt.Sprintf(newFIP, "fip-x", "fip-x", "rt-nope", "172.16.200.5", "10.100.2.5"),
			want:  []string{"fip-x", "VirtualRouter rt-nope is not declared"}},
		{name: "load balancer member that is no address",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.100.1.100", "10.100.1.5, 10.100.1", "{protocol: tcp, portRangeMin: 80}", ""),
			want:  []string{"LoadBalancer lb-x: spec.members[1]", "10.100.1"}},
		{name: "load balancer VIP that is its network's gateway",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.100.1.1", "10.100.1.5", "{protocol: tcp, portRangeMin: 7000}", ""),
			want:  []string{"LoadBalancer lb-x: spec.vip 10.100.1.1 is the gatewayIp of network net-001"}},
		{name: "load balancer VIP that is a VM's address",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.100.1.5", "", "{protocol: udp, portRangeMin: 53}", ""),
			want:  []string{"LoadBalancer lb-x: spec.vip 10.100.1.5 is the address of VM port kv-net-001_default_vm-001_eth1 on network net-001"}},
		{name: "load balancer health check from a VM's address",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.100.1.100", "10.100.1.5", "{protocol: tcp, portRangeMin: 80}", ", healthCheck: {sourceIp: 10.100.1.5}"),
			want:  []string{"LoadBalancer lb-x: spec.healthCheck.sourceIp 10.100.1.5 is the address of VM port kv-net-001_default_vm-001_eth1"}},
		{name: "load balancer VIP outside its network",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.200.0.5", "10.100.1.5", "{protocol: tcp, portRangeMin: 80}", ""),
			want:  []string{"LoadBalancer lb-x: spec.vip 10.200.0.5 is outside network net-001"}},
		{name: "load balancer rule of another protocol",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.100.1.100", "10.100.1.5", "{protocol: gre}", ""),
			want:  []string{"LoadBalancer lb-x: spec.rules[0].protocol", "gre", "is not tcp, udp or icmp"}},
		{name: "load balancer without spec.name",
			input: fmt.Sprintf(newLB, "lb-x", `""`, "net-001", "10.100.1.100", "10.100.1.5", "{protocol: tcp, portRangeMin: 80}", ""),
			want:  []string{"LoadBalancer lb-x: spec.name is required"}},
		{name: "load balancer health check from outside the network",
			input: fmt.Sprintf(newLB, "lb-x", "lb-x", "net-001", "10.100.1.100", "10.100.1.5", "{protocol: tcp, portRangeMin: 80}", ", healthCheck: {sourceIp: 10.200.0.9}"),
			want:  []string{"LoadBalancer lb-x: spec.healthCheck.sourceIp 10.200.0.9 is outside network net-001"}},
		{name: "network ipPool upside down",
			input: poolNetwork,
			want:  []string{"NetworkAttachmentDefinition default/net-pool: network-config.ipPool start 10.5.0.20 is after end 10.5.0.10"}},
		{name: "VM address declared in the interfaces annotation differs from status",
			input: fmt.Sprintf(newVMIDeclared, "vm-dup", "net-006", "10.100.6.7", "net-006", "50:54:00:00:06:07", "50:54:00:00:06:07", "10.100.6.8"),
			want:  []string{"VirtualMachineInstance default/vm-dup", "10.100.6.7 differs from status.interfaces[eth1].ipAddress 10.100.6.8"}},
		{name: "security group rule with an unknown direction",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: sideways"),
			want:  []string{"SecurityGroupRule sgr-x: spec.direction", "is neither ingress nor egress"},
			extra: []string{"sg-x"}},
		{name: "security group rule with a port range upside down",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, protocol: tcp, portRangeMin: 90, portRangeMax: 80"),
			want:  []string{"SecurityGroupRule sgr-x: spec.portRangeMax 80 is below spec.portRangeMin 90"},
			extra: []string{"sg-x"}},
		{name: "security group rule naming an undeclared remote group",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, remoteGroupId: sg-nope"),
			want:  []string{"SecurityGroupRule sgr-x: spec.remoteGroupId SecurityGroup sg-nope is not declared"},
			extra: []string{"sg-x"}},
		{name: "security group rule of an unknown protocol",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, protocol: gre"),
			want:  []string{"SecurityGroupRule sgr-x: spec.protocol", "gre", "is none of tcp, udp, icmp, sctp, any or an IP protocol number 0-255"},
			extra: []string{"sg-x"}},
		{name: "security group rule with a remote prefix that is no prefix",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, remoteIpPrefix: 10.0.0.300/24"),
			want:  []string{"SecurityGroupRule sgr-x: spec.remoteIpPrefix"},
			extra: []string{"sg-x"}},
		{name: "security group rule with ports and no protocol",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, portRangeMin: 80"),
			want:  []string{"SecurityGroupRule sgr-x: spec.portRangeMin needs a spec.protocol"},
			extra: []string{"sg-x"}},
		{name: "security group rule of an unknown ether type",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: egress, etherType: IPX"),
			want:  []string{"SecurityGroupRule sgr-x: spec.etherType", "IPX", "is neither IPv4 nor IPv6"},
			extra: []string{"sg-x"}},
		{name: "IPv6 security group rule with an IPv4 remote prefix",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, etherType: IPv6, remoteIpPrefix: 10.0.0.0/8"),
			want:  []string{"SecurityGroupRule sgr-x: spec.remoteIpPrefix 10.0.0.0/8 is an IPv4 prefix; the rule's spec.etherType is IPv6"},
			extra: []string{"sg-x"}},
		{name: "router external ipv6 on a network without ipv6Cidr",
			input: fmt.Sprintf(newRouter, "r-v6", `{internal: [net-x], enableSnat: true, external: {ip: 172.16.250.1, ipv6: "2001:db8::1", network: public}, gateway: gw1}`),
			want:  []string{"VirtualRouter r-v6: spec.external.ipv6 network public has no ipv6Cidr"}},
		{name: "IPv6-only network with a gatewayIp",
			input: strings.Replace(fmt.Sprintf(newNetwork, "net-v6", "10.3.0.0/24", "10.3.0.1"), `"cidr": "10.3.0.0/24", "gatewayIp": "10.3.0.1"`, `"gatewayIp": "10.3.0.1", "ipv6Cidr": "fd00:3::/64"`, 1),
			want:  []string{"NetworkAttachmentDefinition default/net-v6: network-config.gatewayIp is set without network-config.cidr"}},
		{name: "network ipv6Pool outside its ipv6Cidr",
			input: strings.Replace(fmt.Sprintf(newNetwork, "net-v6", "10.3.0.0/24", "10.3.0.1"), `"gatewayIp": "10.3.0.1"`, `"gatewayIp": "10.3.0.1", "ipv6Cidr": "fd00:3::/64", "ipv6Pool": {"start": "fd00:3::10", "end": "fd00:4::10"}`, 1),
			want:  []string{"NetworkAttachmentDefinition default/net-v6: network-config.ipv6Pool fd00:3::10-fd00:4::10 is not inside ipv6Cidr fd00:3::/64"}},
		{name: "network ipv6AddressMode unknown",
			input: strings.Replace(fmt.Sprintf(newNetwork, "net-v6", "10.3.0.0/24", "10.3.0.1"), `"gatewayIp": "10.3.0.1"`, `"gatewayIp": "10.3.0.1", "ipv6Cidr": "fd00:3::/64", "ipv6AddressMode": "dhcp"`, 1),
			want:  []string{"NetworkAttachmentDefinition default/net-v6: network-config.ipv6AddressMode", "dhcp", "is none of slaac, dhcpv6-stateless, dhcpv6-stateful"}},
		{name: "security group rule with a port out of range",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, protocol: tcp, portRangeMin: 70000"),
			want:  []string{"SecurityGroupRule sgr-x: spec.portRangeMin 70000 is not a port (1-65535)"},
			extra: []string{"sg-x"}},
		{name: "security group rule with an ICMP type out of range",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSGRule, "sgr-x", "r-x", "sg-x", "direction: ingress, protocol: icmp, portRangeMin: 300"),
			want:  []string{"SecurityGroupRule sgr-x: spec.portRangeMin 300 is not an ICMP type (0-255)"},
			extra: []string{"sg-x"}},
		{name: "security group spec.id declared twice",
			input: fmt.Sprintf(newSG, "sg-x", "sg-x") + fmt.Sprintf(newSG, "sg-y", "sg-x"),
			want:  []string{"SecurityGroup sg-x: spec.id sg-x is declared by 2 SecurityGroups (sg-x, sg-y)"}},
		{name: "switch name held by another tool",
			setup: func() {
				nbctl(t, c, "ls-add", "kv-clash", "--", "set", "Logical_Switch", "kv-clash", "external_ids:owner=someone-else")
			},
			input: fmt.Sprintf(newNetwork, "clash", "10.3.0.0/24", "10.3.0.1"),
			want:  []string{"Logical_Switch kv-clash already exists in the NB and is not this kubevirt-ovn instance's row"}},
		{name: "switch port name held by another tool",
			setup: func() {
				nbctl(t, c, "ls-add", "other-switch", "--", "lsp-add", "other-switch", "kv-stor-net-clash_rt-clash")
			},
			input: fmt.Sprintf(newNetwork, "net-clash", "10.4.0.0/24", "10.4.0.1") + fmt.Sprintf(newRouter, "rt-clash", `{internal: [net-clash]}`),
			want:  []string{"Logical_Switch_Port kv-stor-net-clash_rt-clash already exists in the NB and is not this kubevirt-ovn instance's row"},
			extra: []string{"net-clash"}},
	}
	bad := filepath.Join(dir, "bad.yaml")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			require.NoError(t, os.WriteFile(bad, []byte(tc.input), 0o644))
			waitNB(t, "the controller reports: "+strings.Join(tc.want, " … "), func() bool {
				out := p.out.String()
				for _, line := range strings.Split(out, "\n") {
					if !slices.ContainsFunc(tc.want, func(w string) bool { return !strings.Contains(line, w) }) {
						return true
					}
				}
				return false
			})
			assert.Equal(t, healthy, ownedRows(t, c, tc.extra...), "the healthy routers' and networks' rows are byte-identical")
			assert.Equal(t, foreign, dumpForeignRows(t, c), "ovn-kubernetes-like rows are identical")

			require.NoError(t, os.Remove(bad))
			waitNB(t, "only the healthy rows once the bad input is gone", func() bool { return ownedRows(t, c) == healthy })
		})
	}
	assert.Equal(t, foreign, dumpForeignRows(t, c))
}
