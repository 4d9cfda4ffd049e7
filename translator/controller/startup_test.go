package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// load runs LoadWhileConnecting and fails the test when it has not
// returned within a minute.
func load(t *testing.T, paths []string, connect func(context.Context) (func() (int, error), error)) (*FileSource, error) {
	t.Helper()
	type outcome struct {
		f   *FileSource
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		f, err := LoadWhileConnecting(context.Background(), paths, logr.Discard(), FileOptions{}, connect)
		done <- outcome{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-time.After(time.Minute):
		require.FailNow(t, "LoadWhileConnecting did not return")
		return nil, nil
	}
}

// neverConnects is an NB that never answers: connect returns only when
// its context ends.
func neverConnects(ctx context.Context) (func() (int, error), error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func connectsOwning(n int) func(context.Context) (func() (int, error), error) {
	return func(context.Context) (func() (int, error), error) {
		return func() (int, error) { return n, nil }, nil
	}
}

func refused(context.Context) (func() (int, error), error) {
	return nil, errors.New("connecting to NB tcp:127.0.0.1:1: connection refused")
}

// `run --from-file` with a path that does not exist, or a file that does
// not parse, fails at once naming it, while the NB does not answer (it
// waited for the NB, forever, before).
func TestLoadWhileConnectingReportsABadInputAtOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "does-not-exist")
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	require.NoError(t, os.WriteFile(broken, []byte("kind: VirtualRouter\nmetadata: [\n"), 0o644))
	for _, path := range []string{missing, broken} {
		for _, connect := range []func(context.Context) (func() (int, error), error){neverConnects, refused} {
			_, err := load(t, []string{path}, connect)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
		}
	}
}

func TestLoadWhileConnecting(t *testing.T) {
	examples := filepath.Join("..", "..", "deploy", "examples")
	empty := t.TempDir()

	files, err := load(t, []string{examples}, connectsOwning(4))
	require.NoError(t, err)
	assert.NotEmpty(t, files.Input().Units())

	_, err = load(t, []string{examples}, refused)
	assert.EqualError(t, err, "connecting to NB tcp:127.0.0.1:1: connection refused", "a good input and no NB")

	_, err = load(t, []string{empty}, connectsOwning(4))
	var refusal *EmptyInputError
	assert.ErrorAs(t, err, &refusal, "an empty input while we own rows")

	files, err = load(t, []string{empty}, connectsOwning(0))
	require.NoError(t, err, "an empty input and nothing owned")
	assert.Empty(t, files.Input().Units())

	_, err = load(t, []string{empty}, refused)
	assert.EqualError(t, err, "connecting to NB tcp:127.0.0.1:1: connection refused", "an empty input asks the NB, which fails")
}
