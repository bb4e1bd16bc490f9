// Package pebbletest runs Let's Encrypt's ACME test server, pebble, for a
// test: on 127.0.0.1, with a TLS certificate made for the run, accepting
// every challenge without connecting back (PEBBLE_VA_ALWAYS_VALID), without
// its artificial sleeps and nonce rejections, and issuing certificates of
// a validity the test chooses. The pebble binary is named by
// HAPPY_TEST_PEBBLE (.ci/run installs it); without it the test is skipped,
// unless CI is set: then it fails, so a CI run never passes without its
// ACME tests.
package pebbletest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// EnvPath names the pebble binary.
const EnvPath = "HAPPY_TEST_PEBBLE"

// Version is the pebble release .ci/run installs
// (github.com/letsencrypt/pebble/v2/cmd/pebble@Version).
const Version = "v2.10.3"

// Pebble is a running pebble.
type Pebble struct {
	// DirectoryURL is the ACME directory (https://127.0.0.1:PORT/dir).
	DirectoryURL string
	// Management is the base URL of the management interface.
	Management string
	// Client trusts pebble's own TLS certificate: the ACME client's
	// HTTP client.
	Client *http.Client
	// Validity is the lifetime of the certificates it issues.
	Validity time.Duration

	out *lockedBuffer
}

// Start runs pebble until the test ends; its certificates are valid for
// validity (whole seconds, at least one).
func Start(t testing.TB, validity time.Duration) *Pebble {
	t.Helper()
	bin := os.Getenv(EnvPath)
	if bin == "" {
		msg := EnvPath + " is not set (GOBIN=DIR go install github.com/letsencrypt/pebble/v2/cmd/pebble@" + Version + ", then " + EnvPath + "=DIR/pebble)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " and CI is set: the ACME tests must run in CI")
		}
		t.Skip(msg + ": skipping the ACME tests")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v", EnvPath, bin, err)
	}
	secs := int64(validity / time.Second)
	if secs < 1 {
		t.Fatalf("pebbletest: validity %s is under a second", validity)
	}
	dir := t.TempDir()
	certFile, keyFile, pool := listenerCert(t, dir)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	// pebble takes addresses, not listeners: free ports are picked here,
	// and taken again when another process got one first.
	var lastErr error
	for range 5 {
		ports := freePorts(t, 4)
		cfg := map[string]any{"pebble": map[string]any{
			"listenAddress":                  "127.0.0.1:" + strconv.Itoa(ports[0]),
			"managementListenAddress":        "127.0.0.1:" + strconv.Itoa(ports[1]),
			"certificate":                    certFile,
			"privateKey":                     keyFile,
			"httpPort":                       ports[2],
			"tlsPort":                        ports[3],
			"ocspResponderURL":               "",
			"externalAccountBindingRequired": false,
			"retryAfter":                     map[string]int{"authz": 1, "order": 1},
			"keyAlgorithm":                   "ecdsa",
			"profiles":                       map[string]any{"default": map[string]any{"description": "happy tests", "validityPeriod": secs}},
		}}
		b, _ := json.Marshal(cfg)
		cfgFile := filepath.Join(dir, "pebble-config.json")
		if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out := &lockedBuffer{}
		cmd := exec.Command(bin, "-config", cfgFile)
		cmd.Env = []string{"PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start pebble: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
		}
		p := &Pebble{
			DirectoryURL: "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/dir",
			Management:   "https://127.0.0.1:" + strconv.Itoa(ports[1]),
			Client:       client, Validity: time.Duration(secs) * time.Second, out: out,
		}
		if lastErr = p.waitReady(exited); lastErr == nil {
			t.Cleanup(stop)
			return p
		}
		stop()
	}
	t.Fatalf("pebble did not start: %v", lastErr)
	return nil
}

// waitReady waits until both the directory and the management interface
// answer, pebble exits, or 30 s pass.
func (p *Pebble) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range []string{p.DirectoryURL, p.Management + "/roots/0"} {
		for {
			resp, err := p.Client.Get(u)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("GET %s: %s", u, resp.Status)
			}
			select {
			case <-exited:
				return fmt.Errorf("pebble exited: %s", p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w; pebble says: %s", err, p.out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// Roots is a pool with pebble's issuing root (management /roots/0): what a
// client of a relay whose certificate pebble issued trusts.
func (p *Pebble) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Management+"/roots/0", nil)
	resp, err := p.Client.Do(req)
	if err != nil {
		t.Fatalf("pebble roots: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pebble roots: %s %v", resp.Status, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble roots: no certificate in %q", b)
	}
	return pool
}

// Log is what pebble printed so far.
func (p *Pebble) Log() string { return p.out.String() }

// listenerCert makes a CA and, signed by it, the certificate of pebble's
// listeners (127.0.0.1 and localhost), written to dir; the pool trusts the
// CA.
func listenerCert(t testing.TB, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebbletest listener CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "pebble"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "listener.pem"), filepath.Join(dir, "listener.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return certFile, keyFile, pool
}

// freePorts returns n ports of 127.0.0.1 that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			t.Fatalf("pebbletest: listener address %q is not TCP", l.Addr())
		}
		ports = append(ports, addr.Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// lockedBuffer is a bytes.Buffer for a child's output, read while written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
