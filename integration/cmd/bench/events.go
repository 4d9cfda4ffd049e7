package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// eventResult is what `run` did at one N.
type eventResult struct {
	startup    time.Duration // start until idle on an already-right NB
	startupCPU time.Duration
	startupHWM int64 // peak RSS when idle after the start
	// limited is the same start again under GOMEMLIMIT (-memlimit), as
	// the Deployments run it; nil without.
	limited *limitedStart
	// startupTimeout is set when run was not idle within it.
	startupTimeout time.Duration
	lat            []time.Duration // per event: from the file write, or the deletion the NB announced, to the NB end state
	cpu            []time.Duration // per event, controller CPU until idle again
	kinds          []string
	hwm            int64  // peak RSS of run
	note           string // why fewer events than asked, if so
	log            string

	// fipMoves counts fip-move events; fipReplaced those whose NAT row
	// came back as a new row instead of being updated in place.
	fipMoves, fipReplaced int
	// sgEdits counts sg-rule events; sgReplaced those whose ACL came back
	// as a new row instead of being updated in place.
	sgEdits, sgReplaced int
}

// runProc is a running `kubevirt-ovn run`.
type runProc struct {
	cmd     *exec.Cmd
	metrics string
	done    chan struct{}
}

func startRun(bin, nb, manifests, logFile string, more ...string) (*runProc, error) {
	p, err := startRoleOnce(bin, logFile, "run", append([]string{"--nb", nb, "--from-file", manifests,
		"--file-poll", "100ms", "--resync", "24h"}, more...)...)
	if err != nil {
		return nil, err
	}
	return p.runProc, nil
}

