package nb

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/ovn-kubernetes/libovsdb/client"
)

// ErrNotConnected marks a transaction that was not sent because the NB
// connection is down, or that a lost connection cut (it may or may not have
// been committed). Either way the operations were computed from a cache the
// reconnection replaces: the caller must compute them again from the
// re-synced cache, never resend them. errors.Is also matches libovsdb's
// client.ErrNotConnected.
var ErrNotConnected error = notConnectedError{}

type notConnectedError struct{}

func (notConnectedError) Error() string { return "not connected to the NB" }

func (notConnectedError) Is(target error) bool { return target == client.ErrNotConnected }

// Connected says whether c has a live connection. libovsdb's Connected
// stays true after the server closed the connection (only its own
// Disconnect clears it), while CurrentEndpoint is empty from the moment
// the connection is torn down until a reconnection has restarted the
// monitors.
func Connected(c client.Client) bool {
	return c.Connected() && c.CurrentEndpoint() != ""
}

// Disconnections counts the times c lost its connection since it was
// made, when c can tell (the clients of package ovn can); a change says a
// reconnection happened, also one shorter than a poll of Connected.
func Disconnections(c client.Client) int {
	if d, ok := c.(interface{ Disconnections() int }); ok {
		return d.Disconnections()
	}
	return 0
}

// ConnectionLost says whether err, returned by Transact, is the connection
// failing rather than the server answering (for the NB or the SB).
func ConnectionLost(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, client.ErrNotConnected) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &opErr)
}
