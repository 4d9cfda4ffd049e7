package translator

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gateways"
)

// referenceBuild is the whole-input planner Build was before Input: every
// rule evaluated over the whole snapshot at once. It shares only the
// per-object functions (validation, row building) with Input, so it is an
// independent oracle for the indexes and the claim rules.
func referenceBuild(s *Snapshot, instance string) *Plan {
	held := s.Held
	if held == nil {
		held = noClaims{}
	}
	p := &Plan{Failed: map[Unit][]error{}}
	fail := func(u Unit, err error) { p.Failed[u] = append(p.Failed[u], err) }
	for u, err := range s.Invalid {
		fail(u, err)
	}

	byName := map[string][]*Network{}
	for i := range s.Networks {
		byName[s.Networks[i].Name] = append(byName[s.Networks[i].Name], &s.Networks[i])
	}
	nets := map[string]*network{}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		defs := byName[name]
		u := Unit{Kind: KindNetwork, Name: name}
		if len(defs) > 1 {
			var where []string
			for _, d := range defs {
				where = append(where, d.Namespace)
			}
			slices.Sort(where)
			for _, d := range defs {
				fail(u, networkErr(d, "metadata.name", "%s is defined in namespaces %s; network names must be unique", name, strings.Join(where, ", ")))
			}
			continue
		}
		n, errs := validateNetwork(defs[0])
		for _, err := range errs {
			fail(u, err)
		}
		if len(errs) == 0 {
			nets[name] = n
		}
	}
	vmsByNet := map[string][]*VMInterface{}
	for i := range s.VMs {
		v := &s.VMs[i]
		if n, ok := nets[v.Network]; ok && n.Namespace == v.NetworkNamespace {
			vmsByNet[v.Network] = append(vmsByNet[v.Network], v)
		}
	}
	var chassis map[string]string
	if s.ChassisKnown {
		chassis = nodeChassis(s.Chassis)
	}
	for _, name := range slices.Sorted(maps.Keys(nets)) {
		np := networkPlan(nets[name], vmsByNet[name], instance, held, portBinder{chassis: chassis, single: s.SingleChassis})
		p.Errors = append(p.Errors, np.VMErrors...)
		p.Networks = append(p.Networks, *np)
	}

	order := make([]*Router, 0, len(s.Routers))
	for i := range s.Routers {
		order = append(order, &s.Routers[i])
	}
	slices.SortStableFunc(order, func(a, b *Router) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	snatOwner, internalOwner, externalNets := map[string]string{}, map[string]string{}, map[string]string{}
	declared := map[string]int{}
	for _, r := range order {
		declared[r.Name]++
		if r.External != nil && r.External.Network != "" {
			if _, ok := externalNets[r.External.Network]; !ok {
				externalNets[r.External.Network] = r.Name
			}
		}
	}
	claims := func(r *Router) bool {
		return declared[r.Name] == 1 && s.Invalid[Unit{Kind: KindRouter, Name: r.Name}] == nil
	}
	for _, r := range order {
		if !claims(r) {
			continue
		}
		if r.External != nil && r.External.IP != "" {
			if key := normalizeIP(r.External.IP); held.HeldSNATIP(key) == r.Name {
				snatOwner[key] = r.Name
			}
		}
		for _, in := range r.Internal {
			if held.HeldInternal(in) == r.Name {
				internalOwner[in] = r.Name
			}
		}
	}
	lookup := func(name string) (*network, bool) { n, ok := nets[name]; return n, ok }
	var valid []*router
	for _, r := range order {
		u := Unit{Kind: KindRouter, Name: r.Name}
		if s.Invalid[u] != nil {
			continue
		}
		if n := declared[r.Name]; n > 1 {
			if p.Failed[u] == nil {
				fail(u, routerErr(r.Name, "metadata.name", "is declared %d times", n))
			}
			continue
		}
		vr, errs := validateRouter(r, lookup)
		if r.External != nil && r.EnableSNAT && vr.ext != nil {
			// Which chassis: the scheduler's (history-dependent) choice,
			// checked apart by gatewayOrderOK; whether any: here.
			n := gateways.Need{Physnet: physnetOf(vr.ext.Network), Pin: r.Gateway}
			switch {
			case !s.ChassisKnown && r.Gateway == "":
				errs = append(errs, routerErr(r.Name, "spec.gateway", "is required when the Southbound database is not given (--sb)"))
			case !s.ChassisKnown:
				vr.gateways = []string{r.Gateway}
			default:
				sched := gateways.New()
				sched.SetChassis(gatewayChassis(s.Chassis))
				if _, err := sched.Assign(r.Name, n, nil); err != nil {
					errs = append(errs, gatewayErr(err))
				}
			}
		}
		if r.External != nil && r.External.IP != "" {
			key := normalizeIP(r.External.IP)
			if owner, ok := snatOwner[key]; ok && owner != r.Name {
				errs = append(errs, routerErr(r.Name, "spec.external.ip", "%s is already the SNAT IP of VirtualRouter %s", r.External.IP, owner))
			} else {
				snatOwner[key] = r.Name
			}
		}
		for i, in := range r.Internal {
			field := fmt.Sprintf("spec.internal[%d]", i)
			if owner, ok := internalOwner[in]; ok && owner != r.Name {
				errs = append(errs, routerErr(r.Name, field, "network %s is already an internal network of VirtualRouter %s", in, owner))
			} else {
				internalOwner[in] = r.Name
			}
			if owner, ok := externalNets[in]; ok {
				errs = append(errs, routerErr(r.Name, field, "network %s is the external network of VirtualRouter %s", in, owner))
			}
		}
		for _, err := range errs {
			fail(u, err)
		}
		if len(errs) == 0 {
			valid = append(valid, vr)
		}
	}
	slices.SortFunc(valid, func(a, b *router) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range valid {
		p.Routers = append(p.Routers, routerRows(r, instance))
	}
	for _, errs := range p.Failed {
		slices.SortStableFunc(errs, byMessage)
		p.Errors = append(p.Errors, errs...)
	}
	slices.SortStableFunc(p.Errors, byMessage)
	p.Errors = slices.CompactFunc(p.Errors, func(a, b error) bool { return a.Error() == b.Error() })
	return p
}

// gen makes random inputs that collide on purpose: few names, SNAT IPs,
// networks, MACs and IPs for many objects.
type gen struct {
	rnd *rand.Rand
	// n counts generated undecodable objects, to give each its own error.
	n int
}

func (g *gen) pick(xs ...string) string { return xs[g.rnd.Intn(len(xs))] }

func (g *gen) chance(pct int) bool { return g.rnd.Intn(100) < pct }

var (
	genNets     = []string{"net-0", "net-1", "net-2", "net-3", "pub-0", "pub-1"}
	genRouters  = []string{"r-0", "r-1", "r-2", "r-3", "r-4", "r-5"}
	genCreated  = []time.Time{{}, t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)}
	genChassis  = []Chassis{{Name: "ch-1", Hostname: "gw1", Gateway: true, Physnets: genNets}, {Name: "ch-2", Hostname: "gw2", Gateway: true, Physnets: []string{"pub-0", "net-1"}}, {Name: "ch-3", Hostname: "node3", Physnets: genNets}, {Name: "ch-4", Hostname: "gw4", Gateway: true, Physnets: []string{"pub-0", "pub-1"}}}
	genSNATIPs  = []string{"172.16.0.100", "172.16.0.101", "172.16.0.102", "172.17.0.100"}
	genVMMACs   = []string{"50:54:00:00:00:01", "50:54:00:00:00:02", "50:54:00:00:00:03"}
	genVMHosts  = []string{"11", "12", "13"}
	genVMIs     = []string{"vm-0", "vm-1", "vm-2", "vm-3"}
	genVMIfaces = []string{"eth1", "eth2"}
)

