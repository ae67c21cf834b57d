package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartTLS starts a redis-server that speaks only TLS (tls-port; the plain
// port is off) and requires a client certificate. The CA, server and client
// certificates are generated for the test; the returned Server's Client uses
// TLSConfig, which trusts the CA and presents the client certificate.
func StartTLS(t testing.TB, args ...string) (*Server, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "relock test CA", true)
	srvCert, srvKey := newCert(t, ca, caKey, "127.0.0.1", false)
	cliCert, cliKey := newCert(t, ca, caKey, "relock test client", false)
	write := func(name string, block *pem.Block) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return p
	}
	caFile := write("ca.crt", &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	certFile := write("server.crt", &pem.Block{Type: "CERTIFICATE", Bytes: srvCert.Raw})
	keyFile := write("server.key", keyBlock(t, srvKey))

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cfg := &tls.Config{
		RootCAs:    pool,
		ServerName: "127.0.0.1",
		MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{
			Certificate: [][]byte{cliCert.Raw},
			PrivateKey:  cliKey,
		}},
	}
	s := &Server{t: t, bin: Binary(t, "redis-server"), dir: t.TempDir(), tls: cfg, args: append([]string{
		"--tls-cert-file", certFile,
		"--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "yes",
	}, args...)}
	return launch(t, s), cfg
}

// newCert returns a certificate signed by parent (self-signed when parent is
// nil) for cn, valid for an hour; a non-CA one also names 127.0.0.1.
func newCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	} else {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return cert, key
}

func keyBlock(t testing.TB, key *ecdsa.PrivateKey) *pem.Block {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}
