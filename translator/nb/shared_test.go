package nb_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// A root row that rows of two units refer to: DHCP_Options, owned by
// network a (its external_ids), referred to by the dhcpv4_options of a
// port of network a and of a port of network b. A DHCP_Options row is
// identified by the network named in its external_ids (its key: "a", "b"),
// not by its CIDR.

var (
	unitA = tr.Unit{Kind: tr.KindNetwork, Name: "a"}
	unitB = tr.Unit{Kind: tr.KindNetwork, Name: "b"}
)

const (
	cidrA, cidrB = "10.0.0.0/24", "10.2.0.0/24"
	keyA, keyB   = "a", "b"
)

// shared is what units a and b want: a owns the DHCP_Options of key a
// (cidrA) when aOwns, b of key b (bCIDR, else cidrB) when bOwns; each
// unit's port refers to the key in aRef/bRef ("" for none); a unit absent
// from the map has no rows (it is gone).
type shared struct {
	aOwns, bOwns bool
	aRef, bRef   string
	bCIDR        string
	gone         []tr.Unit
}

func (s shared) work() []nb.Work {
	unit := func(u tr.Unit, owns bool, cidr, ref string) nb.Work {
		w := nb.Work{Desired: nb.Desired{Unit: u}}
		if slices.Contains(s.gone, u) {
			return w
		}
		ids := tr.OwnerIDs(instance, u)
		sw := "kv-" + u.Name
		port := tr.Row{Model: &nbmodel.LogicalSwitchPort{Name: "p" + u.Name, Addresses: []string{"unknown"}, ExternalIDs: ids}, Parent: sw}
		if ref != "" {
			port.Refs = []tr.Ref{{Column: "dhcpv4_options", Key: ref}}
		}
		w.Rows = []tr.Row{{Model: &nbmodel.LogicalSwitch{Name: sw, ExternalIDs: ids}}, port}
		if owns {
			dids := tr.OwnerIDs(instance, u)
			dids[tr.KeyDHCPNetwork] = u.Name
			w.Rows = append(w.Rows, tr.Row{Model: &nbmodel.DHCPOptions{Cidr: cidr, Options: map[string]string{"lease_time": "3600"}, ExternalIDs: dids}})
		}
		return w
	}
	bCIDR := cidrB
	if s.bCIDR != "" {
		bCIDR = s.bCIDR
	}
	return []nb.Work{unit(unitA, s.aOwns, cidrA, s.aRef), unit(unitB, s.bOwns, bCIDR, s.bRef)}
}

// sharedNB serves the in-process NB and connects a client monitoring the
// registry's tables, and a raw one.
func sharedNB(t *testing.T, ep string) (ours, raw client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ours, err := ovn.ConnectNBWith(ctx, ovn.Endpoint{Address: ep}, instance, nb.Default, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(ours.Close)
	_, raw = connect(t, ep)
	return ours, raw
}

// syncShared syncs the units of work (all when units is empty) and waits
// until our cache holds what the NB holds.
func syncShared(t *testing.T, ours, raw client.Client, work []nb.Work, units ...tr.Unit) *nb.SyncResult {
	t.Helper()
	if len(units) > 0 {
		work = slices.DeleteFunc(slices.Clone(work), func(w nb.Work) bool { return !slices.Contains(units, w.Unit) })
	}
	res, err := nb.SyncWork(context.Background(), ours, work, nb.SyncOptions{Instance: instance, Registry: nb.Default})
	require.NoError(t, err)
	barrier(t, ours, raw)
	return res
}

// barrier returns once both clients' caches hold every transaction
// committed before it: the server sends each monitor its updates in commit
// order, and both monitor NB_Global, whose nb_cfg it bumps.
func barrier(t *testing.T, clients ...client.Client) {
	t.Helper()
	ctx := context.Background()
	raw := clients[len(clients)-1]
	if len(list[nbmodel.NBGlobal](t, raw)) == 0 {
		op, err := raw.Create(&nbmodel.NBGlobal{})
		require.NoError(t, err)
		_, err = nb.Commit(ctx, raw, "NB_Global", op)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(list[nbmodel.NBGlobal](t, raw)) == 1 }, 5*time.Second, 10*time.Millisecond)
	}
	g := list[nbmodel.NBGlobal](t, raw)[0]
	ops, err := raw.Where(g).Mutate(g, model.Mutation{Field: &g.NbCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1})
	require.NoError(t, err)
	ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbmodel.NBGlobalTable, Where: []ovsdb.Condition{}, Columns: []string{"nb_cfg"}})
	res, err := raw.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(res, ops)
	require.NoError(t, err)
	var want int
	switch v := res[1].Rows[0]["nb_cfg"].(type) {
	case int:
		want = v
	case float64:
		want = int(v)
	}
	require.Positive(t, want, "nb_cfg read back: %#v", res[1].Rows[0])
	for _, c := range clients {
		require.Eventually(t, func() bool {
			gs := list[nbmodel.NBGlobal](t, c)
			return len(gs) == 1 && gs[0].NbCfg >= want
		}, 5*time.Second, 10*time.Millisecond, "caches caught up")
	}
}

