// Package ovn connects kubevirt-ovn to the OVN databases: the Northbound,
// monitored for the rows we own with the client indexes the diff looks them
// up by, and the Southbound, read for gateway chassis.
package ovn

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// Endpoint is an OVSDB endpoint and, for ssl:, its TLS material.
type Endpoint struct {
	// Address is unix:PATH, tcp:IP:PORT or ssl:IP:PORT; several may be
	// given separated by commas (a clustered database).
	Address string
	Cert    string
	Key     string
	CA      string
	// Timeout is how long one endpoint may take to accept a connection
	// and list its databases before it is passed over for the next;
	// DefaultTimeout when zero.
	Timeout time.Duration
}

// addresses are the endpoints of Address, in order.
func (e Endpoint) addresses() []string {
	var out []string
	for _, a := range strings.Split(e.Address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// UsesTLS says whether one of the endpoints of Address is ssl:, the only
// scheme whose Cert, Key and CA are read; for tcp: and unix: they are
// ignored, whatever they name.
func (e Endpoint) UsesTLS() bool {
	for _, a := range e.addresses() {
		if strings.HasPrefix(a, "ssl:") {
			return true
		}
	}
	return false
}

func (e Endpoint) timeout() time.Duration {
	if e.Timeout <= 0 {
		return DefaultTimeout
	}
	return e.Timeout
}

func (e Endpoint) tlsConfig() (*tls.Config, error) {
	if e.Cert == "" || e.Key == "" || e.CA == "" {
		return nil, fmt.Errorf("endpoint %s: ssl: needs a certificate, a key and a CA certificate", e.Address)
	}
	cert, err := tls.LoadX509KeyPair(e.Cert, e.Key)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: client certificate %s and key %s: %w", e.Address, e.Cert, e.Key, err)
	}
	caPEM, err := os.ReadFile(e.CA)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: CA certificate: %w", e.Address, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("endpoint %s: no certificate in %s", e.Address, e.CA)
	}
	// OVN's PKI certificates name no host: verify the chain only, as
	// ovn-nbctl does.
	return &tls.Config{
		Certificates:       []tls.Certificate{cert},
		RootCAs:            pool,
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, 0, len(raw))
			for _, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				certs = append(certs, c)
			}
			if len(certs) == 0 {
				return errors.New("server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		},
	}, nil
}

// NBModel is the NB client model, with every table kubevirt-ovn uses, and
// the client indexes the diff uses (nb.Registry.ClientIndexes).
func NBModel() (model.ClientDBModel, error) { return nbModel(nb.Default, nil) }

// nbModel is the NB client model: the registry's tables (its optional ones
// only when the server's schema has them; all when schema is nil) and
// NB_Global (for hv_cfg). Nothing else: libovsdb validates every table of
// the model against the server's schema.
func nbModel(reg *nb.Registry, schema *ovsdb.DatabaseSchema) (model.ClientDBModel, error) {
	tables := map[string]model.Model{nbmodel.NBGlobalTable: &nbmodel.NBGlobal{}}
	for _, t := range reg.Tables() {
		if schema != nil && t.Optional {
			if _, ok := schema.Tables[t.Name]; !ok {
				continue
			}
		}
		tables[t.Name] = t.New()
	}
	m, err := model.NewClientDBModel(nbmodel.Schema().Name, tables)
	if err != nil {
		return m, err
	}
	idx := map[string][]model.ClientIndex{}
	for _, t := range reg.Tables() {
		if _, ok := tables[t.Name]; ok {
			idx[t.Name] = reg.ClientIndexes(t)
		}
	}
	m.SetIndexes(idx)
	return m, nil
}

// monitorColumns are pointers to the fields of m (a row of t) of the
// columns a diff reads (nb.Registry.ReadColumns), for a monitor of explicit
// columns: a server newer than the models' OVN 22.03 has more columns, and
// the ones it writes (Logical_Router_Port.status on 23.09 and later) must
// not reach the cache — libovsdb fails a whole update notification on a
// modified column the model lacks.
func monitorColumns(reg *nb.Registry, t *nb.Table, m model.Model) []any {
	v := reflect.ValueOf(m).Elem()
	var out []any
	for _, col := range reg.ReadColumns(t) {
		if col == "_uuid" {
			continue
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Tag.Get("ovsdb") == col {
				out = append(out, v.Field(i).Addr().Interface())
			}
		}
	}
	return out
}

