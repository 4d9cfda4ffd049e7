package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Changes to a running Local's (and Zones') chassis, for failover tests: a
// chassis crashing, a gateway joining, a dead chassis removed from the SB.

// KillChassis ends chassis sim the way a crash or a power cut does (see
// hosts.kill); its SB row stays. The chassis leaves Gateways and Workers
// until RestartChassis brings it back.
func (l *Local) KillChassis(sim string) ([]int, error) {
	if !slices.Contains(l.chassis, sim) {
		return nil, fmt.Errorf("killing chassis %s: no such chassis in %s (chassis: %s)", sim, l.Dir, strings.Join(l.chassis, ", "))
	}
	args := l.hosts().killArgs(sim)
	pids, err := l.hosts().kill(sim)
	if err != nil {
		return pids, err
	}
	if l.killed == nil {
		l.killed = map[string]map[string][]string{}
	}
	l.killed[sim] = args
	l.forget(sim)
	return pids, nil
}

// kill ends chassis sim the way a crash or a power cut does: SIGKILL, by
// pid, to its ovs-vswitchd (which runs BFD, so its peers see it down) and
// its ovn-controller (which then cannot remove its SB row), sent before
// waiting for either. It returns the pids killed once they are gone
// (zombies waiting for a late reaper count as gone), and forgets them so
// that stop does not signal them again (they may belong to another process
// by then). The chassis's Open_vSwitch ovsdb-server keeps running, so its
// database and the pcaps of its ports stay readable; stop stops it.
func (h hosts) kill(sim string) ([]int, error) {
	var victims []daemon
	var pids []int
	for _, prog := range []string{"ovs-vswitchd", "ovn-controller"} {
		d, ok := h.daemon(sim, prog)
		if !ok {
			return nil, fmt.Errorf("killing chassis %s: it runs no %s (killed already?)", sim, prog)
		}
		pid, err := d.pid()
		if err != nil {
			return nil, fmt.Errorf("killing chassis %s: %w", sim, err)
		}
		victims = append(victims, d)
		pids = append(pids, pid)
	}
	var errs []error
	for i, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			errs = append(errs, fmt.Errorf("killing %s of chassis %s (pid %d): %w", victims[i].name, sim, pid, err))
		}
	}
	for i, pid := range pids {
		if !waitExit(pid, 10*time.Second) {
			errs = append(errs, fmt.Errorf("%s of chassis %s (pid %d) still runs 10s after SIGKILL", victims[i].name, sim, pid))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return pids, err
	}
	h.ds.list = slices.DeleteFunc(h.ds.list, func(d daemon) bool {
		return slices.ContainsFunc(victims, func(v daemon) bool { return v.pidfile == d.pidfile })
	})
	return pids, nil
}

// RemoveChassis deletes chassis sim from the SB, as an operator does for a
// node that is gone. A chassis whose ovn-controller still runs registers
// again: kill it first (KillChassis).
func (l *Local) RemoveChassis(sim string) error {
	if err := l.removeChassis(sim); err != nil {
		return err
	}
	l.forget(sim)
	return nil
}

// removeChassis deletes chassis name's Chassis row and its Encaps from the
// SB (`ovn-sbctl chassis-del`).
func (c *Central) removeChassis(name string) error {
	if _, err := c.SBCtl("chassis-del", name); err != nil {
		return fmt.Errorf("removing chassis %s from the SB: %w", name, err)
	}
	return nil
}

// RestartChassis brings a chassis KillChassis ended back, as a node that
// reboots (hosts.restart): it rejoins Gateways (when it has br-ex) or
// Workers.
func (l *Local) RestartChassis(sim string) error {
	if _, ok := l.killed[sim]; !ok {
		return fmt.Errorf("restarting chassis %s: not a killed chassis of %s", sim, l.Dir)
	}
	gateway, err := l.hosts().restart(sim, l.encapIP, l.killed[sim])
	if err != nil {
		return err
	}
	delete(l.killed, sim)
	if gateway {
		l.Topology.Gateways = append(slices.Clone(l.Topology.Gateways), sim)
	} else {
		l.Topology.Workers = append(slices.Clone(l.Topology.Workers), sim)
	}
	return nil
}

// restart starts the ovs-vswitchd and ovn-controller of chassis sim again
// with their command lines (args, by program), on the chassis's database
// (bridges, ports and OVN settings kept), sets vswitchd's runtime state
// again (the underlay address, route and tunnel neighbours of the dummy
// datapath: encapIP is every chassis's underlay address) and returns once
// ovn-controller is connected to its SB, and whether sim is a gateway.
// vswitchd reopens its ports' pcap files: captures start afresh.
func (h hosts) restart(sim string, encapIP map[string]string, args map[string][]string) (bool, error) {
	d := h.simDir(sim)
	ip := encapIP[sim]
	for _, prog := range []string{"ovs-vswitchd", "ovn-controller"} {
		if args[prog] == nil {
			return false, fmt.Errorf("restarting chassis %s: no command line of its %s", sim, prog)
		}
		if _, err := run(d, prog, args[prog]...); err != nil {
			return false, fmt.Errorf("restarting chassis %s: %w", sim, err)
		}
		h.ds.list = append(h.ds.list, daemon{name: prog, dir: d, appctl: map[string]string{"ovs-vswitchd": "ovs-appctl", "ovn-controller": "ovn-appctl"}[prog],
			pidfile: filepath.Join(d, prog+".pid"), args: args[prog]})
		if prog != "ovs-vswitchd" {
			continue
		}
		cmds := [][]string{{"ovs-appctl", "netdev-dummy/ip4addr", "br-phys", ip + "/24"}, {"ovs-appctl", "ovs/route/add", ip + "/24", "br-phys"}}
		for peer, peerIP := range encapIP {
			if peer == sim {
				continue
			}
			mac, err := underlayMACOf(peerIP)
			if err != nil {
				return false, err
			}
			cmds = append(cmds, []string{"ovs-appctl", "tnl/neigh/set", "br-phys", peerIP, mac})
		}
		for _, c := range cmds {
			if _, err := h.exec(sim, c...); err != nil {
				return false, fmt.Errorf("restarting chassis %s: %w", sim, err)
			}
		}
	}
	out, _ := h.exec(sim, "ovs-vsctl", "--bare", "--columns=name", "find", "Bridge", "name=br-ex")
	err := poll(90*time.Second, "chassis "+sim+"'s ovn-controller connected to the SB again", func() (bool, error) {
		out, err := h.exec(sim, "ovn-appctl", "connection-status")
		return err == nil && strings.TrimSpace(out) == "connected", nil
	})
	return strings.TrimSpace(out) != "", err
}

