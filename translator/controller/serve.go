package controller

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
)

// ServeOptions say where and what Serve serves.
type ServeOptions struct {
	// Addr is the listen address of /metrics, /healthz and /readyz ("":
	// serve nothing). ":8080", the CLI's default, is every interface.
	Addr string
	// Profiling adds Go's profiles under /debug/pprof/ (off by default:
	// they are unauthenticated, and a CPU profile costs CPU while taken).
	Profiling bool
}

// Serve serves m's /metrics, /healthz and /readyz (see Metrics.Handler)
// and, with opts.Profiling, /debug/pprof/, on opts.Addr until ctx ends. It
// returns the address it listens on (nil when opts.Addr is empty) once it
// listens, or why it cannot.
func Serve(ctx context.Context, opts ServeOptions, m *Metrics, ready func() error, log logr.Logger) (net.Addr, error) {
	if opts.Addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", opts.Addr, err)
	}
	handler := m.Handler(ready)
	paths := "/metrics, /healthz and /readyz"
	if opts.Profiling {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		// Go's profiles, for "where does the time go" on a live process.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		handler = mux
		paths = "/metrics, /healthz, /readyz and /debug/pprof/"
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() { _ = srv.Serve(l) }()
	log.Info("serving "+paths, "addr", l.Addr().String())
	return l.Addr(), nil
}
