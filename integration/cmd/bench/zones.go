package main

// The zones bench (-zones): OVN as ovn-kubernetes runs it in interconnect
// mode, one NB and SB per node, under kubevirt-ovn's cluster roles: the
// allocator and one zone agent per zone, on a real kube-apiserver (etcd and
// the binary built from integration/kube-apiserver).
//
// Each zone is one ovsdb-server serving its NB and SB on one socket (no
// ovn-northd and no ovn-controller: what is measured is kubevirt-ovn's
// work, and the zone's databases hold exactly what it writes). A zone's SB
// holds its node's chassis (a gateway candidate mapping physnet1, as
// ovn-controller registers it) and every other zone's as a remote chassis
// (other_config:is-remote=true, as ovnkube-controller writes them); its NB
// is named after the zone.
//
// The input is -zone-routers routers per zone (the generated routers of
// gen.go), so that what lives in a zone is the same at every zone count:
// router i is pinned to the gateway of zone i mod Z, and the VMs of its
// network j alternate between that zone and zone i+1+j mod Z, so every
// network spans two zones and every zone is the home of as many routers
// and the second zone of as many networks. Measured per zone count: the
// time until every zone's NB holds its rows, from the roles' start on
// empty NBs; the rows, NB transactions, CPU and memory of each zone's
// agent; the allocator's CPU and memory; a zone rebuilt (its NB and SB
// lost, as on a reinstalled node) until its NB is whole again, and what
// the other zones' agents wrote meanwhile; and VMs added and deleted in one
// zone, from the API server's answer until the zone's NB has the port, or
// has lost it.

