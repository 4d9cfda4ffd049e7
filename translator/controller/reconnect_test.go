package controller

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

type connSource struct{ snap translator.Snapshot }

func (s *connSource) Input() *translator.Input { return translator.NewInputFrom(&s.snap) }
func (s *connSource) HasSynced() bool          { return true }

// When the NB connection comes back, every unit is enqueued at once
// (not after its backoff or the resync).
func TestConnReconnectEnqueuesEveryUnit(t *testing.T) {
	nbSrv := nbtest.NewProxy(t, nbtest.Serve(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nb, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: nbSrv.Endpoint(), Timeout: time.Second}, "test", logr.Discard())
	require.NoError(t, err)
	defer nb.Close()
	src := &connSource{snap: translator.Snapshot{Routers: []translator.Router{{Name: "r1"}, {Name: "r2"}}}}
	c := New(nb, nil, src, nil, Options{Instance: "test", Log: testr.New(t)})
	defer c.queue.ShutDown()
	go c.watchReconnect(ctx, c.nbState())

	nbSrv.Down()
	require.Eventually(t, func() bool { return !nb.Connected() }, 10*time.Second, 10*time.Millisecond, "disconnection seen")
	require.Zero(t, c.queue.Len(), "nothing enqueued while the NB is down")
	nbSrv.Up()
	require.Eventually(t, func() bool { return c.queue.Len() == 2 }, 15*time.Second, 10*time.Millisecond, "every unit enqueued on reconnection")
}