// modelColumns are pointers to every column field of m (all but _uuid).
func modelColumns(m model.Model) []any {
	v := reflect.ValueOf(m).Elem()
	var out []any
	for i := 0; i < v.NumField(); i++ {
		if col := v.Type().Field(i).Tag.Get("ovsdb"); col != "" && col != "_uuid" {
			out = append(out, v.Field(i).Addr().Interface())
		}
	}
	return out
}

// ConnectNB connects to the NB and starts one monitor: the rows of instance
// in the registry's tables with owner keys (so that a large ovn-kubernetes
// NB costs us nothing), its tables owned through another row whole when
// the server has them, and NB_Global; each with explicit columns.
func ConnectNB(ctx context.Context, ep Endpoint, instance string, log logr.Logger) (client.Client, error) {
	return ConnectNBWith(ctx, ep, instance, nb.Default, log)
}

// ConnectNBWith is ConnectNB for the tables of reg (a test's registry).
func ConnectNBWith(ctx context.Context, ep Endpoint, instance string, reg *nb.Registry, log logr.Logger) (client.Client, error) {
	c, err := dialNB(ctx, ep, reg, log)
	if err != nil {
		return nil, err
	}
	if _, err := monitorNB(ctx, c, instance, reg); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring NB %s: %w", ep.Address, err)
	}
	// The JSON-RPC codec holds the last reply it read until the next one:
	// the monitor's first, every row we own (8 MiB at 1,000 routers),
	// would stay in memory while the controller catches up. A round trip
	// replaces it; one that fails is the supervisor's to notice.
	_ = c.Echo(ctx)
	return c, nil
}

// DialNB connects to the NB without monitoring anything yet.
func DialNB(ctx context.Context, ep Endpoint, log logr.Logger) (client.Client, error) {
	return dialNB(ctx, ep, nb.Default, log)
}

func dialNB(ctx context.Context, ep Endpoint, reg *nb.Registry, log logr.Logger) (client.Client, error) {
	modelFor := func(s ovsdb.DatabaseSchema) (model.ClientDBModel, error) {
		for _, t := range reg.Tables() {
			if _, ok := s.Tables[t.Name]; !ok && t.Optional {
				log.Info("the NB has no "+t.Name+" table "+t.Missing, "schemaVersion", s.Version)
			}
		}
		return nbModel(reg, &s)
	}
	return connect(ctx, "NB", nbmodel.Schema().Name, modelFor, ep, log)
}

// MonitorNB starts ConnectNB's monitor on c.
func MonitorNB(ctx context.Context, c client.Client, instance string) (client.MonitorCookie, error) {
	return monitorNB(ctx, c, instance, nb.Default)
}

func monitorNB(ctx context.Context, c client.Client, instance string, reg *nb.Registry) (client.MonitorCookie, error) {
	mine := map[string]string{translator.KeyManagedBy: instance}
	var tables []client.MonitorOption
	for _, t := range reg.Tables() {
		if !nb.HasTable(c, t.Name) {
			continue
		}
		m := t.New()
		if !t.OwnerKeys() {
			tables = append(tables, client.WithTable(m, monitorColumns(reg, t, m)...))
			continue
		}
		ids := reflect.ValueOf(m).Elem().FieldByName("ExternalIDs").Addr().Interface()
		cond := model.Condition{Field: ids, Function: ovsdb.ConditionIncludes, Value: mine}
		tables = append(tables, client.WithConditionalTable(m, []model.Condition{cond}, monitorColumns(reg, t, m)...))
	}
	g := &nbmodel.NBGlobal{}
	tables = append(tables, client.WithTable(g, modelColumns(g)...))
	return c.Monitor(ctx, c.NewMonitor(tables...))
}

// ConnectSB connects to the SB and monitors the columns of its Chassis
// table that GatewayChassis reads and, of Port_Binding, the chassisredirect
// ports (where each gateway port is active, for ActiveGateway) and the
// remote ports (interconnect: a port of another zone, which
// BindRemotePorts binds), and the health checks' Service_Monitors
// (OfflineMembers); the client model holds only those tables.
func ConnectSB(ctx context.Context, ep Endpoint, log logr.Logger) (client.Client, error) {
	return connectSB(ctx, ep, "", false, log)
}

