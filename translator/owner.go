package translator

// external_ids keys on every row kubevirt-ovn writes. A row without all three
// (and our instance in KeyManagedBy) is someone else's: it is never read as
// ours, updated or deleted.
const (
	KeyManagedBy = "kubevirt-ovn/managed-by"
	KeyOwnerKind = "kubevirt-ovn/owner-kind"
	KeyOwner     = "kubevirt-ovn/owner"
	// KeyDescription carries a VirtualRouter's spec.description on its
	// Logical_Router.
	KeyDescription = "kubevirt-ovn/description"
	// KeyPinned marks the gateway port of a router with spec.gateway:
	// kubevirt-ovn rebalance never moves that router.
	KeyPinned = "kubevirt-ovn/pinned"
	// KeyFloatingIP carries a floating IP's spec.id on its NAT row, for
	// readability and for who holds its address (Claims.FloatingIPs).
	KeyFloatingIP = "kubevirt-ovn/floating-ip"
	// KeySecurityACL identifies an ACL among its security group's:
	// "rule/<rule spec.id>" for a rule's, "base/<what>" for the ACLs
	// every group has (default drop, DHCP, gateway ping).
	KeySecurityACL = "kubevirt-ovn/sg-acl"
	// KeySecurityGroup carries a security group's spec.id on its
	// Port_Group.
	KeySecurityGroup = "kubevirt-ovn/security-group"
	// KeyLoadBalancer carries a LoadBalancer's metadata.name on its
	// Load_Balancer rows, KeyLoadBalancerID its spec.name (ONOS's key).
	KeyLoadBalancer   = "kubevirt-ovn/load-balancer"
	KeyLoadBalancerID = "kubevirt-ovn/load-balancer-id"
	// A router's Load_Balancer rows of a load balancer with a floating IP
	// on its VIP (one at most: one floating IP per fixed IP) carry it as
	// a NAT row would: KeyFloatingIP its spec.id, KeyFloatingIPAddress
	// its address, KeyLBVIP the VIP (its fixed IP), for who holds them
	// (Claims.FloatingIPs, Claims.FixedIPs).
	KeyFloatingIPAddress = "kubevirt-ovn/floating-ip-address"
	KeyLBVIP             = "kubevirt-ovn/vip"
)

// Our switches also carry ovn-kubernetes' network key with a value no
// ovn-kubernetes network can have (a CNI network name has no "/"). Its
// ovnkube-controller deletes, at every start, each Logical_Switch with a
// non-empty other_config and no such key whose name is not one of its
// zone's nodes (DefaultNetworkController.syncNodes, v1.0.0 to master): in
// interconnect mode ours carry other_config:requested-tnl-key. Every
// reader of the key in ovn-kubernetes v1.0.0 to master either compares it
// with one of its networks' names or also needs k8s.ovn.org/role or
// k8s.ovn.org/topology, which we never set (deploy/README.md,
// "Beside ovn-kubernetes").
const (
	KeyOVNKNetwork   = "k8s.ovn.org/network"
	NotAnOVNKNetwork = "kubevirt-ovn/not-ovn-kubernetes"
)

// Our Port_Group and ACL rows (and any Address_Set of ours) also carry
// ovn-kubernetes' owner-controller key, with the same value: no
// controller of ovn-kubernetes has that name (they are
// "default-network-controller", "<network>-network-controller" and the
// like, a network name having no "/"). ovnkube-controller v1.0.0, at every
// start (DefaultNetworkController.syncDb, pkg/ovn/external_ids_syncer),
// takes every row of those tables without the key for a legacy row of its
// own: the ACL syncer removed every ACL of ours from our port groups (the
// groups kept their ports and lost their rules), the address-set syncer
// deletes an address set of ours that no ACL names, and the port-group
// syncer failed on our groups, failing its start. Every reader
// of the key in ovn-kubernetes v1.0.0 to master compares it with one of
// its controllers' names, or needs a k8s.ovn.org/owner-type we never set
// (deploy/ovn-kubernetes-audit.md).
const KeyOVNKOwnerController = "k8s.ovn.org/owner-controller"

// PolicyIDs are the external_ids of a Port_Group, ACL or Address_Set of
// unit u: its owner keys and ovn-kubernetes' owner-controller key
// (KeyOVNKOwnerController).
func PolicyIDs(instance string, u Unit) map[string]string {
	ids := OwnerIDs(instance, u)
	ids[KeyOVNKOwnerController] = NotAnOVNKNetwork
	return ids
}

// SwitchIDs are the external_ids of a switch of unit u: its owner keys and
// the survival marker.
func SwitchIDs(instance string, u Unit) map[string]string {
	ids := OwnerIDs(instance, u)
	ids[KeyOVNKNetwork] = NotAnOVNKNetwork
	return ids
}

// DefaultInstance is the managed-by value when none is configured.
const DefaultInstance = "kubevirt-ovn"

// OwnerKind is the kind of input object that owns a row.
type OwnerKind string

// Owner kinds. A network owns its switch, its localnet port and its VM ports;
// a router owns everything else, including its ports on network switches.
const (
	KindRouter  OwnerKind = "VirtualRouter"
	KindNetwork OwnerKind = "Network"
	// KindSecurityGroup owns its Port_Group and the ACLs in it; its name
	// is the group's spec.id.
	KindSecurityGroup OwnerKind = "SecurityGroup"
)

// Unit is what one reconcile computes and one transaction commits: a router
// or a network.
type Unit struct {
	Kind OwnerKind
	Name string
}

func (u Unit) String() string { return string(u.Kind) + " " + u.Name }

// OwnerIDs are the external_ids that mark a row as owned by unit u of
// instance.
func OwnerIDs(instance string, u Unit) map[string]string {
	return map[string]string{
		KeyManagedBy: instance,
		KeyOwnerKind: string(u.Kind),
		KeyOwner:     u.Name,
	}
}

// OwnedBy reports whether external_ids mark a row as owned by unit u.
func OwnedBy(ids map[string]string, instance string, u Unit) bool {
	return ids[KeyManagedBy] == instance && ids[KeyOwnerKind] == string(u.Kind) && ids[KeyOwner] == u.Name
}

// OwnerOf returns the unit owning a row of instance, and false for a row
// that is not ours.
func OwnerOf(ids map[string]string, instance string) (Unit, bool) {
	if ids[KeyManagedBy] != instance || ids[KeyOwner] == "" {
		return Unit{}, false
	}
	switch k := OwnerKind(ids[KeyOwnerKind]); k {
	case KindRouter, KindNetwork, KindSecurityGroup:
		return Unit{Kind: k, Name: ids[KeyOwner]}, true
	}
	return Unit{}, false
}
