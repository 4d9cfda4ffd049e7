package ovn

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// realSB is an empty SB on Debian's ovsdb-server, written with ovn-sbctl
// as northd and ovnkube-controller would, and read through ConnectSB.
type realSB struct {
	t    *testing.T
	sock string
	// sb counts the transactions kubevirt-ovn sends.
	sb *countingClient
	dp string
}

type countingClient struct {
	client.Client
	n atomic.Int32
}

func (c *countingClient) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	c.n.Add(1)
	return c.Client.Transact(ctx, ops...)
}

func newRealSB(t *testing.T) *realSB {
	return newRealSBVia(t, func(sock string) string { return "unix:" + sock })
}

// newRealSBVia is newRealSB with the client connected to via(the SB's
// socket), e.g. an nbtest.Proxy's endpoint.
func newRealSBVia(t *testing.T, via func(sock string) string) *realSB {
	s := &realSB{t: t, sock: nbtest.RealSB(t)}
	s.ctl("init")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ConnectSB(ctx, Endpoint{Address: via(s.sock), Timeout: time.Second}, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s.sb = &countingClient{Client: c}
	// A datapath for the ports, as northd makes one per logical switch.
	s.dp = s.ctl("create", "Datapath_Binding", "tunnel_key=16711683", "external_ids:name=kv-span")
	return s
}

func (s *realSB) ctl(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("ovn-sbctl", append([]string{"--db=unix:" + s.sock}, args...)...).CombinedOutput()
	require.NoError(s.t, err, "ovn-sbctl %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// remoteChassis adds chassis name of another zone, as ovnkube-controller
// does, and waits for the client's cache to have it; it returns its _uuid.
func (s *realSB) remoteChassis(name, ip string) string {
	s.ctl("chassis-add", name, "geneve", ip, "--", "set", "Chassis", name, "hostname="+name, "other_config:is-remote=true")
	uuid := s.ctl("--bare", "--columns=_uuid", "find", "Chassis", "name="+name)
	s.cached(func() bool { return IsChassis(context.Background(), s.sb, name) }, "chassis "+name)
	return uuid
}

// remotePort adds the Port_Binding northd makes of a type=remote logical
// switch port, with extra columns (requested_chassis=UUID, chassis=UUID),
// and waits for the cache to have it as written.
func (s *realSB) remotePort(port string, key int, extra ...string) {
	args := append([]string{"create", "Port_Binding", "logical_port=" + port, "type=remote", "datapath=" + s.dp,
		"tunnel_key=" + strconv.Itoa(key), "options:requested-tnl-key=" + strconv.Itoa(key)}, extra...)
	s.ctl(args...)
	s.cachedBinding(port, s.bindingOnServer(port))
}

// bindingOnServer is the _uuid of the chassis port is bound to, read from
// the server ("" for none).
func (s *realSB) bindingOnServer(port string) string {
	return s.ctl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+port)
}

// cachedBinding waits until the client's cache has port bound to chassis
// (a _uuid, "" for none).
func (s *realSB) cachedBinding(port, chassis string) {
	s.cached(func() bool {
		pb := &sbmodel.PortBinding{LogicalPort: port}
		if s.sb.Get(context.Background(), pb) != nil {
			return false
		}
		return (pb.Chassis == nil && chassis == "") || (pb.Chassis != nil && *pb.Chassis == chassis)
	}, "Port_Binding "+port+" bound to "+chassis)
}

func (s *realSB) cached(ok func() bool, what string) {
	s.t.Helper()
	require.Eventually(s.t, ok, 30*time.Second, 5*time.Millisecond, "the SB client's cache never saw %s", what)
}

// TestActiveGatewayOfEachRouter: with gateway ports and remote ports in
// the SB's cache, each router's active gateway is read from its own
// gateway port (a Port_Binding looked up by name must not be mistaken for
// another one: libovsdb looks it up by the schema's first index,
// datapath+tunnel_key, first).
func TestActiveGatewayOfEachRouter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newRealSB(t)
	hv2 := s.remoteChassis("hv2", "192.168.0.12")
	hv3 := s.remoteChassis("hv3", "192.168.0.13")
	lr := s.ctl("create", "Datapath_Binding", "tunnel_key=1")
	for i, r := range []struct{ router, chassis string }{{"r1", hv2}, {"r2", hv3}, {"r3", ""}} {
		args := []string{"create", "Port_Binding", "logical_port=cr-" + translator.GatewayPortName(r.router), "type=chassisredirect",
			"datapath=" + lr, "tunnel_key=" + strconv.Itoa(i+2)}
		if r.chassis != "" {
			args = append(args, "chassis="+r.chassis)
		}
		s.ctl(args...)
		s.cachedBinding("cr-"+translator.GatewayPortName(r.router), r.chassis)
	}
	s.remotePort("kv-span_vm-a", 2, "chassis="+hv3)
	s.remotePort("kv-span_vm-b", 3, "chassis="+hv2)
	s.remotePort("kv-span_vm-c", 4)
	for _, c := range []struct{ router, chassis string }{{"r1", "hv2"}, {"r2", "hv3"}, {"r3", ""}} {
		assert.Equal(t, c.chassis, ActiveGateway(ctx, s.sb, c.router), "active gateway of %s", c.router)
	}
	all, err := ActiveGateways(ctx, s.sb)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"r1": "hv2", "r2": "hv3"}, all)
}
