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
)

// DefaultInstance is the managed-by value when none is configured.
const DefaultInstance = "kubevirt-ovn"

// OwnerKind is the kind of input object that owns a row.
type OwnerKind string

// Owner kinds. A network owns its switch, its localnet port and its VM ports;
// a router owns everything else, including its ports on network switches.
const (
	KindRouter  OwnerKind = "VirtualRouter"
	KindNetwork OwnerKind = "Network"
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
	case KindRouter, KindNetwork:
		return Unit{Kind: k, Name: ids[KeyOwner]}, true
	}
	return Unit{}, false
}
