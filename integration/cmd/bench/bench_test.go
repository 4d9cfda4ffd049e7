package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

func TestTxnsOpsReadsTheSyncLineFromEitherStream(t *testing.T) {
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		want           string
	}{
		{"stdout", "changes per table:\nNB: 3 transactions, 120 operations\n", "", "3/120"},
		{"stderr singular", "", "note: x\nNB: 1 transaction, 5 operations (2 waits)\n", "1/5"},
		{"absent", "no changes\n", "", "-"},
		{"not at line start", "the NB: 3 transactions, 4 operations\n", "", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, txnsOps(childRun{stdout: tc.stdout, stderr: tc.stderr}))
		})
	}
}

// dumpOf decodes tables as the server sends a select's rows.
func dumpOf(t *testing.T, tables map[string]string, order ...string) []dumpTable {
	t.Helper()
	var out []dumpTable
	for _, name := range order {
		var rows []row
		require.NoError(t, json.Unmarshal([]byte(tables[name]), &rows))
		out = append(out, dumpTable{name: name, rows: rows})
	}
	return out
}

var smallDump = map[string]string{
	"Logical_Switch_Port": `[{"_uuid":["uuid","11111111-0000-0000-0000-000000000001"],"_version":["uuid","99999999-0000-0000-0000-000000000000"],
		"name":"kv-net_default_vm_eth1","addresses":"50:54:00:00:00:05 10.0.0.5","port_security":["set",[]],"type":"",
		"options":["map",[]],"external_ids":["map",[["kubevirt-ovn/owner","net"]]],"ha_chassis_group":["set",[]],
		"dhcpv4_options":["uuid","bbbbbbbb-0000-0000-0000-000000000001"]},
		{"_uuid":["uuid","11111111-0000-0000-0000-000000000002"],"name":"kv-stor-net_r","addresses":"router","type":"router",
		"options":["map",[["router-port","kv-rtos-r_net"]]],"external_ids":["map",[]]}]`,
	"Logical_Switch": `[{"_uuid":["uuid","22222222-0000-0000-0000-000000000001"],"name":"kv-net",
		"ports":["set",[["uuid","11111111-0000-0000-0000-000000000001"],["uuid","11111111-0000-0000-0000-000000000002"]]],
		"external_ids":["map",[]],"qos_rules":["set",[["uuid","33333333-0000-0000-0000-00000000dead"]]]}]`,
	"Gateway_Chassis": `[{"_uuid":["uuid","44444444-0000-0000-0000-000000000001"],"name":"kv-rtoe-r_gw1","chassis_name":"gw1","priority":1}]`,
	"NAT": `[{"_uuid":["uuid","55555555-0000-0000-0000-000000000001"],"type":"snat","external_ip":"172.16.0.10","logical_ip":"10.0.0.0/24","logical_port":["set",[]],
		"external_port_range":"1025-65535"},
		{"_uuid":["uuid","55555555-0000-0000-0000-000000000002"],"type":"dnat_and_snat","external_ip":"172.16.156.74","logical_ip":"10.0.0.5","logical_port":["set",[]],
		"external_port_range":"","external_ids":["map",[["kubevirt-ovn/floating-ip","fip-r"]]]}]`,
	"DHCP_Options": `[{"_uuid":["uuid","bbbbbbbb-0000-0000-0000-000000000001"],"cidr":"10.0.0.0/24",
		"options":["map",[["server_id","10.0.0.1"],["lease_time","86400"],["dns_server","{10.0.0.2, 10.0.0.3}"]]],
		"external_ids":["map",[["kubevirt-ovn/owner","net"],["kubevirt-ovn/network","net"]]]},
		{"_uuid":["uuid","bbbbbbbb-0000-0000-0000-000000000002"],"cidr":"172.16.0.0/16","options":["map",[["server_id","172.16.0.1"]]],
		"external_ids":["map",[["kubevirt-ovn/network","public"]]]}]`,
	"Logical_Router_Static_Route": `[{"_uuid":["uuid","66666666-0000-0000-0000-000000000001"],"ip_prefix":"0.0.0.0/0","nexthop":"172.16.0.1",
		"policy":["set",[]],"output_port":"kv-rtoe-r"}]`,
	"Logical_Router_Port": `[{"_uuid":["uuid","77777777-0000-0000-0000-000000000001"],"name":"kv-rtoe-r","mac":"fa:16:3e:00:00:01",
		"networks":"172.16.0.10/16","gateway_chassis":["uuid","44444444-0000-0000-0000-000000000001"],"external_ids":["map",[]]}]`,
	"Logical_Router": `[{"_uuid":["uuid","88888888-0000-0000-0000-000000000001"],"name":"kv-r",
		"ports":["uuid","77777777-0000-0000-0000-000000000001"],
		"nat":["set",[["uuid","55555555-0000-0000-0000-000000000001"],["uuid","55555555-0000-0000-0000-000000000002"]]],
		"static_routes":["uuid","66666666-0000-0000-0000-000000000001"],"external_ids":["map",[["kubevirt-ovn/owner","r"]]]}]`,
	"Static_MAC_Binding": `[{"_uuid":["uuid","99999999-0000-0000-0000-000000000001"],"logical_port":"kv-rtoe-r","ip":"172.16.0.1","mac":"00:00:00:00:ee:01"}]`,
	"ACL": `[{"_uuid":["uuid","aaaaaaaa-0000-0000-0000-000000000001"],"action":"allow"},
		{"_uuid":["uuid","aaaaaaaa-0000-0000-0000-000000000002"],"action":"allow-related","direction":"to-lport","priority":1002,
		"match":"outport == @kv_sg_web && ip4 && tcp && tcp.dst == 80","name":["set",[]],"log":false,
		"external_ids":["map",[["kubevirt-ovn/sg-acl","rule/web-in"]]]},
		{"_uuid":["uuid","aaaaaaaa-0000-0000-0000-000000000003"],"action":"drop","direction":"from-lport","priority":1000,
		"match":"inport == @kv_sg_web && ip","name":["set",[]],"log":false}]`,
	"Port_Group": `[{"_uuid":["uuid","cccccccc-0000-0000-0000-000000000001"],"name":"kv_sg_web",
		"ports":["set",[["uuid","11111111-0000-0000-0000-000000000001"]]],
		"acls":["set",[["uuid","aaaaaaaa-0000-0000-0000-000000000003"],["uuid","aaaaaaaa-0000-0000-0000-000000000002"]]],
		"external_ids":["map",[["kubevirt-ovn/security-group","web"]]]}]`,
}

