package ovn

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
)

func TestIsGateway(t *testing.T) {
	for opts, want := range map[string]bool{
		"enable-chassis-as-gw":                        true,
		"availability-zones=az1,enable-chassis-as-gw": true,
		"enable-chassis-as-gw , foo":                  true,
		"":                                            false,
		"enable-chassis-as-gw-not":                    false,
		"availability-zones=enable-chassis-as-gw":     false,
	} {
		assert.Equal(t, want, isGateway(opts), "%q", opts)
	}
}

func TestEndpointAddresses(t *testing.T) {
	ctx := context.Background()
	_, err := connect(ctx, "NB", "OVN_Northbound", nil, Endpoint{Address: " , "}, logr.Discard())
	assert.EqualError(t, err, "no OVSDB endpoint given")
	assert.Equal(t, []string{"tcp:127.0.0.1:6641", "tcp:127.0.0.1:6643"}, Endpoint{Address: "tcp:127.0.0.1:6641, tcp:127.0.0.1:6643"}.addresses(), "one endpoint per member of a cluster")
	_, err = connect(ctx, "NB", "OVN_Northbound", nil, Endpoint{Address: "ssl:127.0.0.1:6641"}, logr.Discard())
	assert.EqualError(t, err, "endpoint ssl:127.0.0.1:6641: ssl: needs a certificate, a key and a CA certificate")
	assert.Equal(t, DefaultTimeout, Endpoint{}.timeout())
	assert.False(t, Endpoint{Address: "tcp:127.0.0.1:6641,unix:/run/ovn/ssl:db.sock"}.UsesTLS(), "TLS flags of a tcp:/unix: endpoint are ignored")
	assert.True(t, Endpoint{Address: "tcp:127.0.0.1:6641, ssl:127.0.0.1:6643"}.UsesTLS())
}
