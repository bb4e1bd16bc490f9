//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/pebbletest"
	"github.com/happy-dev/happy/server/acmecert"
)

// TestServerDomain runs `happy server --domain relay.test` against pebble
// (a real ACME server on 127.0.0.1): the relay says where it gets its
// certificate and where it keeps it, obtains it at start, serves /health
// over TLS with it to a client that trusts only pebble's root, and its
// HTTP listener sends browsers to https on the relay's own name and port.
func TestServerDomain(t *testing.T) {
	p := pebbletest.Start(t, time.Hour)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return map[string]string{"HAPPY_HOME_DIR": dir}[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, f, serverOptions{listen: "127.0.0.1:0", httpListen: "127.0.0.1:0", dataDir: data, synchronous: "NORMAL",
			domains: []string{"relay.test"}, acmeDirectory: p.DirectoryURL, acmeEmail: "ops@relay.test", acmeHTTPClient: p.Client})
	}()
	m := waitForOutput(t, &out, &errb, regexp.MustCompile(`(?m)^certificate for relay\.test: valid until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC$`))
	until, _ := time.Parse(time.DateTime, m[1])
	if d := time.Until(until); d < 58*time.Minute || d > time.Hour {
		t.Errorf("the certificate is valid until %s, %s from now (pebble issues them for an hour)", m[1], d)
	}
	lines := regexp.MustCompile(`^happy relay listening on https://127\.0\.0\.1:(\d+) \(data (.*)\)\n` +
		`web app: https://relay\.test:(\d+)/\n` +
		`certificates: by ACME from (.*) for relay\.test \(account and certificates in (.*)\), renewed automatically\n` +
		`ACME HTTP-01 challenge and redirect to https on http://(127\.0\.0\.1:\d+)\n`).FindStringSubmatch(out.String())
	folder := filepath.Join(data, "acme", acmecert.CacheFolder("", p.DirectoryURL))
	if lines == nil || lines[1] != lines[3] || lines[2] != data || lines[4] != p.DirectoryURL || lines[5] != folder || errb.String() != "" {
		t.Fatalf("output:\n%s\nstderr %q", out.String(), errb.String())
	}
	port, httpAddr := lines[1], lines[6]

	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: p.Roots(t)},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == "relay.test:80" {
					addr = httpAddr
				} else if addr == "relay.test:"+port {
					addr = "127.0.0.1:" + port
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://relay.test:" + port + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || h.Status != "ok" || strings.Join(resp.TLS.PeerCertificates[0].DNSNames, ",") != "relay.test" {
		t.Fatalf("GET /health over TLS = %d %+v, certificate for %v", resp.StatusCode, h, resp.TLS.PeerCertificates[0].DNSNames)
	}
	resp, err = client.Get("http://relay.test/#pair")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://relay.test:"+port+"/" {
		t.Fatalf("GET http://relay.test/ = %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, d := range []string{filepath.Join(data, "acme"), folder} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", d, st.Mode().Perm(), err)
		}
	}
	if st, err := os.Stat(filepath.Join(folder, "acme_account+key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("account key: mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	client.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.close()
}
