package controller

import (
	"context"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// reconnectPoll is how often watchReconnect looks at the NB connection.
const reconnectPoll = 100 * time.Millisecond

// watchReconnect enqueues every unit each time the NB connection comes
// back, until ctx ends. While the NB is down, reconciles fail without
// writing (translator.Commit refuses to send operations computed from the
// cache the reconnection replaces) and their units back off; without this,
// an edit made meanwhile would wait for the backoff or the resync. The
// reconnection has re-synced the cache by the time the connection reads as
// up, so the reconciles start from what the NB now holds.
func (c *Controller) watchReconnect(ctx context.Context) {
	t := time.NewTicker(reconnectPoll)
	defer t.Stop()
	up := translator.Connected(c.nb)
	var lost time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := translator.Connected(c.nb)
		switch {
		case up && !now:
			lost = time.Now()
			c.opts.Log.Info("NB connection lost; reconciles wait for it to come back")
		case !up && now:
			c.opts.Log.Info("NB connection back; reconciling every unit", "endpoint", c.nb.CurrentEndpoint(), "down", time.Since(lost).Round(time.Millisecond).String())
			c.EnqueueAll()
		}
		up = now
	}
}
