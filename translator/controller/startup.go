package controller

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
)

// errNotConnected is what the owned-rows count of LoadWhileConnecting
// says when the NBs did not connect.
var errNotConnected = errors.New("no NB connection")

// LoadWhileConnecting reads the manifests in paths (NewFileSource) while
// connect connects to the NBs, so that neither waits for the other, and
// returns an input error (a path that does not exist, a file that does
// not parse) at once, whatever the NBs do: a refused or silent NB is
// retried for as long as connect's context lasts and would hide it. The
// input waits for the NBs only when it declares nothing and must ask them
// whether we own rows (opts.Owned is connect's). On an input error
// connect's context is cancelled and LoadWhileConnecting returns once
// connect has: whatever connect opened is the caller's to close, also
// then. When both fail, the input's error wins unless the input needed
// the NBs.
func LoadWhileConnecting(ctx context.Context, paths []string, log logr.Logger, opts FileOptions,
	connect func(context.Context) (owned func() (int, error), err error)) (*FileSource, error) {
	connectCtx, stop := context.WithCancel(ctx)
	defer stop()
	var owned func() (int, error)
	var connectErr error
	connected := make(chan struct{})
	go func() {
		defer close(connected)
		owned, connectErr = connect(connectCtx)
	}()
	opts.Owned = func() (int, error) {
		select {
		case <-connected:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if owned == nil {
			return 0, errNotConnected
		}
		return owned()
	}
	files, err := NewFileSource(paths, log, opts)
	if err != nil {
		stop()
		<-connected
		if errors.Is(err, errNotConnected) && connectErr != nil {
			return nil, connectErr
		}
		return nil, err
	}
	<-connected
	if connectErr != nil {
		return nil, connectErr
	}
	return files, nil
}
