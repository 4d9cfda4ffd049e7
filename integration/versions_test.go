package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// versionsList are the OVN releases whose NB and SB schemas kubevirt-ovn
// supports; testdata/schemas pins each (ovn-nb-<version>.ovsschema).
var versionsList = []string{"22.03", "22.12", "23.03", "23.09", "24.03", "24.09", "25.03", "25.09", "26.03"}

// versionsDB is an ovsdb-server (Debian's) serving one pinned schema; no
// northd: the test writes what northd would.
type versionsDB struct {
	t      *testing.T
	dir    string
	addr   string // unix:PATH
	db     string // OVN_Northbound or OVN_Southbound
	schema map[string]any
}

func versionsSchemaFile(kind, version string) string {
	return filepath.Join("testdata", "schemas", fmt.Sprintf("ovn-%s-%s.ovsschema", kind, version))
}

// versionsServe starts ovsdb-server on a new database of the pinned schema
// of kind (nb or sb) and version; it is stopped, through its control
// socket, when the test ends.
func versionsServe(t *testing.T, kind, version string) *versionsDB {
	t.Helper()
	schemaFile, err := filepath.Abs(versionsSchemaFile(kind, version))
	require.NoError(t, err)
	raw, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	d := &versionsDB{t: t, dir: t.TempDir()}
	require.NoError(t, json.Unmarshal(raw, &d.schema))
	d.db = d.schema["name"].(string)
	db, err := sandbox.StartDB(d.dir, schemaFile)
	require.NoError(t, err)
	pids := db.Pids()
	t.Cleanup(func() {
		assert.NoError(t, db.Stop())
		for _, pid := range pids {
			assert.False(t, sandbox.Alive(pid), "ovsdb-server %d left behind", pid)
		}
	})
	d.addr = db.Unix
	return d
}

// cmd runs an OVS/OVN tool with its directories in the test's.
func (d *versionsDB) cmd(prog string, args ...string) (string, error) {
	c := sandbox.Tool(prog, args...)
	c.Dir = d.dir
	c.Env = append(os.Environ(), "OVS_RUNDIR="+d.dir, "OVS_LOGDIR="+d.dir, "OVS_DBDIR="+d.dir, "OVN_RUNDIR="+d.dir, "OVN_LOGDIR="+d.dir)
	out, err := c.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, ee.Stderr)
	}
	return string(out), err
}

func (d *versionsDB) run(prog string, args ...string) string {
	d.t.Helper()
	out, err := d.cmd(prog, args...)
	require.NoError(d.t, err)
	return out
}

// NBCtl runs ovn-nbctl on this database (for the foreign-row helpers).
func (d *versionsDB) NBCtl(args ...string) (string, error) {
	return d.cmd("ovn-nbctl", append([]string{"--db=" + d.addr}, args...)...)
}

// hasColumn says whether the served schema has table.column (column ""
// asks for the table).
func (d *versionsDB) hasColumn(table, column string) bool {
	tb, ok := d.schema["tables"].(map[string]any)[table].(map[string]any)
	if !ok || column == "" {
		return ok
	}
	_, ok = tb["columns"].(map[string]any)[column]
	return ok
}

// transact runs one raw OVSDB transaction of ops (JSON) and fails the test
// on any error.
func (d *versionsDB) transact(ops ...string) []map[string]any {
	d.t.Helper()
	out := d.run("ovsdb-client", "transact", d.addr, fmt.Sprintf("[%q,%s]", d.db, strings.Join(ops, ",")))
	var res []map[string]any
	require.NoError(d.t, json.Unmarshal([]byte(out), &res), out)
	for _, r := range res {
		require.Nil(d.t, r["error"], "transaction %v: %s", ops, out)
	}
	return res
}

