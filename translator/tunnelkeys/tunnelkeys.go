// Package tunnelkeys allocates the tunnel keys of kubevirt-ovn's switches
// and switch ports in interconnect mode (one NB per zone), where every
// zone's NB requests the same key for a switch (other_config
// requested-tnl-key) and for a port (options requested-tnl-key).
//
// A key is kept while its owner (the unit whose plan names the switch or
// port) takes it; an owner that takes it no more releases it, and a
// released key is handed out again only once every other free key has
// been (the allocation goes round the range), so that a row still holding
// it in some zone's NB is long gone. Datapath keys are taken downward from
// MaxDatapathKey, port keys downward from MaxPortKey (ovn-northd allocates
// a datapath's other ports upward from 1). A datapath key that
// a foreign datapath requests (SetForeign) is never handed out, and a
// switch of ours holding one moves to a free key (ovn-northd gives a
// requested key to the datapath that had it first, and the other one
// silently gets a local key: its cross-zone traffic is lost). Before the
// first allocation the keys the NBs hold are adopted (AdoptHeld), so that
// a restart keeps them.
//
// An Allocator is a leaf: it holds its own mutex only inside one method,
// takes no callbacks and imports nothing of the planner, so its caller may
// hold locks of its own while calling it and no lock order involves it.
// It is deterministic: the same calls in the same order give the same
// keys.
package tunnelkeys

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Tunnel key ranges. OVN (lib/ovn-util.h) has 24-bit datapath keys:
// ovn-northd gives a zone's own datapaths keys in [1, 16711680]
// (OVN_MAX_DP_KEY_LOCAL, NB_Global options:max_tunid under Geneve), lowest
// free first, after every key a datapath requests; the 65535 keys above are
// global: ovn-ic allocates them upward from 16711682, ovn-kubernetes'
// transit switches request 16711683+network ID (up to 16715778) and its
// cluster-manager hands out the rest, [16715779, 16777215], upward. So
// kubevirt-ovn takes its datapath keys from the top of the local range
// downward, where nothing else requests keys and ovn-northd's own
// allocation, coming up from 1, arrives only past 16,646,144 datapaths in
// one zone (and a requested key wins over it anyway). 65,536 keys: as many
// as the global range holds, far more networks than one cluster declares.
// Port keys are 15 bits. Geneve carries them all; VXLAN does not (its
// datapath keys are 12 bits, max_tunid 4095 or 1023): interconnect mode
// refuses a zone whose NB_Global says so (ovn.ZoneKeys.CheckGeneve, where
// the zones' NBs are read).
const (
	MaxDatapathKey = 16711680 // OVN_MAX_DP_KEY_LOCAL
	MinDatapathKey = MaxDatapathKey - 65536 + 1
	MaxPortKey     = 1<<15 - 1
)

// ForeignKey is a datapath tunnel key that a datapath not ours requests,
// or will: another tool's Logical_Switch or Logical_Router in a zone's NB,
// ovn-kubernetes' network as its NAD records it. Holder names it for the
// reports of a collision.
type ForeignKey struct {
	Key    int    `json:"key"`
	Holder string `json:"holder,omitempty"`
}

// Ref names a tunnel key: switch Switch's datapath key (Port "") or the
// key of port Port on it.
type Ref struct{ Switch, Port string }

// Allocator allocates tunnel keys to owners of type O (the planner's
// units).
type Allocator[O comparable] struct {
	mu      sync.Mutex
	adopted bool
	// lo and hi bound the datapath keys handed out.
	lo, hi int
	// foreign are the keys foreign datapaths request, by source (a zone's
	// NB, a NAD), and the sources of each key.
	foreign   map[string]map[int]string
	foreignBy map[int]map[string]bool
	// moved are our switches whose key a foreign datapath requests, or
	// whose held key is out of range, with why, until they get another.
	moved    map[string]string
	switches map[string]int
	dpUsed   map[int]string
	ports    map[string]map[string]int // switch -> port -> key
	used     map[string]map[int]string // switch -> key -> port
	// heldPorts are the port keys the NBs held when adopted: new keys
	// avoid them on every switch (which switch an unplanned port is on is
	// not known), unless a switch has no other key left.
	heldPorts map[int]bool
	// heldByPort are those keys by port name, adopted when first taken.
	heldByPort map[string]int
	owned      map[O][]Ref
	nextDP     int
	nextPort   map[string]int
}

