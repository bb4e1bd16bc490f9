// Package acmecert gives the relay a certificate of its own: it obtains one
// by ACME (RFC 8555; Let's Encrypt by default) for the relay's host names,
// keeps it, with the ACME account key, in a folder of the relay's data, and
// renews it before it expires. It is a thin layer over
// golang.org/x/crypto/acme/autocert, which does the protocol, the
// challenges (TLS-ALPN-01 on the TLS listener, HTTP-01 on port 80) and the
// renewal timers; this package adds what the relay needs around it: one
// cache per ACME directory, a certificate for a client that sends no server
// name, a redirect to https that names only the relay's own host, a first
// certificate asked for at start (so a misconfiguration shows at once), and
// a Close that stops all talk with the CA.
package acmecert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// LetsEncrypt is the ACME directory used when Config.DirectoryURL is empty:
// Let's Encrypt's production directory.
const LetsEncrypt = autocert.DefaultACMEDirectory

// ErrClosed is what every request to the CA gets after Manager.Close.
var ErrClosed = errors.New("acmecert: closed")

// Config says what to obtain and from where.
type Config struct {
	// Domains are the host names of the certificate (at least one; each
	// checked by CheckDomain). The first is the one used for a client
	// that sends no server name, and by Obtain.
	Domains []string
	// DirectoryURL is the CA's ACME directory (an https URL); empty means
	// LetsEncrypt.
	DirectoryURL string
	// Email is the contact address given to the CA when the account is
	// registered (the CA writes there about expiring or revoked
	// certificates); empty registers none.
	Email string
	// CacheDir is the folder under which the account key and the
	// certificates are kept, in one subfolder per directory URL (so a
	// certificate of a staging CA is never served after a switch to the
	// production one). It and the subfolder are made with mode 0700 (and
	// set to it if they exist); files are written 0600.
	CacheDir string
	// RenewBefore is how long before its expiry a certificate is renewed;
	// 0 is autocert's default: a third of its lifetime, at most 30 days
	// (30 days for a 90-day Let's Encrypt certificate). The renewal comes
	// up to a tenth of it (at most an hour) later, at random, so that
	// relays do not renew in step.
	RenewBefore time.Duration
	// HTTPClient talks to the CA; nil uses http.DefaultTransport (the
	// system's roots, which SSL_CERT_FILE can point at a private CA's).
	HTTPClient *http.Client
	// Logger receives a line for every certificate stored (obtained or
	// renewed) and every failed attempt Obtain sees.
	Logger zerolog.Logger
}

// Source is the part of autocert.Manager the relay uses: certificates for
// TLS handshakes (including TLS-ALPN-01 challenge answers) and the HTTP-01
// challenge handler. *autocert.Manager implements it.
type Source interface {
	// GetCertificate is tls.Config.GetCertificate.
	GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
	// HTTPHandler answers HTTP-01 challenges and passes every other
	// request to fallback.
	HTTPHandler(fallback http.Handler) http.Handler
}

// Manager obtains, serves and renews the relay's certificate.
type Manager struct {
	src       Source
	domains   []string
	directory string
	cacheDir  string
	transport *closingTransport // nil with a fake Source
}

// CheckDomain refuses a name the relay cannot get a certificate for by
// ACME: empty, an IP address, a name with a port, scheme, path or a
// wildcard, a name without a dot (the CA needs a name of the public DNS),
// a label that is not letters, digits and inner hyphens, or one longer than
// DNS allows.
func CheckDomain(name string) error {
	switch {
	case name == "":
		return errors.New("empty host name")
	case net.ParseIP(strings.Trim(name, "[]")) != nil:
		return fmt.Errorf("%q is an IP address: ACME certificates are for host names (point a DNS name at this machine)", name)
	case strings.ContainsAny(name, ":/@?#*"):
		return fmt.Errorf("%q: want a bare host name such as relay.example.com (no scheme, port, path or wildcard)", name)
	case !strings.Contains(strings.Trim(name, "."), "."):
		return fmt.Errorf("%q has no dot: the CA issues certificates for names in the public DNS, such as relay.example.com", name)
	case len(name) > 253:
		return fmt.Errorf("%q is longer than 253 characters", name)
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q: %q is not a DNS label", name, label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("%q: %q is not a DNS label (letters, digits and hyphens; write an international name in its xn-- form)", name, label)
			}
		}
	}
	return nil
}

