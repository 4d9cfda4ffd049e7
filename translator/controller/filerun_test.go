package controller

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/stretchr/testify/require"

	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// writer returns a function that writes a manifest into dir as an editor
// would (a temporary file renamed over it), so that a watcher never reads
// half a file.
func writer(t *testing.T, dir string) func(name, content string) {
	return func(name, content string) {
		tmp := filepath.Join(dir, "."+name)
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
	}
}

// startFileController runs a controller on the manifests in dir against a
// fresh in-process NB until the test ends. take returns the units
// reconciled since its last call, sorted, each once; idle says nothing is
// queued or being reconciled. tune, if any, changes the controller's
// options.
func startFileController(t *testing.T, dir string, tune ...func(*Options)) (nbc client.Client, ctx context.Context, take func() []tr.Unit, idle func() bool) {
	t.Helper()
	nbc = ctrlNB(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	files, err := NewFileSource([]string{dir}, logr.Discard(), FileOptions{})
	require.NoError(t, err)
	opts := Options{Instance: instance, Log: logr.Discard(), Resync: time.Hour}
	for _, f := range tune {
		f(&opts)
	}
	c := New(nbc, nil, files, nil, opts)
	var mu sync.Mutex
	var seen []tr.Unit
	c.onReconcile = func(u tr.Unit) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, u)
	}
	take = func() []tr.Unit {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(seen)
		seen = nil
		slices.SortFunc(out, func(a, b tr.Unit) int { return strings.Compare(a.String(), b.String()) })
		return slices.Compact(out)
	}
	idle = func() bool { return c.queue.Len() == 0 && c.active.Load() == 0 }
	go func() { _ = c.Run(ctx) }()
	go files.Watch(ctx, 10*time.Millisecond, c.EnqueueUnits)
	return nbc, ctx, take, idle
}
