package translator

import "strings"

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
// the SB's chassisredirect bindings (cr-<port>), which only name it. NB
// rows are never claimed by their names: the NB registry finds a row
// owned through a port (Static_MAC_Binding) by looking the port up.
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

// LoadBalancerName is the Load_Balancer row of a LoadBalancer for one
// protocol (tcp, udp, or icmp for its port-less VIP). The LoadBalancer's
// name holds no '_' (a Kubernetes name), so the row names of two
// LoadBalancers never meet.
func LoadBalancerName(lb, proto string) string { return NamePrefix + "lb-" + lb + "_" + proto }

// SwitchLoadBalancerName is the Load_Balancer row of a LoadBalancer for
// one protocol on its network's switch (the VIP from inside the network).
func SwitchLoadBalancerName(lb, proto string) string { return LoadBalancerName(lb, proto) + "_switch" }