// dhcp is the NB's DHCP_Options rows by key: the network of ours, else (a
// row not ours) the CIDR; the lowest UUID of several.
func dhcp(t *testing.T, raw client.Client) map[string]*nbmodel.DHCPOptions {
	out := map[string]*nbmodel.DHCPOptions{}
	rows := list[nbmodel.DHCPOptions](t, raw)
	slices.SortFunc(rows, func(a, b *nbmodel.DHCPOptions) int { return strings.Compare(b.UUID, a.UUID) })
	for _, r := range rows {
		out[dhcpKey(r)] = r
	}
	return out
}

func dhcpKey(r *nbmodel.DHCPOptions) string {
	if k := r.ExternalIDs[tr.KeyDHCPNetwork]; k != "" {
		return k
	}
	return r.Cidr
}

// refOf is the key (dhcp's) of the row the port of unit u refers to, ""
// for none, "?" for a row that is not there.
func refOf(t *testing.T, raw client.Client, u tr.Unit) string {
	p := lsps(t, raw)["p"+u.Name]
	require.NotNil(t, p, "port of %s", u)
	if p.Dhcpv4Options == nil {
		return ""
	}
	for _, d := range list[nbmodel.DHCPOptions](t, raw) {
		if d.UUID == *p.Dhcpv4Options {
			return dhcpKey(d)
		}
	}
	return "?"
}

func requireSharedIdle(t *testing.T, ours, raw client.Client, s shared) {
	t.Helper()
	res := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Zero(t, res.Transactions, "nothing more to write: %v", changeLines(res))
}

func notes(res *nb.SyncResult) []string {
	var out []string
	for _, u := range res.Units {
		out = append(out, u.Notes...)
	}
	return out
}

// Created in one transaction with the rows referring to it, from either
// unit; a unit referring to a key nobody has fails alone, named, and
// writes nothing.
func TestSharedRootCreate(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	res := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Equal(t, 1, res.Transactions)
	require.Len(t, dhcp(t, raw), 1)
	assert.Equal(t, keyA, refOf(t, raw, unitA))
	assert.Equal(t, keyA, refOf(t, raw, unitB))
	assert.Contains(t, changeLines(res), "create Logical_Switch_Port pb (addresses=[\"unknown\"] dhcpv4_options=[DHCP_Options a])")
	requireSharedIdle(t, ours, raw, s)

	// b refers to a key no row has and no unit creates: b fails alone.
	s.bRef = keyB
	res = syncShared(t, ours, raw, s.work())
	failed := res.Failed()
	require.Len(t, failed, 1)
	assert.EqualError(t, failed[0], "Network b: Logical_Switch_Port pb dhcpv4_options: no DHCP_Options row of this kubevirt-ovn instance has key b, and none is created with it")
	assert.Equal(t, keyA, refOf(t, raw, unitB), "b's rows left as they were")
	assert.Zero(t, res.Transactions)
}

