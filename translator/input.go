// Package translator turns KubeVirt virtual-router declarations into OVN
// Northbound rows. Input indexes the declarations and plans one unit (a
// router or a network) at a time without I/O: the same input, the same
// rows held in the NB (Held) and the same allocator state give the same
// rows. The allocators it asks (package gateways' scheduler, package
// tunnelkeys' allocator) keep state from one plan to the next; Build plans a whole
// Snapshot on fresh ones, a pure function. Package nb diffs the planned
// rows against the rows kubevirt-ovn owns in the NB, the only producer of
// OVSDB operations, and nb.Commit writes them.
package translator

import (
	"slices"
	"strings"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Snapshot is everything a one-shot plan (Build) reads: the declarations of
// every source in the four fields of Objects (Snapshot.Objects), the SB
// chassis and what the NB holds; NewInputFrom indexes it as an Input, and
// manifest.Set fills its declarations from manifests.
type Snapshot struct {
	Routers  []Router
	Networks []Network
	VMs      []VMInterface
	// FloatingIPs belong to their router's unit (FloatingIP.Router).
	FloatingIPs []FloatingIP
	// SecurityGroups and SecurityGroupRules belong to the unit of their
	// group (KindSecurityGroup, named by its spec.id).
	SecurityGroups     []SecurityGroup
	SecurityGroupRules []SecurityGroupRule
	// LoadBalancers belong to the unit of the router whose internal
	// network is their LoadBalancer.Network (loadbalancer.go).
	LoadBalancers []LoadBalancer
	// SingleChassis: the OVN has no multi-chassis port binding (22.03): a
	// migrating VM's port moves when its migration completed
	// (Input.SetSingleChassis).
	SingleChassis bool
	// OVNRelease is ovn-northd's OVN release ("" unknown): a migration
	// on a release with the monitor-condition bug gets a note
	// (Input.SetOVNRelease).
	OVNRelease string
	// RejectEmptyLB: a load balancer without members rejects (TCP RST,
	// ICMP unreachable) rather than drops, as ONOS did (Input.SetRejectEmptyLB).
	RejectEmptyLB bool
	// DefaultDeny: every VM port drops IP traffic both ways except DHCP
	// and ping to its network's gateway, unless a security group allows
	// it, as ONOS did (Input.SetDefaultDeny, defaultdeny.go).
	DefaultDeny bool
	// Chassis are the SB chassis. ChassisKnown is false when no SB was given;
	// then every router with an external network must name its gateway.
	Chassis      []Chassis
	ChassisKnown bool
	// Interconnect: one NB per zone (the chassis carry their Zone); the
	// plan says each zone's rows, also before any chassis is known.
	Interconnect bool
	// ForeignKeys are the datapath keys datapaths not ours request, by
	// source (a zone's NB): see Input.SetForeignKeys.
	ForeignKeys map[string][]ForeignKey
	// OfflineMembers are the load balancer members each zone's own
	// health checks find offline, by zone: see Input.SetOfflineMembers.
	OfflineMembers map[string][]OfflineMember
	// Invalid are objects the source could not decode: their units fail and
	// keep their rows (they must not look deleted).
	Invalid map[Unit]error
	// Held is what the NB already gives to whom. The first claimant of an
	// SNAT IP, an internal network or a VM's address keeps it, whatever
	// creation times and names say, also across restarts and in file mode.
	// Nil: nobody holds anything.
	Held Held
}

// Held says who holds a claim in the NB now, "" for nobody.
type Held interface {
	// HeldSNATIP is the router whose gateway port has the (normalized)
	// SNAT IP ip.
	HeldSNATIP(ip string) string
	// HeldInternal is the router attached to network as an internal
	// network.
	HeldInternal(network string) string
	// HeldVMAddress is the VM port that has the MAC or IP addr on network.
	HeldVMAddress(network, addr string) string
	// HeldGateways are the chassis of router's gateway port by priority,
	// highest first (its Gateway_Chassis rows).
	HeldGateways(router string) []string
	// HeldTunnelKeys are the tunnel keys our switches and switch ports
	// request (interconnect mode). Read once, before the first allocation.
	HeldTunnelKeys() TunnelKeys
	// HeldFloatingIP is the floating IP (its spec.id) whose NAT row has
	// the (normalized) external IP ip.
	HeldFloatingIP(ip string) string
	// HeldFixedIP is the floating IP (its spec.id) whose NAT row on
	// router has the (normalized) logical IP ip.
	HeldFixedIP(router, ip string) string
}

// Claims say who holds what, as read from the rows in the NB.
type Claims struct {
	// SNATIPs maps an SNAT IP to the router whose gateway port has it.
	SNATIPs map[string]string
	// Internal maps a network to the router attached to it as an internal
	// network.
	Internal map[string]string
	// VMAddresses maps "network MAC" and "network IP" to the VM port that
	// has that address on that network.
	VMAddresses map[string]string
	// Gateways maps a router to the chassis of its gateway port, highest
	// priority first.
	Gateways map[string][]string
	// Keys are the tunnel keys our switches and switch ports request.
	Keys TunnelKeys
	// FloatingIPs maps a floating IP's external IP to its spec.id, and
	// FixedIPs "router fixed-IP" to the spec.id of the floating IP bound
	// to it, as their dnat_and_snat NAT rows say.
	FloatingIPs map[string]string
	FixedIPs    map[string]string
}

// HeldSNATIP implements Held.
func (c Claims) HeldSNATIP(ip string) string { return c.SNATIPs[ip] }

// HeldInternal implements Held.
func (c Claims) HeldInternal(network string) string { return c.Internal[network] }

// HeldVMAddress implements Held.
func (c Claims) HeldVMAddress(network, addr string) string {
	return c.VMAddresses[network+" "+addr]
}

// HeldGateways implements Held.
func (c Claims) HeldGateways(router string) []string { return c.Gateways[router] }

// HeldTunnelKeys implements Held.
func (c Claims) HeldTunnelKeys() TunnelKeys { return c.Keys }

// HeldFloatingIP implements Held.
func (c Claims) HeldFloatingIP(ip string) string { return c.FloatingIPs[ip] }

// HeldFixedIP implements Held.
func (c Claims) HeldFixedIP(router, ip string) string { return c.FixedIPs[router+" "+ip] }

// HeldSwitchKey implements KeyHolder.
func (c Claims) HeldSwitchKey(sw string) int { return c.Keys.Switches[sw] }

// HeldPortKey implements KeyHolder.
func (c Claims) HeldPortKey(port string) int { return c.Keys.Ports[port] }

// noClaims is the Held of an NB where nobody holds anything.
type noClaims struct{}

func (noClaims) HeldSNATIP(string) string            { return "" }
func (noClaims) HeldInternal(string) string          { return "" }
func (noClaims) HeldVMAddress(string, string) string { return "" }
func (noClaims) HeldGateways(string) []string        { return nil }
func (noClaims) HeldTunnelKeys() TunnelKeys          { return TunnelKeys{} }
func (noClaims) HeldFloatingIP(string) string        { return "" }
func (noClaims) HeldFixedIP(string, string) string   { return "" }

// Router is a VirtualRouter (kubevirt.io/v1) as ONOS kubevirt-networking
// accepted it.
type Router struct {
	Name        string
	MAC         string
	Description string
	EnableSNAT  bool
	// EnableIPv6SNAT (spec.enableIpv6Snat, a kubevirt-ovn extension):
	// the internal networks' ipv6Cidrs leave SNATed to External.IPv6
	// (NAT66); without it they are routed.
	EnableIPv6SNAT bool
	Internal       []string
	External       *External
	PeerRouter     *PeerRouter
	// Gateway is the node name of the chosen gateway; optional when the SB
	// is known.
	Gateway string
	// Created orders routers that claim the same SNAT IP or internal network
	// when the NB does not say who already holds it (Snapshot.Held): the
	// older one gets it. Zero (manifests on disk) sorts first, then name.
	Created time.Time
	// Generation is the object's metadata.generation, for status.
	Generation int64
}

// External is a router's external network and its SNAT IP.
type External struct {
	IP      string
	Network string
	// IPv6 is the router's IPv6 address on the external network (its
	// ipv6Cidr): a kubevirt-ovn extension, "" for none.
	IPv6 string
}

// PeerRouter is the upstream router on the external network.
type PeerRouter struct {
	IP  string
	MAC string
	// IPv6 is its IPv6 address, the next hop of the router's IPv6 default
	// route (a kubevirt-ovn extension); MAC is its MAC for both.
	IPv6 string
}

// NetworkType is the network-config "type" of a NetworkAttachmentDefinition.
type NetworkType string

// Network types accepted in network-config (case-insensitive on input).
const (
	NetworkFlat   NetworkType = "FLAT"
	NetworkVLAN   NetworkType = "VLAN"
	NetworkVXLAN  NetworkType = "VXLAN"
	NetworkGeneve NetworkType = "GENEVE"
	NetworkGRE    NetworkType = "GRE"
	NetworkSTT    NetworkType = "STT"
)

// Network is a NetworkAttachmentDefinition carrying a network-config
// annotation. Its name is the NAD's name.
type Network struct {
	Name      string
	Namespace string
	Type      NetworkType
	MTU       int
	SegmentID string
	GatewayIP string
	CIDR      string
	// PhysicalNetworkName is the localnet network_name of a FLAT or VLAN
	// network (ovn-bridge-mappings on the chassis); default: Name.
	PhysicalNetworkName string
	// IPv6CIDR and IPv6GatewayIP are the network's IPv6 side, a
	// kubevirt-ovn extension of network-config (ipv6Cidr, ipv6GatewayIp):
	// a /64 whose VMs configure their address by SLAAC from the router
	// advertisements of the gateway address ("" for an IPv4-only network).
	IPv6CIDR      string
	IPv6GatewayIP string
	// IPv6AddressMode (network-config ipv6AddressMode, Neutron's
	// ipv6_address_mode values): slaac ("" too), dhcpv6-stateless (SLAAC,
	// and DNS servers from DHCPv6) or dhcpv6-stateful (the address from
	// DHCPv6 too).
	IPv6AddressMode string
	HostRoutes      []HostRoute
	IPPool          *IPPool
	// IPv6Pool (network-config ipv6Pool, kubevirt-ovn's) is the ipPool of
	// ipv6Cidr: informational as IPPool is.
	IPv6Pool     *IPPool
	DNSes        []string
	DefaultRoute bool
}

// HostRoute is a network-config host route.
type HostRoute struct {
	Destination string
	Nexthop     string
}

// IPPool is a network-config address pool: the range an IPAM outside
// kubevirt-ovn may hand out, informational as in ONOS (which allocated
// nothing from it). A VM's address is accepted anywhere in the network's
// CIDR; only a load balancer's health check source IP must lie outside
// the pool (no VM may be given it later).
type IPPool struct {
	Start string
	End   string
}

// VMInterface is one interface of a VirtualMachineInstance attached to a
// network through multus.
type VMInterface struct {
	Namespace string
	VMI       string
	Interface string
	// Network is the network (NAD) name, NetworkNamespace its namespace.
	Network          string
	NetworkNamespace string
	MAC              string
	IP               string
	// IPv6 are the IPv6 addresses status.interfaces reports for the
	// interface (guest agent), comma-joined ("" for none): those in the
	// network's ipv6Cidr, and link-local ones, are its port's; without
	// any, its port has the SLAAC (EUI-64) address of its MAC.
	IPv6 string
	// IPv6Field, when set, names where IPv6 was declared (the interfaces
	// annotation's ipv6Address): each global address there must be a host
	// address of the network's ipv6Cidr, else it is the interface's error.
	IPv6Field string
	// MACField and IPField name where MAC and IP were read, for errors;
	// "": status.interfaces[Interface].mac and .ipAddress.
	MACField, IPField string
	// StatusMAC and StatusIP are what status.interfaces reports where MAC
	// or IP was declared (MACField, IPField) and status has one too: a
	// value that differs is an error of the interface.
	StatusMAC, StatusIP string
	// Node is the node the VMI runs on (status.nodeName; the target of a
	// migration once it completed, its source once it failed or was
	// aborted), "" before it is scheduled.
	Node string
	// MigrationTarget is the node a live migration is moving the VMI to
	// while it runs (status.migrationState names a target and has not
	// completed, failed nor been aborted); Node is then its source.
	// MigrationUID is the migration's (status.migrationState.migrationUid).
	MigrationTarget, MigrationUID string
	// MigrationTargetField is where MigrationTarget was read, for notes
	// ("" status.migrationState.targetNode; in a cluster, before the VMI
	// names it, the target pod's spec.nodeName).
	MigrationTargetField string
	// NoActivation: the VM announces no RARP on its migration target
	// (masquerade binding, vhost-user): its port is bound on both chassis
	// without the activation strategy while it migrates, and moves to the
	// target when the migration completed.
	NoActivation bool
	// SecurityGroups are the spec.ids of the security groups the VMI's
	// securityGroups annotation binds its ports to, sorted, without
	// duplicates, joined by commas (a string keeps VMInterface
	// comparable); "" for none. Groups lists them.
	SecurityGroups string
}

// Groups are the security groups v's port joins (SecurityGroups).
func (v *VMInterface) Groups() []string {
	if v.SecurityGroups == "" {
		return nil
	}
	return strings.Split(v.SecurityGroups, ",")
}

// JoinGroups is the VMInterface.SecurityGroups of ids: sorted, without
// duplicates or empty ids.
func JoinGroups(ids []string) string {
	out := slices.Clone(ids)
	slices.Sort(out)
	out = slices.Compact(out)
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	return strings.Join(out, ",")
}

// SecurityGroup is a kubevirt.io/v1 SecurityGroup as ONOS
// kubevirt-networking accepted it: the unit KindSecurityGroup named by its
// ID, one Port_Group of the VM ports bound to it and its rules' ACLs
// (securitygroup.go).
type SecurityGroup struct {
	// Name is metadata.name, ID spec.id (ONOS's key, what VMs and
	// remoteGroupId name), DisplayName spec.name.
	Name        string
	ID          string
	DisplayName string
	Description string
	// Rules are the rules embedded in spec.rules; their SecurityGroupID
	// is ID.
	Rules []SecurityGroupRule
	// Generation is metadata.generation, for status.
	Generation int64
}

// SecurityGroupRule is a kubevirt.io/v1 SecurityGroupRule, or an entry of
// a SecurityGroup's spec.rules, as ONOS accepted it. Values are as written;
// the planner checks them.
type SecurityGroupRule struct {
	// Name is metadata.name ("" for an embedded rule), ID spec.id.
	Name            string
	ID              string
	SecurityGroupID string
	// Direction is ingress or egress, EtherType IPv4 or IPv6 (any case).
	Direction string
	EtherType string
	// Protocol is a name (tcp, udp, icmp, sctp, any) or an IP protocol
	// number, "" for any.
	Protocol string
	// PortRangeMin and PortRangeMax: nil when absent. For ICMP, the type
	// and the code (Neutron's reading, not ONOS's swapped one).
	PortRangeMin, PortRangeMax *int
	RemoteIPPrefix             string
	RemoteGroupID              string
}

// SecurityGroupPlan is the desired rows of one security group: its
// Port_Group and the ACLs in it.
type SecurityGroupPlan struct {
	ID        string
	PortGroup *nbmodel.PortGroup
	// Ports are the VM ports bound to the group (LSP names), sorted.
	Ports []string
	// ACLs are the group's ACLs, sorted by key (external_ids
	// KeySecurityACL).
	ACLs []*nbmodel.ACL
	// KeepACLs are the keys of the ACLs of rules whose input is invalid:
	// an existing row is left as it is; RuleErrors say why.
	KeepACLs   []string `json:",omitempty"`
	RuleErrors []error  `json:"-"`
	// Notes say what of a rule was read as ONOS read it.
	Notes []string `json:",omitempty"`
	// AddressSet, in interconnect mode, is the group's addresses in every
	// zone when a rule names it as its remote group (nil otherwise).
	AddressSet *nbmodel.AddressSet `json:",omitempty"`
	// AddressSet6 is AddressSet's IPv6 twin, when such a rule is IPv6.
	AddressSet6 *nbmodel.AddressSet `json:",omitempty"`
	// Zones are the rows of each zone's NB in interconnect mode (nil
	// otherwise); a zone without an entry holds none of them.
	Zones map[string]*ZoneRows `json:",omitempty"`
}

// FloatingIP is a kubevirt.io/v1 floating IP (kind FloatingIp or
// FloatingIP) as ONOS kubevirt-networking accepted it. It belongs to the
// unit of the router it names: one NAT row of type dnat_and_snat on that
// router once it is valid and bound to a VM's address.
type FloatingIP struct {
	// Name is metadata.name: status is written to it.
	Name string
	// ID is spec.id, ONOS's key: the NAT row's kubevirt-ovn/floating-ip.
	ID string
	// Router is spec.routerName, Network spec.networkName (the router's
	// external network) and IP spec.floatingIp (the external address).
	Router  string
	Network string
	IP      string
	// FixedIP is spec.fixedIp, the VM's address it is bound to (optional).
	FixedIP string
	// VMName is spec.vmName, the VMI that has FixedIP (optional): "name"
	// or "namespace/name".
	VMName string
	// PodName is spec.podName: ignored, ONOS never installed anything for
	// it.
	PodName string
	// Created orders floating IPs that claim the same address (as routers'
	// Created); Generation is metadata.generation, for status.
	Created    time.Time
	Generation int64
}

// FloatingIPStatus is what a plan says of one floating IP: bound and
// answered, or why not.
type FloatingIPStatus struct {
	// Name is the object's metadata.name, ID its spec.id.
	Name, ID string
	// Generation is the metadata.generation the status is of.
	Generation int64 `json:"-"`
	// Ready: its NAT row is planned.
	Ready bool
	// Reason says why it is not Ready: its validation error, "not
	// associated" or "waiting for VM ...".
	Reason string
	// Port is the logical switch port of the VM it is bound to.
	Port string
	// LoadBalancer is the load balancer whose VIP it is bound to (then
	// Port is empty): it is a VIP of the load balancer's rows, no NAT.
	LoadBalancer string `json:",omitempty"`
	// Gateway is the chassis it is answered on: its router's active
	// gateway.
	Gateway string
	// Err is its own input error (Reason says it), nil when it is Ready,
	// not associated, waits for its VM or for its router.
	Err error `json:"-"`
}

// Chassis is an SB Chassis row as far as gateway selection needs it.
type Chassis struct {
	Name     string
	Hostname string
	// Gateway is true when ovn-cms-options contains enable-chassis-as-gw.
	Gateway bool
	// Physnets are the physical networks its ovn-bridge-mappings map.
	Physnets []string
	// Zone is the interconnect zone whose SB has this chassis as a local
	// chassis (not other_config:is-remote); "" with one central NB.
	Zone string
	// MonitorAll: its ovn-controller monitors all of the SB
	// (ovn-monitor-all=true), which its other_config says.
	MonitorAll bool
}

// LoadBalancer is a kubevirt.io/v1 LoadBalancer as ONOS kubevirt-networking
// accepted it: a VIP on an internal network balanced over members on that
// network, per rule (protocol and port range). It belongs to the unit of
// the router that has Network as an internal network.
type LoadBalancer struct {
	// Name is metadata.name: its rows are named after it and status is
	// written to it. ID is spec.name, ONOS's key (kept in external_ids).
	Name string
	ID   string
	// Description is spec.description.
	Description string
	// Network is spec.networkId, VIP spec.vip, Members spec.members.
	Network string
	VIP     string
	Members []string
	Rules   []LBRule
	// HealthCheck is spec.healthCheck, a kubevirt-ovn extension (ONOS had
	// no health checks): nil for none.
	HealthCheck *LBHealthCheck
	// Created and Generation as FloatingIP's.
	Created    time.Time
	Generation int64
}

// LBRule is one entry of a LoadBalancer's spec.rules: Protocol tcp, udp
// or icmp (case-insensitive); PortMin and PortMax (spec.portRangeMin and
// portRangeMax) for tcp and udp, PortMax 0 meaning PortMin.
type LBRule struct {
	Protocol         string
	PortMin, PortMax int
}

// LBHealthCheck says how OVN probes a load balancer's members on its tcp
// and udp ports: from SourceIP, an address of the network that is nobody
// else's (no VM's, not the gateway, outside the ipPool), every Interval
// seconds, a probe failing after Timeout seconds; SuccessCount probes in
// a row bring a member back, FailureCount take it out. Zero: OVN's
// defaults (LBHealthDefaults).
type LBHealthCheck struct {
	SourceIP                   string
	Interval, Timeout          int
	SuccessCount, FailureCount int
}

// LoadBalancerStatus is what a plan says of one load balancer: its rows
// are planned, or why not.
type LoadBalancerStatus struct {
	Name       string
	Generation int64 `json:"-"`
	Ready      bool
	// Reason is why it is not Ready; of a Ready one, what it lacks (no
	// router has its network).
	Reason string `json:",omitempty"`
	// Router is the router whose rows hold it; empty when no router has
	// its network.
	Router string
	// FloatingIPs are the floating IPs (addresses) bound to its VIP.
	FloatingIPs []string `json:",omitempty"`
	Err         error    `json:"-"`
}