// killArgs are the command lines of chassis sim's ovs-vswitchd and
// ovn-controller, for a restart after a kill.
func (h hosts) killArgs(sim string) map[string][]string {
	args := map[string][]string{}
	for _, prog := range []string{"ovs-vswitchd", "ovn-controller"} {
		if d, ok := h.daemon(sim, prog); ok {
			args[prog] = d.args
		}
	}
	return args
}

// AddGateway starts a new gateway chassis sim while the deployment runs,
// built as StartLocal builds its gateways: br-ex with the wire port
// ExternalPort (tx and rx pcap), ovn-bridge-mappings=<physnet>:br-ex and
// ovn-cms-options=enable-chassis-as-gw, tunnel neighbour entries between it
// and every running chassis both ways. physnet "" is the topology's
// PhysicalNetwork; another name makes a gateway that cannot reach the
// external network's localnet. It returns once the chassis is registered
// in the SB.
func (l *Local) AddGateway(sim, physnet string) error {
	if physnet == "" {
		physnet = l.Topology.PhysicalNetwork
	}
	if sim == "main" || slices.Contains(l.chassis, sim) {
		return fmt.Errorf("adding gateway %s: the name is taken in %s", sim, l.Dir)
	}
	ip, err := l.freeEncapIP()
	if err != nil {
		return fmt.Errorf("adding gateway %s: %w", sim, err)
	}
	if err := l.simAdd(sim); err != nil {
		return fmt.Errorf("adding gateway %s: %w", sim, err)
	}
	mac, err := l.attach(sim, ip)
	if err != nil {
		return fmt.Errorf("adding gateway %s: %w", sim, err)
	}
	l.chassis = append(l.chassis, sim)
	l.encapIP[sim] = ip
	l.Topology.Gateways = append(slices.Clone(l.Topology.Gateways), sim)
	if err := l.hosts().gatewayWire(sim, physnet); err != nil {
		return fmt.Errorf("adding gateway %s: %w", sim, err)
	}
	for _, peer := range l.chassis {
		if peer == sim {
			continue
		}
		if _, ok := l.hosts().daemon(peer, "ovs-vswitchd"); !ok {
			continue // killed: nothing to tell it, nothing to learn from it
		}
		peerMAC, err := underlayMACOf(l.encapIP[peer])
		if err != nil {
			return fmt.Errorf("adding gateway %s: %s's underlay MAC: %w", sim, peer, err)
		}
		if _, err := l.Exec(peer, "ovs-appctl", "tnl/neigh/set", "br-phys", ip, mac); err != nil {
			return fmt.Errorf("adding gateway %s: %w", sim, err)
		}
		if _, err := l.Exec(sim, "ovs-appctl", "tnl/neigh/set", "br-phys", l.encapIP[peer], peerMAC); err != nil {
			return fmt.Errorf("adding gateway %s: %w", sim, err)
		}
	}
	if err := poll(90*time.Second, "chassis "+sim+" in the SB", func() (bool, error) {
		out, err := l.SBCtl("--bare", "--columns=ip", "find", "Encap", "chassis_name="+sim)
		return strings.TrimSpace(out) != "", err
	}); err != nil {
		return fmt.Errorf("adding gateway %s: %w", sim, err)
	}
	return nil
}

// daemon is the running daemon prog of chassis sim, if any.
func (h hosts) daemon(sim, prog string) (daemon, bool) {
	dir := h.simDir(sim)
	for _, d := range h.ds.list {
		if d.name == prog && d.dir == dir {
			return d, true
		}
	}
	return daemon{}, false
}

// forget drops sim from the gateways and workers.
func (l *Local) forget(sim string) {
	l.Topology.Gateways = without(l.Topology.Gateways, sim)
	l.Topology.Workers = without(l.Topology.Workers, sim)
}

// without is names without name, in a fresh slice: callers may hold the
// old one.
func without(names []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
}

// freeEncapIP is an underlay address no chassis has: gateways take
// 192.168.0.1-10 and workers 11-20 at start, so later ones go after.
func (l *Local) freeEncapIP() (string, error) {
	used := map[string]bool{}
	for _, ip := range l.encapIP {
		used[ip] = true
	}
	for i := 1; i < 255; i++ {
		if i >= 11 && i <= 20 {
			continue
		}
		ip := fmt.Sprintf("192.168.0.%d", i)
		if !used[ip] {
			return ip, nil
		}
	}
	return "", errors.New("no free underlay address in 192.168.0.0/24")
}
