package ovn

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// ErrZoneUnnamed says a zone's NB has no NB_Global name yet.
var ErrZoneUnnamed = errors.New("the zone NB's NB_Global has no name yet (ovn-kubernetes sets it to the zone's name just after the NB starts; with another OVN give --zone-name)")

// ZoneName is the NB_Global name of the NB (a connected client of
// ConnectNB), which ovn-kubernetes sets to its zone's name (the node's
// name; in v1.3.0's multi-node zones the Node label k8s.ovn.org/zone-name)
// just after the NB starts. kubevirt-ovn never writes it: ovn-kubernetes
// v1.3.0 waits for it to be its zone.
func ZoneName(ctx context.Context, nbc client.Client) (string, error) {
	var globals []*nbmodel.NBGlobal
	if err := nbc.List(ctx, &globals); err != nil {
		return "", fmt.Errorf("reading the zone NB's NB_Global: %w", err)
	}
	if len(globals) != 1 || globals[0].Name == "" {
		return "", ErrZoneUnnamed
	}
	return globals[0].Name, nil
}