// CheckDirectory refuses a directory URL that is not an absolute https
// URL: the account key and every certificate order cross it.
func CheckDirectory(dir string) error {
	u, err := url.Parse(dir)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q: want the CA's ACME directory as an https URL, such as %s", dir, LetsEncrypt)
	}
	return nil
}

// CacheFolder is the subfolder of cacheDir that holds the account and
// certificates of the ACME directory dir: its host and path with every
// character other than letters, digits, dots and hyphens made a hyphen,
// for instance acme-v02.api.letsencrypt.org-directory.
func CacheFolder(cacheDir, dir string) string {
	u, err := url.Parse(dir)
	name := dir
	if err == nil {
		name = u.Host + u.Path
	}
	b := []byte(strings.Trim(name, "/"))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	return filepath.Join(cacheDir, string(b))
}

// New checks cfg and makes the cache folders; nothing is asked of the CA
// until a certificate is needed (a TLS handshake, or Obtain).
func New(cfg Config) (*Manager, error) {
	if len(cfg.Domains) == 0 {
		return nil, errors.New("acmecert: no host name to obtain a certificate for")
	}
	domains := make([]string, len(cfg.Domains))
	for i, d := range cfg.Domains {
		if err := CheckDomain(d); err != nil {
			return nil, fmt.Errorf("acmecert: %w", err)
		}
		domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	dir := cfg.DirectoryURL
	if dir == "" {
		dir = LetsEncrypt
	}
	if err := CheckDirectory(dir); err != nil {
		return nil, fmt.Errorf("acmecert: %w", err)
	}
	if cfg.CacheDir == "" {
		return nil, errors.New("acmecert: no cache folder")
	}
	folder := CacheFolder(cfg.CacheDir, dir)
	for _, d := range []string{cfg.CacheDir, folder} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("acmecert: make the certificate cache %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("acmecert: certificate cache %s: %w", d, err)
		}
	}
	base := http.DefaultTransport
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	}
	ct := &closingTransport{base: base}
	hc := &http.Client{Transport: ct}
	if cfg.HTTPClient != nil {
		hc.Timeout = cfg.HTTPClient.Timeout
	}
	am := &autocert.Manager{
		Prompt:      autocert.AcceptTOS,
		Cache:       loggingCache{DirCache: autocert.DirCache(folder), log: cfg.Logger},
		HostPolicy:  autocert.HostWhitelist(domains...),
		RenewBefore: cfg.RenewBefore,
		Email:       cfg.Email,
		Client:      &acme.Client{DirectoryURL: dir, HTTPClient: hc, UserAgent: "happy-relay"},
	}
	return &Manager{src: am, domains: domains, directory: dir, cacheDir: folder, transport: ct}, nil
}

// Domains are the manager's host names, lower case, the first first.
func (m *Manager) Domains() []string { return append([]string(nil), m.domains...) }

// Directory is the ACME directory URL in use.
func (m *Manager) Directory() string { return m.directory }

// CacheDir is the folder holding this directory's account and
// certificates.
func (m *Manager) CacheDir() string { return m.cacheDir }

// GetCertificate is tls.Config.GetCertificate: the certificate for the
// handshake's server name (obtained first when there is none yet; a name
// that is not one of the manager's is refused, which fails the handshake).
// A client that sends no server name (one that dialled an IP address) gets
// the first domain's.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName == "" {
		h := *hello
		h.ServerName = m.domains[0]
		hello = &h
	}
	return m.src.GetCertificate(hello)
}

// TLSConfig is the relay's TLS configuration: certificates from the
// manager, TLS 1.2 or later, ALPN http/1.1 and acme-tls/1 (the TLS-ALPN-01
// challenge, answered on this listener).
func (m *Manager) TLSConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: m.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1", acme.ALPNProto},
	}
}