// cidrOf gives each generated network its own subnet: pub-N 172.16+N.0.0/24,
// net-N 10.N.0.0/24.
func cidrOf(name string) (prefix string) {
	var i int
	if _, err := fmt.Sscanf(name, "pub-%d", &i); err == nil {
		return fmt.Sprintf("172.%d.0", 16+i)
	}
	fmt.Sscanf(name, "net-%d", &i)
	return fmt.Sprintf("10.%d.0", i)
}

func (g *gen) network() Network {
	name := g.pick(genNets...)
	n := Network{Name: name, Namespace: "default", Type: NetworkType(g.pick("VXLAN", "FLAT", "geneve")), CIDR: cidrOf(name) + ".0/24", GatewayIP: cidrOf(name) + ".1"}
	switch {
	case g.chance(10):
		n.Namespace = "other"
	case g.chance(10):
		n.Type = "BOGUS"
	case g.chance(10):
		n.GatewayIP = ""
	}
	return n
}

func (g *gen) router() Router {
	r := Router{Name: g.pick(genRouters...), Created: genCreated[g.rnd.Intn(len(genCreated))], Generation: int64(g.rnd.Intn(3) + 1)}
	for range g.rnd.Intn(3) {
		r.Internal = append(r.Internal, g.pick(genNets...))
	}
	if g.chance(60) {
		r.External = &External{IP: g.pick(genSNATIPs...), Network: g.pick("pub-0", "pub-0", "pub-1", "net-0")}
		r.EnableSNAT = g.chance(80)
		r.Gateway = g.pick("", "gw1", "ch-2", "node3")
		if g.chance(30) {
			r.PeerRouter = &PeerRouter{IP: "172.16.0.1", MAC: g.pick("", "fa:16:3e:aa:00:01")}
		}
	}
	if g.chance(10) {
		r.MAC = "not-a-mac"
	}
	return r
}