import (
	"bufio"
	"bytes"
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
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/kubeapi"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// zonesNamespace is where the allocator and the agents keep their
// OVNAllocations and OVNZones, as deploy/interconnect does.
const zonesNamespace = "kubevirt-ovn"

func zoneName(z int) string { return fmt.Sprintf("z%02d", z) }

// zoneNode is zone z's node, and its chassis's name and hostname.
func zoneNode(z int) string { return "node-" + zoneName(z) }

// zoneEncap is zone z's chassis's geneve address.
func zoneEncap(z int) string { return fmt.Sprintf("10.254.%d.%d", z>>8, z&255) }

// vmZone is the zone of VM v of network j of router i, over zones zones.
func vmZone(i, j, v, zones int) int {
	if v%2 == 0 {
		return i % zones
	}
	return (i + 1 + j) % zones
}

// zonesResult is one zone count's measurements.
type zonesResult struct {
	zones, routers, vms, objects int
	create                       time.Duration // creating the objects in the API server
	// converge is from the roles' start until every zone's NB holds its
	// rows; zoneConverge the same per zone.
	converge     time.Duration
	zoneConverge []time.Duration
	// rows, txns, cpu, hwm: per zone, its NB's rows (the five tables
	// watched) and its agent's NB transactions, CPU and peak RSS once
	// converged.
	rows, txns []int
	cpu        []time.Duration
	hwm        []int64
	allocCPU   time.Duration
	allocHWM   int64
	verified   string // the dry run's verdict once converged
	// rebuilt: one zone's NB and SB lost and started empty, until its NB
	// is whole again; its agent's transactions and CPU meanwhile, and the
	// other agents' and the allocator's.
	rebuilt                 time.Duration
	rebuiltTxns             int
	rebuiltCPU              time.Duration
	othersTxns              int
	othersCPU, rebuiltAlloc time.Duration
	lat                     []time.Duration // every event's latency
	events                  []zoneEvent
	errs                    []string
}

func (r *zonesResult) fail(what string, err error) {
	r.errs = append(r.errs, fmt.Sprintf("%s: %v", what, err))
}

// zoneDB is one running zone.
type zoneDB struct {
	z     int
	db    *sandbox.DB
	dir   string
	want  map[string]int // rows per watched table, from the dry run
	watch *nbWatch
	agent *roleProc
}

// roleProc is a running allocator or zone agent.
type roleProc struct {
	*runProc
	log string
}

func runZones(cfg *config, dir string, zones int) (res *zonesResult) {
	res = &zonesResult{zones: zones, routers: zones * cfg.zoneRouters}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	keep := func(f func()) {
		stop, _ := cleanup.add(f)
		stops = append(stops, stop)
	}
	cfg.progress("zones %d: the API server", zones)
	kdir := filepath.Join(dir, "kube")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		res.fail("kube", err)
		return res
	}
	srv, err := kubeapi.Start(kdir, cfg.kubeAPIServer)
	if err != nil {
		res.fail("kube-apiserver", err)
		return res
	}
	keep(srv.Stop)
	crds, _ := filepath.Glob(filepath.Join("deploy", "common", "crd-*.yaml"))
	crds = append(crds, filepath.Join("deploy", "interconnect", "crd-interconnect.yaml"),
		filepath.Join("integration", "testdata", "crds", "nad.yaml"), filepath.Join("integration", "testdata", "crds", "vmi.yaml"))
	if err := kubeapi.InstallCRDs(srv.Config, crds); err != nil {
		res.fail("CRDs", err)
		return res
	}
	cfg.progress("zones %d: %d zone databases", zones, zones)
	var dbs []*zoneDB
	for z := range zones {
		zd := &zoneDB{z: z, dir: filepath.Join(dir, "zone-"+zoneName(z))}
		if err := zd.start(zones); err != nil {
			res.fail("zone "+zoneName(z), err)
			return res
		}
		keep(func() { _ = zd.db.Stop() })
		dbs = append(dbs, zd)
	}
	cfg.progress("zones %d: %d routers", zones, res.routers)
	in := &input{dir: filepath.Join(dir, "manifests"), tmp: filepath.Join(dir, "manifests.tmp")}
	for _, d := range []string{in.dir, in.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			res.fail("manifests", err)
			return res
		}
	}
	if err := os.WriteFile(filepath.Join(in.dir, "external.yaml"), []byte(externalManifest), 0o644); err != nil {
		res.fail("manifests", err)
		return res
	}
	for i := range res.routers {
		s := &routerState{index: i, rebound: map[string]bool{}, gateway: zoneNode(i % zones),
			nodeOf: func(v vmSpec) string {
				var a, b, c int
				fmt.Sscanf(v.name, "vm-%d-%d-%d", &a, &b, &c)
				return zoneNode(vmZone(a, b, c, zones))
			}}
		in.routers = append(in.routers, s)
		if err := os.WriteFile(s.file(in.dir), s.manifest(), 0o644); err != nil {
			res.fail("manifests", err)
			return res
		}
		res.vms += len(s.vms(0)) + len(s.vms(1))
	}
	kcfg := rest.CopyConfig(srv.Config)
	kcfg.QPS, kcfg.Burst = 1000, 2000 // the bench's own writes: not client-side throttled
	dyn, err := dynamic.NewForConfig(kcfg)
	if err != nil {
		res.fail("kube client", err)
		return res
	}
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": zonesNamespace}}}
	if _, err := dyn.Resource(nsGVR).Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		res.fail("namespace", err)
		return res
	}
	start := time.Now()
	n, err := createObjects(dyn, in.dir)
	res.create, res.objects = time.Since(start), n
	if err != nil {
		res.fail("creating the objects", err)
		return res
	}
	cfg.progress("zones %d: %d objects created in %s; what each zone wants", zones, n, res.create.Round(time.Millisecond))
	if err := wantPerZone(cfg, dbs, in.dir); err != nil {
		res.fail("dry run on the empty zones", err)
		return res
	}
	for _, zd := range dbs {
		if zd.watch, err = watchNB(context.Background(), zd.db.Unix); err != nil {
			res.fail("watching zone "+zoneName(zd.z), err)
			return res
		}
		w := zd.watch
		keep(w.Close)
	}

	cfg.progress("zones %d: the allocator and %d agents", zones, zones)
	logs := filepath.Join(dir, "logs")
	_ = os.MkdirAll(logs, 0o755)
	start = time.Now()
	// A longer Lease than the default 15 s: this machine's 2 cores run the
	// API server, etcd, every zone's ovsdb-server and agent, and at 50
	// zones the agents' start kept the API server from answering the
	// allocator's renewal within 10 s: it stopped, as it must, and no
	// Deployment was there to start it again.
	alloc, err := startRole(cfg.bin, filepath.Join(logs, "allocator.log"), "allocator", "--kubeconfig", srv.Kubeconfig,
		"--namespace", zonesNamespace, "--lease-namespace", "kube-system", "--identity", "allocator", "--resync", "24h",
		"--lease-duration", "90s", "--renew-deadline", "60s")
	if err != nil {
		res.fail("allocator", err)
		return res
	}
	keep(alloc.stop)
	cpuProfile := make(chan error, 1)
	for _, zd := range dbs {
		args := []string{"--zone-nb", zd.db.Unix, "--zone-sb", zd.db.Unix, "--kubeconfig", srv.Kubeconfig, "--namespace", zonesNamespace,
			"--node-name", "", "--resync", "24h"}
		profiled := cfg.profile != "" && zd.z == 0
		if profiled {
			args = append(args, "--enable-profiling")
		}
		if zd.agent, err = startRole(cfg.bin, filepath.Join(logs, "agent-"+zoneName(zd.z)+".log"), "zone-agent", args...); err != nil {
			res.fail("agent "+zoneName(zd.z), err)
			return res
		}
		keep(zd.agent.stop)
		if profiled {
			// Zone 0's agent: the CPU of its start, as the other agents
			// start beside it.
			go func(p *runProc) {
				cpuProfile <- p.saveProfile(cfg, fmt.Sprintf("profile?seconds=%d", int(cfg.profileStart.Seconds())), fmt.Sprintf("agent-start-cpu-zones%d.pb.gz", zones))
			}(zd.agent.runProc)
		}
	}
	res.zoneConverge = make([]time.Duration, zones)
	for _, zd := range dbs {
		at, err := zd.watch.until(zd.whole, cfg.timeout-time.Since(start))
		if err != nil {
			res.fail("converging", fmt.Errorf("zone %s: %w; holds %v, wants %v (logs in %s)", zoneName(zd.z), err, zd.counts(), zd.want, logs))
			return res
		}
		res.zoneConverge[zd.z] = at.Sub(start)
		res.converge = max(res.converge, at.Sub(start))
	}
	cfg.progress("zones %d: converged in %s; checking with a dry run", zones, res.converge.Round(time.Millisecond))
	res.verified = dryRunClean(cfg, dbs, in.dir)
	if res.verified != "" {
		res.fail("the dry run after converging", errors.New(res.verified))
		return res
	}
	// Idle before the figures: the agents may still publish status.
	_ = waitQuiet(append(roles(dbs), alloc), cfg.timeout)
	for _, zd := range dbs {
		c := zd.counts()
		res.rows = append(res.rows, c["total"])
		m, _ := zd.agent.scrapeAll()
		res.txns = append(res.txns, int(m["kubevirt_ovn_nb_transaction_duration_seconds_count"]))
		cpu, _ := procCPU(zd.agent.cmd.Process.Pid)
		res.cpu = append(res.cpu, cpu)
		res.hwm = append(res.hwm, procHWM(zd.agent.cmd.Process.Pid))
	}
	res.allocCPU, _ = procCPU(alloc.cmd.Process.Pid)
	res.allocHWM = procHWM(alloc.cmd.Process.Pid)
	if cfg.profile != "" {
		if err := <-cpuProfile; err != nil {
			res.fail("agent profile", err)
			return res
		}
		for _, pr := range []string{"allocs", "heap"} {
			if err := dbs[0].agent.saveProfile(cfg, pr, fmt.Sprintf("agent-%s-zones%d.pb.gz", pr, zones)); err != nil {
				res.fail("agent profile", err)
				return res
			}
		}
	}

	cfg.progress("zones %d: a zone rebuilt", zones)
	if err := rebuildZone(cfg, res, dbs, alloc); err != nil {
		res.fail("zone rebuilt", err)
		return res
	}
	cfg.progress("zones %d: %d VM events", zones, cfg.zoneEvents)
	if err := zoneEvents(cfg, res, dyn, dbs, alloc, in); err != nil {
		res.fail("VM events", err)
	}
	return res
}