// Created by its owner's transaction first, then referred to by the other
// unit's: the reference resolves to the existing row.
func TestSharedRootCreateUnitByUnit(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	res := syncShared(t, ours, raw, s.work(), unitB)
	require.Len(t, res.Failed(), 1, "a's row is not there yet")
	assert.Empty(t, lsps(t, raw), "b wrote nothing")
	requireNoFailures(t, syncShared(t, ours, raw, s.work(), unitA))
	requireNoFailures(t, syncShared(t, ours, raw, s.work(), unitB))
	assert.Equal(t, keyA, refOf(t, raw, unitB))
	requireSharedIdle(t, ours, raw, s)
}

// A reference moves in place: the port is updated, not recreated, and the
// row it left stays while its owner wants it.
func TestSharedRootMoveReference(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, bOwns: true, aRef: keyA, bRef: keyA}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	before := lsps(t, raw)["pb"].UUID

	s.bRef = keyB
	res := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Equal(t, []string{"update Logical_Switch_Port pb (dhcpv4_options: [DHCP_Options a] -> [DHCP_Options b])"}, changeLines(res))
	assert.Equal(t, before, lsps(t, raw)["pb"].UUID)
	assert.Equal(t, keyB, refOf(t, raw, unitB))
	assert.Len(t, dhcp(t, raw), 2)
	requireSharedIdle(t, ours, raw, s)

	s.bRef = ""
	res = syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Equal(t, []string{"update Logical_Switch_Port pb (dhcpv4_options: [DHCP_Options b] -> [])"}, changeLines(res))
	assert.Equal(t, "", refOf(t, raw, unitB))
	requireSharedIdle(t, ours, raw, s)
}

// The referring unit goes: the row stays, its owner still wants it.
func TestSharedRootReferrerGoes(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	s.gone = []tr.Unit{unitB}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	assert.NotContains(t, lsps(t, raw), "pb")
	assert.Contains(t, dhcp(t, raw), keyA)
	assert.Equal(t, keyA, refOf(t, raw, unitA))
	requireSharedIdle(t, ours, raw, s)
}

// The owner goes while another unit's port still refers to its row, each
// unit reconciled alone as a controller does: the row stays (a note says
// who holds it) until no row of ours refers to it; the event of the
// reference going names the owner, whose next reconcile deletes it.
func TestSharedRootOwnerGoesFirst(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	dhcpRow := dhcp(t, raw)[keyA]

	s.gone, s.aOwns = []tr.Unit{unitA}, false
	res := syncShared(t, ours, raw, s.work(), unitA)
	requireNoFailures(t, res)
	assert.NotContains(t, lsps(t, raw), "pa")
	assert.Contains(t, dhcp(t, raw), keyA, "kept: b's port refers to it")
	assert.Equal(t, []string{"DHCP_Options a is kept while rows of ours refer to it (Logical_Switch_Port pb of Network b); it goes once none does"}, notes(res))
	present, err := nb.Default.PresentUnits(context.Background(), ours, instance)
	require.NoError(t, err)
	assert.Contains(t, present, unitA, "a still owns a row: its unit is present")

	// b drops its reference: the event names a, whose reconcile deletes
	// the row.
	before := lsps(t, raw)["pb"]
	s.bRef = ""
	requireNoFailures(t, syncShared(t, ours, raw, s.work(), unitB))
	after := lsps(t, raw)["pb"]
	assert.Equal(t, []tr.Unit{unitB, unitA}, nb.Default.Affected(ours, nbmodel.LogicalSwitchPortTable, before, after, instance))
	assert.Contains(t, dhcp(t, raw), keyA, "a is not reconciled yet")
	res = syncShared(t, ours, raw, s.work(), unitA)
	requireNoFailures(t, res)
	assert.Equal(t, []string{"delete DHCP_Options a"}, changeLines(res))
	assert.Empty(t, dhcp(t, raw))
	assert.NotContains(t, nb.Default.Affected(ours, nbmodel.DHCPOptionsTable, dhcpRow, nil, instance), unitB)
	requireSharedIdle(t, ours, raw, s)
}

