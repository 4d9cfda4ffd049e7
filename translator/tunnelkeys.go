package translator

import (
	"maps"
	"slices"
	"sync"
)

// keyRef names a tunnel key: a switch's datapath key (port "") or the key
// of a port on switch sw.
type keyRef struct{ sw, port string }

// tunnelKeys allocates the tunnel keys of interconnect mode (see zones.go).
// A key is kept while its unit plans the switch or port; a unit that plans
// it no more releases it, and a released key is handed out again only once
// every other free key has been (the allocation goes round the range), so
// that a row still holding it in some zone's NB is long gone.
type tunnelKeys struct {
	mu       sync.Mutex
	settled  bool
	switches map[string]int
	dpUsed   map[int]string
	ports    map[string]map[string]int // switch -> port -> key
	used     map[string]map[int]string // switch -> key -> port
	// heldPorts are the port keys the NBs held when settled: new keys
	// avoid them on every switch (which switch an unplanned port is on is
	// not known), unless a switch has no other key left.
	heldPorts map[int]bool
	// heldByPort are those keys by port name, adopted when first planned.
	heldByPort map[string]int
	owned      map[Unit][]keyRef
	nextDP     int
	nextPort   map[string]int
}

func newTunnelKeys() *tunnelKeys {
	return &tunnelKeys{
		switches: map[string]int{}, dpUsed: map[int]string{},
		ports: map[string]map[string]int{}, used: map[string]map[int]string{},
		heldPorts: map[int]bool{}, heldByPort: map[string]int{}, owned: map[Unit][]keyRef{}, nextPort: map[string]int{},
		nextDP: MaxDatapathKey,
	}
}

// settle adopts the keys the NBs hold: a switch's or a port's key is kept
// when it is in range and no other switch or port of that switch has it.
func (k *tunnelKeys) settle(held TunnelKeys) {
	k.settled = true
	for _, sw := range slices.Sorted(maps.Keys(held.Switches)) {
		if key := held.Switches[sw]; key >= MinDatapathKey && key <= MaxDatapathKey && k.dpUsed[key] == "" {
			k.switches[sw], k.dpUsed[key] = key, sw
		}
	}
	for port, key := range held.Ports {
		k.heldPorts[key] = true
		k.heldByPort[port] = key
	}
}

// take returns the keys of refs, unit u's switches and ports, allocating
// the missing ones, and releases the keys u held that refs no longer name.
// A ref whose key is held by another port of its switch gets a new key.
func (k *tunnelKeys) take(u Unit, refs []keyRef, held Held) map[keyRef]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.settled {
		k.settle(held.HeldTunnelKeys())
	}
	out := make(map[keyRef]int, len(refs))
	for _, r := range refs {
		if r.port == "" {
			out[r] = k.switchKey(r.sw)
			continue
		}
		if key, ok := k.ports[r.sw][r.port]; ok {
			out[r] = key
			continue
		}
		key := k.heldByPort[r.port]
		if key < 1 || key > MaxPortKey || k.used[r.sw][key] != "" {
			key = k.freePort(r.sw)
		}
		k.setPort(r.sw, r.port, key)
		out[r] = key
	}
	k.release(u, refs)
	return out
}

// release frees the keys unit u held that refs no longer name; refs nil
// frees all of them. A switch's key goes with the switch's unit.
func (k *tunnelKeys) release(u Unit, refs []keyRef) {
	for _, r := range k.owned[u] {
		if slices.Contains(refs, r) {
			continue
		}
		if r.port == "" {
			delete(k.dpUsed, k.switches[r.sw])
			delete(k.switches, r.sw)
			continue
		}
		if key, ok := k.ports[r.sw][r.port]; ok {
			delete(k.used[r.sw], key)
			delete(k.ports[r.sw], r.port)
		}
	}
	if len(refs) == 0 {
		delete(k.owned, u)
		return
	}
	k.owned[u] = slices.Clone(refs)
}

// Forget releases the keys of a unit that is gone from the input.
func (k *tunnelKeys) forget(u Unit) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.release(u, nil)
}

func (k *tunnelKeys) switchKey(sw string) int {
	if key, ok := k.switches[sw]; ok {
		return key
	}
	for range MaxDatapathKey - MinDatapathKey + 1 {
		key := k.nextDP
		if k.nextDP--; k.nextDP < MinDatapathKey {
			k.nextDP = MaxDatapathKey
		}
		if k.dpUsed[key] == "" {
			k.switches[sw], k.dpUsed[key] = key, sw
			return key
		}
	}
	return 0 // 65,535 switches: planned without a key, ovn-northd refuses nothing
}

// freePort is the next free port key of switch sw going down the range
// round, avoiding the keys the NBs held at start when it can.
func (k *tunnelKeys) freePort(sw string) int {
	next := k.nextPort[sw]
	if next == 0 {
		next = MaxPortKey
	}
	fallback := 0
	for range MaxPortKey {
		key := next
		if next--; next < 1 {
			next = MaxPortKey
		}
		if k.used[sw][key] != "" {
			continue
		}
		if !k.heldPorts[key] {
			k.nextPort[sw] = next
			return key
		}
		if fallback == 0 {
			fallback = key
		}
	}
	return fallback
}

func (k *tunnelKeys) setPort(sw, port string, key int) {
	if key == 0 {
		return
	}
	if k.ports[sw] == nil {
		k.ports[sw], k.used[sw] = map[string]int{}, map[int]string{}
	}
	k.ports[sw][port], k.used[sw][key] = key, port
}