// ConnectWatchSB is ConnectSB for `run` in central mode: it also monitors
// the Port_Bindings of instance's ports (ovn-northd copies a port's
// external_ids to its binding), whose options say where a migrating VM's
// port was activated (Activated).
func ConnectWatchSB(ctx context.Context, ep Endpoint, instance string, log logr.Logger) (client.Client, error) {
	return connectSB(ctx, ep, instance, false, log)
}

// ConnectZoneSB is ConnectSB for a zone's SB in interconnect mode: it also
// monitors the tunnel keys ovn-northd gave our switches and ports
// (CachedSBKeys): Datapath_Binding whole (a zone's few datapaths), and the
// Port_Bindings of instance's ports (ovn-northd copies a port's
// external_ids to its binding), not the zone's every pod's.
func ConnectZoneSB(ctx context.Context, ep Endpoint, instance string, log logr.Logger) (client.Client, error) {
	return connectSB(ctx, ep, instance, true, log)
}

func connectSB(ctx context.Context, ep Endpoint, instance string, datapaths bool, log logr.Logger) (client.Client, error) {
	modelFor := func(ovsdb.DatabaseSchema) (model.ClientDBModel, error) {
		return model.NewClientDBModel(sbmodel.Schema().Name, map[string]model.Model{
			sbmodel.ChassisTable: &sbmodel.Chassis{}, sbmodel.PortBindingTable: &sbmodel.PortBinding{},
			sbmodel.DatapathBindingTable: &sbmodel.DatapathBinding{}, sbmodel.ServiceMonitorTable: &sbmodel.ServiceMonitor{},
			sbmodel.SBGlobalTable: &sbmodel.SBGlobal{}})
	}
	c, err := connect(ctx, "SB", sbmodel.Schema().Name, modelFor, ep, log)
	if err != nil {
		return nil, err
	}
	ch := &sbmodel.Chassis{}
	pb := &sbmodel.PortBinding{}
	// The conditions of a table are OR-ed: one monitor, every kind of port.
	conds := []model.Condition{
		{Field: &pb.Type, Function: ovsdb.ConditionEqual, Value: RedirectPortType},
		{Field: &pb.Type, Function: ovsdb.ConditionEqual, Value: RemotePortType},
	}
	if instance != "" {
		conds = append(conds, model.Condition{Field: &pb.ExternalIDs, Function: ovsdb.ConditionIncludes, Value: map[string]string{translator.KeyManagedBy: instance}})
	}
	global := &sbmodel.SBGlobal{}
	tables := []client.MonitorOption{
		client.WithTable(ch, &ch.Name, &ch.Hostname, &ch.OtherConfig, &ch.ExternalIDs),
		// ovn-northd's release (NorthdRelease).
		client.WithTable(global, &global.Options),
		// datapath and tunnel_key are the schema's first index of
		// Port_Binding, which libovsdb's cache tries first when a binding
		// is looked up by logical_port (the second): left out of the
		// monitor, they would be empty in every cached row and match the
		// lookup's empty ones, and Get would return any binding. The
		// tunnel key is also what CachedSBKeys reads.
		client.WithConditionalTable(pb, conds,
			&pb.LogicalPort, &pb.Type, &pb.Chassis, &pb.RequestedChassis, &pb.Datapath, &pb.TunnelKey, &pb.Options, &pb.ExternalIDs),
	}
	// A zone's health checks (OfflineMembers): a Service_Monitor per
	// member of every health-checked load balancer, few rows.
	sm := &sbmodel.ServiceMonitor{}
	tables = append(tables, client.WithTable(sm, &sm.LogicalPort, &sm.IP, &sm.Port, &sm.Protocol, &sm.Status))
	if datapaths {
		dp := &sbmodel.DatapathBinding{}
		tables = append(tables, client.WithTable(dp, &dp.TunnelKey, &dp.ExternalIDs))
	}
	if _, err := c.Monitor(ctx, c.NewMonitor(tables...)); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring SB %s: %w", ep.Address, err)
	}
	return c, nil
}

