package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// Zone is one interconnect zone: the chassis whose ovn-controller joins the
// zone's own SB.
type Zone struct {
	Name string
	// Gateways get the external wire as in Topology; Workers carry VM ports.
	Gateways []string
	Workers  []string
}

// ZoneTopology is what StartZones builds: zones with disjoint chassis.
type ZoneTopology struct {
	Zones []Zone
	// PhysicalNetwork is what the gateways map to br-ex (default "physnet1").
	PhysicalNetwork string
}

// DefaultZoneTopology is ovn-kubernetes' layout (one zone per node) over
// Local's chassis: zones gw1 and gw2 with one gateway each, zones hv1 and
// hv2 with one worker each.
func DefaultZoneTopology() ZoneTopology {
	return ZoneTopology{PhysicalNetwork: "physnet1", Zones: []Zone{
		{Name: "gw1", Gateways: []string{"gw1"}},
		{Name: "gw2", Gateways: []string{"gw2"}},
		{Name: "hv1", Workers: []string{"hv1"}},
		{Name: "hv2", Workers: []string{"hv2"}},
	}}
}

// ZoneDB is a running zone: its own NB, SB and ovn-northd (Central, with
// NB_Global.name set to the zone's name, as ovnkube-controller does), and
// the chassis local to it.
type ZoneDB struct {
	*Central
	Zone
}

// Chassis are the zone's local chassis: gateways, then workers.
func (z *ZoneDB) Chassis() []string {
	return append(slices.Clone(z.Gateways), z.Workers...)
}

// ChassisUUID is the _uuid of chassis name's row in the zone's SB.
func (z *ZoneDB) ChassisUUID(name string) (string, error) {
	out, err := z.SBCtl("--bare", "--columns=_uuid", "find", "Chassis", "name="+name)
	if err != nil {
		return "", fmt.Errorf("zone %s: reading chassis %s: %w", z.Name, name, err)
	}
	uuid := strings.TrimSpace(out)
	if uuid == "" {
		return "", fmt.Errorf("zone %s: no chassis %s in its SB", z.Name, name)
	}
	return uuid, nil
}

// Zones is OVN as ovn-kubernetes runs it in interconnect mode, on this
// machine: per zone an NB, an SB and ovn-northd (no central NB anywhere),
// each chassis's ovn-controller on its zone's SB, and every zone's SB
// holding the other zones' chassis as remote entries (Chassis with
// other_config:is-remote=true, hostname and a geneve Encap with the
// chassis's real underlay address) — written by the harness, as
// ovnkube-controller writes them. All chassis share Local's simulated
// underlay (bridge n1 in vswitchd "main"), so geneve runs between any two.
//
// Across all chassis it offers what Local does (Exec, AddVMPort, Inject,
// Capture, Pids, Logs, Stop, Gateways, Workers, KillChassis,
// RemoveChassis); databases are per zone (Zone, List, ZoneOf, ZoneFlags).
type Zones struct {
	Dir      string
	Topology ZoneTopology
	zones    []*ZoneDB
	encapIP  map[string]string
	// killed are chassis KillChassis ended and RemoveChassis has not
	// removed yet: still in their zone, no longer Gateways or Workers.
	killed map[string]bool
	// killedArgs are their daemons' command lines, for RestartChassis.
	killedArgs map[string]map[string][]string
	sims       daemons
}

// Chassis is the chassis side of a deployment, which Local and Zones share.
type Chassis interface {
	// Exec runs an OVS/OVN command (ovs-vsctl, ovs-appctl, ovn-appctl...)
	// on a chassis.
	Exec(chassis string, args ...string) (string, error)
	// Gateways are the gateway candidates, bridged to the external network
	// by a wire port ExternalPort; Workers carry VM ports.
	Gateways() []string
	Workers() []string
	// AddVMPort plugs a VM interface bound to the logical port ifaceID.
	AddVMPort(chassis, port, ifaceID string) error
	// Inject makes a port receive a frame; Capture returns what the port
	// has sent so far.
	Inject(chassis, port string, frame []byte) error
	Capture(chassis, port string) ([]wire.Seen, error)
	// Pids are the processes to find gone after Stop (none for a remote
	// deployment); Logs are files worth reading when a test fails.
	Pids() []int
	Logs() []string
	Stop() error
}