// The owner goes and the other unit drops its reference in the same
// sync: the row goes in that sync, whichever unit is diffed first.
func TestSharedRootOwnerAndReferenceGoTogether(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	s = shared{gone: []tr.Unit{unitA}}
	res := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Equal(t, 1, res.Transactions)
	assert.Empty(t, dhcp(t, raw))
	assert.Empty(t, notes(res))
	assert.Equal(t, "", refOf(t, raw, unitB))
	requireSharedIdle(t, ours, raw, s)
}

// A second copy of the row with our owner keys (a retried transaction, a
// hand-made copy) is deleted, and a reference to the copy moves to the row
// every writer keeps (the lowest UUID), in one sync. On ovsdb-server (see
// TestSharedRootForeignReferences).
func TestSharedRootDuplicates(t *testing.T) {
	ours, raw := sharedNB(t, "unix:"+nbtest.Real(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	orig := dhcp(t, raw)[keyA]
	cp := orig.DeepCopy()
	cp.UUID = "copy"
	op, err := raw.Create(cp)
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "seed a copy", op)
	require.NoError(t, err)
	rows := list[nbmodel.DHCPOptions](t, raw)
	require.Len(t, rows, 2)
	slices.SortFunc(rows, func(a, b *nbmodel.DHCPOptions) int { return strings.Compare(a.UUID, b.UUID) })
	kept, dup := rows[0], rows[1]
	// b's port refers to the copy that goes.
	pb := &nbmodel.LogicalSwitchPort{UUID: lsps(t, raw)["pb"].UUID, Dhcpv4Options: &dup.UUID}
	ops, err := raw.Where(pb).Update(pb, &pb.Dhcpv4Options)
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "refer to the copy", ops)
	require.NoError(t, err)
	barrier(t, ours, raw)

	res := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Equal(t, 1, res.Transactions)
	left := list[nbmodel.DHCPOptions](t, raw)
	require.Len(t, left, 1)
	assert.Equal(t, kept.UUID, left[0].UUID, "the lowest UUID is kept")
	for _, p := range []string{"pa", "pb"} {
		require.NotNil(t, lsps(t, raw)[p].Dhcpv4Options)
		assert.Equal(t, kept.UUID, *lsps(t, raw)[p].Dhcpv4Options, p)
	}
	assert.Contains(t, changeLines(res), "delete DHCP_Options a (duplicate "+dup.UUID+")")
	requireSharedIdle(t, ours, raw, s)

	// A row referring to a key twice refers to it once; a column holding
	// one reference refused two keys, naming the row.
	w := s.work()
	port := &w[1].Rows[1]
	port.Refs = append(port.Refs, tr.Ref{Column: "dhcpv4_options", Key: keyA})
	res = syncShared(t, ours, raw, w)
	requireNoFailures(t, res)
	assert.Zero(t, res.Transactions)
	port.Refs = append(port.Refs, tr.Ref{Column: "dhcpv4_options", Key: keyB})
	res = syncShared(t, ours, raw, w)
	require.Len(t, res.Failed(), 1)
	assert.ErrorContains(t, res.Failed()[0], "Network b: Logical_Switch_Port pb: dhcpv4_options holds one reference, not 2 (a, b)")
}

