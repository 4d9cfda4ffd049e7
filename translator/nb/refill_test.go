package nb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// reconnectingClient makes the NB connection drop and come back the first
// time an operation is built, i.e. in the middle of a diff, after some of
// the rows were read: what an NB restart does to a sync at the wrong
// moment. Like every client without a monitor, libovsdb empties its cache
// when it reconnects (sync reads it again with ReadOwned).
type reconnectingClient struct {
	client.Client
	t       *testing.T
	proxy   *nbtest.Proxy
	dropped bool
}

func (c *reconnectingClient) Where(ms ...model.Model) client.ConditionalAPI {
	if !c.dropped {
		c.dropped = true
		before := nb.Disconnections(c.Client)
		c.proxy.Down()
		c.proxy.Up()
		require.Eventually(c.t, func() bool { return nb.Disconnections(c.Client) > before && nb.Connected(c.Client) }, 20*time.Second, 10*time.Millisecond,
			"the client reconnected")
	}
	return c.Client.Where(ms...)
}

// TestNotesNeverCallOurRowsForeignAfterAReconnect: a reconnection in the
// middle of a sync's diff replaces the cache the diff reads (empties it, for
// sync's client without monitors; refills it, for run's monitored one). The
// diff reads one consistent view of the cache: it never says that a router
// of ours holds ports that are not ours because the cache changed under it,
// and what it computed from a replaced cache is not sent (the unit fails as
// not connected; sync and run compute it again from the new cache).
func TestNotesNeverCallOurRowsForeignAfterAReconnect(t *testing.T) {
	for _, monitored := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "monitor"}[monitored], func(t *testing.T) {
			proxy := nbtest.NewProxy(t, nbtest.Serve(t))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ep := ovn.Endpoint{Address: proxy.Endpoint(), Timeout: time.Second}
			var c client.Client
			var err error
			read := func() {}
			if monitored {
				c, err = ovn.ConnectNB(ctx, ep, instance, logr.Discard())
			} else {
				c, err = ovn.DialNB(ctx, ep, logr.Discard())
				read = func() { require.NoError(t, ovn.ReadOwned(ctx, c, instance)) }
			}
			require.NoError(t, err)
			defer c.Close()
			s := example()
			read()
			res, err := nb.Sync(ctx, c, tr.Build(s, instance), nb.SyncOptions{Instance: instance})
			require.NoError(t, err)
			requireNoFailures(t, res)
			if monitored {
				require.Eventually(t, func() bool { return len(lrps(t, c)) == 3 }, 5*time.Second, 10*time.Millisecond)
			}

			read()
			s.Routers[0].Description = "changed: the router's row is updated"
			rc := &reconnectingClient{Client: c, t: t, proxy: proxy}
			res, err = nb.Sync(ctx, rc, tr.Build(s, instance), nb.SyncOptions{Instance: instance})
			require.NoError(t, err)
			require.True(t, rc.dropped, "precondition: the connection dropped during the diff")
			var lost []string
			for _, u := range res.Units {
				for _, n := range u.Notes {
					assert.NotContains(t, n, "not kubevirt-ovn's", "%s: a note about our own rows", u.Unit)
				}
				if u.Err != nil {
					assert.ErrorIs(t, u.Err, nb.ErrNotConnected, "%s: only a lost connection fails a unit", u.Unit)
					lost = append(lost, u.Unit.String())
				}
			}
			assert.Equal(t, []string{"VirtualRouter router1"}, lost, "computed from the replaced cache: not sent")

			// The next pass reads the NB again and syncs.
			read()
			res, err = nb.Sync(ctx, c, tr.Build(s, instance), nb.SyncOptions{Instance: instance})
			require.NoError(t, err)
			requireNoFailures(t, res)
			for _, u := range res.Units {
				assert.Empty(t, u.Notes, u.Unit.String())
			}
			require.Eventually(t, func() bool {
				if !monitored {
					if ovn.ReadOwned(ctx, c, instance) != nil {
						return false
					}
				}
				res, err = nb.Sync(ctx, c, tr.Build(s, instance), nb.SyncOptions{Instance: instance, DryRun: true})
				return err == nil && len(res.Changes()) == 0
			}, 5*time.Second, 10*time.Millisecond, "synced: %v", strings.Join(changeLines(res), "; "))
		})
	}
}

func changeLines(res *nb.SyncResult) []string {
	var out []string
	for _, u := range res.Units {
		for _, c := range u.Changes {
			out = append(out, c.String())
		}
	}
	return out
}
