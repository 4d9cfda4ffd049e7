package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

type runFlags struct {
	nb, sb         ovn.Endpoint
	kubeconfig     string
	paths          multiFlag
	instance       string
	workers        int
	resync         time.Duration
	fileInterval   time.Duration
	allowEmpty     bool
	addr           string
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	identity       string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	events         bool
	moveNudge      *bool
	zones          zoneFlags
	// Interconnect in a cluster: the allocator, or one zone's agent.
	interconnect   bool
	zoneNB, zoneSB ovn.Endpoint
	zoneName       string
	nodeName       string
	podName        string
	podUID         string
	namespace      string
}

func runRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	endpointFlags(fs, &f.nb, &f.sb)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to watch (default: in-cluster configuration)")
	fs.Var(&f.paths, "from-file", "watch manifests on disk instead of a cluster: a file or directory (repeatable)")
	fs.Var(&f.zones, "zone", "with --from-file, interconnect mode instead of --nb/--sb: a zone's NAME=NB,SB (one endpoint each); repeat for every zone")
	fs.StringVar(&f.instance, "instance", translator.DefaultInstance, "managed-by value marking the rows this kubevirt-ovn owns")
	fs.IntVar(&f.workers, "workers", 2, "units reconciled in parallel")
	fs.DurationVar(&f.resync, "resync", 5*time.Minute, "reconcile every unit this often, whatever the events")
	fs.DurationVar(&f.fileInterval, "file-poll", time.Second, "with --from-file: how often to look for changed files")
	fs.BoolVar(&f.allowEmpty, "allow-empty", false, "with --from-file: let manifests that declare no router and no network delete every row this instance owns (without it such an input is refused at start and ignored on change)")
	fs.StringVar(&f.addr, "http-addr", ":8080", "address of /metrics, /healthz and /readyz (empty: none)")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "with a cluster: only the holder of the Lease writes")
	fs.StringVar(&f.leaseNamespace, "lease-namespace", "kube-system", "namespace of the leader election Lease")
	fs.StringVar(&f.leaseName, "lease-name", "kubevirt-ovn", "name of the leader election Lease")
	fs.StringVar(&f.identity, "identity", "", "this replica's identity in the Lease (default: hostname and pid)")
	fs.DurationVar(&f.leaseDuration, "lease-duration", 15*time.Second, "how long a Lease is valid without renewal")
	fs.DurationVar(&f.renewDeadline, "renew-deadline", 10*time.Second, "the leader stops writing when it could not renew for this long (less than --lease-duration)")
	fs.DurationVar(&f.retryPeriod, "retry-period", 2*time.Second, "how often to try to acquire or renew the Lease")
	fs.BoolVar(&f.events, "events", true, "with a cluster: record Kubernetes Events for failures and gateway changes")
	f.moveNudge = moveNudgeFlag(fs)
	fs.BoolVar(&f.interconnect, "interconnect", false, "in a cluster whose OVN has one NB per zone (ovn-kubernetes): be the allocator, which writes no NB; it schedules gateways and allocates tunnel keys, recorded in OVNAllocations of --namespace for the zone agents (--zone-nb)")
	fs.StringVar(&f.zoneNB.Address, "zone-nb", "", "in a cluster whose OVN has one NB per zone: be this node's zone agent, writing this zone's NB (e.g. unix:/var/run/ovn/ovnnb_db.sock) from the allocator's decisions")
	fs.StringVar(&f.zoneSB.Address, "zone-sb", "", "with --zone-nb: this zone's SB (e.g. unix:/var/run/ovn/ovnsb_db.sock)")
	fs.StringVar(&f.zoneName, "zone-name", "", "with --zone-nb: the zone's name (default: the NB's NB_Global name, which ovn-kubernetes sets to it)")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "with --zone-nb: this node's name; the zone's OVNZone is owned by the Node and goes with it")
	fs.StringVar(&f.podName, "pod-name", os.Getenv("POD_NAME"), "with --zone-nb: this agent's Pod, in --namespace, where it records a Warning Event while its zone's NB or SB socket does not answer (empty: no Event)")
	fs.StringVar(&f.podUID, "pod-uid", os.Getenv("POD_UID"), "with --pod-name: the Pod's UID (kubectl describe pod lists the Events of the Pod's UID)")
	fs.StringVar(&f.namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "kubevirt-ovn"), "with --interconnect or --zone-nb: the namespace of the OVNZones and OVNAllocations")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cluster := f.interconnect || f.zoneNB.Address != ""
	switch {
	case f.interconnect && f.zoneNB.Address != "":
		fmt.Fprintln(stderr, "kubevirt-ovn run: --interconnect (the allocator) and --zone-nb (a zone agent) are different roles: run one or the other")
		return 2
	case cluster && (f.nb.Address != "" || f.sb.Address != "" || len(f.zones) > 0 || len(f.paths) > 0):
		fmt.Fprintln(stderr, "kubevirt-ovn run: --interconnect and --zone-nb work with a cluster: no --nb, --sb, --zone or --from-file with them")
		return 2
	case f.zoneNB.Address != "" && f.zoneSB.Address == "":
		fmt.Fprintln(stderr, "kubevirt-ovn run: --zone-nb needs --zone-sb")
		return 2
	case cluster:
	case len(f.zones) > 0 && (f.nb.Address != "" || f.sb.Address != ""):
		fmt.Fprintln(stderr, "kubevirt-ovn run: --zone names each zone's NB and SB: no --nb or --sb with it")
		return 2
	case len(f.zones) > 0 && len(f.paths) == 0:
		fmt.Fprintln(stderr, "kubevirt-ovn run: --zone works with --from-file (a cluster's interconnect mode is not supported yet)")
		return 2
	case len(f.zones) == 0 && f.nb.Address == "":
		fmt.Fprintln(stderr, "kubevirt-ovn run: --nb (or --zone) is required")
		return 2
	}
	if err := endpointsTLS(&f.nb, &f.sb); err != nil {
		fmt.Fprintf(stderr, "kubevirt-ovn run: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runner := runController
	switch {
	case len(f.zones) > 0:
		runner = runZones
	case f.interconnect:
		runner = runAllocator
	case f.zoneNB.Address != "":
		runner = runZoneAgent
	}
	if err := runner(ctx, &f, klog.Background()); err != nil {
		fmt.Fprintf(stderr, "kubevirt-ovn run: %v\n", err)
		return 1
	}
	return 0
}

func runController(ctx context.Context, f *runFlags, log logr.Logger) error {
	// Manifests are decoded while the NB connects and sends our rows; the
	// NB is asked only whether we own rows, when they declare nothing.
	var nb client.Client
	nbDone := make(chan struct{})
	type loaded struct {
		files *controller.FileSource
		err   error
	}
	loading := make(chan loaded, 1)
	if len(f.paths) > 0 {
		owned := func() (int, error) {
			<-nbDone
			if nb == nil {
				return 0, errors.New("no NB connection")
			}
			return controller.OwnedUnits(ctx, nb, f.instance)()
		}
		go func() {
			files, err := controller.NewFileSource(f.paths, log.WithName("files"), controller.FileOptions{AllowEmpty: f.allowEmpty, Owned: owned})
			loading <- loaded{files, err}
		}()
	}
	nb, err := ovn.ConnectNB(ctx, f.nb, f.instance, log.WithName("nb"))
	close(nbDone)
	if err != nil {
		return err
	}
	defer nb.Close()
	var sb client.Client
	if f.sb.Address != "" {
		if sb, err = ovn.ConnectSB(ctx, f.sb, log.WithName("sb")); err != nil {
			return err
		}
		defer sb.Close()
	}
	metrics := controller.NewMetrics(nb, f.instance)
	opts := controller.Options{Instance: f.instance, Workers: f.workers, Resync: f.resync, Log: log.WithName("controller"), Metrics: metrics, SkipMoveNudge: !*f.moveNudge}

	if len(f.paths) > 0 {
		l := <-loading
		if l.err != nil {
			return l.err
		}
		files := l.files
		ctrl := controller.New(nb, sb, files, nil, opts)
		go files.Watch(ctx, f.fileInterval, ctrl.EnqueueUnits)
		if err := serve(ctx, f.addr, metrics, func() error { return connected(nb) }, log); err != nil {
			return err
		}
		return ctrl.Run(ctx)
	}

	dyn, kc, recorder, stopEvents, err := kubeClients(ctx, f, f.events)
	if err != nil {
		return err
	}
	defer stopEvents()
	source := kube.NewSource(dyn, f.resync, recorder, log.WithName("kube"))
	ctrl := controller.New(nb, sb, source, source, opts)
	if err := source.Notify(ctrl.EnqueueUnits); err != nil {
		return err
	}
	source.Start(ctx)
	ready := func() error {
		if !source.HasSynced() {
			return errors.New("informer caches not synced")
		}
		return connected(nb)
	}
	if err := serve(ctx, f.addr, metrics, ready, log); err != nil {
		return err
	}
	return runLeading(ctx, f, kc, recorder, ctrl, log)
}

// runLeading runs r, with --leader-elect only while this replica holds
// the Lease (see lead).
func runLeading(ctx context.Context, f *runFlags, kc kubernetes.Interface, recorder record.EventRecorder, r interface{ Run(context.Context) error }, log logr.Logger) error {
	if !f.leaderElect {
		return r.Run(ctx)
	}
	id := f.identity
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, f.leaseNamespace, f.leaseName,
		nil, kc.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return err
	}
	return lead(ctx, lock, f, r, log)
}