func (p *runProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop ends run by SIGTERM to its pid, then SIGKILL after 10 s.
func (p *runProc) stop() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// label names the input in file names: N, and its variant.
func (in *input) label() string {
	l := strconv.Itoa(len(in.routers))
	for _, v := range []struct {
		on   bool
		name string
	}{{in.fips, "fip"}, {in.sgs, "sg"}, {in.v6, "v6"}} {
		if v.on {
			l += "-" + v.name
		}
	}
	return l
}

// saveProfile saves run's /debug/pprof/<what> into -profile's directory
// as name, retrying while run does not answer yet.
func (p *runProc) saveProfile(cfg *config, what, name string) error {
	cl := http.Client{Timeout: cfg.timeout}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err = cl.Get(p.metrics + "/debug/pprof/" + what); err == nil || time.Now().After(deadline) || !p.alive() {
			break
		}
		time.Sleep(20 * time.Millisecond) // until run listens
	}
	if err != nil {
		return fmt.Errorf("profile %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", what, resp.Status)
	}
	f, err := os.Create(filepath.Join(cfg.profile, name))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// scraped is what one look at /readyz and /metrics saw; a metric the
// binary does not export is -1.
type scraped struct {
	ready                 bool
	depth, routers, recon float64
}

// scrape reads /readyz and, from /metrics, the queue depth, the routers with
// a status and the reconciles finished.
func (p *runProc) scrape() (scraped, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(p.metrics + "/readyz")
	if err != nil {
		return scraped{}, err
	}
	resp.Body.Close()
	m := scraped{ready: resp.StatusCode == http.StatusOK, depth: -1, routers: -1, recon: -1}
	resp, err = cl.Get(p.metrics + "/metrics")
	if err != nil {
		return scraped{}, err
	}
	defer resp.Body.Close()
	add := func(to *float64, v float64) {
		if *to < 0 {
			*to = 0
		}
		*to += v
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		switch name {
		case "kubevirt_ovn_queue_depth":
			m.depth = v
		case "kubevirt_ovn_routers_ready", "kubevirt_ovn_routers_not_ready":
			add(&m.routers, v)
		case "kubevirt_ovn_reconcile_duration_seconds_count":
			add(&m.recon, v)
		}
	}
	return m, sc.Err()
}

// Idle: over two windows of idleWindow in a row the controller used at most
// idleShare of one CPU (the file poll's stats remain), and at the end of
// each /readyz is 200, its queue is empty, every router has a status, and no
// reconcile finished in between (a starved reconcile may use no CPU for a
// window). /metrics is scraped only once the CPU is quiet, since a scrape
// costs the controller CPU.
const (
	idleWindow = 300 * time.Millisecond
	idleStep   = 50 * time.Millisecond
	idleShare  = 0.10
)

// errNotIdle is waitIdle's timeout: a measurement, not a failure.
var errNotIdle = errors.New("kubevirt-ovn run not idle")

// waitIdle polls until run is idle, at most timeout; it returns when the
// quiet windows that proved it began.
func (p *runProc) waitIdle(routers int, timeout time.Duration) (time.Time, error) {
	type sample struct {
		t   time.Time
		cpu time.Duration
	}
	var samples []sample
	deadline := time.Now().Add(timeout)
	last := ""
	pid := p.cmd.Process.Pid
	var quietSince time.Time // the first quiet window's start, if its scrape was idle
	prevRecon := -1.0
	for {
		if !p.alive() {
			return time.Time{}, fmt.Errorf("kubevirt-ovn run (pid %d) exited", pid)
		}
		now := time.Now()
		cpu, err := procCPU(pid)
		if err != nil {
			return time.Time{}, err
		}
		samples = append(samples, sample{now, cpu})
		// The newest sample at least idleWindow old.
		k := -1
		for i := range samples {
			if now.Sub(samples[i].t) >= idleWindow {
				k = i
			}
		}
		if k >= 0 {
			s := samples[k]
			samples = samples[k:]
			if float64(cpu-s.cpu) <= idleShare*float64(now.Sub(s.t)) {
				m, err := p.scrape()
				idle := false
				switch {
				case err != nil:
					last = err.Error()
				case !m.ready:
					last = "/readyz is not 200"
				case m.depth > 0:
					last = fmt.Sprintf("queue depth %v", m.depth)
				case m.routers >= 0 && int(m.routers) != routers:
					last = fmt.Sprintf("%v routers with a status, want %d", m.routers, routers)
				default:
					idle = true
				}
				switch {
				case !idle:
					quietSince, prevRecon = time.Time{}, -1
				case !quietSince.IsZero() && m.recon == prevRecon:
					return quietSince, nil
				case !quietSince.IsZero():
					last = "reconciles finished while quiet"
					quietSince, prevRecon = s.t, m.recon
				default:
					quietSince, prevRecon = s.t, m.recon
				}
				samples = nil // the scrape cost CPU: start a new window
			} else {
				last = "busy"
				quietSince, prevRecon = time.Time{}, -1
			}
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("%w within %s (last seen: %s)", errNotIdle, timeout, last)
		}
		time.Sleep(idleStep) // the poll interval of a deadline-bounded poll
	}
}

// runEvents starts `run` on the already-synced NB, measures its start, then
// events until count or the budget.
func runEvents(cfg *config, dir, nb string, in *input, count int) (*eventResult, error) {
	res := &eventResult{log: filepath.Join(dir, "run.log")}
	w, err := watchNB(context.Background(), nb)
	if err != nil {
		return res, err
	}
	defer w.Close()
	start := time.Now()
	var more []string
	if cfg.profile != "" {
		more = append(more, "--enable-profiling")
	}
	p, err := startRun(cfg.bin, nb, in.dir, res.log, more...)
	if err != nil {
		return res, err
	}
	stopRun, _ := cleanup.add(p.stop)
	defer stopRun()
	cpuProfile := make(chan error, 1)
	if cfg.profile != "" {
		go func() {
			cpuProfile <- p.saveProfile(cfg, fmt.Sprintf("profile?seconds=%d", int(cfg.profileStart.Seconds())), fmt.Sprintf("run-start-cpu-%s.pb.gz", in.label()))
		}()
	}
	live := func() int {
		n := 0
		for _, s := range in.routers {
			if !s.removed {
				n++
			}
		}
		return n
	}
	idle, err := p.waitIdle(live(), cfg.timeout)
	res.startupCPU, _ = procCPU(p.cmd.Process.Pid)
	if errors.Is(err, errNotIdle) {
		res.startupTimeout = cfg.timeout
		res.hwm = procHWM(p.cmd.Process.Pid)
		res.note = fmt.Sprintf("`run` start: %v; no events measured (log %s)", err, res.log)
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("run start: %w (log %s)", err, res.log)
	}
	res.startup = idle.Sub(start)
	res.startupHWM = procHWM(p.cmd.Process.Pid)
	if cfg.profile != "" {
		// The start's CPU, then what it allocated and what it holds idle.
		if err := <-cpuProfile; err != nil {
			return res, err
		}
		for _, pr := range []string{"allocs", "heap"} {
			if err := p.saveProfile(cfg, pr, fmt.Sprintf("run-start-%s-%s.pb.gz", pr, in.label())); err != nil {
				return res, err
			}
		}
	}

	budgetEnd := time.Now().Add(cfg.eventsBudget)
	budgetNote := fmt.Sprintf("the -events-budget of %s", cfg.eventsBudget)
	if cfg.deadline.Before(budgetEnd) {
		budgetEnd, budgetNote = cfg.deadline, fmt.Sprintf("the -budget of %s", cfg.budget)
	}
	pickN := 0
	pick := func(not int) *routerState {
		for {
			s := in.routers[(pickN*37)%len(in.routers)]
			pickN++
			if !s.removed && s.index != not {
				return s
			}
		}
	}
	// The kinds cycle; the inputs with floating IPs or security groups
	// have their own.
	kinds := []string{"vm-add", "snat-ip", "router-del", "hand-del", "router-add"}
	if in.fips {
		kinds = append(kinds, "fip-move")
	}
	if in.sgs {
		kinds = append(kinds, "sg-rule", "sg-bind")
	}
	period := len(kinds)
	var removed *routerState
	for k := 0; k < count; k++ {
		if time.Now().After(budgetEnd) {
			res.note = fmt.Sprintf("%d of %d events: %s ran out", k, count, budgetNote)
			break
		}
		pid := p.cmd.Process.Pid
		cpu0, err := procCPU(pid)
		if err != nil {
			return res, err
		}
		var t0 time.Time
		handDeleted := "" // the UUID of a row deleted by hand, whose deletion times the event
		var cond func(view) bool
		var kind string
		fipMoved := "" // the UUID of the NAT row of a floating IP moved
		var movedFrom *routerState
		sgEdited := "" // the UUID of the ACL of a rule edited
		sgGroup := -1
		switch kinds[k%period] {
		case "vm-add": // one VM added to a router's file
			kind = "vm-add"
			s := pick(-1)
			j := k / period % netsPerRouter
			v := vm(s.index, j, vmsPerNet+len(s.extra[j]))
			s.extra[j] = append(s.extra[j], v)
			t0 = time.Now()
			if err := in.write(s); err != nil {
				return res, err
			}
			cond = vmPresent(v, nil)
			if in.sgs {
				cond = both(cond, s.vmGroupsRight(v))
			}
		case "snat-ip": // one router's SNAT IP changed
			kind = "snat-ip"
			s := pick(-1)
			s.altSNAT = !s.altSNAT
			t0 = time.Now()
			if err := in.write(s); err != nil {
				return res, err
			}
			cond = routerRight(s)
		case "router-del": // one router removed: its file deleted
			kind = "router-del"
			removed = pick(-1)
			removed.removed = true
			t0 = time.Now()
			if err := os.Remove(removed.file(in.dir)); err != nil {
				return res, err
			}
			cond = routerGone(removed)
		case "hand-del": // one owned row deleted by hand
			s := pick(removed.index)
			var parent, column, oldUUID string
			w.mu.Lock()
			if k/period%2 == 0 {
				kind = "lsp-del"
				v := vm(s.index, 0, 0)
				if p := (view{w}).portNamed(vmPortRow(v.network, v.name, "eth1")); p != nil {
					oldUUID = p.UUID
				}
				parent, column = "Logical_Switch", "ports"
				cond = vmPresent(v, &oldUUID)
				if in.sgs {
					cond = both(cond, s.vmGroupsRight(v))
				}
			} else {
				kind = "nat-del"
				a, b := netPrefix(s.index, 1)
				cidr := fmt.Sprintf("10.%d.%d.0/24", a, b)
				if r := (view{w}).routerNamed(routerRow(routerName(s.index))); r != nil {
					for _, n := range (view{w}).nats(r) {
						if n.LogicalIP == cidr {
							oldUUID = n.UUID
						}
					}
				}
				parent, column = "Logical_Router", "nat"
				cond = natBack(s, cidr, oldUUID)
			}
			w.mu.Unlock()
			if oldUUID == "" {
				return res, fmt.Errorf("event %d (%s): the row to delete is not in the NB", k, kind)
			}
			handDeleted = oldUUID
			var err error
			if t0, err = handDelete(nb, parent, column, oldUUID, cfg.timeout); err != nil {
				return res, err
			}
		case "router-add": // the removed router back
			kind = "router-add"
			removed.removed = false
			t0 = time.Now()
			if err := in.write(removed); err != nil {
				return res, err
			}
			cond = routerRight(removed)
		case "fip-move": // one router's floating IP moved to another of its VMs
			kind = "fip-move"
			s := pick(-1)
			w.mu.Lock()
			if n := (view{w}).fipNAT(s); n != nil {
				fipMoved = n.UUID
			}
			w.mu.Unlock()
			if fipMoved == "" {
				return res, fmt.Errorf("event %d (%s): floating IP %s of router %s is not in the NB", k, kind, fipIP(s.index), routerName(s.index))
			}
			s.fipVM = 1 - s.fipVM
			movedFrom = s
			t0 = time.Now()
			if err := in.write(s); err != nil {
				return res, err
			}
			cond = fipBound(s)
		case "sg-rule": // one rule of a security group edited: its port
			kind = "sg-rule"
			g := k / period % sgCount
			w.mu.Lock()
			if a := (view{w}).ruleACL(g, sgRuleID(g, sgEditedRule)); a != nil {
				sgEdited = a.UUID
			}
			w.mu.Unlock()
			if sgEdited == "" {
				return res, fmt.Errorf("event %d (%s): the ACL of rule %s is not in the NB", k, kind, sgRuleID(g, sgEditedRule))
			}
			in.sgAlt[g] = !in.sgAlt[g]
			sgGroup = g
			t0 = time.Now()
			if err := in.writeSGs(); err != nil {
				return res, err
			}
			cond = ruleOnPort(g, in.sgRulePort(g))
		case "sg-bind": // one VM moved from one of its groups to another
			kind = "sg-bind"
			s := pick(-1)
			v := vm(s.index, k/period%netsPerRouter, k/period%vmsPerNet)
			s.rebound[v.name] = !s.rebound[v.name]
			t0 = time.Now()
			if err := in.write(s); err != nil {
				return res, err
			}
			cond = s.vmGroupsRight(v)
		}
		t1, err := w.until(cond, cfg.timeout)
		if err != nil {
			return res, fmt.Errorf("event %d (%s): %w (log %s)", k, kind, err, res.log)
		}
		if movedFrom != nil {
			res.fipMoves++
			w.mu.Lock()
			if n := (view{w}).fipNAT(movedFrom); n == nil || n.UUID != fipMoved {
				res.fipReplaced++
			}
			w.mu.Unlock()
		}
		if sgGroup >= 0 {
			res.sgEdits++
			w.mu.Lock()
			if a := (view{w}).ruleACL(sgGroup, sgRuleID(sgGroup, sgEditedRule)); a == nil || a.UUID != sgEdited {
				res.sgReplaced++
			}
			w.mu.Unlock()
		}
		if handDeleted != "" {
			// From the deletion the NB announced, not from the start of
			// ovn-nbctl, which first reads the whole NB (at N=1,000
			// longer than the repair takes).
			if at := w.deletedAt(handDeleted); !at.IsZero() && at.After(t0) {
				t0 = at
			}
			handDeleted = ""
		}
		_, idleErr := p.waitIdle(live(), cfg.timeout)
		if idleErr != nil && !errors.Is(idleErr, errNotIdle) {
			return res, fmt.Errorf("event %d (%s): %w (log %s)", k, kind, idleErr, res.log)
		}
		cpu1, err := procCPU(pid)
		if err != nil {
			return res, err
		}
		res.kinds = append(res.kinds, kind)
		res.lat = append(res.lat, t1.Sub(t0))
		res.cpu = append(res.cpu, cpu1-cpu0)
		if idleErr != nil {
			res.note = fmt.Sprintf("event %d (%s): %v: its CPU is a lower bound and no further events were measured", k, kind, idleErr)
			break
		}
		if cfg.verbose {
			fmt.Fprintf(os.Stderr, "  event %d %-10s latency %s cpu %s\n", k, kind, t1.Sub(t0).Round(time.Millisecond), (cpu1 - cpu0).Round(time.Millisecond))
		}
	}
	res.hwm = procHWM(p.cmd.Process.Pid)
	if removed != nil && removed.removed {
		// Keep the input whole for whoever reads the directory next.
		removed.removed = false
		_ = in.write(removed)
	}
	return res, nil
}

// vmPresent: the VM's port exists (with a UUID other than old, if given),
// carries its MAC, and is one of its switch's ports.
func vmPresent(v vmSpec, old *string) func(view) bool {
	return func(x view) bool {
		p := x.portNamed(vmPortRow(v.network, v.name, "eth1"))
		if p == nil || (old != nil && p.UUID == *old) {
			return false
		}
		if !slices.ContainsFunc(p.Addresses, func(a string) bool { return strings.HasPrefix(a, v.mac) }) {
			return false
		}
		ls := x.switchNamed(switchRow(v.network))
		return ls != nil && slices.Contains(ls.Ports, p.UUID)
	}
}

// wantNATs is how many NAT rows router s has: one SNAT per internal
// network, and its floating IP's.
func (s *routerState) wantNATs() int {
	if s.fip {
		return netsPerRouter + 1
	}
	return netsPerRouter
}

// routerRight: the router exists with its three ports, one SNAT per
// internal network on the current SNAT IP, its floating IP bound to its
// current VM, its gateway port on the SNAT IP, and its switches with a port
// per VM and one for the router.
func routerRight(s *routerState) func(view) bool {
	return func(x view) bool {
		r := x.routerNamed(routerRow(routerName(s.index)))
		if r == nil || len(r.Ports) != netsPerRouter+1 {
			return false
		}
		nats := x.nats(r)
		if len(nats) != s.wantNATs() || len(r.Nat) != s.wantNATs() {
			return false
		}
		for _, n := range nats {
			if n.Type == nbmodel.NATTypeSNAT && n.ExternalIP != s.snat() {
				return false
			}
		}
		if s.fip && !fipBound(s)(x) {
			return false
		}
		if s.sgs {
			for j := 0; j < netsPerRouter; j++ {
				for _, v := range s.vms(j) {
					if !s.vmGroupsRight(v)(x) {
						return false
					}
				}
			}
		}
		gw := x.routerPortNamed(rtoeRow(routerName(s.index)))
		if gw == nil || !slices.ContainsFunc(gw.Networks, func(n string) bool { return strings.HasPrefix(n, s.snat()+"/") }) {
			return false
		}
		if x.portNamed(etorRow(routerName(s.index))) == nil {
			return false
		}
		for j := 0; j < netsPerRouter; j++ {
			ls := x.switchNamed(switchRow(netName(s.index, j)))
			if ls == nil || len(ls.Ports) != len(s.vms(j))+1 {
				return false
			}
			for _, u := range ls.Ports {
				if x.w.lsp[u] == nil {
					return false
				}
			}
		}
		return true
	}
}

// routerGone: the router, its switches and its external switch port are gone.
func routerGone(s *routerState) func(view) bool {
	return func(x view) bool {
		if x.routerNamed(routerRow(routerName(s.index))) != nil || x.portNamed(etorRow(routerName(s.index))) != nil {
			return false
		}
		for j := 0; j < netsPerRouter; j++ {
			if x.switchNamed(switchRow(netName(s.index, j))) != nil {
				return false
			}
		}
		return true
	}
}

// natBack: the router has its SNAT for cidr again, as a new row.
func natBack(s *routerState, cidr, old string) func(view) bool {
	return func(x view) bool {
		r := x.routerNamed(routerRow(routerName(s.index)))
		if r == nil {
			return false
		}
		nats := x.nats(r)
		if len(nats) != s.wantNATs() {
			return false
		}
		for _, n := range nats {
			if n.LogicalIP == cidr && n.UUID != old && n.ExternalIP == s.snat() {
				return true
			}
		}
		return false
	}
}

// fipBound: the router's floating IP is one dnat_and_snat row with the
// VM's address as its logical IP.
func fipBound(s *routerState) func(view) bool {
	return func(x view) bool {
		n := x.fipNAT(s)
		return n != nil && n.LogicalIP == s.fipFixed().ip
	}
}

func both(a, b func(view) bool) func(view) bool {
	return func(x view) bool { return a(x) && b(x) }
}

// vmGroupsRight: VM v's port is in the Port_Groups of its two security
// groups and in no other.
func (s *routerState) vmGroupsRight(v vmSpec) func(view) bool {
	return func(x view) bool {
		p := x.portNamed(vmPortRow(v.network, v.name, "eth1"))
		if p == nil {
			return false
		}
		want := s.groups(v)
		for g := 0; g < sgCount; g++ {
			pg := x.groupNamed(sgRow(g))
			if pg == nil || slices.Contains(pg.Ports, p.UUID) != slices.Contains(want, g) {
				return false
			}
		}
		return true
	}
}

// sgACLKey is the external_ids key that names a security group's ACL.
const sgACLKey = "kubevirt-ovn/sg-acl"

// ruleACL is the ACL of rule id among group g's ACLs.
func (v view) ruleACL(g int, id string) *nbmodel.ACL {
	pg := v.groupNamed(sgRow(g))
	if pg == nil {
		return nil
	}
	for _, u := range pg.ACLs {
		if a := v.w.acl[u]; a != nil && a.ExternalIDs[sgACLKey] == "rule/"+id {
			return a
		}
	}
	return nil
}

// ruleOnPort: group g's edited rule matches TCP port port.
func ruleOnPort(g, port int) func(view) bool {
	return func(x view) bool {
		a := x.ruleACL(g, sgRuleID(g, sgEditedRule))
		return a != nil && strings.HasSuffix(a.Match, fmt.Sprintf("tcp.dst == %d", port))
	}
}

// handDelete deletes row uuid, which column of a row of table parent
// holds, as ovn-nbctl's lsp-del and lr-nat-del do (one mutate of the
// parent; the child, not a root, goes with it), over a connection of its
// own, and returns when it sent the transaction. ovn-nbctl reads the whole
// NB before it writes: 0.4 s at 10,000 routers, which the event's latency
// counted as the controller's.
func handDelete(nb, parent, column, uuid string, timeout time.Duration) (time.Time, error) {
	r, err := dialRaw(nb)
	if err != nil {
		return time.Time{}, err
	}
	defer r.Close()
	ref := []any{"uuid", uuid}
	op := map[string]any{"op": "mutate", "table": parent, "where": []any{[]any{column, "includes", ref}},
		"mutations": []any{[]any{column, "delete", ref}}}
	t0 := time.Now()
	if _, err := r.transact([]any{"OVN_Northbound", op}, timeout); err != nil {
		return t0, fmt.Errorf("deleting %s by hand: %w", uuid, err)
	}
	return t0, nil
}

// limitedStart is `run`'s warm start under a GOMEMLIMIT.
type limitedStart struct {
	limit   string
	startup time.Duration
	cpu     time.Duration
	hwm     int64
}

// runLimited starts `run` once more on the synced NB with GOMEMLIMIT=limit
// (the Deployments set it from the container's memory limit) and measures
// its start until idle: the Go runtime collects harder as the heap nears
// the limit, which bounds the peak at the cost of CPU.
func runLimited(cfg *config, dir, nb string, in *input, limit string) (*limitedStart, error) {
	log := filepath.Join(dir, "run-limited.log")
	start := time.Now()
	rp, err := startRoleEnv(cfg.bin, log, "run", []string{"GOMEMLIMIT=" + limit}, "--nb", nb, "--from-file", in.dir,
		"--file-poll", "100ms", "--resync", "24h")
	if err != nil {
		return nil, err
	}
	p := rp.runProc
	stop, _ := cleanup.add(p.stop)
	defer stop()
	live := 0
	for _, s := range in.routers {
		if !s.removed {
			live++
		}
	}
	idle, err := p.waitIdle(live, cfg.timeout)
	if err != nil {
		return nil, fmt.Errorf("run under GOMEMLIMIT=%s: %w (log %s)", limit, err, log)
	}
	res := &limitedStart{limit: limit, startup: idle.Sub(start), hwm: procHWM(p.cmd.Process.Pid)}
	res.cpu, _ = procCPU(p.cmd.Process.Pid)
	return res, nil
}