// MultiChassis says whether the OVN whose NB c is connected to binds a
// port to several chassis (options:requested-chassis a list, and the
// activation strategy): OVN 22.06 and later, whose NB schema is 6.2 or
// newer (22.03's is 6.1.0, 22.12's 7.0.0). A version that does not read
// counts as a recent one.
func MultiChassis(c client.Client) bool {
	var major, minor int
	if _, err := fmt.Sscanf(c.Schema().Version, "%d.%d", &major, &minor); err != nil {
		return true
	}
	return major > 6 || major == 6 && minor >= 2
}

// Activated are the chassis a Port_Binding's options say its port was
// activated on as an additional chassis (ovn-controller saw the VM's RARP
// there: options:additional-chassis-activated, a comma-separated list).
func Activated(pb *sbmodel.PortBinding) []string {
	v := pb.Options["additional-chassis-activated"]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// OfflineMembers are the load balancer members whose health check the
// zone of SB sb finds offline: its Service_Monitors with status offline.
// Only the zone where a member's port is bound probes it (a remote twin's
// monitor has no status), so these are the zone's own members; which of
// them are ours the planner decides (Input.SetOfflineMembers).
func OfflineMembers(ctx context.Context, sb client.Client) ([]translator.OfflineMember, error) {
	var rows []*sbmodel.ServiceMonitor
	err := sb.WhereCache(func(m *sbmodel.ServiceMonitor) bool {
		return m.Status != nil && *m.Status == sbmodel.ServiceMonitorStatusOffline
	}).List(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("listing SB Service_Monitor: %w", err)
	}
	out := make([]translator.OfflineMember, 0, len(rows))
	for _, m := range rows {
		proto := string(sbmodel.ServiceMonitorProtocolTCP)
		if m.Protocol != nil {
			proto = string(*m.Protocol)
		}
		out = append(out, translator.OfflineMember{Port: m.LogicalPort, IP: m.IP, Protocol: proto, PortNum: m.Port})
	}
	slices.SortFunc(out, func(a, b translator.OfflineMember) int {
		return cmp.Or(strings.Compare(a.Port, b.Port), strings.Compare(a.IP, b.IP), strings.Compare(a.Protocol, b.Protocol), cmp.Compare(a.PortNum, b.PortNum))
	})
	return out, nil
}

// OfflineBackends are OfflineMembers as load balancer backends,
// "ip:port" ("[ip]:port" for IPv6), as a Load_Balancer's vips list them.
func OfflineBackends(ctx context.Context, sb client.Client) (map[string]bool, error) {
	members, err := OfflineMembers(ctx, sb)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(members))
	for _, m := range members {
		out[net.JoinHostPort(m.IP, strconv.Itoa(m.PortNum))] = true
	}
	return out, nil
}

