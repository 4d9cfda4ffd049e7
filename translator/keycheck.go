package translator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Tunnel key collisions (interconnect mode). Our switches and ports
// request the same key in every zone; when another datapath of a zone (or
// another port of the switch) requests the same key, ovn-northd gives it
// to the first requester and ours silently gets another one: cross-zone
// traffic of that network or port breaks. CheckTunnelKeys compares what
// we requested in a zone's NB with what its SB says after ovn-northd has
// processed it.

// KeyRequest is a tunnel key one of our rows requests in a zone's NB: a
// switch's datapath key (Port "") or a port's key.
type KeyRequest struct {
	// Network is the network whose switch it is.
	Network string
	// Switch is the switch's name, SwitchUUID its NB _uuid ("": not
	// known, the binding is found by the switch's name).
	Switch     string
	SwitchUUID string
	Port       string
	Key        int
}

// SBDatapath is a zone SB's Datapath_Binding: the NB row it binds (its
// external_ids logical-switch or logical-router), its name (external_ids
// name) and its key.
type SBDatapath struct {
	NBUUID string
	Name   string
	Key    int
}

// SBKeys are the tunnel keys a zone's SB holds: every datapath's, and the
// keys of ports by logical port name (ours at least).
type SBKeys struct {
	Datapaths []SBDatapath
	Ports     map[string]int
}

// SBDatapathOf is the SBDatapath of a Datapath_Binding's external_ids and
// key, as ovn-northd writes them: logical-switch or logical-router is the
// NB row's UUID (OVN 22.03 to 26.03; from 25.09 also the nb_uuid column),
// name its name.
func SBDatapathOf(externalIDs map[string]string, key int) SBDatapath {
	uuid := externalIDs["logical-switch"]
	if uuid == "" {
		uuid = externalIDs["logical-router"]
	}
	return SBDatapath{NBUUID: uuid, Name: externalIDs["name"], Key: key}
}

// KeyMismatch is a row of ours whose SB key is not the one it requests.
type KeyMismatch struct {
	Zone string
	KeyRequest
	// Actual is the key the SB gave it.
	Actual int
	// Holder names the datapath of the zone that has the requested key
	// ("" when unknown, and for a port).
	Holder string
	// Free: no datapath of the zone has the requested key (a switch's
	// mismatch only). ovn-northd from 25.09 on assigns a datapath's
	// requested key again only when its NB row changes (or it recomputes):
	// a key freed by another datapath's going stays unused
	// (nb.NudgeRequestedKey).
	Free bool
}

// String says what differs, where, the likely cause and what breaks, in
// one line.
func (m KeyMismatch) String() string {
	if m.Port == "" {
		holder := "another datapath"
		if m.Holder != "" {
			holder += " (" + m.Holder + ")"
		}
		return fmt.Sprintf("zone %s: switch %s of network %s requests tunnel key %d but the SB gave it %d: %s in zone %s requests the same key; ovn-northd gave ours another one: cross-zone traffic of network %s breaks",
			m.Zone, m.Switch, m.Network, m.Key, m.Actual, holder, m.Zone, m.Network)
	}
	return fmt.Sprintf("zone %s: port %s of switch %s (network %s) requests tunnel key %d but the SB gave it %d: another port of switch %s in zone %s requests the same key; ovn-northd gave ours another one: cross-zone traffic of port %s of network %s breaks",
		m.Zone, m.Port, m.Switch, m.Network, m.Key, m.Actual, m.Switch, m.Zone, m.Port, m.Network)
}

