package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/leader"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// The flags the long-running roles (run, allocator, zone-agent) share.

// ctrlFlags tune a controller.
type ctrlFlags struct {
	instance  string
	workers   int
	resync    time.Duration
	batchOps  int
	moveNudge bool
	events    bool
	// rejectEmptyLB: see lbRejectEmptyFlag.
	rejectEmptyLB bool
	// defaultDeny: see defaultDenyFlag.
	defaultDeny bool
}

// add defines the controller flags; the gateway move nudge and batches
// only for the roles that write an NB (writesNB), Events for those that
// record them.
func (f *ctrlFlags) add(fs *pflag.FlagSet, writesNB, events bool) {
	instanceFlag(fs, &f.instance)
	fs.IntVar(&f.workers, "workers", 2, "`N` units (routers, networks) reconciled in parallel")
	fs.DurationVar(&f.resync, "resync", 5*time.Minute, "reconcile every unit this often, whatever the events")
	if writesNB {
		fs.IntVar(&f.batchOps, "batch-ops", kvnb.MaxBatchOps, "while many units wait (start, reconnection, resync), most operations (`N`) in one NB transaction of a batch of them; a batch that needs more commits in several, never splitting a router or a network")
		moveNudgeFlag(fs, &f.moveNudge)
		lbRejectEmptyFlag(fs, &f.rejectEmptyLB)
		defaultDenyFlag(fs, &f.defaultDeny)
	} else {
		f.moveNudge = true
	}
	if events {
		fs.BoolVar(&f.events, "events", true, "with a cluster: record Kubernetes Events for failures and gateway changes")
	}
}

// options are the controller options of f, logging to log.
func (f *ctrlFlags) options(log logr.Logger, metrics *controller.Metrics) controller.Options {
	return controller.Options{Instance: f.instance, Workers: f.workers, Resync: f.resync, BatchOps: f.batchOps, Log: log, Metrics: metrics, SkipMoveNudge: !f.moveNudge, RejectEmptyLB: f.rejectEmptyLB, DefaultDeny: f.defaultDeny}
}

// leaderFlags are the Lease of the leader-elected roles.
type leaderFlags struct {
	elect bool
	cfg   leader.Config
}

func (f *leaderFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.elect, "leader-elect", true, "with a cluster: only the holder of the Lease writes")
	fs.StringVar(&f.cfg.Namespace, "lease-namespace", "kube-system", "`NAMESPACE` of the leader election Lease")
	fs.StringVar(&f.cfg.Name, "lease-name", "kubevirt-ovn", "`NAME` of the leader election Lease")
	fs.StringVar(&f.cfg.Identity, "identity", "", "this replica's `IDENTITY` in the Lease (default: hostname and pid)")
	fs.DurationVar(&f.cfg.LeaseDuration, "lease-duration", 15*time.Second, "how long a Lease is valid without renewal")
	fs.DurationVar(&f.cfg.RenewDeadline, "renew-deadline", 10*time.Second, "the leader stops writing when it could not renew for this long (less than --lease-duration); it also stops as soon as it sees another holder in the Lease")
	fs.DurationVar(&f.cfg.RetryPeriod, "retry-period", 2*time.Second, "how often to try to acquire or renew the Lease")
}

// lead runs r, with --leader-elect only while this replica holds the
// Lease (see package leader).
func (f *leaderFlags) lead(ctx context.Context, kc kubernetes.Interface, recorder record.EventRecorder, r leader.Runner, log logr.Logger) error {
	if !f.elect {
		return r.Run(ctx)
	}
	lock, err := leader.NewLock(kc, f.cfg, recorder)
	if err != nil {
		return err
	}
	return leader.Run(ctx, lock, f.cfg, r, log)
}

// servingFlags say what the role serves over HTTP.
type servingFlags struct{ controller.ServeOptions }

func (f *servingFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.Addr, "http-addr", ":8080", "listen `ADDRESS` of /metrics, /healthz and /readyz, empty for none; the default listens on every interface (127.0.0.1:8080: this host only)")
	fs.BoolVar(&f.Profiling, "enable-profiling", false, "also serve Go's profiles under /debug/pprof/ on --http-addr (unauthenticated: for a trusted network)")
}

func (f *servingFlags) serve(ctx context.Context, m *controller.Metrics, ready func() error, log logr.Logger) error {
	_, err := controller.Serve(ctx, f.ServeOptions, m, ready, log)
	return err
}

// clusterFlags reach the Kubernetes API.
type clusterFlags struct {
	kubeconfig string
	namespace  string
	qps        float32
	burst      int
}

func (f *clusterFlags) addKubeconfig(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` of the cluster to watch (default: in-cluster configuration)")
	// client-go's own 5 and 10 would hold a start that adds the finalizer
	// and writes the status of 1,000 routers to 400 s.
	fs.Float32Var(&f.qps, "kube-api-qps", 50, "most requests per second to the Kubernetes API (`QPS`), after --kube-api-burst")
	fs.IntVar(&f.burst, "kube-api-burst", 100, "requests (`N`) to the Kubernetes API allowed in a burst")
}

func (f *clusterFlags) addNamespace(fs *pflag.FlagSet) {
	fs.StringVar(&f.namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "kubevirt-ovn"), "the `NAMESPACE` of the OVNZones and OVNAllocations ($POD_NAMESPACE when set)")
}

// clients are the cluster's dynamic and typed clients and, with events,
// an event recorder; stop flushes the recorder.
func (f *clusterFlags) clients(ctx context.Context, events bool) (dynamic.Interface, kubernetes.Interface, record.EventRecorder, func(), error) {
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if !events {
		return dyn, kc, nil, func() {}, nil
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
	return dyn, kc, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubevirt-ovn"}), b.Shutdown, nil
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

func connected(nb client.Client) error {
	if !nb.Connected() {
		return errors.New("not connected to the OVN Northbound database")
	}
	return nil
}
