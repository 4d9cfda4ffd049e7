// Package ovn connects kubevirt-ovn to the OVN databases: the Northbound,
// monitored for the rows we own with the client indexes the diff looks them
// up by, and the Southbound, read for gateway chassis.
package ovn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
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
		return nil, fmt.Errorf("endpoint %s: %w", e.Address, err)
	}
	caPEM, err := os.ReadFile(e.CA)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", e.Address, err)
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

// NBModel is the NB client model with the client indexes the diff uses:
// rows by owner name and by managed-by instance, and static MAC bindings by
// port.
func NBModel() (model.ClientDBModel, error) {
	m, err := nbmodel.FullDatabaseModel()
	if err != nil {
		return m, err
	}
	owned := []model.ClientIndex{
		{Columns: []model.ColumnKey{{Column: "external_ids", Key: translator.KeyOwner}}},
		{Columns: []model.ColumnKey{{Column: "external_ids", Key: translator.KeyManagedBy}}},
	}
	idx := map[string][]model.ClientIndex{}
	for _, t := range ownedTables {
		idx[t] = owned
	}
	idx[nbmodel.StaticMACBindingTable] = []model.ClientIndex{{Columns: []model.ColumnKey{{Column: "logical_port"}}}}
	m.SetIndexes(idx)
	return m, nil
}

// ownedTables carry our owner keys in external_ids.
var ownedTables = []string{
	nbmodel.LogicalRouterTable,
	nbmodel.LogicalRouterPortTable,
	nbmodel.LogicalSwitchTable,
	nbmodel.LogicalSwitchPortTable,
	nbmodel.NATTable,
	nbmodel.LogicalRouterStaticRouteTable,
	nbmodel.GatewayChassisTable,
}

// ConnectNB connects to the NB and starts one monitor: the rows of instance
// in the tables we write (so that a large ovn-kubernetes NB costs us
// nothing), Static_MAC_Binding (which has no external_ids) and NB_Global.
func ConnectNB(ctx context.Context, ep Endpoint, instance string, log logr.Logger) (client.Client, error) {
	dbModel, err := NBModel()
	if err != nil {
		return nil, err
	}
	c, err := connect(ctx, "NB", dbModel.Name(), dbModel, ep, log)
	if err != nil {
		return nil, err
	}
	mine := map[string]string{translator.KeyManagedBy: instance}
	cond := func(field *map[string]string) []model.Condition {
		return []model.Condition{{Field: field, Function: ovsdb.ConditionIncludes, Value: mine}}
	}
	lr, lrp, ls, lsp := &nbmodel.LogicalRouter{}, &nbmodel.LogicalRouterPort{}, &nbmodel.LogicalSwitch{}, &nbmodel.LogicalSwitchPort{}
	nat, route, gc := &nbmodel.NAT{}, &nbmodel.LogicalRouterStaticRoute{}, &nbmodel.GatewayChassis{}
	mon := c.NewMonitor(
		client.WithConditionalTable(lr, cond(&lr.ExternalIDs)),
		client.WithConditionalTable(lrp, cond(&lrp.ExternalIDs)),
		client.WithConditionalTable(ls, cond(&ls.ExternalIDs)),
		client.WithConditionalTable(lsp, cond(&lsp.ExternalIDs)),
		client.WithConditionalTable(nat, cond(&nat.ExternalIDs)),
		client.WithConditionalTable(route, cond(&route.ExternalIDs)),
		client.WithConditionalTable(gc, cond(&gc.ExternalIDs)),
		client.WithTable(&nbmodel.StaticMACBinding{}),
		client.WithTable(&nbmodel.NBGlobal{}),
	)
	if _, err := c.Monitor(ctx, mon); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring NB %s: %w", ep.Address, err)
	}
	return c, nil
}

// ConnectSB connects to the SB and monitors its Chassis table.
func ConnectSB(ctx context.Context, ep Endpoint, log logr.Logger) (client.Client, error) {
	dbModel, err := sbmodel.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	c, err := connect(ctx, "SB", dbModel.Name(), dbModel, ep, log)
	if err != nil {
		return nil, err
	}
	if _, err := c.Monitor(ctx, c.NewMonitor(client.WithTable(&sbmodel.Chassis{}))); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring SB %s: %w", ep.Address, err)
	}
	return c, nil
}

// GatewayChassis lists the SB chassis, marking those whose ovn-cms-options
// (in other_config, or external_ids for older ovn-controllers) contain
// enable-chassis-as-gw.
func GatewayChassis(ctx context.Context, sb client.Client) ([]translator.Chassis, error) {
	var rows []*sbmodel.Chassis
	if err := sb.List(ctx, &rows); err != nil {
		return nil, fmt.Errorf("listing SB chassis: %w", err)
	}
	out := make([]translator.Chassis, 0, len(rows))
	for _, r := range rows {
		out = append(out, translator.Chassis{
			Name:     r.Name,
			Hostname: r.Hostname,
			Gateway:  isGateway(r.OtherConfig["ovn-cms-options"]) || isGateway(r.ExternalIDs["ovn-cms-options"]),
		})
	}
	slices.SortFunc(out, func(a, b translator.Chassis) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func isGateway(cmsOptions string) bool {
	for _, opt := range strings.Split(cmsOptions, ",") {
		if strings.TrimSpace(opt) == "enable-chassis-as-gw" {
			return true
		}
	}
	return false
}
