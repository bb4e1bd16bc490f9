package acmecert_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/pebbletest"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/acmecert"
)

const testDomain = "relay.test"

// TestObtainServeAndRenew runs a relay whose certificate comes from a real
// ACME server (pebble, on 127.0.0.1, certificates valid 30 s): the relay
// obtains one for relay.test, a client that trusts only pebble's root gets
// /health over TLS with that name, the relay renews it before it expires
// and serves the new one without a restart, the account and certificates
// are kept 0600 in a 0700 folder, and a relay started again on that folder
// serves the kept certificate without asking the CA.
func TestObtainServeAndRenew(t *testing.T) {
	p := pebbletest.Start(t, 30*time.Second)
	dir := t.TempDir()
	cache := filepath.Join(dir, "acme")
	m, err := acmecert.New(acmecert.Config{
		Domains: []string{testDomain}, DirectoryURL: p.DirectoryURL, Email: "ops@relay.test",
		CacheDir: cache, HTTPClient: p.Client,
		// Renewal starts 1 to 3.8 s after issuance: 28 s before the
		// expiry (29 s after issuance), up to 2.8 s later at random.
		RenewBefore: 28 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv, err := server.New(server.Config{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := server.NewTLSListener(l, m.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, tl) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		_ = srv.Close()
	}()

	first, err := m.Obtain(ctx)
	if err != nil {
		t.Fatalf("%v\npebble:\n%s", err, p.Log())
	}
	if strings.Join(first.DNSNames, ",") != testDomain || first.NotAfter.Sub(first.NotBefore) != 29*time.Second {
		t.Fatalf("obtained %v, valid %s to %s", first.DNSNames, first.NotBefore, first.NotAfter)
	}

	// A client trusting only pebble's root, with relay.test resolving
	// to the relay's loopback address.
	roots := p.Roots(t)
	addr := l.Addr().String()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + testDomain + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || h.Status != "ok" {
		t.Fatalf("GET /health over TLS = %d %+v", resp.StatusCode, h)
	}
	if leaf := resp.TLS.PeerCertificates[0]; !leaf.Equal(first) || len(resp.TLS.VerifiedChains) == 0 || resp.TLS.NegotiatedProtocol != "http/1.1" {
		t.Fatalf("served %v serial %x (verified chains %d, ALPN %q), want the obtained serial %x", leaf.DNSNames, leaf.SerialNumber, len(resp.TLS.VerifiedChains), resp.TLS.NegotiatedProtocol, first.SerialNumber)
	}

	// Renewal: a new certificate is served while the first one is still
	// valid.
	handshake := func() (*x509.Certificate, error) {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: testDomain, RootCAs: roots})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0], nil
	}
	var second *x509.Certificate
	if !(waitfor.Poll{Every: 50 * time.Millisecond, Within: time.Until(first.NotAfter)}).True(func() bool {
		c, err := handshake()
		if err != nil {
			t.Fatalf("handshake while renewing: %v", err)
		}
		if !c.Equal(first) {
			second = c
		}
		return second != nil
	}) {
		t.Fatalf("no renewed certificate before the first one expired at %s\npebble:\n%s", first.NotAfter, p.Log())
	}
	if strings.Join(second.DNSNames, ",") != testDomain || second.SerialNumber.Cmp(first.SerialNumber) == 0 || !second.NotBefore.Before(first.NotAfter) {
		t.Fatalf("renewed: %v serial %x valid from %s (the first, serial %x, until %s)", second.DNSNames, second.SerialNumber, second.NotBefore, first.SerialNumber, first.NotAfter)
	}

	// What is kept: the account key and the certificate, private.
	folder := m.CacheDir()
	if folder != filepath.Join(cache, acmecert.CacheFolder("", p.DirectoryURL)) {
		t.Fatalf("cache folder %s", folder)
	}
	entries, err := os.ReadDir(folder)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		st, err := os.Stat(filepath.Join(folder, e.Name()))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", e.Name(), st.Mode().Perm(), err)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "acme_account+key,"+testDomain {
		t.Errorf("cache holds %v", names)
	}
	for _, d := range []string{cache, folder} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", d, st.Mode().Perm(), err)
		}
	}

	// Started again on the same folder, the relay has its certificate
	// without a word to the CA.
	_ = m.Close()
	var asked atomic.Int32
	again, err := acmecert.New(acmecert.Config{
		Domains: []string{testDomain}, DirectoryURL: p.DirectoryURL, CacheDir: cache, RenewBefore: time.Second,
		HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			asked.Add(1)
			return nil, errors.New("the CA is away")
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	kept, err := again.Obtain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kept.DNSNames[0] != testDomain || kept.NotAfter.Before(second.NotAfter) || asked.Load() != 0 {
		t.Fatalf("after a restart: serial %x until %s (renewed one until %s), %d requests to the CA", kept.SerialNumber, kept.NotAfter, second.NotAfter, asked.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
