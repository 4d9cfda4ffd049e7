package nbtest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb/serverdb"
	"github.com/ovn-kubernetes/libovsdb/server"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
)

// ServeSB serves an empty OVN_Southbound (and _Server) of the pinned SB
// schema from libovsdb's in-process server until the test ends, and
// returns its unix socket path: for tests that read chassis and bindings
// and need no ovn-northd (the test writes what northd or ovn-controller
// would). Like Serve, it ignores monitor conditions.
func ServeSB(t testing.TB) string {
	t.Helper()
	sbModel, err := sbmodel.FullDatabaseModel()
	require.NoError(t, err)
	srvModel, err := serverdb.FullDatabaseModel()
	require.NoError(t, err)
	log := logr.Discard()
	db := inmemory.NewDatabase(map[string]model.ClientDBModel{"OVN_Southbound": sbModel, "_Server": srvModel}, &log)
	sbDBModel, errs := model.NewDatabaseModel(sbmodel.Schema(), sbModel)
	require.Empty(t, errs)
	srvDBModel, errs := model.NewDatabaseModel(serverdb.Schema(), srvModel)
	require.Empty(t, errs)
	srv, err := server.NewOvsdbServer(db, &log, sbDBModel, srvDBModel)
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), "sb.sock")
	go func() { _ = srv.Serve("unix", sock) }()
	t.Cleanup(srv.Close)
	require.Eventually(t, srv.Ready, 5*time.Second, 10*time.Millisecond, "in-process SB did not start")
	return sock
}
