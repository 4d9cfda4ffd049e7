package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

type (
	frame = wire.Frame
	seen  = wire.Seen
)

func frameBytes(t *testing.T, f frame) []byte {
	t.Helper()
	b, err := f.Bytes()
	require.NoError(t, err)
	return b
}

// capture is what one chassis port has sent so far.
type capture struct {
	name string
	read func() ([]seen, error)
}

// waitFor polls capture c until a packet after skip matches, and fails the
// test printing every packet seen when none does in time.
func waitFor(t *testing.T, c capture, what string, skip int, match func(seen) bool) seen {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ps, err := c.read()
		require.NoError(t, err)
		for i := skip; i < len(ps); i++ {
			if match(ps[i]) {
				return ps[i]
			}
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "packet not seen", "%s: not seen on %s; packets there:\n%s", what, c.name, wire.Describe(ps))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quietWindow is how long a negative check watches a wire after its
// barrier (the same injection seen taking effect elsewhere): a packet that
// would be sent is sent within milliseconds on this datapath.
const quietWindow = 700 * time.Millisecond

// requireNone fails when a packet after skip matches within quietWindow.
func requireNone(t *testing.T, c capture, what string, skip int, match func(seen) bool) {
	t.Helper()
	deadline := time.Now().Add(quietWindow)
	for {
		ps, err := c.read()
		require.NoError(t, err)
		for i := skip; i < len(ps); i++ {
			if match(ps[i]) {
				require.FailNowf(t, "unexpected packet", "%s: seen on %s: %s; packets there:\n%s", what, c.name, ps[i], wire.Describe(ps))
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count is how many packets a capture holds now, to look only at later ones.
func count(t *testing.T, c capture) int {
	t.Helper()
	ps, err := c.read()
	require.NoError(t, err)
	return len(ps)
}
