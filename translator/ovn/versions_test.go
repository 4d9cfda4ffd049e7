package ovn

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// The client models validate against the NB and SB schema of every
// supported OVN, as libovsdb checks at connect; Static_MAC_Binding is in
// the NB model exactly when the server has it.
func TestVersionsModelsValidateOnEverySchema(t *testing.T) {
	load := func(name string) ovsdb.DatabaseSchema {
		b, err := os.ReadFile(filepath.Join("..", "..", "integration", "testdata", "schemas", name))
		require.NoError(t, err)
		var s ovsdb.DatabaseSchema
		require.NoError(t, json.Unmarshal(b, &s))
		return s
	}
	for _, v := range []string{"22.03", "22.12", "23.03", "23.09", "24.03", "24.09", "25.03", "25.09", "26.03"} {
		nbs := load("ovn-nb-" + v + ".ovsschema")
		_, pins := nbs.Tables[nbmodel.StaticMACBindingTable]
		assert.Equal(t, v != "22.03", pins, "OVN %s: Static_MAC_Binding", v)
		m, err := nbModel(nb.Default, &nbs)
		require.NoError(t, err)
		dbm, errs := model.NewDatabaseModel(nbs, m)
		assert.Empty(t, errs, "OVN %s NB", v)
		_, inModel := dbm.Types()[nbmodel.StaticMACBindingTable]
		assert.Equal(t, pins, inModel, "OVN %s: Static_MAC_Binding in the client model", v)

		sb := load("ovn-sb-" + v + ".ovsschema")
		sm, err := model.NewClientDBModel(sbmodel.Schema().Name, map[string]model.Model{sbmodel.ChassisTable: &sbmodel.Chassis{}})
		require.NoError(t, err)
		_, errs = model.NewDatabaseModel(sb, sm)
		assert.Empty(t, errs, "OVN %s SB", v)
	}
}