func (g *gen) vm() VMInterface {
	net := g.pick("net-0", "net-1", "net-2", "pub-0")
	v := VMInterface{
		Namespace: "default", VMI: g.pick(genVMIs...), Interface: g.pick(genVMIfaces...),
		Network: net, NetworkNamespace: "default",
		MAC: g.pick(genVMMACs...), IP: cidrOf(net) + "." + g.pick(genVMHosts...),
	}
	if g.chance(10) {
		v.NetworkNamespace = "other"
	}
	if g.chance(5) {
		v.MAC = "01:00:5e:00:00:01"
	}
	return v
}

func (g *gen) objects() Objects {
	var o Objects
	for range g.rnd.Intn(3) {
		o.Routers = append(o.Routers, g.router())
	}
	for range g.rnd.Intn(3) {
		o.Networks = append(o.Networks, g.network())
	}
	for range g.rnd.Intn(4) {
		o.VMs = append(o.VMs, g.vm())
	}
	if g.chance(15) {
		g.n++
		u := Unit{Kind: KindRouter, Name: g.pick(genRouters...)}
		if g.chance(40) {
			u = Unit{Kind: KindNetwork, Name: g.pick(genNets...)}
		}
		o.Invalid = map[Unit]error{u: fmt.Errorf("%s: cannot decode (%d)", u, g.n)}
	}
	return o
}

// mutate changes one object of o, or adds one.
func (g *gen) mutate(o Objects) Objects {
	o = Objects{Routers: slices.Clone(o.Routers), Networks: slices.Clone(o.Networks), VMs: slices.Clone(o.VMs), Invalid: o.Invalid}
	switch g.rnd.Intn(6) {
	case 4, 5:
		// Only the creation time (the claim order) or the generation.
		if len(o.Routers) > 0 {
			i := g.rnd.Intn(len(o.Routers))
			if g.chance(70) {
				o.Routers[i].Created = genCreated[g.rnd.Intn(len(genCreated))]
			} else {
				o.Routers[i].Generation++
			}
		}
	case 0:
		if len(o.Routers) > 0 {
			i := g.rnd.Intn(len(o.Routers))
			r := g.router()
			r.Name = o.Routers[i].Name // the same router, edited
			o.Routers[i] = r
		} else {
			o.Routers = append(o.Routers, g.router())
		}
	case 1:
		if len(o.Networks) > 0 {
			i := g.rnd.Intn(len(o.Networks))
			n := g.network()
			n.Name = o.Networks[i].Name
			o.Networks[i] = n
		} else {
			o.Networks = append(o.Networks, g.network())
		}
	case 2:
		if len(o.VMs) > 0 {
			i := g.rnd.Intn(len(o.VMs))
			o.VMs[i] = g.vm()
		} else {
			o.VMs = append(o.VMs, g.vm())
		}
	case 3:
		o.Routers = append(o.Routers, g.router())
	}
	return o
}