// CheckTunnelKeys compares the keys want requests in zone with the keys
// sb holds, and returns the mismatches, sorted by switch then port. A
// switch's binding is the datapath whose NB UUID is the switch's, or else
// the only one named like it; a row without a binding yet (ovn-northd has
// not created it) is no mismatch.
func CheckTunnelKeys(zone string, want []KeyRequest, sb SBKeys) []KeyMismatch {
	byUUID := map[string]SBDatapath{}
	byName := map[string][]SBDatapath{}
	byKey := map[int]SBDatapath{}
	for _, dp := range sb.Datapaths {
		if dp.NBUUID != "" {
			byUUID[dp.NBUUID] = dp
		}
		if dp.Name != "" {
			byName[dp.Name] = append(byName[dp.Name], dp)
		}
		byKey[dp.Key] = dp
	}
	var out []KeyMismatch
	for _, r := range want {
		if r.Key == 0 {
			continue
		}
		if r.Port != "" {
			if got, ok := sb.Ports[r.Port]; ok && got != r.Key {
				out = append(out, KeyMismatch{Zone: zone, KeyRequest: r, Actual: got})
			}
			continue
		}
		dp, ok := byUUID[r.SwitchUUID]
		if !ok {
			named := byName[r.Switch]
			if len(named) != 1 || (named[0].NBUUID != "" && r.SwitchUUID != "") {
				// None yet, or several of that name and none ours by UUID.
				continue
			}
			dp = named[0]
		}
		if dp.Key == r.Key {
			continue
		}
		m := KeyMismatch{Zone: zone, KeyRequest: r, Actual: dp.Key}
		if h, ok := byKey[r.Key]; ok {
			m.Holder = cmpOr(h.Name, h.NBUUID)
		} else {
			m.Free = true
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b KeyMismatch) int {
		if c := strings.Compare(a.Switch, b.Switch); c != 0 {
			return c
		}
		return strings.Compare(a.Port, b.Port)
	})
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// RequestedKeys are the tunnel keys the rows of plan's units in zone
// request, but those of the units skip says to leave out (their commit
// failed: the NB holds other rows). Switch UUIDs are not known here.
func RequestedKeys(plan *Plan, zone string, skip func(Unit) bool) []KeyRequest {
	var zoneRows []*ZoneRows
	for i := range plan.Networks {
		if zr := plan.Networks[i].Zones[zone]; zr != nil && !skip(Unit{Kind: KindNetwork, Name: plan.Networks[i].Name}) {
			zoneRows = append(zoneRows, zr)
		}
	}
	for i := range plan.Routers {
		if zr := plan.Routers[i].Zones[zone]; zr != nil && !skip(Unit{Kind: KindRouter, Name: plan.Routers[i].Name}) {
			zoneRows = append(zoneRows, zr)
		}
	}
	network := map[string]string{} // switch name -> network
	for _, p := range plan.Networks {
		if p.Switch != nil {
			network[p.Switch.Name] = p.Name
		}
	}
	var out []KeyRequest
	for _, zr := range zoneRows {
		out = append(out, KeysOfRows(zr.Rows, network)...)
	}
	return out
}

// KeysOfRows are the tunnel keys rows request: each switch's
// other_config:requested-tnl-key and each port's
// options:requested-tnl-key. network maps a switch name to its network
// when the switch is not among rows.
func KeysOfRows(rows []Row, network map[string]string) []KeyRequest {
	var out []KeyRequest
	for _, r := range rows {
		switch m := r.Model.(type) {
		case *nbmodel.LogicalSwitch:
			if k, err := strconv.Atoi(m.OtherConfig[KeyTunnel]); err == nil {
				out = append(out, KeyRequest{Network: networkOf(m.Name, m.ExternalIDs, network), Switch: m.Name, SwitchUUID: m.UUID, Key: k})
			}
		case *nbmodel.LogicalSwitchPort:
			if k, err := strconv.Atoi(m.Options[KeyTunnel]); err == nil {
				out = append(out, KeyRequest{Network: networkOf(r.Parent, nil, network), Switch: r.Parent, Port: m.Name, Key: k})
			}
		}
	}
	return out
}

// networkOf is the network of switch sw: its owner, or as network says,
// or its name without our prefix.
func networkOf(sw string, ids map[string]string, network map[string]string) string {
	if ids[KeyOwnerKind] == string(KindNetwork) && ids[KeyOwner] != "" {
		return ids[KeyOwner]
	}
	if n, ok := network[sw]; ok {
		return n
	}
	return strings.TrimPrefix(sw, NamePrefix)
}
