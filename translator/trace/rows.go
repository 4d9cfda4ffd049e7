package trace

import (
	"net/netip"
	"strings"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Zone is what a trace knows of one OVN: the NB rows it names the path
// with and the few SB facts it adds. In central mode there is one, with
// no Name.
type Zone struct {
	Name string
	// Rows are the NB's rows of the instance (owner keys), and any ACL
	// a flow of the trace names whatever its owner.
	Rows Rows
	// Active maps a router to the chassis its gateway port is active on
	// now (the SB binding of its chassisredirect port).
	Active map[string]string
	// Order maps a router to its gateway chassis by priority.
	Order map[string][]string
	// Bound maps a VM port to the chassis its SB binding is on.
	Bound map[string]string
	// Offline are the load balancer members ("ip:port") whose health
	// check fails now.
	Offline map[string]bool
}

// Rows are the NB rows a trace reads.
type Rows struct {
	Switches       []*nbmodel.LogicalSwitch
	SwitchPorts    []*nbmodel.LogicalSwitchPort
	Routers        []*nbmodel.LogicalRouter
	RouterPorts    []*nbmodel.LogicalRouterPort
	NATs           []*nbmodel.NAT
	Routes         []*nbmodel.LogicalRouterStaticRoute
	ACLs           []*nbmodel.ACL
	PortGroups     []*nbmodel.PortGroup
	LoadBalancers  []*nbmodel.LoadBalancer
	StaticBindings []*nbmodel.StaticMACBinding
}

// index looks a zone's rows up by name and by the first 8 hex digits of
// their UUIDs (the stage-hint ovn-northd puts on a logical flow).
type index struct {
	zone       *Zone
	lsp        map[string]*nbmodel.LogicalSwitchPort
	lrp        map[string]*nbmodel.LogicalRouterPort
	switchOf   map[string]*nbmodel.LogicalSwitch // port name -> its switch
	peerSwitch map[string]*nbmodel.LogicalSwitch // router port name -> the switch it attaches to
	routerOf   map[string]*nbmodel.LogicalRouter // router port name -> its router
	natRouter  map[string]*nbmodel.LogicalRouter // NAT UUID -> router
	byHint     map[string]any
	pgSG       map[string]string // port group name -> security group
	switchName map[string]*nbmodel.LogicalSwitch
	routerName map[string]*nbmodel.LogicalRouter
	// vms are the zone's VM ports of ours, byAddr them by address.
	vms    []vmPort
	byAddr map[netip.Addr]vmPort
}

func newIndex(z *Zone) *index {
	x := &index{zone: z, lsp: map[string]*nbmodel.LogicalSwitchPort{}, lrp: map[string]*nbmodel.LogicalRouterPort{},
		switchOf: map[string]*nbmodel.LogicalSwitch{}, peerSwitch: map[string]*nbmodel.LogicalSwitch{}, routerOf: map[string]*nbmodel.LogicalRouter{},
		natRouter: map[string]*nbmodel.LogicalRouter{}, byHint: map[string]any{}, pgSG: map[string]string{},
		switchName: map[string]*nbmodel.LogicalSwitch{}, routerName: map[string]*nbmodel.LogicalRouter{}, byAddr: map[netip.Addr]vmPort{}}
	r := &z.Rows
	hint := func(uuid string, row any) {
		if len(uuid) >= 8 {
			x.byHint[uuid[:8]] = row
		}
	}
	lspByUUID := map[string]*nbmodel.LogicalSwitchPort{}
	for _, p := range r.SwitchPorts {
		x.lsp[p.Name] = p
		lspByUUID[p.UUID] = p
		hint(p.UUID, p)
		if v, ok := vmPortOf(p); ok {
			x.vms = append(x.vms, v)
			for _, a := range v.addresses {
				x.byAddr[a] = v
			}
		}
	}
	lrpByUUID := map[string]*nbmodel.LogicalRouterPort{}
	for _, p := range r.RouterPorts {
		x.lrp[p.Name] = p
		lrpByUUID[p.UUID] = p
		hint(p.UUID, p)
	}
	for _, s := range r.Switches {
		x.switchName[s.Name] = s
		for _, u := range s.Ports {
			if p := lspByUUID[u]; p != nil {
				x.switchOf[p.Name] = s
				if rp := p.Options["router-port"]; rp != "" {
					x.peerSwitch[rp] = s
				}
			}
		}
	}
	for _, n := range r.NATs {
		hint(n.UUID, n)
	}
	for _, lr := range r.Routers {
		x.routerName[lr.Name] = lr
		for _, u := range lr.Ports {
			if p := lrpByUUID[u]; p != nil {
				x.routerOf[p.Name] = lr
			}
		}
		for _, u := range lr.Nat {
			x.natRouter[u] = lr
		}
	}
	for _, row := range r.Routes {
		hint(row.UUID, row)
	}
	for _, row := range r.ACLs {
		hint(row.UUID, row)
	}
	for _, row := range r.LoadBalancers {
		hint(row.UUID, row)
	}
	for _, pg := range r.PortGroups {
		if id := pg.ExternalIDs[translator.KeySecurityGroup]; id != "" {
			x.pgSG[pg.Name] = id
		}
	}
	return x
}

// ours says whether a row's external_ids are kubevirt-ovn's.
func ours(ids map[string]string) bool { return ids[translator.KeyManagedBy] != "" }

// vmPort is a VM interface's switch port, read back from its row.
type vmPort struct {
	port      *nbmodel.LogicalSwitchPort
	network   string
	vmi       string // namespace/name
	iface     string
	mac       string
	addresses []netip.Addr
}

func (v vmPort) String() string { return "VM " + v.vmi + " " + v.iface }

// vmPortOf reads a VM port of ours: its network (owner), VMI, interface
// (the end of its name) and addresses.
func vmPortOf(p *nbmodel.LogicalSwitchPort) (vmPort, bool) {
	vmi := p.ExternalIDs[translator.KeyVMI]
	network := p.ExternalIDs[translator.KeyOwner]
	if vmi == "" || network == "" || !ours(p.ExternalIDs) {
		return vmPort{}, false
	}
	ns, name, _ := strings.Cut(vmi, "/")
	prefix := translator.VMPortName(network, ns, name, "")
	v := vmPort{port: p, network: network, vmi: vmi, iface: strings.TrimPrefix(p.Name, prefix)}
	v.mac, v.addresses = translator.VMPortAddresses(p)
	return v, true
}

// addressOf is v's address of family v6, if it has one.
func (v vmPort) addressOf(v6 bool) (netip.Addr, bool) {
	for _, a := range v.addresses {
		if a.Is6() == v6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// describePort names a port as the user's objects say it.
func (x *index) describePort(name string) string {
	if p := x.lsp[name]; p != nil {
		if v, ok := vmPortOf(p); ok {
			return v.String()
		}
		if p.Type == "localnet" {
			return "the physical network " + p.Options["network_name"] + " (localnet port " + name + ")"
		}
		if p.Type == "router" || strings.HasPrefix(name, translator.NamePrefix+"stor-") || strings.HasPrefix(name, translator.NamePrefix+"etor-") {
			if rp := p.Options["router-port"]; rp != "" {
				if lr := x.routerOf[rp]; lr != nil {
					return "router " + routerName(lr)
				}
			}
			if r, ok := routerOfSwitchPort(name); ok {
				return "router " + r
			}
		}
	}
	if p := x.lrp[name]; p != nil {
		if s := x.networkOfRouterPort(p); s != "" {
			return "network " + s
		}
	}
	return "port " + name
}

// routerOfSwitchPort reads the router of a router's port on a switch from
// its name (kv-stor-<network>_<router>, kv-etor-<router>).
func routerOfSwitchPort(name string) (string, bool) {
	if r, ok := strings.CutPrefix(name, translator.NamePrefix+"etor-"); ok {
		return r, true
	}
	if rest, ok := strings.CutPrefix(name, translator.NamePrefix+"stor-"); ok {
		if i := strings.LastIndex(rest, "_"); i >= 0 {
			return rest[i+1:], true
		}
	}
	return "", false
}

// networkOfRouterPort is the network a router port of ours attaches to:
// the switch whose router-type port peers with it.
func (x *index) networkOfRouterPort(p *nbmodel.LogicalRouterPort) string {
	if s := x.peerSwitch[p.Name]; s != nil {
		return networkName(s)
	}
	return ""
}

// networkName is the network of one of our switches, or the switch's name.
func networkName(s *nbmodel.LogicalSwitch) string {
	if ours(s.ExternalIDs) {
		return s.ExternalIDs[translator.KeyOwner]
	}
	return s.Name
}

// routerName is the VirtualRouter of one of our routers, or its name.
func routerName(r *nbmodel.LogicalRouter) string {
	if ours(r.ExternalIDs) {
		return r.ExternalIDs[translator.KeyOwner]
	}
	return r.Name
}

// describeDatapath names a datapath (a switch or router name) as the
// user's objects say it.
func (x *index) describeDatapath(dp string) string {
	if s := x.switchName[dp]; s != nil {
		return "network " + networkName(s)
	}
	if r := x.routerName[dp]; r != nil {
		return "router " + routerName(r)
	}
	return "datapath " + dp
}

// routerRef is the VirtualRouter of a router datapath, "" for another.
func (x *index) routerRef(dp string) string {
	if r := x.routerName[dp]; r != nil && ours(r.ExternalIDs) {
		return routerName(r)
	}
	return ""
}