func (g *gen) held() Claims {
	h := Claims{SNATIPs: map[string]string{}, Internal: map[string]string{}, VMAddresses: map[string]string{}}
	for _, ip := range genSNATIPs {
		if g.chance(40) {
			h.SNATIPs[ip] = g.pick(genRouters...)
		}
	}
	for _, n := range genNets {
		if g.chance(40) {
			h.Internal[n] = g.pick(genRouters...)
		}
	}
	for range 3 {
		v := g.vm()
		port := VMPortName(v.Network, v.Namespace, v.VMI, v.Interface)
		h.VMAddresses[v.Network+" "+v.MAC] = port
		h.VMAddresses[v.Network+" "+v.IP] = port
	}
	return h
}

// snapshotOf is the Snapshot equal to sources: their objects concatenated
// in source-name order; of two sources with an undecodable object of one
// unit, the first by name gives its error.
func snapshotOf(sources map[string]Objects, chassis []Chassis, known bool, held Held) *Snapshot {
	s := &Snapshot{Chassis: chassis, ChassisKnown: known, Held: held, Invalid: map[Unit]error{}}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		o := sources[name]
		s.Routers = append(s.Routers, o.Routers...)
		s.Networks = append(s.Networks, o.Networks...)
		s.VMs = append(s.VMs, o.VMs...)
		for u, err := range o.Invalid {
			if _, ok := s.Invalid[u]; !ok {
				s.Invalid[u] = err
			}
		}
	}
	return s
}

// unitsOf lists the units a snapshot declares, as Input.Units does.
func unitsOf(s *Snapshot) []Unit {
	units := set[Unit]{}
	for _, n := range s.Networks {
		units.add(Unit{Kind: KindNetwork, Name: n.Name})
	}
	for _, r := range s.Routers {
		units.add(Unit{Kind: KindRouter, Name: r.Name})
	}
	for u := range s.Invalid {
		units.add(u)
	}
	return sortedUnits(units)
}

// generationOf is the generation of router u's oldest declaration in s,
// the first listed of equally old ones.
func generationOf(s *Snapshot, u Unit) int64 {
	var first *Router
	for i, r := range s.Routers {
		if u.Kind == KindRouter && r.Name == u.Name && (first == nil || r.Created.Before(first.Created)) {
			first = &s.Routers[i]
		}
	}
	if first == nil {
		return 0
	}
	return first.Generation
}

// expectedUnitPlan is what the reference plan says of unit u.
func expectedUnitPlan(ref *Plan, u Unit) (np *NetworkPlan, rp *RouterPlan, errs []string) {
	if u.Kind == KindNetwork {
		for i := range ref.Networks {
			if ref.Networks[i].Name == u.Name {
				np = &ref.Networks[i]
			}
		}
	} else {
		for i := range ref.Routers {
			if ref.Routers[i].Name == u.Name {
				rp = &ref.Routers[i]
			}
		}
	}
	return np, rp, errTexts(ref.Failed[u])
}

// withoutGateways is p with the scheduler's gateway orders removed (the
// reference planner does not schedule) when the SB is known.
func withoutGateways(p *Plan, known bool) *Plan {
	if !known {
		return p
	}
	out := *p
	out.Routers = slices.Clone(p.Routers)
	for i := range out.Routers {
		if out.Routers[i].Gateway != nil {
			out.Routers[i].Gateway = &GatewayChoice{}
			out.Routers[i].GatewayChassis = nil
		}
	}
	return &out
}

func (rp RouterPlan) ptr() *RouterPlan { return &rp }

