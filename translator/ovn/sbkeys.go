package ovn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// Reading the tunnel keys a zone's SB gave our switches and ports
// (translator.CheckTunnelKeys compares them with what we requested).
// Datapath_Binding is small in a zone (a node's switches and routers): it
// is read whole. Port_Binding holds every pod's binding in an
// ovn-kubernetes zone: only ours are read, by logical_port (an index of
// the table) in a one-shot sync, and through the zone SB's monitor of
// the bindings whose external_ids (ovn-northd copies a switch port's
// external_ids to its binding) carry our managed-by.

// WaitNorthd waits until ovn-northd has processed everything committed to
// nbc so far: it increments NB_Global.nb_cfg, as ovn-nbctl --wait=sb
// does, and polls NB_Global.sb_cfg (which northd sets once the SB holds
// what that nb_cfg asked for) until it reaches it or ctx ends.
func WaitNorthd(ctx context.Context, nbc client.Client) error {
	// A mutate needs a where clause, which libovsdb leaves out when empty:
	// every row (NB_Global has one) has a _uuid other than the nil one.
	all := []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionNotEqual, Value: ovsdb.UUID{GoUUID: "00000000-0000-0000-0000-000000000000"}}}
	bump := ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbmodel.NBGlobalTable, Where: all,
		Mutations: []ovsdb.Mutation{{Column: "nb_cfg", Mutator: ovsdb.MutateOperationAdd, Value: 1}}}
	if _, err := nb.Commit(ctx, nbc, "NB_Global nb_cfg (waiting for ovn-northd)", []ovsdb.Operation{bump}); err != nil {
		return err
	}
	// At least our increment: another writer's may be counted too.
	want, err := nbGlobalInt(ctx, nbc, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbmodel.NBGlobalTable, Where: all, Columns: []string{"nb_cfg"}})
	if err != nil {
		return err
	}
	read := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbmodel.NBGlobalTable, Where: all, Columns: []string{"sb_cfg"}}
	last := -1
	for {
		got, err := nbGlobalInt(ctx, nbc, read)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		last = got
		select {
		case <-ctx.Done():
			return fmt.Errorf("ovn-northd has not processed nb_cfg %d (NB_Global.sb_cfg is %d): %w", want, last, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// nbGlobalInt runs select, a select of one integer column of NB_Global,
// and returns its value.
func nbGlobalInt(ctx context.Context, nbc client.Client, sel ovsdb.Operation) (int, error) {
	results, err := nbc.Transact(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("reading NB_Global %s: %w", sel.Columns[0], err)
	}
	if len(results) != 1 || results[0].Error != "" || len(results[0].Rows) != 1 {
		return 0, fmt.Errorf("reading NB_Global %s: unexpected result %+v", sel.Columns[0], results)
	}
	v, ok := results[0].Rows[0][sel.Columns[0]].(float64)
	if !ok {
		return 0, fmt.Errorf("reading NB_Global %s: not an integer: %v", sel.Columns[0], results[0].Rows[0][sel.Columns[0]])
	}
	return int(v), nil
}

// OwnedSwitchUUIDs reads the NB _uuid of each switch instance owns, by
// name (a one-shot sync's NB cache does not have the rows it created).
func OwnedSwitchUUIDs(ctx context.Context, nbc client.Client, instance string) (map[string]string, error) {
	sel := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbmodel.LogicalSwitchTable,
		Where:   []ovsdb.Condition{{Column: "external_ids", Function: ovsdb.ConditionIncludes, Value: ovsdb.OvsMap{GoMap: map[any]any{translator.KeyManagedBy: instance}}}},
		Columns: []string{"_uuid", "name"}}
	results, err := nbc.Transact(ctx, sel)
	if err == nil && (len(results) != 1 || results[0].Error != "") {
		err = fmt.Errorf("unexpected result %+v", results)
	}
	if err != nil {
		return nil, fmt.Errorf("reading our switches from the NB: %w", err)
	}
	out := map[string]string{}
	for _, row := range results[0].Rows {
		name, _ := row["name"].(string)
		if uuid, ok := row["_uuid"].(ovsdb.UUID); ok {
			out[name] = uuid.GoUUID
		}
	}
	return out, nil
}

// ReadSBKeys reads, in one SB transaction, every Datapath_Binding's key
// and the keys of the Port_Bindings of ports (a port without a binding is
// left out).
func ReadSBKeys(ctx context.Context, sb client.Client, ports []string) (translator.SBKeys, error) {
	ops := []ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: sbmodel.DatapathBindingTable, Where: []ovsdb.Condition{},
		Columns: []string{"external_ids", "tunnel_key"}}}
	for _, p := range ports {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: sbmodel.PortBindingTable,
			Where:   []ovsdb.Condition{{Column: "logical_port", Function: ovsdb.ConditionEqual, Value: p}},
			Columns: []string{"logical_port", "tunnel_key"}})
	}
	out := translator.SBKeys{Ports: map[string]int{}}
	results, err := transactSB(ctx, sb, ops)
	if err == nil && len(results) < len(ops) {
		err = fmt.Errorf("%d results for %d selects", len(results), len(ops))
	}
	if err != nil {
		return out, fmt.Errorf("reading tunnel keys from the SB: %w", err)
	}
	for i, r := range results[:len(ops)] {
		if r.Error != "" {
			return out, fmt.Errorf("reading tunnel keys from the SB: %s: %s", r.Error, r.Details)
		}
		for _, row := range r.Rows {
			key, _ := row["tunnel_key"].(float64)
			if i == 0 {
				out.Datapaths = append(out.Datapaths, translator.SBDatapathOf(stringMap(row["external_ids"]), int(key)))
				continue
			}
			if name, ok := row["logical_port"].(string); ok {
				out.Ports[name] = int(key)
			}
		}
	}
	return out, nil
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(ovsdb.OvsMap); ok {
		for k, v := range m.GoMap {
			ks, _ := k.(string)
			vs, _ := v.(string)
			out[ks] = vs
		}
	}
	return out
}

// CachedSBKeys is ReadSBKeys from sb's cache (ConnectZoneSB's monitor).
func CachedSBKeys(ctx context.Context, sb client.Client, ports []string) (translator.SBKeys, error) {
	out := translator.SBKeys{Ports: map[string]int{}}
	var dps []*sbmodel.DatapathBinding
	if err := sb.List(ctx, &dps); err != nil {
		return out, fmt.Errorf("listing SB datapath bindings: %w", err)
	}
	for _, dp := range dps {
		out.Datapaths = append(out.Datapaths, translator.SBDatapathOf(dp.ExternalIDs, dp.TunnelKey))
	}
	for _, p := range ports {
		pb := &sbmodel.PortBinding{LogicalPort: p}
		if err := sb.Get(ctx, pb); errors.Is(err, client.ErrNotFound) {
			continue
		} else if err != nil {
			return out, fmt.Errorf("reading the SB Port_Binding of %s: %w", p, err)
		}
		out.Ports[p] = pb.TunnelKey
	}
	return out, nil
}

// SwitchOfDatapath is the NB UUID of the switch an SB Datapath_Binding
// (by its SB _uuid) binds, from sb's cache; "" when unknown.
func SwitchOfDatapath(ctx context.Context, sb client.Client, datapath string) string {
	dp := &sbmodel.DatapathBinding{UUID: datapath}
	if err := sb.Get(ctx, dp); err != nil {
		return ""
	}
	return dp.ExternalIDs["logical-switch"]
}