// New returns an allocator of the datapath keys [MinDatapathKey,
// MaxDatapathKey].
func New[O comparable]() *Allocator[O] {
	return NewInRange[O](MinDatapathKey, MaxDatapathKey)
}

// NewInRange returns an allocator of the datapath keys [lo, hi] (tests
// run out of a small range).
func NewInRange[O comparable](lo, hi int) *Allocator[O] {
	return &Allocator[O]{
		switches: map[string]int{}, dpUsed: map[int]string{},
		ports: map[string]map[string]int{}, used: map[string]map[int]string{},
		heldPorts: map[int]bool{}, heldByPort: map[string]int{}, owned: map[O][]Ref{}, nextPort: map[string]int{},
		lo: lo, hi: hi, nextDP: hi,
		foreign: map[string]map[int]string{}, foreignBy: map[int]map[string]bool{}, moved: map[string]string{},
	}
}

// Adopted says whether the held keys are adopted (AdoptHeld ran, or a key
// was taken).
func (k *Allocator[O]) Adopted() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.adopted
}

// AdoptHeld adopts, before the first allocation, the keys the NBs hold:
// switches, by switch name, and ports, by port name. A switch's or a
// port's key is kept when it is in range and no other switch or port of
// that switch has it, and a switch's when no foreign datapath requests it.
// A switch key outside the range (written by an older kubevirt-ovn, which
// took keys in OVN's global range [16711681, 16777215], where ovn-ic and
// ovn-kubernetes allocate too) is not adopted: that switch gets a key in
// range, once, in every zone (its ports keep theirs). Once adopted, or
// once a key is taken, it does nothing.
func (k *Allocator[O]) AdoptHeld(switches, ports map[string]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.adopted {
		return
	}
	k.adopted = true
	for _, sw := range slices.Sorted(maps.Keys(switches)) {
		key := switches[sw]
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
	for port, key := range ports {
		k.heldPorts[key] = true
		k.heldByPort[port] = key
	}
}

// Take returns the keys of refs, owner's switches and ports, allocating
// the missing ones, and releases the keys owner held that refs no longer
// name. A ref whose key is held by another port of its switch gets a new
// key. notes say which switches moved off a key (a foreign datapath
// requests it, or it was out of range). When a range has no free key left,
// Take fails with an error saying which range ran out for which switch or
// port; then it allocates nothing and releases nothing.
func (k *Allocator[O]) Take(owner O, refs []Ref) (keys map[Ref]int, notes []string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.adopted = true // nothing held is adopted after a first allocation
	out := make(map[Ref]int, len(refs))
	var fresh []Ref // allocated here: undone when a later ref fails
	for _, r := range refs {
		if r.Port == "" {
			key, had := k.switches[r.Switch]
			if !had {
				var ok bool
				if key, ok = k.switchKey(r.Switch); !ok {
					k.undo(fresh)
					return nil, nil, fmt.Errorf("ran out: every datapath key of kubevirt-ovn's range [%d, %d] is taken (by its switches, or requested by datapaths not ours), none left for switch %s", k.lo, k.hi, r.Switch)
				}
				fresh = append(fresh, r)
			}
			out[r] = key
			continue
		}
		if key, ok := k.ports[r.Switch][r.Port]; ok {
			out[r] = key
			continue
		}
		key := k.heldByPort[r.Port]
		if key < 1 || key > MaxPortKey || k.used[r.Switch][key] != "" {
			var ok bool
			if key, ok = k.freePort(r.Switch); !ok {
				k.undo(fresh)
				return nil, nil, fmt.Errorf("ran out: every port key of switch %s ([1, %d]) is taken, none left for port %s", r.Switch, MaxPortKey, r.Port)
			}
		}
		k.setPort(r.Switch, r.Port, key)
		fresh = append(fresh, r)
		out[r] = key
	}
	for _, r := range fresh {
		if why := k.moved[r.Switch]; r.Port == "" && why != "" {
			notes = append(notes, fmt.Sprintf("Logical_Switch %s: %s: moved to tunnel key %d in every zone", r.Switch, why, out[r]))
			delete(k.moved, r.Switch)
		}
	}
	k.release(owner, refs)
	return out, notes, nil
}

// Release releases every key of owner: it is gone.
func (k *Allocator[O]) Release(owner O) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.release(owner, nil)
}