// gatewayOrderOK checks a scheduled router's gateway order against the
// snapshot: its candidates only, each once, as many as MaxGateways allows,
// spec.gateway first, and the Gateway_Chassis rows in that order.
func gatewayOrderOK(t *testing.T, s *Snapshot, rp *RouterPlan, ctx string) {
	t.Helper()
	if !s.ChassisKnown || rp.Gateway == nil {
		return
	}
	var r *Router
	for i := range s.Routers {
		if s.Routers[i].Name == rp.Name {
			r = &s.Routers[i]
		}
	}
	require.NotNil(t, r)
	var ext *Network
	for i := range s.Networks {
		if s.Networks[i].Name == r.External.Network {
			ext = &s.Networks[i]
		}
	}
	require.NotNil(t, ext)
	var cands []string
	for _, c := range s.Chassis {
		if physnet := physnetOf(ext); c.Gateway && (physnet == "" || slices.Contains(c.Physnets, physnet)) {
			cands = append(cands, c.Name)
		}
	}
	order := rp.Gateway.Chassis
	require.Len(t, order, min(MaxGateways, len(cands)), "%s: %s gateway order %v of candidates %v", ctx, rp.Name, order, cands)
	for i, ch := range order {
		require.Contains(t, cands, ch, "%s: %s gateway order %v", ctx, rp.Name, order)
		require.NotContains(t, order[:i], ch, "%s: %s gateway order %v", ctx, rp.Name, order)
		require.Equal(t, ch, rp.GatewayChassis[i].ChassisName)
		require.Equal(t, len(order)-i, rp.GatewayChassis[i].Priority)
	}
	if r.Gateway != "" {
		first := slices.IndexFunc(s.Chassis, func(c Chassis) bool { return c.Name == order[0] })
		require.True(t, order[0] == r.Gateway || s.Chassis[first].Hostname == r.Gateway, "%s: %s pinned to %s, order %v", ctx, rp.Name, r.Gateway, order)
	}
}

// TestInputIncremental is the proof of the incremental path: random inputs
// from several sources that compete for SNAT IPs, internal networks, names,
// network names and VM addresses, changed by a random sequence of Set and
// SetChassis calls. After every step, each unit's Plan equals what the
// whole-input reference planner says of that unit for the equivalent
// snapshot (so does Build), and every unit whose plan changed is among the
// units the step returned.
func TestInputIncremental(t *testing.T) {
	const seeds, steps = 40, 80
	allUnits := []Unit{}
	for _, n := range genNets {
		allUnits = append(allUnits, Unit{Kind: KindNetwork, Name: n})
	}
	for _, r := range genRouters {
		allUnits = append(allUnits, Unit{Kind: KindRouter, Name: r})
	}
	changedPlans := 0
	// The rules the steps exercised, by a fragment of their error.
	rules := map[string]int{
		"is already the SNAT IP of": 0, "is already an internal network of": 0, "is the external network of": 0,
		"is declared": 0, "is defined in namespaces": 0, "is already the IP of": 0, "is already the MAC of": 0,
		"cannot decode": 0, "has no gateway candidate": 0,
	}
	for seed := int64(1); seed <= seeds; seed++ {
		g := &gen{rnd: rand.New(rand.NewSource(seed))}
		var held Held
		if g.chance(70) {
			held = g.held()
		}
		in := NewInput()
		sources := map[string]Objects{}
		var chassis []Chassis
		known := false
		prev := map[Unit]UnitPlan{}
		for _, u := range allUnits {
			prev[u] = in.Plan(u, testInstance, held)
		}
		for step := range steps {
			src := fmt.Sprintf("src-%d", g.rnd.Intn(5))
			var got []Unit
			var what string
			identical := false
			switch op := g.rnd.Intn(10); {
			case op < 4:
				what = "set new objects in " + src
				sources[src] = g.objects()
				got = in.Set(src, sources[src])
			case op < 7:
				what = "edit one object of " + src
				sources[src] = g.mutate(sources[src])
				got = in.Set(src, sources[src])
			case op < 8:
				what = "remove " + src
				delete(sources, src)
				got = in.Set(src, Objects{})
			case op < 9:
				what = "set the same objects again in " + src
				identical = true
				got = in.Set(src, sources[src])
			default:
				what = "set chassis"
				known = g.chance(70)
				chassis = nil
				for _, c := range genChassis {
					if g.chance(60) {
						chassis = append(chassis, c)
					}
				}
				got = in.SetChassis(chassis, known)
			}
			ctx := fmt.Sprintf("seed %d step %d: %s", seed, step, what)
			if identical {
				require.Empty(t, got, "%s: nothing changed, nothing is affected", ctx)
			}
			require.True(t, slices.IsSortedFunc(got, CompareUnits), "%s: affected units are sorted: %v", ctx, got)

			s := snapshotOf(sources, chassis, known, held)
			ref := referenceBuild(s, testInstance)
			built := Build(s, testInstance)
			for i := range built.Routers {
				gatewayOrderOK(t, s, &built.Routers[i], ctx)
			}
			require.Equal(t, ref, withoutGateways(built, known), "%s: Build equals the whole-input reference", ctx)
			for _, err := range ref.Errors {
				for frag := range rules {
					if strings.Contains(err.Error(), frag) {
						rules[frag]++
					}
				}
			}
			require.Equal(t, unitsOf(s), in.Units(), "%s: units", ctx)
			declared := set[Unit]{}
			for _, u := range unitsOf(s) {
				declared.add(u)
			}
			for _, u := range allUnits {
				up := in.Plan(u, testInstance, held)
				np, rp, errs := expectedUnitPlan(ref, u)
				require.Equal(t, np, up.Network, "%s: %s network plan", ctx, u)
				var gotRouter *RouterPlan
				if up.Router != nil {
					gatewayOrderOK(t, s, up.Router, ctx)
					gotRouter = withoutGateways(&Plan{Routers: []RouterPlan{*up.Router}}, known).Routers[0].ptr()
				}
				require.Equal(t, rp, gotRouter, "%s: %s router plan", ctx, u)
				require.Equal(t, errs, errTexts(up.Errs), "%s: %s errors", ctx, u)
				require.Equal(t, generationOf(s, u), up.Generation, "%s: %s generation", ctx, u)
				_, inInput := declared[u]
				require.Equal(t, inInput, up.InInput, "%s: %s in input", ctx, u)
				if !reflect.DeepEqual(prev[u], up) {
					changedPlans++
					require.Contains(t, got, u, "%s: the plan of %s changed but Set did not return it", ctx, u)
				}
				prev[u] = up
			}
		}
	}
	t.Logf("%d seeds × %d steps: %d unit plans changed, each among the units returned; errors seen: %v", seeds, steps, changedPlans, rules)
	for frag, n := range rules {
		assert.NotZero(t, n, "no step exercised the rule of %q", frag)
	}
	assert.Greater(t, changedPlans, seeds*steps/4, "the random steps change plans")
}

