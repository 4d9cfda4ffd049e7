package translator

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ForeignKey is a datapath tunnel key that a datapath not ours requests,
// or will: another tool's Logical_Switch or Logical_Router in a zone's NB,
// ovn-kubernetes' network as its NAD records it. Holder names it for the
// reports of a collision.
type ForeignKey struct {
	Key    int    `json:"key"`
	Holder string `json:"holder,omitempty"`
}

// keyRef names a tunnel key: a switch's datapath key (port "") or the key
// of a port on switch sw.
type keyRef struct{ sw, port string }

// tunnelKeys allocates the tunnel keys of interconnect mode (see zones.go).
// A key is kept while its unit plans the switch or port; a unit that plans
// it no more releases it, and a released key is handed out again only once
// every other free key has been (the allocation goes round the range), so
// that a row still holding it in some zone's NB is long gone. A datapath key
// that a foreign datapath requests is never handed out, and a switch of
// ours holding one moves to a free key (ovn-northd gives a requested key to
// the datapath that had it first, and the other one silently gets a local
// key: its cross-zone traffic is lost).
type tunnelKeys struct {
	mu      sync.Mutex
	settled bool
	// lo and hi bound the datapath keys handed out: MinDatapathKey and
	// MaxDatapathKey (other values in tests only).
	lo, hi int
	// foreign are the keys foreign datapaths request, by source (a zone's
	// NB, a NAD), and the sources of each key.
	foreign   map[string]map[int]string
	foreignBy map[int]map[string]bool
	// moved are our switches whose key a foreign datapath requests, with
	// why, until they get another key.
	moved    map[string]string
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
		lo: MinDatapathKey, hi: MaxDatapathKey, nextDP: MaxDatapathKey,
		foreign: map[string]map[int]string{}, foreignBy: map[int]map[string]bool{}, moved: map[string]string{},
	}
}

// settle adopts the keys the NBs hold: a switch's or a port's key is kept
// when it is in range and no other switch or port of that switch has it,
// and a switch's when no foreign datapath requests it. A switch key outside
// the range (written by an older kubevirt-ovn, which took keys in OVN's
// global range [16711681, 16777215], where ovn-ic and ovn-kubernetes
// allocate too) is not adopted: that switch gets a key in range, once, in
// every zone (its ports keep theirs).
func (k *tunnelKeys) settle(held TunnelKeys) {
	k.settled = true
	for _, sw := range slices.Sorted(maps.Keys(held.Switches)) {
		key := held.Switches[sw]
		switch who := k.foreignHolder(key); {
		case key < k.lo || key > k.hi:
			k.moved[sw] = fmt.Sprintf("tunnel key %d is outside kubevirt-ovn's range [%d, %d] (an older kubevirt-ovn's key)", key, k.lo, k.hi)
			continue
		case k.dpUsed[key] != "":
			continue
		case who != "":
			k.moved[sw] = collision(key, who)
			continue
		}
		k.switches[sw], k.dpUsed[key] = key, sw
	}
	for port, key := range held.Ports {
		k.heldPorts[key] = true
		k.heldByPort[port] = key
	}
}

// take returns the keys of refs, unit u's switches and ports, allocating
// the missing ones, and releases the keys u held that refs no longer name.
// A ref whose key is held by another port of its switch gets a new key.
// notes say which switches moved off a key a foreign datapath requests.
// When a range has no free key left, take fails with an error saying which
// range ran out for which switch or port; then it allocates nothing and
// releases nothing (the unit's rows stay as they are).
func (k *tunnelKeys) take(u Unit, refs []keyRef, held Held) (keys map[keyRef]int, notes []string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.settled {
		k.settle(held.HeldTunnelKeys())
	}
	out := make(map[keyRef]int, len(refs))
	var fresh []keyRef // allocated here: undone when a later ref fails
	for _, r := range refs {
		if r.port == "" {
			key, had := k.switches[r.sw]
			if !had {
				var ok bool
				if key, ok = k.switchKey(r.sw); !ok {
					k.undo(fresh)
					return nil, nil, fmt.Errorf("ran out: every datapath key of kubevirt-ovn's range [%d, %d] is taken (by its switches, or requested by datapaths not ours), none left for switch %s", k.lo, k.hi, r.sw)
				}
				fresh = append(fresh, r)
			}
			out[r] = key
			continue
		}
		if key, ok := k.ports[r.sw][r.port]; ok {
			out[r] = key
			continue
		}
		key := k.heldByPort[r.port]
		if key < 1 || key > MaxPortKey || k.used[r.sw][key] != "" {
			var ok bool
			if key, ok = k.freePort(r.sw); !ok {
				k.undo(fresh)
				return nil, nil, fmt.Errorf("ran out: every port key of switch %s ([1, %d]) is taken, none left for port %s", r.sw, MaxPortKey, r.port)
			}
		}
		k.setPort(r.sw, r.port, key)
		fresh = append(fresh, r)
		out[r] = key
	}
	for _, r := range fresh {
		if why := k.moved[r.sw]; r.port == "" && why != "" {
			notes = append(notes, fmt.Sprintf("Logical_Switch %s: %s: moved to tunnel key %d in every zone", r.sw, why, out[r]))
			delete(k.moved, r.sw)
		}
	}
	k.release(u, refs)
	return out, notes, nil
}

