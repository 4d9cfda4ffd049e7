package nb

import (
	"context"
	"fmt"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// BFDMultOption is the NB_Global option NudgeBFD rewrites: OVN's BFD detect
// multiplier for the tunnels between chassis.
const BFDMultOption = "bfd-mult"

// nudgedValue is the value of NB_Global options:bfd-mult after a nudge, the
// same number written differently: none (OVS's default, 3) and "3"
// alternate, another value N alternates with "0N".
func nudgedValue(v string) string {
	switch {
	case v == "":
		return "3"
	case v == "3":
		return ""
	case strings.HasPrefix(v, "0") && len(v) > 1:
		return v[1:]
	}
	return "0" + v
}

// NudgeBFD rewrites NB_Global options:bfd-mult with the same value written
// differently. northd copies it to SB_Global; every ovn-controller that runs
// BFD rewrites its tunnels' bfd settings, which makes it recompute all its
// flows. It is the cure for an ovn-controller bug (seen in OVN 23.03): after
// a gateway port moves to another chassis, the old chassis may keep the
// port's flows (answer ARP for its addresses, SNAT) until it recomputes.
// See integration/testdata/gateway-moves.md. One nudge serves every move
// made before it.
func NudgeBFD(ctx context.Context, c client.Client) error {
	// NB_Global is read in the transaction's own select: sync has no
	// monitor. A writer between the select and the mutation at worst
	// nudges twice.
	sel := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbmodel.NBGlobalTable, Where: anyRow(), Columns: []string{"options"}}
	res, err := c.Transact(ctx, sel)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, []ovsdb.Operation{sel})
	}
	if err != nil {
		return fmt.Errorf("reading NB_Global options: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 {
		return fmt.Errorf("reading NB_Global options: %d rows", len(res[0].Rows))
	}
	cur := ""
	if m, ok := res[0].Rows[0]["options"].(ovsdb.OvsMap); ok {
		if v, ok := m.GoMap[BFDMultOption].(string); ok {
			cur = v
		}
	}
	next := nudgedValue(cur)
	var ops []ovsdb.Operation
	mutate := func(mutator ovsdb.Mutator, v string) {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: nbmodel.NBGlobalTable, Where: anyRow(),
			Mutations: []ovsdb.Mutation{{Column: "options", Mutator: mutator, Value: ovsdb.OvsMap{GoMap: map[any]any{BFDMultOption: v}}}}})
	}
	if cur != "" {
		mutate(ovsdb.MutateOperationDelete, cur)
	}
	if next != "" {
		mutate(ovsdb.MutateOperationInsert, next)
	}
	if _, err := Commit(ctx, c, "NB_Global options:"+BFDMultOption, ops); err != nil {
		return err
	}
	return nil
}

// anyRow is a condition every row meets (libovsdb drops an empty where).
func anyRow() []ovsdb.Condition {
	return []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionNotEqual, Value: ovsdb.UUID{GoUUID: "00000000-0000-0000-0000-000000000000"}}}
}

// NudgeRequestedKey makes ovn-northd read the requested tunnel key of our
// switch uuid again: it rewrites other_config:requested-tnl-key=key as
// "0<key>" (the same number to OVN, which reads it in base 10) and back, in
// two transactions, each only while the row holds the value it replaces.
// ovn-northd from 25.09 on re-reads a datapath's requested key only when
// its NB row changes (northd/en-datapath-sync.c): a key another datapath
// held and gave up is not given to the switch that requests it until then.
// The row ends as it was.
func NudgeRequestedKey(ctx context.Context, c client.Client, uuid string, key int) error {
	const opt = "requested-tnl-key"
	plain, padded := fmt.Sprint(key), "0"+fmt.Sprint(key)
	swap := func(from, to string) error {
		where := []ovsdb.Condition{
			{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: uuid}},
			{Column: "other_config", Function: ovsdb.ConditionIncludes, Value: ovsdb.OvsMap{GoMap: map[any]any{opt: from}}},
		}
		// One operation: its mutations apply in order, to the row only
		// while it holds from.
		ops := []ovsdb.Operation{{Op: ovsdb.OperationMutate, Table: nbmodel.LogicalSwitchTable, Where: where,
			Mutations: []ovsdb.Mutation{
				{Column: "other_config", Mutator: ovsdb.MutateOperationDelete, Value: ovsdb.OvsMap{GoMap: map[any]any{opt: from}}},
				{Column: "other_config", Mutator: ovsdb.MutateOperationInsert, Value: ovsdb.OvsMap{GoMap: map[any]any{opt: to}}},
			}}}
		_, err := Commit(ctx, c, "Logical_Switch "+uuid+" other_config:"+opt, ops)
		return err
	}
	if err := swap(plain, padded); err != nil {
		return err
	}
	return swap(padded, plain)
}