// costInput is n routers, each in its own source with its own internal
// network, SNAT IP and 5 VMs, the networks in source "networks".
func costInput(n int) (*Input, map[string]Objects) {
	in := NewInput()
	sources := map[string]Objects{}
	nets := Objects{Networks: []Network{{Name: "public", Namespace: "default", Type: NetworkFlat, CIDR: "172.16.0.0/16", GatewayIP: "172.16.0.1"}}}
	for i := range n {
		name := fmt.Sprintf("net-%d", i)
		nets.Networks = append(nets.Networks, Network{Name: name, Namespace: "default", Type: NetworkVXLAN, CIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), GatewayIP: fmt.Sprintf("10.%d.%d.1", i/256, i%256)})
		for j := range 5 {
			nets.VMs = append(nets.VMs, VMInterface{Namespace: "default", VMI: fmt.Sprintf("vm-%d-%d", i, j), Interface: "eth1", Network: name, NetworkNamespace: "default",
				MAC: fmt.Sprintf("50:54:00:%02x:%02x:%02x", i/256, i%256, j), IP: fmt.Sprintf("10.%d.%d.%d", i/256, i%256, 10+j)})
		}
	}
	sources["networks"] = nets
	in.Set("networks", nets)
	for i := range n {
		src := fmt.Sprintf("router-%d", i)
		sources[src] = Objects{Routers: []Router{{
			Name: fmt.Sprintf("r-%d", i), EnableSNAT: true, Gateway: "gw1",
			Internal: []string{fmt.Sprintf("net-%d", i)},
			External: &External{Network: "public", IP: fmt.Sprintf("172.16.%d.%d", 1+i/200, 2+i%200)},
		}}}
		in.Set(src, sources[src])
	}
	return in, sources
}

func routerUnit(u string) Unit  { return Unit{Kind: KindRouter, Name: u} }
func networkUnit(u string) Unit { return Unit{Kind: KindNetwork, Name: u} }

