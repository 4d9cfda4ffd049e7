package translator

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Row names. They are what `ovn-nbctl show` prints, so they are readable and
// stable, and all start with NamePrefix. Kubernetes names never contain '_',
// so '_' separates the names a row name is built from and a role word
// (rtos, stor, rtoe, etor, ln) keeps port names of different roles apart:
// Port_Binding names are shared by switch and router ports.
const NamePrefix = "kv-"

// RouterName is the Logical_Router of a VirtualRouter.
func RouterName(router string) string { return NamePrefix + router }

// SwitchName is the Logical_Switch of a network.
func SwitchName(network string) string { return NamePrefix + network }

// RouterPortName is the router's port on an internal network.
func RouterPortName(router, network string) string {
	return NamePrefix + "rtos-" + router + "_" + network
}

// SwitchRouterPortName is the internal network switch's port facing the router.
func SwitchRouterPortName(network, router string) string {
	return NamePrefix + "stor-" + network + "_" + router
}

// GatewayPortName is the router's gateway port on its external network; it
// carries the SNAT IP and the gateway chassis.
func GatewayPortName(router string) string { return NamePrefix + "rtoe-" + router }

// RouterOfGatewayPort is the router whose gateway port is named port, for
// the SB's chassisredirect bindings (cr-<port>), which only name it. The NB
// registry finds a row owned through a port (Static_MAC_Binding) by looking
// the port up; only a binding whose port the NB holds nowhere is claimed by
// the name, after a read of the NB (translator/nb, OrphanKeys).
func RouterOfGatewayPort(port string) (string, bool) {
	return strings.CutPrefix(port, NamePrefix+"rtoe-")
}

// ExternalSwitchPortName is the external switch's port facing the router's
// gateway port.
func ExternalSwitchPortName(router string) string { return NamePrefix + "etor-" + router }

// LocalnetPortName is the localnet port of a FLAT or VLAN network.
func LocalnetPortName(network string) string { return NamePrefix + "ln-" + network }

// VMPortName is the switch port of a VM interface. It is the iface-id the
// VM's interface must carry in the Open_vSwitch database of its node.
func VMPortName(network, namespace, vmi, iface string) string {
	return NamePrefix + network + "_" + namespace + "_" + vmi + "_" + iface
}

// GatewayChassisName names the Gateway_Chassis row of a gateway port on a
// chassis. ovn-nbctl lrp-set-gateway-chassis joins them with '-', which is
// ambiguous for us: router a on chassis b-gw1 and router a-b on chassis
// gw1 would share a name (Gateway_Chassis names are a schema index). The
// port name holds no '_' (a Kubernetes name), so its first '_' ends it
// whatever the chassis is called.
func GatewayChassisName(port, chassis string) string { return port + "_" + chassis }

// PortGroupPrefix starts the name of every Port_Group kubevirt-ovn writes.
// Port_Group names are OVN identifiers ([a-zA-Z_.][a-zA-Z_.0-9]*: no '-',
// which Kubernetes names are full of), also used in ACL matches as
// @name and $name_ip4.
const PortGroupPrefix = "kv_sg_"

// PortGroupName is the Port_Group of security group id (its spec.id):
// kv_sg_<id> when id holds only letters, digits and '_'; otherwise every
// other character becomes '_' and a '.' and the first 8 hex digits of
// id's FNV-1a 64 hash follow (sg-web: kv_sg_sg_web.1f0c7e3a). The two forms
// cannot meet: only the second holds a '.'. Two ids that differ only in
// their replaced characters differ in the hash (a 32-bit hash: a clash is
// one in four billion per pair, and the Port_Group name index refuses the
// second group rather than merging them).
func PortGroupName(id string) string { return identName(PortGroupPrefix, id) }

// NetworkPortGroupPrefix starts the name of a network's default-deny
// Port_Group (--default-deny). It differs from PortGroupPrefix in its
// fourth character, so a network's group never has a security group's
// name.
const NetworkPortGroupPrefix = "kv_net_"

// NetworkPortGroupName is the default-deny Port_Group of network (its VM
// ports), sanitized as PortGroupName does (net-a: kv_net_net_a.<hash>).
func NetworkPortGroupName(network string) string { return identName(NetworkPortGroupPrefix, network) }

// identName is prefix+s as an OVN identifier: s itself when it holds only
// letters, digits and '_', else s with every other character replaced by
// '_' and '.' plus 8 hex digits of its FNV-1a 64 hash appended.
func identName(prefix, s string) string {
	clean := []byte(s)
	changed := false
	for i, c := range clean {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			clean[i] = '_'
			changed = true
		}
	}
	if !changed {
		return prefix + s
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("%s%s.%08x", prefix, clean, h.Sum64()>>32)
}

// AddressSetPrefix starts the name of every Address_Set kubevirt-ovn
// writes. It is not PortGroupPrefix followed by more: ovn-northd names the
// address sets it derives from each Port_Group <pg>_ip4 and <pg>_ip6 in
// the Southbound, and an NB Address_Set of one of those names makes
// every northd commit to the SB fail (seen on OVN 23.03: "constraint
// violation" on the SB Address_Set name index, northd stuck).
const AddressSetPrefix = "kv_sgaddr_"

// AddressSetName is the Address_Set of security group id's members'
// IPv4 addresses in interconnect mode: kv_sgaddr_<id>_ip4, id sanitized as
// in PortGroupName (kv_sgaddr_sg_web.1f0c7e3a_ip4).
func AddressSetName(id string) string {
	return AddressSetPrefix + strings.TrimPrefix(PortGroupName(id), PortGroupPrefix) + "_ip4"
}

// AddressSetName6 is AddressSetName for the members' IPv6 addresses:
// kv_sgaddr_<id>_ip6.
func AddressSetName6(id string) string {
	return AddressSetPrefix + strings.TrimPrefix(PortGroupName(id), PortGroupPrefix) + "_ip6"
}

// LoadBalancerName is the Load_Balancer row of a LoadBalancer for one
// protocol (tcp, udp, or icmp for its port-less VIP). The LoadBalancer's
// name holds no '_' (a Kubernetes name), so the row names of two
// LoadBalancers never meet.
func LoadBalancerName(lb, proto string) string { return NamePrefix + "lb-" + lb + "_" + proto }

// SwitchLoadBalancerName is the Load_Balancer row of a LoadBalancer for
// one protocol on its network's switch (the VIP from inside the network).
func SwitchLoadBalancerName(lb, proto string) string { return LoadBalancerName(lb, proto) + "_switch" }