// rows selects the rows of table matching where (a JSON array of
// conditions).
func (d *versionsDB) rows(table, where string, columns ...string) []map[string]any {
	d.t.Helper()
	// With _uuid: ovsdb-server folds rows that read the same.
	cols, _ := json.Marshal(append([]string{"_uuid"}, columns...))
	res := d.transact(fmt.Sprintf(`{"op":"select","table":%q,"where":%s,"columns":%s}`, table, where, cols))
	var out []map[string]any
	for _, r := range res[0]["rows"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// nbCfg is NB_Global's nb_cfg.
func (d *versionsDB) nbCfg() int {
	d.t.Helper()
	g := d.rows("NB_Global", "[]", "nb_cfg")
	require.Len(d.t, g, 1)
	return int(g[0]["nb_cfg"].(float64))
}

// versionsSeedForeign writes the ovn-kubernetes-like rows of
// seedForeignRows; without the wait for northd, which these tests do not
// run.
func versionsSeedForeign(t *testing.T, d *versionsDB) string {
	t.Helper()
	writeForeignRows(t, d)
	return dumpForeignRows(t, d)
}

// versionsNB serves the NB of version with NB_Global and ovn-kubernetes-like
// rows, checked byte-identical when the test ends.
func versionsNB(t *testing.T, version string) *versionsDB {
	t.Helper()
	nb := versionsServe(t, "nb", version)
	nbctl(t, nb, "init")
	foreign := versionsSeedForeign(t, nb)
	t.Cleanup(func() {
		if !t.Failed() {
			assert.Equal(t, foreign, dumpForeignRows(t, nb), "ovn-kubernetes-like rows must be identical")
		}
	})
	return nb
}

// versionsNAT is the external IPs of router1's NAT rows.
func versionsNAT(nb *versionsDB) string {
	var ips []string
	for _, r := range nb.rows("NAT", `[["external_ids","includes",["map",[["kubevirt-ovn/owner","router1"]]]]]`, "external_ip") {
		ips = append(ips, r["external_ip"].(string))
	}
	return strings.Join(ips, " ")
}

// One binary against the NB and SB of every supported OVN: sync of the
// examples creates the rows (the peer MAC pinned where the NB has
// Static_MAC_Binding, a note where it does not; DHCP options), a second
// sync writes nothing, a floating IP on a router without SNAT gets its NAT
// and policies, an update and a deletion behave.
func TestVersionsSyncOnEverySchema(t *testing.T) {
	for _, v := range versionsList {
		t.Run(v, func(t *testing.T) {
			nb := versionsNB(t, v)
			sb := versionsServe(t, "sb", v)
			sb.transact(
				`{"op":"insert","table":"Encap","row":{"type":"geneve","ip":"192.168.0.11","chassis_name":"gw1"},"uuid-name":"e1"}`,
				`{"op":"insert","table":"Chassis","row":{"name":"gw1","hostname":"gw1","encaps":["named-uuid","e1"],"other_config":["map",[["ovn-bridge-mappings","physnet1:br-ex"],["ovn-cms-options","enable-chassis-as-gw"]]]}}`,
				`{"op":"insert","table":"Encap","row":{"type":"geneve","ip":"192.168.0.21","chassis_name":"hv1"},"uuid-name":"e2"}`,
				`{"op":"insert","table":"Chassis","row":{"name":"hv1","hostname":"hv1","encaps":["named-uuid","e2"]}}`,
			)
			pins := nb.hasColumn("Static_MAC_Binding", "")
			ex := examples(t)
			sync := func() result {
				t.Helper()
				r := kubevirtOVN(t, "sync", "--nb", nb.addr, "--sb", sb.addr, "--from-file", ex)
				require.Equal(t, 0, r.code, r.stderr)
				return r
			}
			macs := func() []string {
				if !pins {
					return nil
				}
				var out []string
				for _, r := range nb.rows("Static_MAC_Binding", `[["logical_port","==","kv-rtoe-router1"]]`, "ip", "mac") {
					out = append(out, r["ip"].(string)+" "+r["mac"].(string))
				}
				return out
			}

			r := sync()
			assert.Contains(t, squash(r.stdout), "Logical_Router 1 created")
			assert.Len(t, nb.rows("Logical_Router", `[["name","==","kv-router1"]]`), 1)
			assert.Equal(t, "172.16.0.100 172.16.0.100", versionsNAT(nb))
			if pins {
				assert.Equal(t, []string{"172.16.0.1 00:00:00:00:ee:01"}, macs())
				assert.NotContains(t, r.stderr, "not pinned")
			} else {
				assert.Contains(t, r.stderr, "peerRouter.mac 00:00:00:00:ee:01 (172.16.0.1 on kv-rtoe-router1) is not pinned: this OVN Northbound has no Static_MAC_Binding table")
			}
			assert.Contains(t, sync().stdout, "no changes")

			// DHCP on every network with a gatewayIp, referenced by its
			// VM ports.
			assert.Len(t, nb.rows("DHCP_Options", `[["external_ids","includes",["map",[["kubevirt-ovn/network","net-a"]]]]]`), 1)
			assert.Len(t, nb.rows("Logical_Switch_Port", `[["name","==","kv-net-a_default_vm-a_eth1"],["dhcpv4_options","!=",["set",[]]]]`), 1)
			// A floating IP on a router without SNAT: its dnat_and_snat row
			// and the policies that let only its VM out.
			b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", "floatingips.yaml"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(ex, "floatingips.yaml"), b, 0o644))
			edit(t, filepath.Join(ex, "router.yaml"), "enableSnat: true", "enableSnat: false")
			r = sync()
			assert.Equal(t, "172.16.0.150", versionsNAT(nb))
			assert.Len(t, nb.rows("Logical_Router_Policy", `[["external_ids","includes",["map",[["kubevirt-ovn/owner","router1"]]]]]`), 2)
			assert.Contains(t, sync().stdout, "no changes")
			require.NoError(t, os.Remove(filepath.Join(ex, "floatingips.yaml")))
			edit(t, filepath.Join(ex, "router.yaml"), "enableSnat: false", "enableSnat: true")
			r = sync()
			assert.Equal(t, "172.16.0.100 172.16.0.100", versionsNAT(nb))
			assert.Empty(t, nb.rows("Logical_Router_Policy", `[["external_ids","includes",["map",[["kubevirt-ovn/owner","router1"]]]]]`))

			// A load balancer with a health check behind a floating IP:
			// router and switch rows, their health checks, no NAT.
			require.NoError(t, os.WriteFile(filepath.Join(ex, "lb.yaml"), []byte(`apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: web}
spec: {name: web, networkId: net-a, vip: 10.10.0.100, members: [10.10.0.5], rules: [{protocol: tcp, portRangeMin: 80}],
  healthCheck: {sourceIp: 10.10.0.250}}
---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: fip-web}
spec: {id: fip-web, routerName: router1, networkName: public, floatingIp: 172.16.0.160, fixedIp: 10.10.0.100}
`), 0o644))
			r = sync()
			// The router's row, net-a's switch's and net-b's (router1's
			// other internal network).
			assert.Contains(t, squash(r.stdout), "Load_Balancer 3 created")
			assert.Len(t, nb.rows("Load_Balancer_Health_Check", `[["external_ids","includes",["map",[["kubevirt-ovn/load-balancer","web"]]]]]`), 4)
			assert.Equal(t, "172.16.0.100 172.16.0.100", versionsNAT(nb), "no NAT for a floating IP on a VIP")
			assert.Contains(t, sync().stdout, "no changes")
			require.NoError(t, os.Remove(filepath.Join(ex, "lb.yaml")))
			sync()
			assert.Empty(t, nb.rows("Load_Balancer", `[["external_ids","includes",["map",[["kubevirt-ovn/load-balancer","web"]]]]]`))

			// A live migration of vm-a from hv1 to gw1: the dual binding
			// where OVN has multi-chassis binding; on 22.03 its source
			// alone, and a note saying so.
			vmis := filepath.Join(ex, "vmis.yaml")
			orig, err := os.ReadFile(vmis)
			require.NoError(t, err)
			edit(t, vmis, "      ipAddress: 10.10.0.5\n", "      ipAddress: 10.10.0.5\n  migrationState: {sourceNode: hv1, targetNode: gw1, migrationUid: m-1}\n")
			r = sync()
			lsp := nb.rows("Logical_Switch_Port", `[["name","==","kv-net-a_default_vm-a_eth1"]]`, "options")
			require.Len(t, lsp, 1)
			if v == "22.03" {
				assert.Equal(t, []any{"map", []any{[]any{"requested-chassis", "hv1"}}}, lsp[0]["options"])
				assert.Contains(t, r.stderr, "this OVN has no multi-chassis port binding (before 22.06): its port stays on hv1 until status.migrationState says completed, then moves to gw1")
			} else {
				assert.Equal(t, []any{"map", []any{[]any{"activation-strategy", "rarp"}, []any{"requested-chassis", "hv1,gw1"}}}, lsp[0]["options"])
			}
			assert.Contains(t, sync().stdout, "no changes")
			require.NoError(t, os.WriteFile(vmis, orig, 0o644))
			sync()

			edit(t, filepath.Join(ex, "router.yaml"), "ip: 172.16.0.100", "ip: 172.16.0.103")
			edit(t, filepath.Join(ex, "router.yaml"), `mac: "00:00:00:00:ee:01"`, `mac: "00:00:00:00:ee:02"`)
			r = sync()
			assert.Contains(t, squash(r.stdout), "NAT 2 updated")
			assert.Equal(t, "172.16.0.103 172.16.0.103", versionsNAT(nb))
			if pins {
				assert.Equal(t, []string{"172.16.0.1 00:00:00:00:ee:02"}, macs())
			}
			assert.Contains(t, sync().stdout, "no changes")

			require.NoError(t, os.Remove(filepath.Join(ex, "router.yaml")))
			r = sync()
			assert.Contains(t, squash(r.stdout), "Logical_Router 1 deleted")
			assert.Empty(t, nb.rows("Logical_Router", `[["name","==","kv-router1"]]`))
			assert.Empty(t, versionsNAT(nb))
			assert.Empty(t, macs())
			assert.Contains(t, sync().stdout, "no changes")
		})
	}
}

// On every supported OVN, `run` reports the realization each time a
// northd-like writer advances hv_cfg, together with the gateway port's
// status where the schema has that column (OVN >= 23.09 writes it in the
// same transaction): 20 commits, 0 missed.
func TestVersionsRunReportsEveryRealization(t *testing.T) {
	const rounds = 20
	for _, v := range versionsList {
		t.Run(v, func(t *testing.T) {
			nb := versionsNB(t, v)
			status := nb.hasColumn("Logical_Router_Port", "status")
			ex := examples(t)
			p := startController(t, "versions-"+v, "--nb", nb.addr, "--from-file", ex, "--file-poll", "100ms")
			realized := func() float64 { return p.metric("kubevirt_ovn_routers_realized") }
			ips := []string{"172.16.0.100", "172.16.0.103"}
			missed := 0
			var worst time.Duration
			for i := 0; i < rounds; i++ {
				if i > 0 {
					edit(t, filepath.Join(ex, "router.yaml"), "ip: "+ips[(i-1)%2], "ip: "+ips[i%2])
				}
				want := ips[i%2] + " " + ips[i%2]
				// The commit is in and the controller has seen hv_cfg behind it.
				require.NoError(t, sandbox.Poll(30*time.Second, fmt.Sprintf("round %d: router1 committed and not realized", i), func() (bool, error) {
					return versionsNAT(nb) == want && realized() == 0, nil
				}))
				ops := []string{fmt.Sprintf(`{"op":"update","table":"NB_Global","where":[],"row":{"hv_cfg":%d}}`, nb.nbCfg())}
				if status {
					ops = append(ops, fmt.Sprintf(`{"op":"update","table":"Logical_Router_Port","where":[["name","==","kv-rtoe-router1"]],"row":{"status":["map",[["hosting-chassis","gw1-%d"]]]}}`, i))
				}
				start := time.Now()
				nb.transact(ops...)
				if err := sandbox.Poll(10*time.Second, fmt.Sprintf("round %d: router1 realized", i), func() (bool, error) { return realized() == 1, nil }); err != nil {
					t.Log(err)
					missed++
					if missed == 3 {
						break
					}
					continue
				}
				worst = max(worst, time.Since(start))
			}
			t.Logf("OVN %s (Logical_Router_Port.status written: %v): %d rounds, %d realizations missed, slowest report %s", v, status, rounds, missed, worst)
			assert.Zero(t, missed, "realizations missed")
		})
	}
}
