package sandbox

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// Deployment is an OVN deployment as the integration tests and the demo
// see it: database endpoints, the chassis by role, commands on a chassis,
// and frames injected into and captured from chassis ports. Local is the
// implementation on this machine; another (a real ovn-fake-multinode) only
// has to provide these.
type Deployment interface {
	// NBEndpoint and SBEndpoint are OVSDB endpoints kubevirt-ovn can reach.
	NBEndpoint() string
	SBEndpoint() string
	NBCtl(args ...string) (string, error)
	SBCtl(args ...string) (string, error)
	Chassis
	// KillChassis crashes a chassis: SIGKILL to its ovs-vswitchd and
	// ovn-controller; it returns their pids. The chassis leaves Gateways
	// and Workers for good; what its ports sent stays readable.
	KillChassis(chassis string) ([]int, error)
	// AddGateway starts a new gateway candidate whose external bridge is
	// mapped to physnet ("" for the one the others map).
	AddGateway(chassis, physnet string) error
	// RemoveChassis deletes a chassis from the SB (ovn-sbctl chassis-del).
	RemoveChassis(chassis string) error
}

// EnvDeployment names the deployment the integration tests use.
const EnvDeployment = "KUBEVIRT_OVN_DEPLOYMENT"

// Start starts the deployment EnvDeployment names under dir: "local" (the
// default) is Local with DefaultTopology; "ofm" attaches to a running
// ovn-fake-multinode cluster (AttachOFM).
func Start(dir string) (Deployment, error) {
	switch kind := os.Getenv(EnvDeployment); kind {
	case "", "local":
		return StartLocal(dir, DefaultTopology())
	case "ofm":
		return AttachOFM(dir)
	default:
		return nil, fmt.Errorf("%s=%s: \"local\" or \"ofm\" (see integration/README.md)", EnvDeployment, kind)
	}
}

// NBEndpoint is the NB's loopback TCP endpoint.
func (l *Local) NBEndpoint() string { return l.NBTCP }

// SBEndpoint is the SB's loopback TCP endpoint.
func (l *Local) SBEndpoint() string { return l.SBTCP }

// Gateways are the gateway chassis.
func (l *Local) Gateways() []string { return append([]string(nil), l.Topology.Gateways...) }

// Workers are the worker chassis.
func (l *Local) Workers() []string { return append([]string(nil), l.Topology.Workers...) }

// Capture reads what port on sim has sent, from its tx_pcap file.
func (l *Local) Capture(sim, port string) ([]wire.Seen, error) {
	return wire.ReadPcapFile(l.CapturePath(sim, port))
}

// WaitGateway waits until the chassisredirect port crPort is bound to
// gateway gw and every BFD session on the gateways and on workers is up
// (workers must have sessions too): until then both gateways may claim
// the port, and a worker whose session to gw is not up yet sends to the
// next gateway, which drops the packet.
func WaitGateway(d Deployment, crPort, gw string, workers ...string) error {
	return waitGateway(d, d, crPort, gw, d.Gateways(), d.Workers(), func(ch string) bool {
		return slices.Contains(d.Gateways(), ch) || slices.Contains(workers, ch)
	})
}

// waitGateway waits until crPort is bound to gw in sb and, on each chassis
// of gateways and workers, every BFD session is up, with at least one where
// needed says so.
func waitGateway(sb interface {
	SBCtl(args ...string) (string, error)
}, c Chassis, crPort, gw string, gateways, workers []string, needed func(chassis string) bool) error {
	gwUUID, err := sb.SBCtl("--bare", "--columns=_uuid", "find", "Chassis", "name="+gw)
	if err != nil {
		return err
	}
	gwUUID = strings.TrimSpace(gwUUID)
	if gwUUID == "" {
		return fmt.Errorf("no chassis %s in the SB", gw)
	}
	return poll(90*time.Second, crPort+" bound to "+gw+" with BFD up", func() (bool, error) {
		bound, err := sb.SBCtl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+crPort)
		if err != nil || strings.TrimSpace(bound) != gwUUID {
			return false, err
		}
		for _, ch := range append(slices.Clone(gateways), workers...) {
			out, err := c.Exec(ch, "ovs-appctl", "bfd/show")
			if err != nil {
				return false, err
			}
			n := strings.Count(out, "Local Session State: ")
			if (needed(ch) && n == 0) || n != strings.Count(out, "Local Session State: up") {
				return false, nil
			}
		}
		return true, nil
	})
}