// undo frees the keys take allocated for refs before one failed.
func (k *tunnelKeys) undo(refs []keyRef) {
	for _, r := range refs {
		if r.port == "" {
			delete(k.dpUsed, k.switches[r.sw])
			delete(k.switches, r.sw)
			continue
		}
		delete(k.used[r.sw], k.ports[r.sw][r.port])
		delete(k.ports[r.sw], r.port)
	}
}

// release frees the keys unit u held that refs no longer name; refs nil
// frees all of them. A switch's key goes with the switch's unit.
func (k *tunnelKeys) release(u Unit, refs []keyRef) {
	for _, r := range k.owned[u] {
		if slices.Contains(refs, r) {
			continue
		}
		if r.port == "" {
			if key, ok := k.switches[r.sw]; ok {
				delete(k.dpUsed, key)
			}
			delete(k.switches, r.sw)
			delete(k.moved, r.sw)
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

// switchKey gives switch sw, which has none, the next free key going
// down the range round, never one a foreign datapath requests; ok is false
// when every key of the range is taken.
func (k *tunnelKeys) switchKey(sw string) (int, bool) {
	for range k.hi - k.lo + 1 {
		key := k.nextDP
		if k.nextDP--; k.nextDP < k.lo || k.nextDP > k.hi {
			k.nextDP = k.hi
		}
		if key < k.lo || key > k.hi {
			continue
		}
		if k.dpUsed[key] == "" && len(k.foreignBy[key]) == 0 {
			k.switches[sw], k.dpUsed[key] = key, sw
			return key, true
		}
	}
	return 0, false
}

// setForeign records the keys source's foreign datapaths request (nil:
// none any more) and releases the keys of our switches that one of them
// requests: the units returned own those switches, which move to another
// key when next planned.
func (k *tunnelKeys) setForeign(source string, keys []ForeignKey) []Unit {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.foreign[source] {
		if s := k.foreignBy[key]; s != nil {
			delete(s, source)
			if len(s) == 0 {
				delete(k.foreignBy, key)
			}
		}
	}
	delete(k.foreign, source)
	if len(keys) == 0 {
		return nil
	}
	now := make(map[int]string, len(keys))
	var moved []string
	for _, f := range keys {
		now[f.Key] = f.Holder
		if k.foreignBy[f.Key] == nil {
			k.foreignBy[f.Key] = map[string]bool{}
		}
		k.foreignBy[f.Key][source] = true
		if sw := k.dpUsed[f.Key]; sw != "" {
			delete(k.dpUsed, f.Key)
			delete(k.switches, sw)
			k.moved[sw] = collision(f.Key, k.describe(source, f.Holder))
			moved = append(moved, sw)
		}
	}
	k.foreign[source] = now
	var units []Unit
	for u, refs := range k.owned {
		for _, r := range refs {
			if r.port == "" && slices.Contains(moved, r.sw) {
				units = append(units, u)
				break
			}
		}
	}
	slices.SortFunc(units, unitOrder)
	return units
}

// foreignHolder describes who requests key, "" for nobody.
func (k *tunnelKeys) foreignHolder(key int) string {
	sources := k.foreignBy[key]
	if len(sources) == 0 {
		return ""
	}
	source := slices.Min(slices.Collect(maps.Keys(sources)))
	return k.describe(source, k.foreign[source][key])
}

// collision says why a switch of ours leaves key.
func collision(key int, who string) string {
	return fmt.Sprintf("tunnel key %d collides with %s (ovn-northd gives a requested key to the datapath that had it first; the other gets a zone-local key and loses its cross-zone traffic)", key, who)
}

func (k *tunnelKeys) describe(source, holder string) string {
	if holder == "" {
		return source
	}
	return holder + " (" + source + ")"
}

// freePort is the next free port key of switch sw going down the range
// round, avoiding the keys the NBs held at start when it can; ok is false
// when every port key of sw is taken.
func (k *tunnelKeys) freePort(sw string) (int, bool) {
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
			return key, true
		}
		if fallback == 0 {
			fallback = key
		}
	}
	return fallback, fallback != 0
}

func (k *tunnelKeys) setPort(sw, port string, key int) {
	if k.ports[sw] == nil {
		k.ports[sw], k.used[sw] = map[string]int{}, map[int]string{}
	}
	k.ports[sw][port], k.used[sw][key] = key, port
}
