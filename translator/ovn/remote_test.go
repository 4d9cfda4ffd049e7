package ovn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// TestBindRemotePorts: each remote port is bound to its chassis in one
// transaction; a port already bound there (as northd 23.09 binds it) and a
// second call write nothing; a port without Port_Binding or chassis is
// pending; a port bound elsewhere is re-pointed; a binding requesting
// another chassis is left alone.
func TestBindRemotePorts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newRealSB(t)
	hv2 := s.remoteChassis("hv2", "192.168.0.12")
	hv3 := s.remoteChassis("hv3", "192.168.0.13")
	// As a northd of 23.09 or later leaves it: bound to its requested chassis.
	s.remotePort("kv-span_vm-done", 2, "requested_chassis="+hv2, "chassis="+hv2)
	pending, err := BindRemotePorts(ctx, s.sb, map[string]string{"kv-span_vm-done": "hv2"})
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.Equal(t, int32(0), s.sb.n.Load(), "transactions for a port bound already")

	// As northd 23.03 leaves them: unbound (one with requested_chassis
	// filled in, as 23.03 does, one without, as older ones do); one bound
	// to the chassis the port lived on before it moved.
	s.remotePort("kv-span_vm-a", 3, "requested_chassis="+hv2)
	s.remotePort("kv-span_vm-b", 4)
	s.remotePort("kv-span_vm-moved", 5, "chassis="+hv3)
	// The NB asks for hv3: a stale want of hv2 must not bind it.
	s.remotePort("kv-span_vm-other", 6, "requested_chassis="+hv3)
	want := map[string]string{
		"kv-span_vm-done":    "hv2",
		"kv-span_vm-a":       "hv2",
		"kv-span_vm-b":       "hv3",
		"kv-span_vm-moved":   "hv2",
		"kv-span_vm-other":   "hv2",
		"kv-span_vm-nopb":    "hv2", // northd has not created it yet
		"kv-span_vm-nochass": "hv9", // no such chassis in this SB
	}
	s.remotePort("kv-span_vm-nochass", 7)
	pending, err = BindRemotePorts(ctx, s.sb, want)
	require.NoError(t, err)
	assert.Equal(t, []string{"kv-span_vm-nochass", "kv-span_vm-nopb", "kv-span_vm-other"}, pending)
	assert.Equal(t, int32(1), s.sb.n.Load(), "one transaction for all the bindings")
	// Idempotent: the same call again, at once, sends nothing (libovsdb
	// has applied ovsdb-server's update of our own commit, sent before
	// its reply, by the time Transact returns).
	pending, err = BindRemotePorts(ctx, s.sb, want)
	require.NoError(t, err)
	assert.Equal(t, []string{"kv-span_vm-nochass", "kv-span_vm-nopb", "kv-span_vm-other"}, pending)
	assert.Equal(t, int32(1), s.sb.n.Load(), "transactions after a second call")
	for port, ch := range map[string]string{"kv-span_vm-done": hv2, "kv-span_vm-a": hv2, "kv-span_vm-b": hv3, "kv-span_vm-moved": hv2,
		"kv-span_vm-other": "", "kv-span_vm-nochass": ""} {
		assert.Equal(t, ch, s.bindingOnServer(port), "SB Port_Binding.chassis of %s", port)
	}

	// The timeout error says, per port, why it is pending.
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	err = WaitRemotePorts(short, s.sb, want)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	for _, part := range []string{
		"3 remote ports not bound",
		"kv-span_vm-nochass -> hv9: no chassis named hv9 in the SB",
		"kv-span_vm-nopb -> hv2: no Port_Binding of type remote yet",
		"kv-span_vm-other -> hv2: its Port_Binding requests another chassis (hv3), not hv2",
	} {
		assert.Contains(t, err.Error(), part)
	}
	assert.Equal(t, int32(1), s.sb.n.Load(), "transactions while waiting on what cannot be bound")
}

// TestWaitRemotePortsBindsWhenTheBindingAppears: WaitRemotePorts, waiting on
// a port whose Port_Binding northd has not created and whose chassis
// ovnkube-controller has not added yet, binds it as soon as both are in
// the SB, woken by the cache, and returns.
func TestWaitRemotePortsBindsWhenTheBindingAppears(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newRealSB(t)
	want := map[string]string{"kv-span_vm-late": "hv2"}
	passes, done := startWait(ctx, s.sb, want, 100)
	// awaitPass waits for a pass of WaitRemotePorts that finds the port
	// pending for reason.
	awaitPass := func(reason string) {
		t.Helper()
		for {
			select {
			case p := <-passes:
				if strings.Contains(p["kv-span_vm-late"], reason) {
					return
				}
			case err := <-done:
				t.Fatalf("WaitRemotePorts returned while waiting for a pass with %q: %v", reason, err)
			case <-ctx.Done():
				t.Fatalf("no pass of WaitRemotePorts found the port pending with %q", reason)
			}
		}
	}
	awaitPass("no Port_Binding of type remote yet")
	s.remotePort("kv-span_vm-late", 2)
	// Woken by the Port_Binding: now only the chassis is missing.
	awaitPass("no chassis named hv2")
	hv2 := s.remoteChassis("hv2", "192.168.0.12")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("WaitRemotePorts did not return after the binding and the chassis appeared")
	}
	assert.Equal(t, hv2, s.bindingOnServer("kv-span_vm-late"))
	assert.Equal(t, int32(1), s.sb.n.Load(), "transactions")
}