// HTTPHandler is what the relay serves on port 80: answers to HTTP-01
// challenges, a redirect (302) of every other GET or HEAD to the same path
// and query over https, and 400 with a JSON error naming the https URL for
// any other method. The redirect goes to the request's host only when it
// is one of the manager's names (else to the first), with httpsPort
// unless that is "443" or empty: it never sends a browser to a host the
// request chose.
func (m *Manager) HTTPHandler(httpsPort string) http.Handler {
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := m.domains[0]
		if h := strings.ToLower(strings.TrimSuffix(stripPort(r.Host), ".")); h != "" {
			for _, d := range m.domains {
				if d == h {
					host = d
				}
			}
		}
		if httpsPort != "" && httpsPort != "443" {
			host = net.JoinHostPort(host, httpsPort)
		}
		target := "https://" + host + r.URL.RequestURI()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "this relay answers only over https: use https://" + host + "/"})
			return
		}
		http.Redirect(w, r, target, http.StatusFound)
	})
	challenges := m.src.HTTPHandler(redirect)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// autocert checks the Host header against the names without a
		// port; a CA connects to port 80 and sends none, a test or a
		// port-forward may.
		if h := stripPort(r.Host); h != r.Host {
			r = r.Clone(r.Context())
			r.Host = h
		}
		challenges.ServeHTTP(w, r)
	})
}

func stripPort(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// Obtain returns the certificate of the first domain, from the cache or,
// when there is none (or it expired), from the CA, which can take a
// minute. The renewal timer starts with it. It returns ctx's error when
// ctx ends first (the request to the CA then goes on in the background
// until it ends or Close).
func (m *Manager) Obtain(ctx context.Context) (*x509.Certificate, error) {
	type result struct {
		cert *tls.Certificate
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// An ECDSA-capable client: the certificate relays hand out by
		// default (autocert gets an RSA one only for a client that
		// cannot do ECDSA).
		c, err := m.GetCertificate(&tls.ClientHelloInfo{
			ServerName:        m.domains[0],
			CipherSuites:      []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
			SignatureSchemes:  []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
			SupportedCurves:   []tls.CurveID{tls.CurveP256},
			SupportedVersions: []uint16{tls.VersionTLS13, tls.VersionTLS12},
		})
		done <- result{c, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("acmecert: certificate for %s from %s: %w", m.domains[0], m.directory, r.err)
		}
		if r.cert.Leaf != nil {
			return r.cert.Leaf, nil
		}
		if len(r.cert.Certificate) == 0 {
			return nil, fmt.Errorf("acmecert: certificate for %s: empty chain", m.domains[0])
		}
		leaf, err := x509.ParseCertificate(r.cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("acmecert: certificate for %s: %w", m.domains[0], err)
		}
		return leaf, nil
	}
}

// Close stops every exchange with the CA: requests in flight and later
// ones (a renewal timer that fires) fail with ErrClosed, and idle
// connections to the CA are closed. Certificates already obtained are
// still served. It is safe to call more than once.
func (m *Manager) Close() error {
	if m.transport != nil {
		m.transport.closed.Store(true)
		if ci, ok := m.transport.base.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	}
	return nil
}

// closingTransport passes requests to base until closed.
type closingTransport struct {
	base   http.RoundTripper
	closed atomic.Bool
}

func (t *closingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.closed.Load() {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, ErrClosed
	}
	return t.base.RoundTrip(r)
}

// loggingCache is a DirCache that logs every certificate it stores.
type loggingCache struct {
	autocert.DirCache
	log zerolog.Logger
}

// Put implements autocert.Cache.
func (c loggingCache) Put(ctx context.Context, key string, data []byte) error {
	err := c.DirCache.Put(ctx, key, data)
	if strings.HasSuffix(key, "+key") || strings.HasSuffix(key, "+token") || strings.HasSuffix(key, "+http-01") {
		return err
	}
	if err != nil {
		c.log.Error().Err(err).Str("name", key).Msg("acme: certificate not stored")
		return err
	}
	ev := c.log.Info().Str("name", key)
	if leaf := leafOf(data); leaf != nil {
		ev = ev.Time("notAfter", leaf.NotAfter).Str("serial", leaf.SerialNumber.Text(16))
	}
	ev.Msg("acme: certificate stored")
	return nil
}

// leafOf is the first certificate of a cache entry (the key's PEM block,
// then the chain's), or nil.
func leafOf(data []byte) *x509.Certificate {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil
			}
			return c
		}
	}
}