var smallOrder = []string{"DHCP_Options", "Logical_Switch_Port", "Logical_Switch", "Gateway_Chassis", "NAT", "Logical_Router_Static_Route",
	"Logical_Router_Port", "Logical_Router", "Static_MAC_Binding", "ACL", "Port_Group"}

// insertOf is the insert op of the row with dump UUID u, and its position.
func insertOf(t *testing.T, ops []any, u string) (map[string]any, int) {
	t.Helper()
	for i, op := range ops[1:] {
		if m := op.(map[string]any); m["uuid-name"] == namedUUID(u) {
			return m, i + 1
		}
	}
	t.Fatalf("no insert of row %s", u)
	return nil, 0
}

func TestFloorOpsInsertEveryRowWithNamedUUIDReferences(t *testing.T) {
	tables := dumpOf(t, smallDump, smallOrder...)
	ops, n := floorOps("OVN_Northbound", tables)
	require.Equal(t, 16, n)
	require.Len(t, ops, 17)
	assert.Equal(t, "OVN_Northbound", ops[0])

	port, portAt := insertOf(t, ops, "11111111-0000-0000-0000-000000000001")
	assert.Equal(t, "insert", port["op"])
	assert.Equal(t, "Logical_Switch_Port", port["table"])
	assert.Equal(t, "r11111111_0000_0000_0000_000000000001", port["uuid-name"])
	prow := port["row"].(map[string]any)
	assert.NotContains(t, prow, "_uuid")
	assert.NotContains(t, prow, "_version")
	assert.NotContains(t, prow, "port_security", "empty sets are left out")
	assert.NotContains(t, prow, "options", "empty maps are left out")
	assert.Equal(t, "50:54:00:00:00:05 10.0.0.5", prow["addresses"])
	assert.Equal(t, []any{"named-uuid", "rbbbbbbbb_0000_0000_0000_000000000001"}, prow["dhcpv4_options"],
		"a port refers to its network's DHCP options inserted in the same transaction")

	dhcp, dhcpAt := insertOf(t, ops, "bbbbbbbb-0000-0000-0000-000000000001")
	assert.Equal(t, "DHCP_Options", dhcp["table"])
	assert.Less(t, dhcpAt, portAt, "the DHCP options before the port that refers to them")
	pub, _ := insertOf(t, ops, "bbbbbbbb-0000-0000-0000-000000000002")
	assert.Equal(t, "172.16.0.0/16", pub["row"].(map[string]any)["cidr"], "DHCP options no port refers to are inserted too (a root table)")

	sw, _ := insertOf(t, ops, "22222222-0000-0000-0000-000000000001")
	assert.Equal(t, []any{"set", []any{
		[]any{"named-uuid", "r11111111_0000_0000_0000_000000000001"},
		[]any{"named-uuid", "r11111111_0000_0000_0000_000000000002"},
	}}, sw["row"].(map[string]any)["ports"], "children are referenced from the parent's insert row")
	assert.Equal(t, []any{"set", []any{[]any{"uuid", "33333333-0000-0000-0000-00000000dead"}}}, sw["row"].(map[string]any)["qos_rules"],
		"a reference to a row outside the dump stays a UUID")

	lr, _ := insertOf(t, ops, "88888888-0000-0000-0000-000000000001")
	assert.Equal(t, []any{"named-uuid", "r77777777_0000_0000_0000_000000000001"}, lr["row"].(map[string]any)["ports"])
	assert.Equal(t, []any{"set", []any{
		[]any{"named-uuid", "r55555555_0000_0000_0000_000000000001"},
		[]any{"named-uuid", "r55555555_0000_0000_0000_000000000002"},
	}}, lr["row"].(map[string]any)["nat"], "the SNAT and the floating IP's dnat_and_snat are the router's children")
	fip, _ := insertOf(t, ops, "55555555-0000-0000-0000-000000000002")
	assert.Equal(t, "dnat_and_snat", fip["row"].(map[string]any)["type"])

	pg, _ := insertOf(t, ops, "cccccccc-0000-0000-0000-000000000001")
	assert.Equal(t, []any{"set", []any{[]any{"named-uuid", "r11111111_0000_0000_0000_000000000001"}}}, pg["row"].(map[string]any)["ports"],
		"a port group refers to its ports inserted in the same transaction")
	assert.Equal(t, []any{"set", []any{
		[]any{"named-uuid", "raaaaaaaa_0000_0000_0000_000000000003"},
		[]any{"named-uuid", "raaaaaaaa_0000_0000_0000_000000000002"},
	}}, pg["row"].(map[string]any)["acls"], "its ACLs are its children")
}