// start creates the zone's NB and SB (one ovsdb-server), names its NB and
// registers the chassis: its own and every other zone's as remote.
func (zd *zoneDB) start(zones int) error {
	var err error
	if zd.db, err = sandbox.StartDBs(zd.dir, sandbox.NBSchema, sandbox.SBSchema); err != nil {
		return err
	}
	nb := []string{"--db=" + zd.db.Unix, "--", "init", "--", "set", "NB_Global", ".", "name=" + zoneName(zd.z)}
	if _, err := sandbox.Run(zd.dir, "ovn-nbctl", nb...); err != nil {
		return err
	}
	sb := []string{"--db=" + zd.db.Unix, "--", "init"}
	for z := range zones {
		node := zoneNode(z)
		sb = append(sb, "--", "chassis-add", node, "geneve", zoneEncap(z), "--", "set", "Chassis", node, "hostname="+node)
		if z == zd.z {
			sb = append(sb, "other_config:ovn-cms-options=enable-chassis-as-gw", "other_config:ovn-bridge-mappings=physnet1:br-ex")
		} else {
			sb = append(sb, "other_config:is-remote=true")
		}
	}
	_, err = sandbox.Run(zd.dir, "ovn-sbctl", sb...)
	return err
}

// watched are the NB tables a zone's rows are counted in.
var watched = []string{"Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port", "NAT"}

