package translator

import (
	"fmt"
	"slices"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/tunnelkeys"
)

// The planner's calls into the tunnel key allocator (package tunnelkeys)
// in interconnect mode: a unit's plan takes its switch's and ports' keys
// (takeKeys), a unit gone from the input releases them (Plan), and the
// foreign keys are set here.

// Tunnel key ranges: see package tunnelkeys.
const (
	MaxDatapathKey = tunnelkeys.MaxDatapathKey
	MinDatapathKey = tunnelkeys.MinDatapathKey
	MaxPortKey     = tunnelkeys.MaxPortKey
)

// ForeignKey is a datapath tunnel key that a datapath not ours requests.
type ForeignKey = tunnelkeys.ForeignKey

// ReasonTunnelKeysExhausted is the reason of a unit that needs a tunnel
// key when a range has none left: its rows stay as they are.
const ReasonTunnelKeysExhausted = "TunnelKeysExhausted"

func newTunnelKeys() *tunnelkeys.Allocator[Unit] { return tunnelkeys.New[Unit]() }

// SetForeignKeys records the datapath keys that datapaths not ours request
// in source (a zone's NB, a NAD of ovn-kubernetes, a zone agent's report):
// no switch of ours gets one of them, and a switch of ours that holds one
// moves to another key. It replaces what source said before; nil keys
// forget source. Call it before the first plan with every source known,
// and again whenever a source changes. It returns the units whose switch
// must move (their next plan says so in NetworkPlan.KeyNotes), sorted.
func (in *Input) SetForeignKeys(source string, keys []ForeignKey) []Unit {
	in.mu.Lock()
	if in.keys == nil {
		in.keys = newTunnelKeys()
	}
	k := in.keys
	in.mu.Unlock()
	units := k.SetForeign(source, keys)
	slices.SortFunc(units, CompareUnits)
	return units
}

// takeKeys are unit u's tunnel keys for refs: allocated (with notes on
// switches moved off a key), or a follower's from held. Callers hold in.mu
// (read).
func (in *Input) takeKeys(u Unit, refs []tunnelkeys.Ref, held Held) (map[tunnelkeys.Ref]int, []string, error) {
	kind := ObjVirtualRouter
	if u.Kind == KindNetwork {
		kind = ObjNAD
	}
	if !in.follow {
		if !in.keys.Adopted() {
			h := held.HeldTunnelKeys()
			in.keys.AdoptHeld(h.Switches, h.Ports)
		}
		keys, notes, err := in.keys.Take(u, refs)
		if err != nil {
			return nil, nil, &InputError{Kind: kind, Object: u.Name, Field: "tunnel keys", Msg: err.Error(), Reason: ReasonTunnelKeysExhausted}
		}
		return keys, notes, nil
	}
	kh, _ := held.(KeyHolder)
	out := map[tunnelkeys.Ref]int{}
	missing := 0
	for _, r := range refs {
		key := 0
		if kh != nil && r.Port == "" {
			key = kh.HeldSwitchKey(r.Switch)
		} else if kh != nil {
			key = kh.HeldPortKey(r.Port)
		}
		if key == 0 {
			missing++
		}
		out[r] = key
	}
	if missing > 0 {
		return nil, nil, &InputError{Kind: kind, Object: u.Name, Field: "tunnel keys", Msg: fmt.Sprintf("%d of %d not allocated yet by the allocator", missing, len(refs)), Reason: ReasonWaiting}
	}
	return out, nil, nil
}

// keysOf are keys by switch and by port name.
func keysOf(keys map[tunnelkeys.Ref]int) TunnelKeys {
	out := TunnelKeys{Switches: map[string]int{}, Ports: map[string]int{}}
	for r, k := range keys {
		if r.Port == "" {
			out.Switches[r.Switch] = k
		} else {
			out.Ports[r.Port] = k
		}
	}
	return out
}