func TestSchemaOrderPutsReferencedTablesFirst(t *testing.T) {
	s := schemaTables{
		"Logical_Router":      {"Logical_Router_Port": true, "NAT": true},
		"Logical_Router_Port": {"Gateway_Chassis": true},
		"Gateway_Chassis":     {},
		"NAT":                 {},
		"NB_Global":           {"Connection": true},
		"Connection":          {},
		"Loop_A":              {"Loop_B": true},
		"Loop_B":              {"Loop_A": true},
	}
	order := s.order()
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	require.Len(t, order, len(s))
	for parent, refs := range s {
		for child := range refs {
			if parent == "Loop_A" || parent == "Loop_B" {
				continue
			}
			assert.Less(t, pos[child], pos[parent], "%s before %s", child, parent)
		}
	}
}

func TestNbctlCommandsRebuildTheDump(t *testing.T) {
	plan := nbctlCommands(dumpOf(t, smallDump, smallOrder...))
	assert.Equal(t, [][]string{
		{"dhcp-options-create", "10.0.0.0/24", "kubevirt-ovn/network=net", "kubevirt-ovn/owner=net"},
		{"dhcp-options-create", "172.16.0.0/16", "kubevirt-ovn/network=public"},
	}, plan.create, "DHCP options are created first, with their external_ids")
	assert.Equal(t, map[string]int{"ACL": 1}, plan.skipped, "an ACL of no port group is not rebuilt")

	cmds, err := plan.resolve(map[string]string{
		"10.0.0.0/24 kubevirt-ovn/network=net kubevirt-ovn/owner=net": "d0000000-0000-0000-0000-000000000001",
		"172.16.0.0/16 kubevirt-ovn/network=public":                   "d0000000-0000-0000-0000-000000000002",
	})
	require.NoError(t, err)
	var got []string
	for _, c := range cmds {
		got = append(got, joinCmd(c))
	}
	assert.Equal(t, []string{
		"dhcp-options-set-options d0000000-0000-0000-0000-000000000001 dns_server={10.0.0.2, 10.0.0.3} lease_time=86400 server_id=10.0.0.1",
		"dhcp-options-set-options d0000000-0000-0000-0000-000000000002 server_id=172.16.0.1",
		"ls-add kv-net",
		"lsp-add kv-net kv-net_default_vm_eth1",
		"lsp-set-addresses kv-net_default_vm_eth1 50:54:00:00:00:05 10.0.0.5",
		"lsp-set-dhcpv4-options kv-net_default_vm_eth1 d0000000-0000-0000-0000-000000000001",
		`set Logical_Switch_Port kv-net_default_vm_eth1 external_ids:"kubevirt-ovn/owner"="net"`,
		"lsp-add kv-net kv-stor-net_r",
		"lsp-set-addresses kv-stor-net_r router",
		"lsp-set-type kv-stor-net_r router",
		"lsp-set-options kv-stor-net_r router-port=kv-rtos-r_net",
		"lr-add kv-r",
		`set Logical_Router kv-r external_ids:"kubevirt-ovn/owner"="r"`,
		"lrp-add kv-r kv-rtoe-r fa:16:3e:00:00:01 172.16.0.10/16",
		"lrp-set-gateway-chassis kv-rtoe-r gw1 1",
		"--portrange lr-nat-add kv-r snat 172.16.0.10 10.0.0.0/24 1025-65535",
		"lr-nat-add kv-r dnat_and_snat 172.16.156.74 10.0.0.5",
		"lr-route-add kv-r 0.0.0.0/0 172.16.0.1 kv-rtoe-r",
		"static-mac-binding-add kv-rtoe-r 172.16.0.1 00:00:00:00:ee:01",
		"pg-add kv_sg_web kv-net_default_vm_eth1",
		`set Port_Group kv_sg_web external_ids:"kubevirt-ovn/security-group"="web"`,
		"--type=port-group acl-add kv_sg_web from-lport 1000 inport == @kv_sg_web && ip drop",
		"--type=port-group acl-add kv_sg_web to-lport 1002 outport == @kv_sg_web && ip4 && tcp && tcp.dst == 80 allow-related",
	}, got, "the port groups last, after the ports they name")

	_, err = plan.resolve(map[string]string{"172.16.0.0/16 kubevirt-ovn/network=public": "d0000000-0000-0000-0000-000000000002"})
	assert.ErrorContains(t, err, `ovn-nbctl created no DHCP_Options row "10.0.0.0/24 kubevirt-ovn/network=net kubevirt-ovn/owner=net"`)

	b := batches(cmds[:5], 2)
	require.Len(t, b, 3)
	assert.Equal(t, []string{"dhcp-options-set-options", "d0000000-0000-0000-0000-000000000001", "dns_server={10.0.0.2, 10.0.0.3}",
		"lease_time=86400", "server_id=10.0.0.1", "--", "dhcp-options-set-options", "d0000000-0000-0000-0000-000000000002", "server_id=172.16.0.1"}, b[0])
	assert.Equal(t, []string{"lsp-set-addresses", "kv-net_default_vm_eth1", "50:54:00:00:00:05 10.0.0.5"}, b[2])
}