// TestWaitRemotePortsAcrossALostSB: the SB connection is lost while
// WaitRemotePorts waits, the Port_Binding and the chassis appear while it
// is down; the reconnection re-fills the cache, and WaitRemotePorts binds
// the port then.
func TestWaitRemotePortsAcrossALostSB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var proxy *nbtest.Proxy
	s := newRealSBVia(t, func(sock string) string {
		proxy = nbtest.NewProxy(t, sock)
		return proxy.Endpoint()
	})
	want := map[string]string{"kv-span_vm-late": "hv2"}
	passes, done := startWait(ctx, s.sb, want, 1)
	select {
	case <-passes:
	case err := <-done:
		t.Fatalf("WaitRemotePorts returned with nothing to bind: %v", err)
	}
	proxy.Down()
	require.Eventually(t, func() bool { return !nb.Connected(s.sb) }, 10*time.Second, 5*time.Millisecond, "disconnection seen")
	s.ctl("chassis-add", "hv2", "geneve", "192.168.0.12", "--", "set", "Chassis", "hv2", "other_config:is-remote=true")
	hv2 := s.ctl("--bare", "--columns=_uuid", "find", "Chassis", "name=hv2")
	s.ctl("create", "Port_Binding", "logical_port=kv-span_vm-late", "type=remote", "datapath="+s.dp, "tunnel_key=2")
	proxy.Up()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("WaitRemotePorts did not bind after the SB came back")
	}
	assert.Equal(t, hv2, s.bindingOnServer("kv-span_vm-late"))
}

// TestBindOpsDoNotClobber: the operations BindRemotePorts sends change
// nothing when the binding or the chassis they were computed from changed
// on the server meanwhile.
func TestBindOpsDoNotClobber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newRealSB(t)
	hv2 := s.remoteChassis("hv2", "192.168.0.12")
	hv3 := s.remoteChassis("hv3", "192.168.0.13")
	s.remotePort("kv-span_vm-a", 2)
	read := &sbmodel.PortBinding{LogicalPort: "kv-span_vm-a"}
	require.NoError(t, s.sb.Get(ctx, read))

	// Another writer binds it to hv3 after our read: our update to hv2,
	// made from the unbound row we read, matches no row.
	s.ctl("set", "Port_Binding", read.UUID, "chassis="+hv3)
	res, err := transactSB(ctx, s.sb, []ovsdb.Operation{bindOp(read, hv2)})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Empty(t, res[0].Error)
	assert.Equal(t, 0, res[0].Count, "rows updated from a stale read")
	assert.Equal(t, hv3, s.bindingOnServer("kv-span_vm-a"))

	// The port turned local in this zone (type ""): not bound either.
	s.ctl("set", "Port_Binding", read.UUID, "type=\"\"", "chassis=[]")
	res, err = transactSB(ctx, s.sb, []ovsdb.Operation{bindOp(read, hv2)})
	require.NoError(t, err)
	assert.Equal(t, 0, res[0].Count, "rows updated after the port became local")
	s.ctl("set", "Port_Binding", read.UUID, "type=remote")

	// The chassis row was deleted (and added again) after our read: the
	// transaction fails on its wait and binds nothing.
	ch := &sbmodel.Chassis{Name: "hv2"}
	require.NoError(t, s.sb.Get(ctx, ch))
	s.ctl("chassis-del", "hv2")
	s.remoteChassis("hv2", "192.168.0.12")
	res, err = transactSB(ctx, s.sb, []ovsdb.Operation{sameChassis(ch), bindOp(read, ch.UUID)})
	require.NoError(t, err)
	require.NotEmpty(t, res)
	assert.Equal(t, "timed out", res[0].Error)
	assert.Equal(t, "", s.bindingOnServer("kv-span_vm-a"))
}

// startWait runs waitRemotePorts for want in the background: each pass's
// pending ports go to passes (up to buffer of them waiting, the others
// dropped), its result to done.
func startWait(ctx context.Context, sb client.Client, want map[string]string, buffer int) (passes chan map[string]string, done chan error) {
	passes, done = make(chan map[string]string, buffer), make(chan error, 1)
	go func() {
		done <- waitRemotePorts(ctx, sb, want, func(pending map[string]string) {
			select {
			case passes <- pending:
			default:
			}
		})
	}()
	return passes, done
}