// undo frees the keys Take allocated for refs before one failed.
func (k *Allocator[O]) undo(refs []Ref) {
	for _, r := range refs {
		if r.Port == "" {
			delete(k.dpUsed, k.switches[r.Switch])
			delete(k.switches, r.Switch)
			continue
		}
		delete(k.used[r.Switch], k.ports[r.Switch][r.Port])
		delete(k.ports[r.Switch], r.Port)
	}
}

// release frees the keys owner held that refs no longer name; refs nil
// frees all of them. A switch's key goes with the owner that took it.
func (k *Allocator[O]) release(owner O, refs []Ref) {
	for _, r := range k.owned[owner] {
		if slices.Contains(refs, r) {
			continue
		}
		if r.Port == "" {
			if key, ok := k.switches[r.Switch]; ok {
				delete(k.dpUsed, key)
			}
			delete(k.switches, r.Switch)
			delete(k.moved, r.Switch)
			continue
		}
		if key, ok := k.ports[r.Switch][r.Port]; ok {
			delete(k.used[r.Switch], key)
			delete(k.ports[r.Switch], r.Port)
		}
	}
	if len(refs) == 0 {
		delete(k.owned, owner)
		return
	}
	k.owned[owner] = slices.Clone(refs)
}

// switchKey gives switch sw, which has none, the next free key going down
// the range round, never one a foreign datapath requests; false when every
// key of the range is taken.
func (k *Allocator[O]) switchKey(sw string) (int, bool) {
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

// SetForeign records the keys source's foreign datapaths request (nil:
// none any more) and releases the keys of our switches that one of them
// requests: it returns the owners of those switches, in no particular
// order, which move to another key when they next take it.
func (k *Allocator[O]) SetForeign(source string, keys []ForeignKey) []O {
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
			k.moved[sw] = collision(f.Key, describe(source, f.Holder))
			moved = append(moved, sw)
		}
	}
	k.foreign[source] = now
	var owners []O
	for o, refs := range k.owned {
		for _, r := range refs {
			if r.Port == "" && slices.Contains(moved, r.Switch) {
				owners = append(owners, o)
				break
			}
		}
	}
	return owners
}

// foreignHolder describes who requests key, "" for nobody.
func (k *Allocator[O]) foreignHolder(key int) string {
	sources := k.foreignBy[key]
	if len(sources) == 0 {
		return ""
	}
	source := slices.Min(slices.Collect(maps.Keys(sources)))
	return describe(source, k.foreign[source][key])
}

// collision says why a switch of ours leaves key.
func collision(key int, who string) string {
	return fmt.Sprintf("tunnel key %d collides with %s (ovn-northd gives a requested key to the datapath that had it first; the other gets a zone-local key and loses its cross-zone traffic)", key, who)
}

func describe(source, holder string) string {
	if holder == "" {
		return source
	}
	return holder + " (" + source + ")"
}

// freePort is the next free port key of switch sw going down the range
// round, avoiding the keys the NBs held at start when it can; false when
// every port key of sw is taken.
func (k *Allocator[O]) freePort(sw string) (int, bool) {
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

func (k *Allocator[O]) setPort(sw, port string, key int) {
	if k.ports[sw] == nil {
		k.ports[sw], k.used[sw] = map[string]int{}, map[int]string{}
	}
	k.ports[sw][port], k.used[sw][key] = key, port
}