// counts are the zone's rows per watched table, and their total.
func (zd *zoneDB) counts() map[string]int {
	zd.watch.mu.Lock()
	defer zd.watch.mu.Unlock()
	return viewCounts(view{zd.watch})
}

func viewCounts(v view) map[string]int {
	c := map[string]int{"Logical_Switch": len(v.w.ls), "Logical_Switch_Port": len(v.w.lsp), "Logical_Router": len(v.w.lr),
		"Logical_Router_Port": len(v.w.lrp), "NAT": len(v.w.nat)}
	for _, n := range []int{len(v.w.ls), len(v.w.lsp), len(v.w.lr), len(v.w.lrp), len(v.w.nat)} {
		c["total"] += n
	}
	return c
}

// whole says the zone's NB holds as many rows as the dry run wanted in
// every watched table.
func (zd *zoneDB) whole(v view) bool {
	c := viewCounts(v)
	for _, t := range watched {
		if c[t] != zd.want[t] {
			return false
		}
	}
	return true
}

// createObjects creates the objects of every manifest in dir: networks,
// then routers, then VMIs, by 8 clients at once.
func createObjects(dyn dynamic.Interface, dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, err
	}
	var ranks [3][]*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return 0, fmt.Errorf("%s: %w", f, err)
			}
			switch u.GetKind() {
			case "":
			case "NetworkAttachmentDefinition":
				ranks[0] = append(ranks[0], u)
			case "VirtualRouter":
				ranks[1] = append(ranks[1], u)
			default:
				ranks[2] = append(ranks[2], u)
			}
		}
	}
	n := 0
	for _, objs := range ranks {
		if err := createAll(dyn, objs); err != nil {
			return n, err
		}
		n += len(objs)
	}
	return n, nil
}

