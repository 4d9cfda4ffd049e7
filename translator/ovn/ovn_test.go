package ovn

import (
	"testing"

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

func TestEndpointOptions(t *testing.T) {
	_, err := Endpoint{}.options()
	assert.EqualError(t, err, "no OVSDB endpoint given")
	opts, err := Endpoint{Address: "tcp:127.0.0.1:6641, tcp:127.0.0.1:6643"}.options()
	assert.NoError(t, err)
	assert.Len(t, opts, 2, "one option per endpoint of a cluster")
	_, err = Endpoint{Address: "ssl:127.0.0.1:6641"}.options()
	assert.EqualError(t, err, "endpoint ssl:127.0.0.1:6641: ssl: needs a certificate, a key and a CA certificate")
}