func TestDHCPCreatedReadsNbctlsList(t *testing.T) {
	got, err := dhcpCreated(`{"data":[[["uuid","d0000000-0000-0000-0000-000000000001"],"10.0.0.0/24",["map",[["kubevirt-ovn/owner","net"],["kubevirt-ovn/network","net"]]]],` +
		`[["uuid","d0000000-0000-0000-0000-000000000002"],"172.16.0.0/16",["map",[["kubevirt-ovn/network","public"]]]]],"headings":["_uuid","cidr","external_ids"]}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"10.0.0.0/24 kubevirt-ovn/network=net kubevirt-ovn/owner=net": "d0000000-0000-0000-0000-000000000001",
		"172.16.0.0/16 kubevirt-ovn/network=public":                   "d0000000-0000-0000-0000-000000000002",
	}, got)

	_, err = dhcpCreated(`{"data":[[["uuid","d0000000-0000-0000-0000-000000000001"],"10.0.0.0/24",["map",[]]],` +
		`[["uuid","d0000000-0000-0000-0000-000000000002"],"10.0.0.0/24",["map",[]]]],"headings":["_uuid","cidr","external_ids"]}`)
	assert.ErrorContains(t, err, "cannot tell them apart")
}

func TestQuantileIsNearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	assert.Equal(t, time.Duration(5), quantile(ds, 0.5))
	assert.Equal(t, time.Duration(10), quantile(ds, 0.99))
	assert.Equal(t, time.Duration(1), quantile(ds, 0))
	assert.Equal(t, time.Duration(0), quantile(nil, 0.5))
	assert.Equal(t, time.Duration(5), quantile([]time.Duration{5}, 0.99))
}

func TestGeneratedInputIsUniqueAcrossRouters(t *testing.T) {
	ext := netip.MustParsePrefix(externalCIDR)
	seen := map[string]string{"ip" + peerIP: "the peer router and the external network's gatewayIp"}
	note := func(kind, v, who string) {
		t.Helper()
		if prev, ok := seen[kind+v]; ok {
			t.Fatalf("%s %s of %s is also %s's", kind, v, who, prev)
		}
		seen[kind+v] = who
	}
	external := func(ip, who string) {
		t.Helper()
		a := netip.MustParseAddr(ip)
		require.True(t, ext.Contains(a) && a != ext.Addr() && a != netip.MustParseAddr("172.16.255.255"),
			"%s %s is a host address of the external network %s", who, ip, externalCIDR)
		note("ip", ip, who)
	}
	for _, i := range append(steps(0, 3000, 7), maxRouters-1) {
		external(snatIP(i, false), routerName(i))
		external(snatIP(i, true), routerName(i)+" (alt)")
		external(fipIP(i), fipName(i))
		for j := 0; j < netsPerRouter; j++ {
			a, b := netPrefix(i, j)
			note("cidr", fmt.Sprintf("10.%d.%d.0/24", a, b), netName(i, j))
			for v := 0; v < vmsPerNet+3; v++ {
				x := vm(i, j, v)
				note("mac", x.mac, x.name)
			}
		}
	}
	_, err := generate(t.TempDir(), maxRouters+1, variant{fips: true})
	assert.ErrorContains(t, err, "at most 20000")
}

func steps(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

// The generated input with floating IPs, planned as `sync` plans it: no
// error, DHCP on every network with every VM port referring to it, and each
// router's floating IP one dnat_and_snat on its router, bound to its VM;
// moved, it is bound to the other VM.
func TestGeneratedFloatingIPsArePlannedOnePerRouter(t *testing.T) {
	const n = 4
	in, err := generate(t.TempDir(), n, variant{fips: true})
	require.NoError(t, err)
	in.routers[2].fipVM = 1
	require.NoError(t, in.write(in.routers[2]))

	set, err := manifest.LoadPaths([]string{in.dir})
	require.NoError(t, err)
	plan := translator.Build(set.Objects.Snapshot(), "bench")
	require.Empty(t, plan.Errors)

	require.Len(t, plan.Networks, n*netsPerRouter+1, "the routers' networks and the external one")
	vmPorts := 0
	for _, np := range plan.Networks {
		require.NotNil(t, np.DHCP, "network %s has DHCP", np.Name)
		for _, r := range np.Rows() {
			if p, ok := r.Model.(*nbmodel.LogicalSwitchPort); ok && p.Type == "" {
				vmPorts++
				assert.Equal(t, []translator.Ref{{Column: "dhcpv4_options", Key: np.Name}}, r.Refs, "port %s refers to its network's DHCP options", p.Name)
			}
		}
	}
	assert.Equal(t, n*netsPerRouter*vmsPerNet, vmPorts)

	require.Len(t, plan.Routers, n)
	for i, rp := range plan.Routers {
		require.Equal(t, routerName(i), rp.Name)
		var fips []*nbmodel.NAT
		for _, nat := range rp.NATs {
			if nat.Type == nbmodel.NATTypeDNATAndSNAT {
				fips = append(fips, nat)
			}
		}
		require.Len(t, fips, 1, "router %s", rp.Name)
		assert.Equal(t, fipIP(i), fips[0].ExternalIP)
		assert.Equal(t, in.routers[i].fipFixed().ip, fips[0].LogicalIP)
		assert.Len(t, rp.NATs, in.routers[i].wantNATs())
	}
	assert.Equal(t, vm(2, 0, 1).ip, in.routers[2].fipFixed().ip)
	require.Len(t, plan.FloatingIPs, n)
	for _, st := range plan.FloatingIPs {
		assert.True(t, st.Ready, "floating IP %s: %s", st.Name, st.Reason)
	}

	// Without floating IPs: the same routers, SNAT only.
	plain, err := generate(t.TempDir(), 1, variant{})
	require.NoError(t, err)
	b, err := os.ReadFile(plain.routers[0].file(plain.dir))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "FloatingIp")
}

// The generated input with security groups, planned as `sync` plans it: no
// error, sgCount Port_Groups of sgRules rule ACLs (and the base ones) each,
// every VM port in exactly its two groups, each group with 2/sgCount of
// them; a VM rebound is in its new second group and no more in its old.
func TestGeneratedSecurityGroupsArePlannedTwoPerVM(t *testing.T) {
	const n = 5
	in, err := generate(t.TempDir(), n, variant{sgs: true})
	require.NoError(t, err)
	s := in.routers[3]
	moved := vm(3, 1, 2)
	s.rebound[moved.name] = true
	require.NoError(t, in.write(s))
	in.sgAlt[4] = true
	require.NoError(t, in.writeSGs())

	set, err := manifest.LoadPaths([]string{in.dir})
	require.NoError(t, err)
	plan := translator.Build(set.Objects.Snapshot(), "bench")
	require.Empty(t, plan.Errors)
	require.Empty(t, plan.Notes)

	require.Len(t, plan.SecurityGroups, sgCount)
	member := map[string][]int{}
	for g, sp := range plan.SecurityGroups {
		require.Equal(t, sgID(g), sp.ID)
		assert.Equal(t, sgRow(g), sp.PortGroup.Name)
		assert.InDelta(t, n*netsPerRouter*vmsPerNet*2/sgCount, len(sp.Ports), 1, "group %s holds 2/%d of the ports (one VM rebound)", sp.ID, sgCount)
		rules := 0
		for _, a := range sp.ACLs {
			if a.Priority == translator.SGRulePriority {
				rules++
			}
		}
		assert.Equal(t, sgRules, rules, "group %s", sp.ID)
		for _, p := range sp.Ports {
			member[p] = append(member[p], g)
		}
	}
	require.Len(t, member, n*netsPerRouter*vmsPerNet)
	for i := 0; i < n; i++ {
		for j := 0; j < netsPerRouter; j++ {
			for v := 0; v < vmsPerNet; v++ {
				x := vm(i, j, v)
				assert.ElementsMatch(t, in.routers[i].groups(x), member[vmPortRow(x.network, x.name, "eth1")], "VM %s", x.name)
			}
		}
	}
	g := moved.serial % sgCount
	assert.ElementsMatch(t, []int{g, (g + 2) % sgCount}, member[vmPortRow(moved.network, moved.name, "eth1")])

	var edited string
	for _, a := range plan.SecurityGroups[4].ACLs {
		if a.ExternalIDs[sgACLKey] == "rule/"+sgRuleID(4, sgEditedRule) {
			edited = a.Match
		}
	}
	assert.Equal(t, fmt.Sprintf("outport == @%s && ip4 && tcp && tcp.dst == %d", sgRow(4), sgAltPort+4), edited)
}

// The dual stack input, planned as `sync` plans it: no error, every VM
// port with an IPv6 (SLAAC) address, every router's internal ports and
// gateway port with an IPv6 network and an IPv6 default route to the peer.
func TestGeneratedDualStackIsPlanned(t *testing.T) {
	const n = 3
	in, err := generate(t.TempDir(), n, variant{v6: true})
	require.NoError(t, err)
	set, err := manifest.LoadPaths([]string{in.dir})
	require.NoError(t, err)
	plan := translator.Build(set.Objects.Snapshot(), "bench")
	require.Empty(t, plan.Errors)
	vmPorts := 0
	for _, np := range plan.Networks {
		for _, p := range np.Ports {
			if p.Type == "" {
				vmPorts++
				require.Len(t, strings.Fields(p.Addresses[0]), 3, "port %s: MAC, IPv4 and IPv6", p.Name)
			}
		}
	}
	assert.Equal(t, n*netsPerRouter*vmsPerNet, vmPorts)
	require.Len(t, plan.Routers, n)
	for i, rp := range plan.Routers {
		for _, lrp := range rp.Ports {
			require.Len(t, lrp.Networks, 2, "router port %s: both families", lrp.Name)
		}
		var routes []string
		for _, r := range rp.Routes {
			routes = append(routes, r.IPPrefix+" via "+r.Nexthop)
		}
		assert.Equal(t, []string{"0.0.0.0/0 via " + peerIP, "::/0 via " + externalIPv6(1)}, routes, "router %d", i)
	}
}
