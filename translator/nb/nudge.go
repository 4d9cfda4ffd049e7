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