// runZones runs the controllers of every zone (--zone) from manifests on
// disk.
func runZones(ctx context.Context, f *runFlags, log logr.Logger) error {
	var zones []controller.ZoneClients
	for _, tg := range f.zones.targets() {
		nbc, err := ovn.ConnectNB(ctx, tg.nbEp, f.instance, log.WithName("nb").WithValues("zone", tg.zone))
		if err != nil {
			return fmt.Errorf("%s%w", tg.label(), err)
		}
		defer nbc.Close()
		sbc, err := ovn.ConnectZoneSB(ctx, tg.sbEp, f.instance, log.WithName("sb").WithValues("zone", tg.zone))
		if err != nil {
			return fmt.Errorf("%s%w", tg.label(), err)
		}
		defer sbc.Close()
		zones = append(zones, controller.ZoneClients{Zone: tg.zone, NB: nbc, SB: sbc})
	}
	owned := func() (int, error) {
		n := 0
		for _, z := range zones {
			k, err := controller.OwnedUnits(ctx, z.NB, f.instance)()
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	}
	files, err := controller.NewFileSource(f.paths, log.WithName("files"), controller.FileOptions{AllowEmpty: f.allowEmpty, Owned: owned})
	if err != nil {
		return err
	}
	// The metrics' owned-row counts are the first zone's.
	metrics := controller.NewMetrics(zones[0].NB, f.instance)
	opts := controller.Options{Instance: f.instance, Workers: f.workers, Resync: f.resync, Log: log.WithName("controller"), Metrics: metrics, SkipMoveNudge: !*f.moveNudge}
	group := controller.NewZones(zones, files, nil, opts)
	go files.Watch(ctx, f.fileInterval, group.EnqueueUnits)
	ready := func() error {
		for _, z := range zones {
			if err := connected(z.NB); err != nil {
				return fmt.Errorf("zone %s: %w", z.Zone, err)
			}
		}
		return nil
	}
	if err := serve(ctx, f.addr, metrics, ready, log); err != nil {
		return err
	}
	return group.Run(ctx)
}

// stopGrace bounds how long a replica that stops leading waits for the
// controller's reconciles in progress to return before it exits anyway.
const stopGrace = 10 * time.Second

// lead runs ctrl while this replica holds the Lease. It returns nil when ctx
// ends, and an error when the Lease is lost: the caller exits, and the
// replica starts over as a candidate with fresh state. Either way the
// controller has stopped writing when lead returns.
func lead(ctx context.Context, lock resourcelock.Interface, f *runFlags, ctrl interface{ Run(context.Context) error }, log logr.Logger) error {
	id := lock.Identity()
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	watch := &leaseWatch{Interface: lock}
	watch.lost = func(holder string) {
		log.Info("lost the Lease to another replica: stopping NB writes", "identity", id, "holder", holder)
		// Ends the leader's context, so the controller writes nothing more,
		// and the election: this replica no longer holds the Lease, so it
		// releases nothing.
		stopElecting()
	}
	stopped := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            watch,
		LeaseDuration:   f.leaseDuration,
		RenewDeadline:   f.renewDeadline,
		RetryPeriod:     f.retryPeriod,
		ReleaseOnCancel: true,
		Name:            f.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(stopped)
				watch.leading.Store(true)
				log.Info("leading: this replica writes", "identity", id)
				if err := ctrl.Run(ctx); err != nil {
					log.Error(err, "controller stopped")
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				if leader != id {
					log.Info("another replica leads; standing by", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(electCtx)
	if watch.leading.Load() {
		select {
		case <-stopped:
			log.Info("not leading: this replica stopped writing", "identity", id)
		case <-time.After(stopGrace):
			log.Info("not leading: reconciles still in progress after the grace period; exiting anyway", "identity", id, "grace", stopGrace)
		}
	}
	switch {
	case watch.lostTo.Load() != nil:
		return fmt.Errorf("lost the leader election Lease %s/%s to %s", f.leaseNamespace, f.leaseName, *watch.lostTo.Load())
	case ctx.Err() != nil:
		return nil
	case watch.leading.Load():
		// A replica that lost the Lease exits so that it starts over as a
		// candidate with fresh state.
		return fmt.Errorf("lost the leader election Lease %s/%s: not renewed within --renew-deadline %s", f.leaseNamespace, f.leaseName, f.renewDeadline)
	}
	return errors.New("leader election ended before this replica led")
}

// leaseWatch is the Lease lock with a tripwire: a read of the Lease that
// shows another holder while this replica leads calls lost at once (client-go
// alone keeps leading until --renew-deadline passes without a renewal, and
// the controller would write all that time).
type leaseWatch struct {
	resourcelock.Interface
	leading atomic.Bool
	lostTo  atomic.Pointer[string]
	lost    func(holder string)
}

func (l *leaseWatch) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && l.leading.Load() && rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() {
		if l.lostTo.CompareAndSwap(nil, &rec.HolderIdentity) {
			l.lost(rec.HolderIdentity)
		}
	}
	return rec, raw, err
}

func connected(nb client.Client) error {
	if !nb.Connected() {
		return errors.New("not connected to the OVN Northbound database")
	}
	return nil
}

// serve starts /metrics, /healthz and /readyz on addr until ctx ends.
func serve(ctx context.Context, addr string, m *controller.Metrics, ready func() error, log logr.Logger) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: m.Handler(ready), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() { _ = srv.Serve(l) }()
	log.Info("serving /metrics, /healthz and /readyz", "addr", l.Addr().String())
	return nil
}

// restConfig is the kubeconfig's, or the in-cluster configuration. JSON,
// not protobuf: CRD-backed APIs (and Lease CRDs in tests) speak JSON only.
func restConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	return cfg, nil
}
