package ovn

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// ZoneKeys is what a zone's NB says about datapath tunnel keys.
type ZoneKeys struct {
	// Foreign are the keys that rows not ours request: a Logical_Switch's
	// other_config:requested-tnl-key, a Logical_Router's
	// options:requested-tnl-key.
	Foreign []translator.ForeignKey
	// MaxTunID is NB_Global options:max_tunid, which ovn-northd sets to the
	// largest key it gives a zone's own datapaths: 16711680 under Geneve,
	// 4095 or 1023 under VXLAN; 0 when absent.
	MaxTunID int
}

// ZoneKeysSource names zone's NB as a source of foreign keys
// (translator.Input.SetForeignKeys).
func ZoneKeysSource(zone string) string { return "zone " + zone + "'s NB" }

// ReadZoneKeys reads c's NB's ZoneKeys in one transaction of selects on a
// connection of its own: our client monitors only our rows, and this read
// is made at start and on each resync, not kept up to date.
func ReadZoneKeys(ctx context.Context, c client.Client, instance string) (ZoneKeys, error) {
	cc, ok := c.(*conn)
	if !ok {
		return ZoneKeys{}, fmt.Errorf("ReadZoneKeys needs a client of package ovn, not %T", c)
	}
	addr := c.CurrentEndpoint()
	if addr == "" {
		return ZoneKeys{}, fmt.Errorf("reading the NB's tunnel keys: %w", nb.ErrNotConnected)
	}
	notOurs := []any{[]any{"external_ids", "excludes", []any{"map", [][2]string{{translator.KeyManagedBy, instance}}}}}
	type sel struct {
		table, column string
		where         []any
	}
	sels := []sel{
		{nbmodel.LogicalSwitchTable, "other_config", notOurs},
		{nbmodel.LogicalRouterTable, "options", notOurs},
		{nbmodel.NBGlobalTable, "options", nil},
	}
	ops := make([]ovsdb.Operation, len(sels))
	for i, s := range sels {
		ops[i] = ovsdb.Operation{Op: ovsdb.OperationSelect, Table: s.table}
	}
	req, err := selectRequest(ops, func(i int) []any { return sels[i].where }, func(i int) []string {
		if sels[i].table == nbmodel.NBGlobalTable {
			return []string{"options"}
		}
		return []string{"name", sels[i].column, "external_ids"}
	})
	if err != nil {
		return ZoneKeys{}, err
	}
	results, err := cc.rawTransact(ctx, addr, req)
	if err != nil {
		return ZoneKeys{}, fmt.Errorf("reading tunnel keys from NB %s: %w", addr, err)
	}
	if len(results) != len(sels) {
		return ZoneKeys{}, fmt.Errorf("reading tunnel keys from NB %s: %d results for %d selects", addr, len(results), len(sels))
	}
	var out ZoneKeys
	for i, s := range sels {
		r := results[i]
		if r.Error != "" {
			return ZoneKeys{}, fmt.Errorf("reading %s from NB %s: %s: %s", s.table, addr, r.Error, r.Details)
		}
		for _, row := range r.Rows {
			m, err := decodeStringMap(row[s.column])
			if err != nil {
				return ZoneKeys{}, fmt.Errorf("reading %s %s from NB %s: %w", s.table, s.column, addr, err)
			}
			if s.table == nbmodel.NBGlobalTable {
				out.MaxTunID, _ = strconv.Atoi(m["max_tunid"])
				continue
			}
			key, err := strconv.Atoi(m[translator.KeyTunnel])
			if err != nil || key <= 0 {
				continue // none, or one ovn-northd ignores
			}
			var name string
			_ = json.Unmarshal(row["name"], &name)
			out.Foreign = append(out.Foreign, translator.ForeignKey{Key: key, Holder: s.table + " " + name})
		}
	}
	slices.SortFunc(out.Foreign, func(a, b translator.ForeignKey) int { return a.Key - b.Key })
	return out, nil
}

// CheckGeneve refuses a zone whose ovn-northd gives datapaths fewer keys
// than kubevirt-ovn's range needs: VXLAN (max_tunid 4095, or 1023 with
// ovn-ic's VXLAN mode) would ignore the keys our switches request.
func (z ZoneKeys) CheckGeneve(zone string) error {
	if z.MaxTunID == 0 || z.MaxTunID >= translator.MaxDatapathKey {
		return nil
	}
	return fmt.Errorf("zone %s: NB_Global options:max_tunid=%d (VXLAN): kubevirt-ovn's interconnect tunnel keys need Geneve (max_tunid %d)", zone, z.MaxTunID, translator.MaxDatapathKey)
}

// decodeStringMap decodes an OVSDB map of strings, ["map", [[k, v], ...]].
func decodeStringMap(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m ovsdb.OvsMap
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m.GoMap))
	for k, v := range m.GoMap {
		ks, ok1 := k.(string)
		vs, ok2 := v.(string)
		if ok1 && ok2 {
			out[ks] = vs
		}
	}
	return out, nil
}