// References another tool made by hand: to a row that is not ours, in our
// port (replaced where ours must be there, else left with a note); and
// from its own port to our row (which does not keep our row: it goes with
// its owner, and the server empties the other tool's weak reference). On
// ovsdb-server: libovsdb's in-process server does not answer a
// transaction deleting a row another row refers to weakly.
func TestSharedRootForeignReferences(t *testing.T) {
	ours, raw := sharedNB(t, "unix:"+nbtest.Real(t))
	s := shared{aOwns: true, aRef: keyA, bRef: keyA}
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	ctx := context.Background()

	foreign := &nbmodel.DHCPOptions{UUID: "foreign", Cidr: "192.168.0.0/24", ExternalIDs: map[string]string{"owner": "someone-else"}}
	op, err := raw.Create(foreign)
	require.NoError(t, err)
	res, err := raw.Transact(ctx, op...)
	require.NoError(t, err)
	foreign.UUID = res[0].UUID.GoUUID
	setRef := func(port string, uuid *string) {
		t.Helper()
		p := lsps(t, raw)[port]
		m := &nbmodel.LogicalSwitchPort{UUID: p.UUID, Dhcpv4Options: uuid}
		ops, err := raw.Where(m).Update(m, &m.Dhcpv4Options)
		require.NoError(t, err)
		_, err = nb.Commit(ctx, raw, "by hand", ops)
		require.NoError(t, err)
		barrier(t, ours, raw)
	}

	// In our port where ours must be: ours takes its place.
	setRef("pb", &foreign.UUID)
	sr := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, sr)
	assert.Equal(t, []string{"update Logical_Switch_Port pb (dhcpv4_options: [" + foreign.UUID + " (not kubevirt-ovn's)] -> [DHCP_Options a])"}, changeLines(sr))
	assert.Equal(t, keyA, refOf(t, raw, unitB))

	// In our port where we want none: left as it is, with a note.
	s.bRef = ""
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	setRef("pb", &foreign.UUID)
	sr = syncShared(t, ours, raw, s.work())
	requireNoFailures(t, sr)
	assert.Zero(t, sr.Transactions)
	assert.Equal(t, []string{"Logical_Switch_Port pb: dhcpv4_options holds 1 reference(s) to DHCP_Options rows that are not kubevirt-ovn's (" + foreign.UUID + "); left as they are"}, notes(sr))
	assert.Equal(t, "192.168.0.0/24", refOf(t, raw, unitB))

	// Another tool's port refers to our row: our row still goes with its
	// owner; the other tool's rows are never written by us.
	ls := &nbmodel.LogicalSwitch{UUID: "ls", Name: "theirs", Ports: []string{"lsp"}}
	lsp := &nbmodel.LogicalSwitchPort{UUID: "lsp", Name: "their-port", Dhcpv4Options: &dhcp(t, raw)[keyA].UUID}
	var seed []model.Model = []model.Model{lsp, ls}
	var ops2 []ovsdb.Operation
	for _, m := range seed {
		o, err := raw.Create(m)
		require.NoError(t, err)
		ops2 = append(ops2, o...)
	}
	_, err = nb.Commit(ctx, raw, "their port", ops2)
	require.NoError(t, err)
	s.gone, s.aOwns = []tr.Unit{unitA}, false
	requireNoFailures(t, syncShared(t, ours, raw, s.work()))
	assert.NotContains(t, dhcp(t, raw), keyA, "another tool's reference does not keep our row")
	assert.Contains(t, dhcp(t, raw), "192.168.0.0/24", "another tool's row is not ours to delete")
	require.Contains(t, lsps(t, raw), "their-port", "another tool's port stays")
	assert.Nil(t, lsps(t, raw)["their-port"].Dhcpv4Options, "the server emptied its weak reference")
}

// Two networks (of two routers) with one CIDR: each owns its DHCP_Options
// row, identified by its network, and each port refers to its own
// network's row, not to the other with the same CIDR.
func TestSharedRootSameCIDR(t *testing.T) {
	ours, raw := sharedNB(t, startNB(t))
	s := shared{aOwns: true, bOwns: true, aRef: keyA, bRef: keyB, bCIDR: cidrA}
	res := syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	rows := dhcp(t, raw)
	require.Len(t, rows, 2)
	assert.Equal(t, cidrA, rows[keyA].Cidr)
	assert.Equal(t, cidrA, rows[keyB].Cidr)
	assert.Equal(t, keyA, refOf(t, raw, unitA))
	assert.Equal(t, keyB, refOf(t, raw, unitB))
	assert.Contains(t, changeLines(res), "create DHCP_Options b (cidr=10.0.0.0/24 options={lease_time=\"3600\"})")
	requireSharedIdle(t, ours, raw, s)

	// a's row goes; b's, with the same CIDR, stays and keeps b's port.
	s.aOwns, s.aRef = false, ""
	res = syncShared(t, ours, raw, s.work())
	requireNoFailures(t, res)
	assert.Contains(t, changeLines(res), "delete DHCP_Options a")
	assert.Equal(t, []string{keyB}, slices.Collect(maps.Keys(dhcp(t, raw))))
	assert.Equal(t, keyB, refOf(t, raw, unitB))
	requireSharedIdle(t, ours, raw, s)
}
