package controller

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// The metrics handler serves no profile: /debug/pprof/ is unauthenticated
// and the metrics port listens on every interface by default.
func TestMetricsHandlerServesNoProfiles(t *testing.T) {
	srv := httptest.NewServer(NewMetrics(nil, instance).Handler(func() error { return nil }))
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
		code, _ := get(t, srv.URL+path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
	code, _ := get(t, srv.URL+"/healthz")
	assert.Equal(t, http.StatusOK, code)
}

// Serve adds the profiles only when asked to (--enable-profiling), beside
// what it always serves.
func TestServeProfilingOnlyWhenEnabled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, profiling := range []bool{false, true} {
		addr, err := Serve(ctx, ServeOptions{Addr: "127.0.0.1:0", Profiling: profiling}, NewMetrics(nil, instance), func() error { return nil }, logr.Discard())
		require.NoError(t, err)
		base := "http://" + addr.String()
		code, body := get(t, base+"/debug/pprof/")
		if profiling {
			assert.Equal(t, http.StatusOK, code)
			assert.Contains(t, body, "goroutine")
		} else {
			assert.Equal(t, http.StatusNotFound, code)
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			code, _ := get(t, base+path)
			assert.Equal(t, http.StatusOK, code, "profiling %v: %s", profiling, path)
		}
	}
	addr, err := Serve(ctx, ServeOptions{}, NewMetrics(nil, instance), nil, logr.Discard())
	assert.NoError(t, err)
	assert.Nil(t, addr, "no address: nothing served")
}
