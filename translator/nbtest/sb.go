package nbtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
)

// ServeSB serves an OVN_Southbound (and _Server) of the pinned SB schema
// from libovsdb's in-process server until the test ends, holding chassis
// (each given a geneve Encap), and returns its unix socket path: for tests
// that read chassis and bindings and need no ovn-northd (the test writes
// what northd or ovn-controller would). Like Serve, it ignores monitor
// conditions.
func ServeSB(t testing.TB, chassis ...*sbmodel.Chassis) string {
	t.Helper()
	sbModel, err := sbmodel.FullDatabaseModel()
	require.NoError(t, err)
	sock := serveInProcess(t, "sb", sbModel, sbmodel.Schema())
	if len(chassis) > 0 {
		addChassis(t, sbModel, sock, chassis)
	}
	return sock
}

// addChassis inserts chassis, each with an Encap of its own, into the SB
// at sock.
func addChassis(t testing.TB, dbModel model.ClientDBModel, sock string, chassis []*sbmodel.Chassis) {
	t.Helper()
	var rows []model.Model
	for i, ch := range chassis {
		encap := &sbmodel.Encap{UUID: fmt.Sprintf("encap%d", i), Type: "geneve", IP: fmt.Sprintf("192.0.2.%d", i+1), ChassisName: ch.Name}
		row := *ch
		row.Encaps = []string{encap.UUID}
		rows = append(rows, encap, &row)
	}
	insertSB(t, dbModel, sock, "inserting the SB chassis", rows...)
}

// SetNorthdRelease writes the SB_Global row at sock as ovn-northd of OVN
// version (a northd_internal_version, "25.03.0-21.1.0-72.8") does.
func SetNorthdRelease(t testing.TB, sock, version string) {
	t.Helper()
	sbModel, err := sbmodel.FullDatabaseModel()
	require.NoError(t, err)
	insertSB(t, sbModel, sock, "inserting SB_Global", &sbmodel.SBGlobal{Options: map[string]string{"northd_internal_version": version}})
}

// insertSB inserts rows into the SB at sock in one transaction.
func insertSB(t testing.TB, dbModel model.ClientDBModel, sock, what string, rows ...model.Model) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.NewOVSDBClient(dbModel, client.WithEndpoint("unix:"+sock))
	require.NoError(t, err)
	require.NoError(t, c.Connect(ctx))
	defer c.Close()
	var ops []ovsdb.Operation
	for _, m := range rows {
		op, err := c.Create(m)
		require.NoError(t, err)
		ops = append(ops, op...)
	}
	res, err := c.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(res, ops)
	require.NoError(t, err, what)
}
