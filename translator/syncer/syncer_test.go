package syncer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

const instance = "test"

var examples = filepath.Join("..", "..", "deploy", "examples")

// notes collects what a sync says.
type notes struct {
	mu  sync.Mutex
	all []string
}

func (n *notes) note(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.all = append(n.all, s)
}

func (n *notes) has(part string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.all {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

func opts(nb string, paths ...string) Options {
	return Options{Paths: paths, Targets: []Target{{NB: ovn.Endpoint{Address: nb, Timeout: time.Second}}}, Instance: instance, Log: logr.Discard()}
}

// runBounded runs Run and fails the test when it has not returned within
// a minute (its own context would let it wait ten).
func runBounded(t *testing.T, o Options) (*Report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	type outcome struct {
		r   *Report
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := Run(ctx, o)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case <-time.After(time.Minute):
		require.FailNow(t, "Run did not return")
		return nil, nil
	}
}

func changes(r *Report) int {
	n := 0
	for _, res := range r.Results {
		for _, u := range res.Units {
			n += len(u.Changes)
		}
	}
	return n
}

// A manifest path that does not exist is an error at once, naming the
// path, whatever the NB does: one that refuses connections, or one that
// accepts them and never answers (before, sync retried the NB for its
// whole --timeout and then reported only the NB).
func TestRunReportsABadInputAtOnceWhateverTheNB(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "does", "not", "exist")
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	require.NoError(t, os.WriteFile(broken, []byte("kind: VirtualRouter\nmetadata: [\n"), 0o644))
	for _, nb := range []string{"tcp:127.0.0.1:1", nbtest.Silent(t)} {
		for _, path := range []string{missing, broken} {
			_, err := runBounded(t, opts(nb, path))
			require.Error(t, err, "NB %s, input %s", nb, path)
			assert.Contains(t, err.Error(), path, "NB %s", nb)
			assert.ErrorIs(t, err, ErrNothingWritten)
			assert.NotContains(t, err.Error(), "127.0.0.1", "the input's error, not the NB's")
		}
	}
}

// A sync writes the examples; a second one finds nothing to change.
func TestRunSyncsAndIsIdempotent(t *testing.T) {
	nb := "unix:" + nbtest.Serve(t)
	r, err := runBounded(t, opts(nb, examples))
	require.NoError(t, err)
	require.Empty(t, r.Failures)
	require.Len(t, r.Results, 1)
	assert.Positive(t, changes(r))
	assert.Positive(t, r.Results[0].Transactions)

	r, err = runBounded(t, opts(nb, examples))
	require.NoError(t, err)
	assert.Zero(t, changes(r), "nothing to change")
}

// Manifests that declare nothing while we own rows are refused, naming
// the path and how many units own rows, and write nothing; AllowEmpty
// lets them delete every row.
func TestRunRefusesAnEmptyInput(t *testing.T) {
	nb := "unix:" + nbtest.Serve(t)
	_, err := runBounded(t, opts(nb, examples))
	require.NoError(t, err)
	empty := t.TempDir()

	_, err = runBounded(t, opts(nb, empty))
	require.Error(t, err)
	var refusal *controller.EmptyInputError
	require.ErrorAs(t, err, &refusal)
	// 5 units: router1, public, net-a, net-b and the security group sg-web.
	assert.Equal(t, "the manifests in "+empty+" declare no router and no network, but 5 routers and networks own rows in the NB: refusing to delete them all without --allow-empty (nothing written)", err.Error())

	o := opts(nb, empty)
	o.DryRun = true
	_, err = runBounded(t, o)
	assert.ErrorAs(t, err, &refusal, "also with a dry run")

	o = opts(nb, empty)
	o.AllowEmpty = true
	r, err := runBounded(t, o)
	require.NoError(t, err)
	assert.Positive(t, changes(r), "every row deleted")
	r, err = runBounded(t, opts(nb, empty))
	require.NoError(t, err, "nothing owned: nothing to refuse")
	assert.Zero(t, changes(r))
}

func TestMemoryLimit(t *testing.T) {
	const least = 128 << 20
	dir := t.TempDir()
	assert.Equal(t, int64(least), MemoryLimit([]string{dir}), "no manifest")
	assert.Equal(t, int64(least), MemoryLimit([]string{filepath.Join(dir, "gone")}), "a path that does not exist")
	small := filepath.Join(dir, "small.yaml")
	require.NoError(t, os.WriteFile(small, []byte("kind: List\n"), 0o644))
	assert.Equal(t, int64(least), MemoryLimit([]string{dir}), "small manifests: the floor")
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(10<<20))
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), make([]byte, 1<<20), 0o644))
	assert.Equal(t, int64(30*(10<<20+len("kind: List\n"))), MemoryLimit([]string{dir}), "30 times the manifests, other files not counted")
}

func TestRunNeedsATarget(t *testing.T) {
	_, err := Run(context.Background(), Options{Paths: []string{examples}})
	assert.Error(t, err)
	assert.False(t, errors.Is(err, ErrNothingWritten))
}

// sync --zone: a chassis two zones' SBs list as local fails the sync
// before anything is written, naming the chassis and both zones.
func TestRunRefusesAChassisOfTwoZones(t *testing.T) {
	zone := func(name string, chassis ...string) Target {
		var rows []*sbmodel.Chassis
		for _, c := range chassis {
			rows = append(rows, &sbmodel.Chassis{Name: c, Hostname: c})
		}
		return Target{Zone: name, NB: ovn.Endpoint{Address: "unix:" + nbtest.Serve(t)}, SB: ovn.Endpoint{Address: "unix:" + nbtest.ServeSB(t, rows...)}}
	}
	o := opts("", examples)
	o.Targets = []Target{zone("a", "gw1", "hv1"), zone("b", "gw1", "hv2")}
	_, err := runBounded(t, o)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNothingWritten)
	assert.Equal(t, "chassis gw1 is a local chassis of zones a and b (not other_config:is-remote=true in either SB) (nothing written)", err.Error())
}