// TestInputSetCost: with 1,000 routers in 1,000 sources, a change of one
// source returns only the units it affects, and setting the same objects
// again returns none.
func TestInputSetCost(t *testing.T) {
	in, sources := costInput(1000)
	require.Len(t, in.Units(), 2001)
	edit := func(src string, f func(r *Router)) []Unit {
		r := sources[src].Routers[0]
		r.Internal = slices.Clone(r.Internal)
		ext := *r.External
		r.External = &ext
		f(&r)
		sources[src] = Objects{Routers: []Router{r}}
		start := time.Now()
		got := in.Set(src, sources[src])
		t.Logf("Set %s: %v, %d units affected", src, time.Since(start), len(got))
		return got
	}

	assert.Empty(t, in.Set("router-5", sources["router-5"]), "the same objects again")
	assert.Empty(t, in.Set("networks", sources["networks"]), "the same objects again")

	assert.Equal(t, []Unit{routerUnit("r-5")}, edit("router-5", func(r *Router) { r.MAC = "fa:16:3e:00:00:05" }), "an edit of its own")

	// r-0 takes r-1's SNAT IP: both routers' plans change, nobody else's.
	assert.Equal(t, []Unit{routerUnit("r-0"), routerUnit("r-1")}, edit("router-0", func(r *Router) { r.External.IP = "172.16.1.3" }))
	assert.Nil(t, in.Plan(routerUnit("r-1"), testInstance, nil).Router, "r-0 sorts first and gets the IP")
	assert.NotNil(t, in.Plan(routerUnit("r-1"), testInstance, Claims{SNATIPs: map[string]string{"172.16.1.3": "r-1"}}).Router, "unless the NB shows r-1 holding it")

	// r-2 takes r-3's internal network too.
	assert.Equal(t, []Unit{routerUnit("r-2"), routerUnit("r-3")}, edit("router-2", func(r *Router) { r.Internal = append(r.Internal, "net-3") }))

	// A second declaration of r-9: r-9 competes for nothing more, but every
	// claim of r-9 changes hands (here none other claims them).
	assert.Equal(t, []Unit{routerUnit("r-9")}, in.Set("dup", Objects{Routers: []Router{{Name: "r-9"}}}))
	assert.Equal(t, []Unit{routerUnit("r-9")}, in.Set("dup", Objects{}))

	// A network: itself and the router on it.
	nets := sources["networks"]
	nets.Networks = slices.Clone(nets.Networks)
	nets.Networks[8].MTU = 1400 // net-7
	nets.VMs = slices.Clone(nets.VMs)
	nets.VMs[5*20].IP = "10.0.20.99" // a VM of net-20
	sources["networks"] = nets
	assert.Equal(t, []Unit{networkUnit("net-20"), networkUnit("net-7"), routerUnit("r-7")}, in.Set("networks", nets))

	// Removing a router's source.
	assert.Equal(t, []Unit{routerUnit("r-42")}, in.Set("router-42", Objects{}))
	assert.Equal(t, []Unit{routerUnit("r-42")}, in.Set("router-42", sources["router-42"]))

	// An undecodable router: itself, and the routers its claims may go to.
	bad := Objects{Invalid: map[Unit]error{routerUnit("r-1"): errors.New("r-1: cannot decode")}}
	assert.Equal(t, []Unit{routerUnit("r-0"), routerUnit("r-1")}, in.Set("router-1-broken", bad))
	assert.Empty(t, in.Set("router-1-broken", bad))

	// Chassis: every router that chooses a gateway, once per change.
	ch := []Chassis{{Name: "ch-1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}}}
	assert.Len(t, in.SetChassis(ch, true), 1000)
	assert.Empty(t, in.SetChassis(append(ch, Chassis{Name: "ch-9"}), true), "a chassis that is no gateway candidate changes nothing")
	named := append(ch, Chassis{Name: "ch-9"}, Chassis{Name: "ch-10", Hostname: "kv-net-7"})
	assert.Equal(t, []Unit{networkUnit("net-7")}, in.SetChassis(named, true), "a node named like a network's switch fails that network")
	require.NotEmpty(t, in.Plan(networkUnit("net-7"), testInstance, nil).Errs)
	assert.Equal(t, []Unit{networkUnit("net-7")}, in.SetChassis(append(ch, Chassis{Name: "ch-9"}), true), "and its going plans it again")

	// The incremental input still plans like a fresh one.
	fresh := NewInput()
	for src, o := range sources {
		fresh.Set(src, o)
	}
	fresh.Set("router-1-broken", bad)
	fresh.SetChassis(ch, true)
	for _, u := range in.Units() {
		require.Equal(t, fresh.Plan(u, testInstance, nil), in.Plan(u, testInstance, nil), "%s", u)
	}
}

// TestInputConcurrent plans while a source sets objects (run with -race).
func TestInputConcurrent(t *testing.T) {
	in, sources := costInput(20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			src := fmt.Sprintf("router-%d", i%20)
			o := sources[src]
			if i%2 == 0 {
				o = Objects{}
			}
			in.Set(src, o)
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for _, u := range in.Units() {
			in.Plan(u, testInstance, nil)
		}
	}
	assert.False(t, in.Empty())
}

// BenchmarkPlanUnit plans one router and one network of an input of N
// routers × 1 internal network × 5 VMs: the cost does not grow with N.
func BenchmarkPlanUnit(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			in, _ := costInput(n)
			in.SetChassis([]Chassis{{Name: "ch-1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}}, {Name: "ch-2", Gateway: true, Physnets: []string{"physnet1"}}}, true)
			units := []Unit{routerUnit(fmt.Sprintf("r-%d", n/2)), networkUnit(fmt.Sprintf("net-%d", n/2))}
			held := Claims{}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if up := in.Plan(units[i%2], testInstance, held); up.Router == nil && up.Network == nil {
					b.Fatalf("%s not planned: %v", up.Unit, up.Errs)
				}
			}
		})
	}
}

// BenchmarkSetOneRouter sets one router's source, changed, in an input of N
// routers.
func BenchmarkSetOneRouter(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			in, sources := costInput(n)
			src := fmt.Sprintf("router-%d", n/2)
			a := sources[src]
			r := a.Routers[0]
			r.MAC = "fa:16:3e:00:00:01"
			c := Objects{Routers: []Router{r}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o := a
				if i%2 == 0 {
					o = c
				}
				if got := in.Set(src, o); len(got) != 1 {
					b.Fatalf("affected %v", got)
				}
			}
		})
	}
}

