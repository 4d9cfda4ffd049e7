package controller

import (
	"net/http"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// Metrics are the controller's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	Registry *prometheus.Registry

	reconcile    *prometheus.HistogramVec
	reconcileErr *prometheus.CounterVec
	parked       prometheus.Counter
	batch        prometheus.Histogram
	txn          prometheus.Histogram
	txnErr       prometheus.Counter
	keys         *prometheus.GaugeVec
	collapse     prometheus.Histogram

	mu      sync.Mutex
	routers map[string]RouterStatus
	queues  []workqueue.TypedRateLimitingInterface[translator.Unit]
}

// NewMetrics registers the metrics; nb is counted for owned rows on scrape.
func NewMetrics(nb client.Client, instance string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubevirt_ovn_reconcile_duration_seconds", Help: "Duration of one unit's reconcile (a unit reconciled in a batch counts its batch's), by kind and result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"kind", "result"}),
		reconcileErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_ovn_reconcile_errors_total", Help: "Reconciles that failed, by kind.",
		}, []string{"kind"}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubevirt_ovn_routers_parked_total", Help: "Router reconciles put off until the switches of their networks exist.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubevirt_ovn_reconcile_batch_units", Help: "Units reconciled together: one while the queue is short, batches while it is long (start, reconnection, resync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		txn: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubevirt_ovn_nb_transaction_duration_seconds", Help: "Latency of NB transactions.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		txnErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubevirt_ovn_nb_transaction_failures_total", Help: "NB transactions that failed.",
		}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubevirt_ovn_tunnel_key_mismatches", Help: "Switches and ports of ours to which a zone's ovn-northd gave another tunnel key than the one they request (a collision: their cross-zone traffic breaks), by zone.",
		}, []string{"zone"}),
		collapse: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubevirt_ovn_migration_activation_to_collapse_seconds",
			Help:    "From the SB showing a migrating VM's port activated on its target (the VM's RARP seen there) to the commit of the port on the target alone.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		routers: map[string]RouterStatus{},
	}
	m.Registry.MustRegister(m.reconcile, m.reconcileErr, m.batch, m.parked, m.txn, m.txnErr, m.keys, m.collapse)
	// The standard process and Go runtime metrics every Prometheus
	// target has (process_resident_memory_bytes, process_open_fds,
	// go_goroutines, ...): what an operator watches for leaks.
	m.Registry.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kubevirt_ovn_routers_ready", Help: "Routers whose rows are committed.",
	}, func() float64 { return m.countRouters(func(s RouterStatus) bool { return s.Err == nil }) }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kubevirt_ovn_routers_not_ready", Help: "Routers with invalid input or a failed commit.",
	}, func() float64 { return m.countRouters(func(s RouterStatus) bool { return s.Err != nil }) }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kubevirt_ovn_routers_realized", Help: "Routers whose last commit the chassis have.",
	}, func() float64 { return m.countRouters(func(s RouterStatus) bool { return s.Realized }) }))
	if nb != nil {
		m.CountOwnedRows(nb, instance)
	}
	return m
}

// CountOwnedRows counts nb's rows owned by instance on scrape, for metrics
// made before the NB was connected (a zone agent serves /readyz while it
// waits for its NB).
func (m *Metrics) CountOwnedRows(nb client.Client, instance string) {
	m.Registry.MustRegister(&ownedRows{nb: nb, instance: instance, desc: prometheus.NewDesc(
		"kubevirt_ovn_owned_rows", "NB rows owned by this instance, by table.", []string{"table"}, nil)})
}

func (m *Metrics) countRouters(f func(RouterStatus) bool) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.routers {
		if f(s) {
			n++
		}
	}
	return float64(n)
}

// watchQueue adds q to the queue depth (every zone's controller has one).
func (m *Metrics) watchQueue(q workqueue.TypedRateLimitingInterface[translator.Unit]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queues = append(m.queues, q)
	if len(m.queues) > 1 {
		return
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kubevirt_ovn_queue_depth", Help: "Units waiting to be reconciled.",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for _, q := range m.queues {
			n += q.Len()
		}
		return float64(n)
	}))
}

func (m *Metrics) observeReconcile(u translator.Unit, d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
		m.reconcileErr.WithLabelValues(string(u.Kind)).Inc()
	}
	m.reconcile.WithLabelValues(string(u.Kind), result).Observe(d.Seconds())
}

func (m *Metrics) observeBatch(units int) {
	if m == nil {
		return
	}
	m.batch.Observe(float64(units))
}

func (m *Metrics) observeParked() {
	if m == nil {
		return
	}
	m.parked.Inc()
}

func (m *Metrics) observeCommit(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.txn.Observe(d.Seconds())
	if err != nil {
		m.txnErr.Inc()
	}
}

func (m *Metrics) setKeyMismatches(zone string, n int) {
	if m == nil {
		return
	}
	m.keys.WithLabelValues(zone).Set(float64(n))
}

func (m *Metrics) setRouterState(name string, st RouterStatus) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routers[name] = st
}

func (m *Metrics) forgetRouter(name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.routers, name)
}

// ownedRows counts our rows per table from the NB cache on scrape.
type ownedRows struct {
	nb       client.Client
	instance string
	desc     *prometheus.Desc
}

func (o *ownedRows) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

func (o *ownedRows) Collect(ch chan<- prometheus.Metric) {
	// The cache's table sizes: a scrape costs nothing per row.
	counts := nb.CountOwned(o.nb, o.instance)
	for _, t := range nb.Default.Tables() {
		if n, ok := counts[t.Name]; ok {
			ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(n), t.Name)
		}
	}
}

// Handler serves /metrics, /healthz (the process runs) and /readyz (ready()
// says the caches are synced and the NB connected). It serves no profile:
// Serve adds /debug/pprof/ when asked to (--enable-profiling).
func (m *Metrics) Handler(ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// observeCollapse records a migrating port's time from its activation to
// the commit of its collapse.
func (m *Metrics) observeCollapse(d time.Duration) {
	if m == nil {
		return
	}
	m.collapse.Observe(d.Seconds())
}