// GatewayChassis lists the SB chassis, marking those whose ovn-cms-options
// (in other_config, or external_ids for older ovn-controllers) contain
// enable-chassis-as-gw, with the physical networks of their
// ovn-bridge-mappings (same places).
func GatewayChassis(ctx context.Context, sb client.Client) ([]translator.Chassis, error) {
	var rows []*sbmodel.Chassis
	if err := sb.List(ctx, &rows); err != nil {
		return nil, fmt.Errorf("listing SB chassis: %w", err)
	}
	out := make([]translator.Chassis, 0, len(rows))
	for _, r := range rows {
		out = append(out, translator.Chassis{
			Name:       r.Name,
			Hostname:   r.Hostname,
			Gateway:    isGateway(r.OtherConfig["ovn-cms-options"]) || isGateway(r.ExternalIDs["ovn-cms-options"]),
			Physnets:   physnets(cmp.Or(r.OtherConfig["ovn-bridge-mappings"], r.ExternalIDs["ovn-bridge-mappings"])),
			MonitorAll: r.OtherConfig["ovn-monitor-all"] == "true",
		})
	}
	slices.SortFunc(out, func(a, b translator.Chassis) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// NorthdRelease is the OVN release of the ovn-northd writing SB sb (its
// SB_Global options:northd_internal_version, "25.03.0-21.1.0-72.8", up to
// the first dash), "" while none wrote it.
func NorthdRelease(sb client.Client) string {
	t := sb.Cache().Table(sbmodel.SBGlobalTable)
	if t == nil {
		return ""
	}
	for _, m := range t.Rows() {
		v, _, _ := strings.Cut(m.(*sbmodel.SBGlobal).Options["northd_internal_version"], "-")
		return v
	}
	return ""
}

// ZoneChassis lists the local chassis of zone's SB (GatewayChassis
// without the remote entries, other_config:is-remote=true, that stand for
// the chassis of other zones), each marked with zone.
func ZoneChassis(ctx context.Context, sb client.Client, zone string) ([]translator.Chassis, error) {
	all, err := GatewayChassis(ctx, sb)
	if err != nil {
		return nil, err
	}
	var remote []*sbmodel.Chassis
	if err := sb.WhereCache(func(c *sbmodel.Chassis) bool { return c.OtherConfig["is-remote"] == "true" }).List(ctx, &remote); err != nil {
		return nil, fmt.Errorf("listing SB chassis: %w", err)
	}
	out := all[:0]
	for _, c := range all {
		if !slices.ContainsFunc(remote, func(r *sbmodel.Chassis) bool { return r.Name == c.Name }) {
			c.Zone = zone
			out = append(out, c)
		}
	}
	return out, nil
}

// ActiveGateways maps each router whose gateway port is bound in the SB
// (its chassisredirect port, cr-<port>) to the chassis it is bound to now:
// where OVN has made it active, which BFD may have moved away from the
// planned primary.
func ActiveGateways(ctx context.Context, sb client.Client) (map[string]string, error) {
	var bindings []*sbmodel.PortBinding
	if err := sb.List(ctx, &bindings); err != nil {
		return nil, fmt.Errorf("listing SB port bindings: %w", err)
	}
	out := map[string]string{}
	for _, b := range bindings {
		if router, ok := RouterOfRedirectPort(b.LogicalPort); ok {
			if ch := boundChassis(ctx, sb, b); ch != "" {
				out[router] = ch
			}
		}
	}
	return out, nil
}

// ActiveGateway is the chassis router's gateway port is bound to in the SB
// now, "" when it is bound nowhere (or sb is nil).
func ActiveGateway(ctx context.Context, sb client.Client, router string) string {
	if sb == nil {
		return ""
	}
	b := &sbmodel.PortBinding{LogicalPort: "cr-" + translator.GatewayPortName(router)}
	if err := sb.Get(ctx, b); err != nil {
		return ""
	}
	return boundChassis(ctx, sb, b)
}

// boundChassis is the name of the chassis b is bound to, "" for none.
func boundChassis(ctx context.Context, sb client.Client, b *sbmodel.PortBinding) string {
	if b.Chassis == nil {
		return ""
	}
	ch := &sbmodel.Chassis{UUID: *b.Chassis}
	if err := sb.Get(ctx, ch); err != nil {
		return ""
	}
	return ch.Name
}

// RouterOfRedirectPort is the router whose gateway port's chassisredirect
// port is named port.
func RouterOfRedirectPort(port string) (string, bool) {
	lrp, ok := strings.CutPrefix(port, "cr-")
	if !ok {
		return "", false
	}
	return translator.RouterOfGatewayPort(lrp)
}

// physnets are the physical networks of ovn-bridge-mappings
// ("physnet1:br-ex,physnet2:br-vlan").
func physnets(mappings string) []string {
	var out []string
	for _, m := range strings.Split(mappings, ",") {
		if net, _, ok := strings.Cut(strings.TrimSpace(m), ":"); ok && net != "" {
			out = append(out, net)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isGateway(cmsOptions string) bool {
	for _, opt := range strings.Split(cmsOptions, ",") {
		if strings.TrimSpace(opt) == "enable-chassis-as-gw" {
			return true
		}
	}
	return false
}

// BoundPorts maps each of instance's ports that the SB binds to a
// chassis to that chassis's name (from a client of ConnectWatchSB or
// ConnectZoneSB, which monitor those bindings).
func BoundPorts(ctx context.Context, sb client.Client, instance string) (map[string]string, error) {
	var bindings []*sbmodel.PortBinding
	if err := sb.List(ctx, &bindings); err != nil {
		return nil, fmt.Errorf("listing SB port bindings: %w", err)
	}
	out := map[string]string{}
	for _, b := range bindings {
		if b.ExternalIDs[translator.KeyManagedBy] == instance {
			if ch := boundChassis(ctx, sb, b); ch != "" {
				out[b.LogicalPort] = ch
			}
		}
	}
	return out, nil
}