var (
	_ Chassis = (*Local)(nil)
	_ Chassis = (*Zones)(nil)
)

// StartZones starts every zone of t under dir (dir/zone-<name> holds a
// zone's databases and northd, dir/<chassis> a chassis), stitches the zones
// with remote chassis entries and returns once every zone's SB holds all
// chassis, its own registered by their ovn-controllers. On error, whatever
// started is stopped.
func StartZones(dir string, t ZoneTopology) (_ *Zones, err error) {
	if t.PhysicalNetwork == "" {
		t.PhysicalNetwork = "physnet1"
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(VSwitchSchema); err != nil {
		return nil, fmt.Errorf("this machine has no Open vSwitch (%w): run 'make deps'", err)
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	z := &Zones{Dir: dir, Topology: t, encapIP: map[string]string{}, killed: map[string]bool{}, killedArgs: map[string]map[string][]string{}}
	defer func() {
		if err != nil {
			_ = z.Stop()
		}
	}()
	for _, zone := range t.Zones {
		c, err := StartCentral(filepath.Join(dir, "zone-"+zone.Name))
		if err != nil {
			return nil, fmt.Errorf("starting zone %s: %w", zone.Name, err)
		}
		zdb := &ZoneDB{Central: c, Zone: zone}
		z.zones = append(z.zones, zdb)
		if _, err := c.NBCtl("set", "NB_Global", ".", "name="+zone.Name); err != nil {
			return nil, fmt.Errorf("naming zone %s: %w", zone.Name, err)
		}
	}
	h := z.hosts()
	if err := h.underlay(); err != nil {
		return nil, err
	}
	var arp []underlayMAC
	nGw, nHv := 0, 0
	for _, zdb := range z.zones {
		for _, ch := range zdb.Chassis() {
			var ip string
			if slices.Contains(zdb.Gateways, ch) {
				nGw++
				ip = fmt.Sprintf("192.168.0.%d", nGw)
			} else {
				nHv++
				ip = fmt.Sprintf("192.168.0.%d", 10+nHv)
			}
			if err := h.simAdd(ch); err != nil {
				return nil, err
			}
			mac, err := h.attach(ch, ip, zdb.SB)
			if err != nil {
				return nil, err
			}
			arp = append(arp, underlayMAC{ch, ip, mac})
			z.encapIP[ch] = ip
			// ovn-controller builds tunnels to is-remote chassis only
			// from an interconnect chassis: ovnkube-node sets this on
			// every node in interconnect mode.
			if _, err := h.exec(ch, "ovs-vsctl", "set", "Open_vSwitch", ".", "external-ids:ovn-is-interconn=true"); err != nil {
				return nil, err
			}
			if slices.Contains(zdb.Gateways, ch) {
				if err := h.gatewayWire(ch, t.PhysicalNetwork); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := h.neighbours(arp); err != nil {
		return nil, err
	}
	for _, zdb := range z.zones {
		for _, ch := range zdb.Chassis() {
			if err := poll(90*time.Second, "chassis "+ch+" in zone "+zdb.Name+"'s SB", func() (bool, error) {
				out, err := zdb.SBCtl("--bare", "--columns=ip", "find", "Encap", "chassis_name="+ch)
				return strings.TrimSpace(out) != "", err
			}); err != nil {
				return nil, err
			}
		}
	}
	for _, zdb := range z.zones {
		for _, other := range z.zones {
			if other == zdb {
				continue
			}
			for _, ch := range other.Chassis() {
				if err := zdb.addRemoteChassis(ch, z.encapIP[ch]); err != nil {
					return nil, err
				}
			}
		}
	}
	return z, nil
}

// check rejects a topology with no zone, an unnamed or repeated zone, or a
// chassis named twice.
func (t ZoneTopology) check() error {
	if len(t.Zones) == 0 {
		return errors.New("zone topology: no zone")
	}
	seen := map[string]string{"main": "the underlay"}
	zones := map[string]bool{}
	for _, zone := range t.Zones {
		if zone.Name == "" || zones[zone.Name] {
			return fmt.Errorf("zone topology: zone name %q is empty or repeated", zone.Name)
		}
		zones[zone.Name] = true
		for _, ch := range append(slices.Clone(zone.Gateways), zone.Workers...) {
			if prev, ok := seen[ch]; ok {
				return fmt.Errorf("zone topology: chassis %s of zone %s is taken by %s", ch, zone.Name, prev)
			}
			seen[ch] = "zone " + zone.Name
		}
	}
	return nil
}

// addRemoteChassis writes chassis name of another zone into this zone's SB
// as ovnkube-controller does: a Chassis row with hostname and
// other_config:is-remote=true, and a geneve Encap with its underlay ip.
func (z *ZoneDB) addRemoteChassis(name, ip string) error {
	if _, err := z.SBCtl("chassis-add", name, "geneve", ip,
		"--", "set", "Chassis", name, "hostname="+name, "other_config:is-remote=true"); err != nil {
		return fmt.Errorf("zone %s: adding remote chassis %s: %w", z.Name, name, err)
	}
	return nil
}

func (z *Zones) hosts() hosts { return hosts{root: z.Dir, ds: &z.sims} }

// Zone is the zone called name, or nil.
func (z *Zones) Zone(name string) *ZoneDB {
	for _, zdb := range z.zones {
		if zdb.Name == name {
			return zdb
		}
	}
	return nil
}

// List is every zone, in topology order.
func (z *Zones) List() []*ZoneDB { return slices.Clone(z.zones) }

// ZoneOf is the zone chassis is local to, or nil.
func (z *Zones) ZoneOf(chassis string) *ZoneDB {
	for _, zdb := range z.zones {
		if slices.Contains(zdb.Chassis(), chassis) {
			return zdb
		}
	}
	return nil
}

// Gateways are the running gateway chassis of every zone.
func (z *Zones) Gateways() []string {
	var out []string
	for _, zdb := range z.zones {
		out = append(out, zdb.Gateways...)
	}
	return z.running(out)
}

// Workers are the running worker chassis of every zone.
func (z *Zones) Workers() []string {
	var out []string
	for _, zdb := range z.zones {
		out = append(out, zdb.Workers...)
	}
	return z.running(out)
}

// running is chassis without the killed ones.
func (z *Zones) running(chassis []string) []string {
	return slices.DeleteFunc(chassis, func(ch string) bool { return z.killed[ch] })
}

// ZoneFlags are the flags that give kubevirt-ovn every zone's endpoints:
// `--zone NAME=NB,SB` per zone (loopback TCP), in topology order.
func (z *Zones) ZoneFlags() []string {
	var out []string
	for _, zdb := range z.zones {
		out = append(out, "--zone", zdb.Name+"="+zdb.NBTCP+","+zdb.SBTCP)
	}
	return out
}

// WaitGateway waits until the chassisredirect port crPort is bound to
// gateway gw in gw's zone's SB and every BFD session of that zone's
// gateways is up. A router's gateway chassis are all in its zone (BFD runs
// within a zone); a zone with one gateway has no session to wait for.
func (z *Zones) WaitGateway(crPort, gw string) error {
	zdb := z.ZoneOf(gw)
	if zdb == nil {
		return fmt.Errorf("waiting for %s on %s: no such chassis in %s (chassis: %s)", crPort, gw, z.Dir, strings.Join(z.all(), ", "))
	}
	gateways := z.running(slices.Clone(zdb.Gateways))
	if err := waitGateway(zdb, z, crPort, gw, gateways, nil, func(string) bool { return len(gateways) > 1 }); err != nil {
		return fmt.Errorf("zone %s: %w", zdb.Name, err)
	}
	return nil
}

// KillChassis crashes chassis as Local.KillChassis does: SIGKILL, by pid,
// to its ovs-vswitchd and ovn-controller; it returns their pids. Its SB
// rows stay (its own in its zone's SB, the remote entries in the others')
// until RemoveChassis. It leaves Gateways and Workers and stays in its
// zone's Chassis until RestartChassis brings it back.
func (z *Zones) KillChassis(chassis string) ([]int, error) {
	if z.ZoneOf(chassis) == nil {
		return nil, fmt.Errorf("killing chassis %s: no such chassis in %s (chassis: %s)", chassis, z.Dir, strings.Join(z.all(), ", "))
	}
	args := z.hosts().killArgs(chassis)
	pids, err := z.hosts().kill(chassis)
	if err != nil {
		return pids, err
	}
	z.killed[chassis] = true
	z.killedArgs[chassis] = args
	return pids, nil
}

// RestartChassis brings a chassis KillChassis ended (and RemoveChassis did
// not remove) back in its zone, as a node that reboots (hosts.restart).
func (z *Zones) RestartChassis(chassis string) error {
	if !z.killed[chassis] || z.killedArgs[chassis] == nil {
		return fmt.Errorf("restarting chassis %s: not a killed chassis of %s", chassis, z.Dir)
	}
	if _, err := z.hosts().restart(chassis, z.encapIP, z.killedArgs[chassis]); err != nil {
		return err
	}
	delete(z.killed, chassis)
	delete(z.killedArgs, chassis)
	return nil
}

// RemoveChassis is what ovnkube-controller does when chassis's node is
// deleted: the chassis's row (with its Encap) leaves its own zone's SB and
// its remote entry every other zone's SB. It then belongs to no zone. A
// chassis whose ovn-controller still runs registers again in its zone:
// kill it first (KillChassis).
func (z *Zones) RemoveChassis(chassis string) error {
	home := z.ZoneOf(chassis)
	if home == nil {
		return fmt.Errorf("removing chassis %s: no such chassis in %s (chassis: %s)", chassis, z.Dir, strings.Join(z.all(), ", "))
	}
	var errs []error
	for _, zdb := range z.zones {
		if err := zdb.removeChassis(chassis); err != nil {
			errs = append(errs, fmt.Errorf("zone %s: %w", zdb.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	home.Gateways = without(home.Gateways, chassis)
	home.Workers = without(home.Workers, chassis)
	delete(z.killed, chassis)
	delete(z.killedArgs, chassis)
	return nil
}

// all is every chassis of every zone, killed ones included.
func (z *Zones) all() []string {
	var out []string
	for _, zdb := range z.zones {
		out = append(out, zdb.Chassis()...)
	}
	return out
}

// EncapIP is chassis's underlay (geneve) address.
func (z *Zones) EncapIP(chassis string) string { return z.encapIP[chassis] }

// Exec runs an OVS/OVN command on a chassis, as Local.Exec.
func (z *Zones) Exec(chassis string, args ...string) (string, error) {
	return z.hosts().exec(chassis, args...)
}

// AddVMPort plugs a VM interface on chassis bound to the logical port
// ifaceID (which must be a local port of the chassis's zone).
func (z *Zones) AddVMPort(chassis, port, ifaceID string) error {
	return z.hosts().addVMPort(chassis, port, ifaceID)
}

// Inject makes port on chassis receive the Ethernet frame.
func (z *Zones) Inject(chassis, port string, frame []byte) error {
	_, err := z.Exec(chassis, "ovs-appctl", "netdev-dummy/receive", port, fmt.Sprintf("%x", frame))
	return err
}

// Capture reads what port on chassis has sent, from its tx_pcap file.
func (z *Zones) Capture(chassis, port string) ([]wire.Seen, error) {
	return wire.ReadPcapFile(filepath.Join(z.hosts().simDir(chassis), port+"-tx.pcap"))
}

// Pids are every daemon's pids: the chassis's and each zone's.
func (z *Zones) Pids() []int {
	pids := z.sims.Pids()
	for _, zdb := range z.zones {
		pids = append(pids, zdb.Pids()...)
	}
	return pids
}

// Logs lists every daemon's log file.
func (z *Zones) Logs() []string {
	logs := z.sims.Logs()
	for _, zdb := range z.zones {
		logs = append(logs, zdb.Logs()...)
	}
	return logs
}

// Stop stops the chassis (ovn-controllers first, while their SBs are up),
// then every zone's northd and databases.
func (z *Zones) Stop() error {
	errs := []error{z.hosts().stop()}
	for i := len(z.zones) - 1; i >= 0; i-- {
		errs = append(errs, z.zones[i].Stop())
	}
	z.zones = nil
	return errors.Join(errs...)
}