// BenchmarkBuild plans every unit of an input of N routers, what each
// reconcile of one unit cost before Input.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			_, sources := costInput(n)
			s := snapshotOf(sources, nil, false, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				Build(s, testInstance)
			}
		})
	}
}

// BenchmarkReferenceBuild is the former whole-input Build, for comparison.
func BenchmarkReferenceBuild(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			_, sources := costInput(n)
			s := snapshotOf(sources, nil, false, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				referenceBuild(s, testInstance)
			}
		})
	}
}

// ReconcileOrder puts the networks several routers hang from first, then
// each router right after its own networks, then the rest.
func TestReconcileOrderKeepsRoutersWithTheirNetworks(t *testing.T) {
	net := func(name string) Network {
		return Network{Name: name, Namespace: "default", Type: "GENEVE", CIDR: "10.0.0.0/24", GatewayIP: "10.0.0.1"}
	}
	in := NewInputFrom(&Snapshot{
		Networks: []Network{net("zz-public"), net("b1"), net("a1"), net("a2"), net("unused")},
		Routers: []Router{
			{Name: "r2", Internal: []string{"b1"}, External: &External{IP: "172.16.0.3", Network: "zz-public"}},
			{Name: "r1", Internal: []string{"a2", "a1"}, External: &External{IP: "172.16.0.2", Network: "zz-public"}},
		},
	})
	n := func(name string) Unit { return Unit{Kind: KindNetwork, Name: name} }
	r := func(name string) Unit { return Unit{Kind: KindRouter, Name: name} }
	assert.Equal(t, []Unit{n("zz-public"), n("a1"), n("a2"), r("r1"), n("b1"), r("r2"), n("unused")}, in.ReconcileOrder())
	assert.ElementsMatch(t, in.Units(), in.ReconcileOrder(), "every unit, once")
}
