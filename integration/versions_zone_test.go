package integration

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// TestVersionsZoneSecurityGroupOnEverySchema: on every supported OVN NB
// schema, one zone's rows of a security group named as remote group (its
// Port_Group, ACLs and Address_Set) and a load balancer (the switch's and
// the router's rows) sync through the monitor, a second sync writes
// nothing, and the group's removal takes its Address_Set. (The zone's
// other concerns, tunnel keys and northd, are TestZones*'s.)
func TestVersionsZoneSecurityGroupOnEverySchema(t *testing.T) {
	port := 80
	snapshot := func() *translator.Snapshot {
		return &translator.Snapshot{
			Networks: []translator.Network{
				{Name: "public", Namespace: "default", Type: "FLAT", PhysicalNetworkName: "physnet1", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
				{Name: "net-a", Namespace: "default", Type: "GENEVE", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
			},
			Routers: []translator.Router{{Name: "r1", EnableSNAT: true, Internal: []string{"net-a"}, Gateway: "gw1",
				External: &translator.External{IP: "172.16.0.100", Network: "public"}}},
			VMs: []translator.VMInterface{
				{Namespace: "default", VMI: "vm-a", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "hv1", SecurityGroups: "web"},
				{Namespace: "default", VMI: "vm-b", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.10.0.6", Node: "hv1", SecurityGroups: "client"},
			},
			SecurityGroups: []translator.SecurityGroup{
				{Name: "web", ID: "web", Rules: []translator.SecurityGroupRule{{ID: "http", Direction: "ingress", Protocol: "tcp", PortRangeMin: &port, RemoteGroupID: "client"}}},
				{Name: "client", ID: "client"},
			},
			LoadBalancers: []translator.LoadBalancer{{Name: "lb", ID: "lb", Network: "net-a", VIP: "10.10.0.100", Members: []string{"10.10.0.5"},
				Rules: []translator.LBRule{{Protocol: "tcp", PortMin: 80}}, HealthCheck: &translator.LBHealthCheck{SourceIP: "10.10.0.250"}}},
			Interconnect: true, ChassisKnown: true,
			Chassis: []translator.Chassis{
				{Name: "gw1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "z1"},
				{Name: "hv1", Hostname: "hv1", Zone: "z1"},
			},
		}
	}
	for _, v := range versionsList {
		t.Run(v, func(t *testing.T) {
			db := versionsNB(t, v)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := ovn.ConnectNB(ctx, ovn.Endpoint{Address: db.addr}, "kubevirt-ovn", logr.Discard())
			require.NoError(t, err)
			defer c.Close()
			sync := func(s *translator.Snapshot) *nb.SyncResult {
				t.Helper()
				res, err := nb.Sync(ctx, c, translator.Build(s, "kubevirt-ovn"), nb.SyncOptions{Instance: "kubevirt-ovn", Zone: "z1"})
				require.NoError(t, err)
				require.Empty(t, res.Failed())
				return res
			}
			s := snapshot()
			sync(s)
			sets := db.rows("Address_Set", `[["name","==","`+translator.AddressSetName("client")+`"]]`, "addresses")
			require.Len(t, sets, 1)
			assert.Equal(t, "10.10.0.6", sets[0]["addresses"], "client's member")
			assert.Len(t, db.rows("Port_Group", `[]`, "name"), 2)
			assert.Len(t, db.rows("Load_Balancer", `[]`, "name"), 2, "the router's row and the switch's")
			res := sync(s)
			assert.Zero(t, res.Transactions, "a second sync writes nothing")

			s.SecurityGroups = s.SecurityGroups[1:] // web goes: nothing names client
			sync(s)
			assert.Empty(t, db.rows("Address_Set", `[["name","==","`+translator.AddressSetName("client")+`"]]`))
		})
	}
}
