package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// pki writes a throw-away CA and a certificate+key signed by it for each
// name, as OVN's PKI would (certificates naming no host), and returns the
// directory.
func pki(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(file, typ string, der []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubevirt-ovn test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	write("ca.crt", "CERTIFICATE", caDER)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	for i, name := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		write(name+".crt", "CERTIFICATE", der)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		write(name+".key", "EC PRIVATE KEY", keyDER)
	}
	return dir
}

// The NB over ssl:, as a production deployment serves it: kubevirt-ovn
// verifies the server against the CA and presents its client certificate.
func TestSyncOverSSL(t *testing.T) {
	c := startCentral(t)
	certs := pki(t, "ovnnb", "kubevirt-ovn")
	p := func(f string) string { return filepath.Join(certs, f) }
	port, err := sandbox.FreePort()
	require.NoError(t, err)
	nbctl(t, c, "set-ssl", p("ovnnb.key"), p("ovnnb.crt"), p("ca.crt"))
	nbctl(t, c, "set-connection", fmt.Sprintf("pssl:%d:127.0.0.1", port))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	require.NoError(t, sandbox.Poll(10*time.Second, "NB listening on "+addr, func() (bool, error) {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	}))
	ex := examples(t)
	nb := "ssl:" + addr

	r := kubevirtOVN(t, "sync", "--nb", nb, "--nb-cert", p("kubevirt-ovn.crt"), "--nb-key", p("kubevirt-ovn.key"), "--nb-ca", p("ca.crt"), "--from-file", ex)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, nbctl(t, c, "show"), "(kv-router1)")

	r = kubevirtOVN(t, "sync", "--nb", nb, "--from-file", ex)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "ssl: needs a certificate, a key and a CA certificate")

	// A server whose certificate another CA signed is refused.
	other := pki(t, "kubevirt-ovn")
	r = kubevirtOVN(t, "sync", "--nb", nb, "--nb-cert", filepath.Join(other, "kubevirt-ovn.crt"),
		"--nb-key", filepath.Join(other, "kubevirt-ovn.key"), "--nb-ca", filepath.Join(other, "ca.crt"),
		"--from-file", ex, "--timeout", "5s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "connecting to NB")
}
