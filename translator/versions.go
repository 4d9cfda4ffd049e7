package translator

import (
	"github.com/ovn-kubernetes/libovsdb/client"
)

// HasTable says whether c's client model holds table: the NB client model
// holds an optional table (Static_MAC_Binding, which OVN 22.03 lacks) only
// when the server's schema has it.
func HasTable(c client.Client, table string) bool {
	tc := c.Cache()
	if tc == nil {
		return false
	}
	_, ok := tc.DatabaseModel().Types()[table]
	return ok
}

// notPinnedNote says why a peer router's MAC is not pinned.
func notPinnedNote(port, ip, mac string) string {
	return "peerRouter.mac " + mac + " (" + ip + " on " + port + ") is not pinned: this OVN Northbound has no Static_MAC_Binding table " +
		"(OVN before 22.12); the router still works, OVN learns the peer's MAC by ARP"
}
