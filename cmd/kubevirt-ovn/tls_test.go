package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// The Deployment passes --nb-cert/--nb-key/--nb-ca whether or not its
// optional Secret exists: with a tcp: or unix: NB, flags naming files that
// do not exist are ignored and the sync succeeds.
func TestTLSFlagsIgnoredWithoutSSL(t *testing.T) {
	sock := nbtest.Serve(t)
	proxy := nbtest.NewProxy(t, sock)
	missing := filepath.Join(t.TempDir(), "no-secret")
	examples := filepath.Join("..", "..", "deploy", "examples")
	for _, nb := range []string{"unix:" + sock, proxy.Endpoint()} {
		var out, errb bytes.Buffer
		code := run([]string{"sync", "--nb", nb,
			"--nb-cert", filepath.Join(missing, "tls.crt"), "--nb-key", filepath.Join(missing, "tls.key"), "--nb-ca", filepath.Join(missing, "ca.crt"),
			"--sb-ca", filepath.Join(missing, "sb-ca.crt"),
			"--from-file", examples, "--timeout", "30s"}, &out, &errb)
		assert.Equal(t, 0, code, "sync --nb %s with missing TLS files: %s", nb, errb.String())
	}

	for _, ep := range []string{"tcp:127.0.0.1:6641", "unix:/run/ovn/ovnnb_db.sock", "tcp:10.0.0.1:6641,tcp:10.0.0.2:6641", ""} {
		nb := ovn.Endpoint{Address: ep, Cert: filepath.Join(missing, "tls.crt"), Key: filepath.Join(missing, "tls.key"), CA: filepath.Join(missing, "ca.crt")}
		sb := ovn.Endpoint{Address: ep}
		assert.NoError(t, endpointsTLS(&nb, &sb), "%q", ep)
	}
}

// With an ssl: endpoint a TLS file that is missing or not given is an
// error naming the flag (and, for the SB, the NB flag it defaulted to) and
// the file, before anything is dialled.
func TestTLSFlagsCheckedForSSL(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	for _, c := range []struct {
		name    string
		nb, sb  ovn.Endpoint
		wantErr []string
	}{
		{"all files there", ovn.Endpoint{Address: "ssl:127.0.0.1:6641", Cert: p("tls.crt"), Key: p("tls.key"), CA: p("ca.crt")},
			ovn.Endpoint{Address: "ssl:127.0.0.1:6642"}, nil},
		{"NB cert missing", ovn.Endpoint{Address: "ssl:127.0.0.1:6641", Cert: p("gone.crt"), Key: p("tls.key"), CA: p("ca.crt")},
			ovn.Endpoint{}, []string{"--nb-cert " + p("gone.crt"), "NB endpoint ssl:127.0.0.1:6641", "no such file or directory"}},
		{"ssl: second in a cluster list", ovn.Endpoint{Address: "tcp:127.0.0.1:6641,ssl:127.0.0.1:6643", Cert: p("tls.crt"), Key: p("gone.key"), CA: p("ca.crt")},
			ovn.Endpoint{}, []string{"--nb-key " + p("gone.key")}},
		{"NB CA not given", ovn.Endpoint{Address: "ssl:127.0.0.1:6641", Cert: p("tls.crt"), Key: p("tls.key")},
			ovn.Endpoint{}, []string{"--nb-ca is not set", "ssl: needs a certificate, a key and a CA certificate"}},
		{"SB CA defaulted from a missing NB CA", ovn.Endpoint{Address: "tcp:127.0.0.1:6641", Cert: p("tls.crt"), Key: p("tls.key"), CA: p("gone-ca.crt")},
			ovn.Endpoint{Address: "ssl:127.0.0.1:6642"}, []string{"--sb-ca (default: --nb-ca) " + p("gone-ca.crt"), "SB endpoint ssl:127.0.0.1:6642"}},
		{"SB's own key missing", ovn.Endpoint{Address: "tcp:127.0.0.1:6641", Cert: p("tls.crt"), Key: p("tls.key"), CA: p("ca.crt")},
			ovn.Endpoint{Address: "ssl:127.0.0.1:6642", Key: p("sb.key")}, []string{"--sb-key " + p("sb.key") + ","}},
	} {
		err := endpointsTLS(&c.nb, &c.sb)
		if c.wantErr == nil {
			assert.NoError(t, err, c.name)
			continue
		}
		if assert.Error(t, err, c.name) {
			for _, w := range c.wantErr {
				assert.Contains(t, err.Error(), w, c.name)
			}
		}
	}

	// Through the CLI: exit 1 with the flag and the file, and no attempt to
	// connect (nothing listens on port 1).
	var out, errb bytes.Buffer
	code := run([]string{"sync", "--nb", "ssl:127.0.0.1:1", "--nb-cert", p("gone.crt"), "--nb-key", p("tls.key"), "--nb-ca", p("ca.crt"),
		"--from-file", filepath.Join("..", "..", "deploy", "examples")}, &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "kubevirt-ovn sync: --nb-cert "+p("gone.crt")+", needed by the ssl: NB endpoint ssl:127.0.0.1:1: open "+p("gone.crt")+": no such file or directory")
	assert.NotContains(t, errb.String(), "connect")
}