func createAll(dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	work := make(chan *unstructured.Unstructured)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				if err := createObject(dyn, u); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, u := range objs {
		work <- u
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// objectGVR is where an object of the generated input lives.
func objectGVR(u *unstructured.Unstructured) (schema.GroupVersionResource, bool, error) {
	switch u.GetKind() {
	case "NetworkAttachmentDefinition":
		return kube.NADGVR, true, nil
	case "VirtualMachineInstance":
		return kube.VMIGVR, true, nil
	case "VirtualRouter":
		return kube.RouterGVR, false, nil
	}
	return schema.GroupVersionResource{}, false, fmt.Errorf("%s %s: not in the zones bench's input", u.GetKind(), u.GetName())
}

// resourceOf is where u is read and written.
func resourceOf(dyn dynamic.Interface, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvr, namespaced, err := objectGVR(u)
	if err != nil {
		return nil, err
	}
	if namespaced {
		return dyn.Resource(gvr).Namespace(u.GetNamespace()), nil
	}
	return dyn.Resource(gvr), nil
}

func createObject(dyn dynamic.Interface, u *unstructured.Unstructured) error {
	r, err := resourceOf(dyn, u)
	if err == nil {
		_, err = r.Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

func deleteObject(dyn dynamic.Interface, u *unstructured.Unstructured) error {
	r, err := resourceOf(dyn, u)
	if err == nil {
		err = r.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// zoneFlags are `sync --zone` flags for every zone.
func zoneFlags(dbs []*zoneDB) []string {
	var out []string
	for _, zd := range dbs {
		out = append(out, "--zone", zoneName(zd.z)+"="+zd.db.Unix+","+zd.db.Unix)
	}
	return out
}

// dryRun is `sync --dry-run` of the manifests against every zone: its
// output per zone ("" for the zones it names no change in).
func dryRun(cfg *config, dbs []*zoneDB, manifests string) (map[string]string, error) {
	// The bench's timeout, not sync's 60 s: right after converging, 50
	// agents may still be busy on the same 2 cores.
	args := append(append([]string{"sync"}, zoneFlags(dbs)...), "--from-file", manifests, "--dry-run", "--timeout", cfg.timeout.String())
	r, err := runChild(cfg.timeout, nil, cfg.bin, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	zone := ""
	for _, line := range strings.Split(r.stdout, "\n") {
		if z, ok := strings.CutPrefix(line, "zone "); ok && strings.HasSuffix(z, ":") {
			zone = strings.TrimSuffix(z, ":")
			continue
		}
		out[zone] += line + "\n"
	}
	return out, nil
}

// wantPerZone reads, from a dry run on the empty zones, how many rows of
// each watched table each zone is to hold.
func wantPerZone(cfg *config, dbs []*zoneDB, manifests string) error {
	out, err := dryRun(cfg, dbs, manifests)
	if err != nil {
		return err
	}
	for _, zd := range dbs {
		zd.want = map[string]int{}
		sc := bufio.NewScanner(strings.NewReader(out[zoneName(zd.z)]))
		tables := false
		for sc.Scan() {
			line := sc.Text()
			if line == "changes per table:" {
				tables = true
				continue
			}
			f := strings.Fields(line)
			if !tables || len(f) < 4 || f[2] != "to" || f[3] != "create," && f[3] != "create" {
				continue
			}
			if slices.Contains(watched, f[0]) {
				zd.want[f[0]], _ = strconv.Atoi(f[1])
			}
		}
		if len(zd.want) == 0 {
			return fmt.Errorf("the dry run names no row for zone %s:\n%s", zoneName(zd.z), out[zoneName(zd.z)])
		}
	}
	return nil
}

// dryRunClean is "" when a dry run against every zone says no changes,
// else what it says.
func dryRunClean(cfg *config, dbs []*zoneDB, manifests string) string {
	out, err := dryRun(cfg, dbs, manifests)
	if err != nil {
		return err.Error()
	}
	var bad []string
	for _, zd := range dbs {
		if o := out[zoneName(zd.z)]; !strings.Contains(o, "no changes\n") {
			bad = append(bad, "zone "+zoneName(zd.z)+":\n"+lastLines(o, 20))
		}
	}
	return strings.Join(bad, "\n")
}

// startRole starts kubevirt-ovn ROLE args, serving /metrics on a free
// port, its output in logFile, and returns once it serves /healthz. A free
// port can be taken before the role binds it (by another process's
// outgoing connection, with fifty agents starting): then it starts again
// on another.
func startRole(bin, logFile, role string, args ...string) (*roleProc, error) {
	for attempt := 1; ; attempt++ {
		p, err := startRoleOnce(bin, logFile, role, args...)
		if err != nil {
			return nil, err
		}
		err = sandbox.Poll(30*time.Second, role+" serving /healthz", func() (bool, error) {
			if !p.alive() {
				return false, errors.New("exited")
			}
			resp, err := http.Get(p.metrics + "/healthz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
		if err == nil {
			return p, nil
		}
		p.stop()
		out, _ := os.ReadFile(logFile)
		if attempt == 5 || !strings.Contains(string(out), "address already in use") {
			return nil, fmt.Errorf("%s: %w: %s", role, err, lastLines(string(out), 5))
		}
	}
}

func startRoleOnce(bin, logFile, role string, args ...string) (*roleProc, error) {
	return startRoleEnv(bin, logFile, role, nil, args...)
}

// startRoleEnv is startRoleOnce with env added to the bench's environment.
func startRoleEnv(bin, logFile, role string, env []string, args ...string) (*roleProc, error) {
	port, err := sandbox.FreePort()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, append([]string{role, "--http-addr", addr}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &runProc{cmd: cmd, metrics: "http://" + addr, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return &roleProc{runProc: p, log: logFile}, nil
}

// scrapeAll is every sample of /metrics, summed over labels.
func (p *runProc) scrapeAll() (map[string]float64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		out[name] += v
	}
	return out, sc.Err()
}

func roles(dbs []*zoneDB) []*roleProc {
	var out []*roleProc
	for _, zd := range dbs {
		out = append(out, zd.agent)
	}
	return out
}

// waitQuiet waits until each of the processes used at most idleShare of
// one CPU over two idleWindows in a row.
func waitQuiet(ps []*roleProc, timeout time.Duration) error {
	cpus := func() []time.Duration {
		out := make([]time.Duration, len(ps))
		for i, p := range ps {
			out[i], _ = procCPU(p.cmd.Process.Pid)
		}
		return out
	}
	deadline := time.Now().Add(timeout)
	quiet := 0
	for quiet < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("not quiet within %s", timeout)
		}
		before, t0 := cpus(), time.Now()
		time.Sleep(idleWindow)
		after, window := cpus(), time.Since(t0)
		// Each of them idle: 50 idle agents together use more than
		// idleShare of one core (their supervisors, informers and
		// runtime), and a sum would never be quiet.
		busy := false
		for i := range ps {
			if float64(after[i]-before[i]) > idleShare*float64(window) {
				busy = true
			}
		}
		if busy {
			quiet = 0
		} else {
			quiet++
		}
	}
	return nil
}

// snapshot is every agent's CPU, NB transactions and reconciles, and the
// allocator's CPU, at one moment.
type snapshot struct {
	cpu         []time.Duration
	txns, recon []int
	alloc       time.Duration
}

// snap takes a snapshot. A scrape of /metrics costs the agent CPU: a
// snapshot that begins an interval (end false) scrapes before it reads
// the CPU, one that ends it (end true) after, so that no scrape is in the
// interval.
func snap(dbs []*zoneDB, alloc *roleProc, end bool) snapshot {
	var s snapshot
	readCPU := func() {
		for _, zd := range dbs {
			c, _ := procCPU(zd.agent.cmd.Process.Pid)
			s.cpu = append(s.cpu, c)
		}
		s.alloc, _ = procCPU(alloc.cmd.Process.Pid)
	}
	if end {
		readCPU()
	}
	for _, zd := range dbs {
		m, _ := zd.agent.scrapeAll()
		s.txns = append(s.txns, int(m["kubevirt_ovn_nb_transaction_duration_seconds_count"]))
		s.recon = append(s.recon, int(m["kubevirt_ovn_reconcile_duration_seconds_count"]))
	}
	if !end {
		readCPU()
	}
	return s
}

// rebuildZone stops the middle zone's ovsdb-server, loses its NB and SB,
// starts them empty (the chassis registered again, the NB named), and
// waits until its NB is whole again.
func rebuildZone(cfg *config, res *zonesResult, dbs []*zoneDB, alloc *roleProc) error {
	zd := dbs[len(dbs)/2]
	before := snap(dbs, alloc, false)
	zd.watch.Close()
	if err := zd.db.Stop(); err != nil {
		return err
	}
	if err := os.RemoveAll(zd.dir); err != nil {
		return err
	}
	// From the empty databases' start: the agent may reconnect and write
	// while the chassis are registered.
	start := time.Now()
	if err := zd.start(len(dbs)); err != nil {
		return err
	}
	var err error
	if zd.watch, err = watchNB(context.Background(), zd.db.Unix); err != nil {
		return err
	}
	w := zd.watch
	cleanup.add(w.Close)
	at, err := zd.watch.until(zd.whole, cfg.timeout)
	if err != nil {
		return fmt.Errorf("zone %s: %w; holds %v, wants %v", zoneName(zd.z), err, zd.counts(), zd.want)
	}
	res.rebuilt = at.Sub(start)
	_ = waitQuiet(append(roles(dbs), alloc), cfg.timeout)
	after := snap(dbs, alloc, true)
	for i := range dbs {
		if dbs[i] == zd {
			res.rebuiltTxns = after.txns[i] - before.txns[i]
			res.rebuiltCPU = after.cpu[i] - before.cpu[i]
			continue
		}
		res.othersTxns += after.txns[i] - before.txns[i]
		res.othersCPU += after.cpu[i] - before.cpu[i]
	}
	res.rebuiltAlloc = after.alloc - before.alloc
	return nil
}

// zoneEvents measures cfg.zoneEvents rounds over routers spread across the
// zones, each of three events: a VM added to a network, deleted again,
// and the router's SNAT IP changed. Each from the API server's answer
// until the zone's NB has it (the VM's port, gone, or the router's snat
// NAT with the new IP, in its home zone); and the CPU its zones' agents
// (the network's two, or the router's home), every other agent and the
// allocator used for it, once all are quiet again.
func zoneEvents(cfg *config, res *zonesResult, dyn dynamic.Interface, dbs []*zoneDB, alloc *roleProc, in *input) error {
	zones := len(dbs)
	for e := range cfg.zoneEvents {
		i := (e * 7919) % len(in.routers)
		s := in.routers[i]
		j := e % netsPerRouter
		v := vm(i, j, vmsPerNet+e/2)
		home := dbs[vmZone(i, j, vmsPerNet+e/2, zones)]
		var buf bytes.Buffer
		fmt.Fprintf(&buf, `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: %s
spec:
  networks:
    - name: eth1
      multus:
        networkName: %s
status:
  nodeName: %s
  interfaces:
    - name: eth1
      mac: "%s"
      ipAddress: %s
`, v.name, namespace, v.network, s.node(v), v.mac, v.ip)
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(&buf, 4096).Decode(&u.Object); err != nil {
			return err
		}
		port := vmPortRow(v.network, v.name, "eth1")
		for _, kind := range []string{"vm-add", "vm-del", "snat-ip"} {
			before := snap(dbs, alloc, false)
			spans := []int{vmZone(i, j, 0, zones), vmZone(i, j, 1, zones)}
			where, cond := home, func(w view) bool { return (w.portNamed(port) != nil) == (kind == "vm-add") }
			var err error
			switch kind {
			case "vm-add":
				err = createObject(dyn, u)
			case "vm-del":
				err = deleteObject(dyn, u)
			case "snat-ip":
				s.altSNAT = !s.altSNAT
				err = setSNATIP(dyn, s)
				where, spans = dbs[i%zones], []int{i % zones}
				want := s.snat()
				cond = func(w view) bool {
					lr := w.routerNamed(routerRow(routerName(i)))
					return lr != nil && slices.ContainsFunc(w.nats(lr), func(n *nbmodel.NAT) bool { return n.Type == "snat" && n.ExternalIP == want })
				}
			}
			if err != nil {
				return err
			}
			t0 := time.Now()
			at, err := where.watch.until(cond, cfg.timeout)
			if err != nil {
				return fmt.Errorf("%s of router %s's VM %s in zone %s: %w", kind, routerName(i), v.name, zoneName(where.z), err)
			}
			res.lat = append(res.lat, at.Sub(t0))
			_ = waitQuiet(append(roles(dbs), alloc), cfg.timeout)
			after := snap(dbs, alloc, true)
			var own, others time.Duration
			recon := 0
			for k := range dbs {
				d := after.cpu[k] - before.cpu[k]
				if slices.Contains(spans, k) {
					own += d
				} else {
					others += d
					recon += after.recon[k] - before.recon[k]
				}
			}
			res.events = append(res.events, zoneEvent{kind: kind, own: own, others: others, alloc: after.alloc - before.alloc, otherRecon: recon})
		}
	}
	return nil
}

// setSNATIP writes router s's SNAT IP into its VirtualRouter.
func setSNATIP(dyn dynamic.Interface, s *routerState) error {
	r := dyn.Resource(kube.RouterGVR)
	u, err := r.Get(context.Background(), routerName(s.index), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(u.Object, s.snat(), "spec", "external", "ip"); err != nil {
		return err
	}
	_, err = r.Update(context.Background(), u, metav1.UpdateOptions{})
	return err
}

// zoneEvent is one event's CPU: of the agents of the zones it concerns, of
// every other agent, of the allocator; and the other agents' reconciles.
type zoneEvent struct {
	kind               string
	own, others, alloc time.Duration
	otherRecon         int
}

// reportZones prints the zones table.
func reportZones(w io.Writer, results []*zonesResult) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Interconnect: one NB and SB per zone, the allocator and an agent per zone (all zones gateway candidates; each router pinned to a zone's gateway, each network over two zones):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| zones | routers | VMs | objects (create) | converge from empty | zone p50 | rows/zone mean (max) | NB txns/zone mean (max) | agent CPU mean (max) | agent peak RSS mean (max) | allocator CPU | allocator peak RSS |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		if len(r.rows) == 0 {
			fmt.Fprintf(w, "| %d | %d | %d | %d (%s) | failed | | | | | | | |\n", r.zones, r.routers, r.vms, r.objects, secs(r.create))
			continue
		}
		fmt.Fprintf(w, "| %d | %d | %d | %d (%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.zones, r.routers, r.vms, r.objects, secs(r.create),
			secs(r.converge), secs(quantile(r.zoneConverge, 0.5)), meanMaxInt(r.rows), meanMaxInt(r.txns),
			meanMaxDur(r.cpu), meanMaxMiB(r.hwm), secs(r.allocCPU), mib(r.allocHWM))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| zones | zone rebuilt: whole again | its agent: txns, CPU | other agents: txns, CPU | allocator CPU | events | latency p50 | p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		if r.rebuilt == 0 {
			continue
		}
		fmt.Fprintf(w, "| %d | %s | %d, %s | %d, %s | %s | %d | %s | %s |\n", r.zones, secs(r.rebuilt), r.rebuiltTxns, secs(r.rebuiltCPU),
			r.othersTxns, secs(r.othersCPU), secs(r.rebuiltAlloc), len(r.lat), secs(quantile(r.lat, 0.5)), secs(quantile(r.lat, 0.99)))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Mean CPU per event (a VM added or deleted: its network's two zones; a router's SNAT IP: its home zone):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| zones | event | count | its zones' agents | all other agents | per other agent | allocator | other agents' reconciles per event |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		for _, kind := range []string{"vm-add", "vm-del", "snat-ip"} {
			var own, others, alloc []time.Duration
			recon := 0
			for _, e := range r.events {
				if e.kind == kind {
					own, others, alloc = append(own, e.own), append(others, e.others), append(alloc, e.alloc)
					recon += e.otherRecon
				}
			}
			if len(own) == 0 {
				continue
			}
			nOthers := r.zones - 2
			if kind == "snat-ip" {
				nOthers = r.zones - 1
			}
			fmt.Fprintf(w, "| %d | %s | %d | %s | %s | %s | %s | %.1f |\n", r.zones, kind, len(own), secs(mean(own)), secs(mean(others)),
				secs(mean(others)/time.Duration(max(nOthers, 1))), secs(mean(alloc)), float64(recon)/float64(len(own)))
		}
	}
	for _, r := range results {
		for _, e := range r.errs {
			fmt.Fprintf(w, "\nzones %d: %s\n", r.zones, e)
		}
	}
}

func meanMaxInt(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	sum := 0
	for _, x := range v {
		sum += x
	}
	return fmt.Sprintf("%.0f (%d)", float64(sum)/float64(len(v)), slices.Max(v))
}

func meanMaxDur(v []time.Duration) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", secs(mean(v)), secs(slices.Max(v)))
}

func meanMaxMiB(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	var sum int64
	for _, x := range v {
		sum += x
	}
	return fmt.Sprintf("%s (%s)", mib(sum/int64(len(v))), mib(slices.Max(v)))
}
