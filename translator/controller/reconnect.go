package controller

import (
	"context"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// reconnectPoll is how often watchReconnect looks at the NB connection.
const reconnectPoll = 100 * time.Millisecond

// nbState is what watchReconnect compares from one poll to the next.
type nbState struct {
	up bool
	// lost counts the disconnections (see nb.Disconnections).
	lost int
}

func (c *Controller) nbState() nbState {
	return nbState{up: nb.Connected(c.nb), lost: nb.Disconnections(c.nb)}
}

// watchReconnect enqueues every unit each time the NB connection comes
// back after from (read by the caller, so that a loss right after the
// call is not missed), until ctx ends. While the NB is down, reconciles
// wait for it or fail without writing (nb.Commit refuses to send
// operations computed from the cache the reconnection replaces) and back
// off; without this, an edit made meanwhile could wait for the backoff or
// the resync. The reconnection has re-synced the cache by the time the
// connection reads as up, so the reconciles start from what the NB now
// holds. The count of disconnections catches a reconnection quicker than
// the poll.
func (c *Controller) watchReconnect(ctx context.Context, from nbState) {
	t := time.NewTicker(reconnectPoll)
	defer t.Stop()
	last, lostAt := from, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.nbState()
		switch {
		case last.up && !now.up:
			lostAt = time.Now()
			c.opts.Log.Info("NB connection lost; writes wait for it to come back")
		case now.up && (!last.up || now.lost != last.lost):
			down := "under " + reconnectPoll.String()
			if !last.up {
				down = time.Since(lostAt).Round(time.Millisecond).String()
			}
			c.opts.Log.Info("NB connection back; reconciling every unit", "endpoint", c.nb.CurrentEndpoint(), "down", down)
			c.EnqueueAll(ctx)
		}
		last = now
	}
}
