package acmecert

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: a closed
// manager's renewal has nobody to talk to.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckDomain(t *testing.T) {
	for _, tc := range []struct{ name, err string }{
		{"relay.example.com", ""},
		{"Relay.Example.COM.", ""},
		{"xn--bcher-kva.example", ""},
		{"", "empty host name"},
		{"192.0.2.7", `"192.0.2.7" is an IP address: ACME certificates are for host names (point a DNS name at this machine)`},
		{"[2001:db8::1]", `"[2001:db8::1]" is an IP address: ACME certificates are for host names (point a DNS name at this machine)`},
		{"https://relay.example.com", `"https://relay.example.com": want a bare host name such as relay.example.com (no scheme, port, path or wildcard)`},
		{"relay.example.com:443", `"relay.example.com:443": want a bare host name such as relay.example.com (no scheme, port, path or wildcard)`},
		{"*.example.com", `"*.example.com": want a bare host name such as relay.example.com (no scheme, port, path or wildcard)`},
		{"localhost", `"localhost" has no dot: the CA issues certificates for names in the public DNS, such as relay.example.com`},
		{"relay..example", `"relay..example": "" is not a DNS label`},
		{"-relay.example", `"-relay.example": "-relay" is not a DNS label`},
		{"relay_1.example", `"relay_1.example": "relay_1" is not a DNS label (letters, digits and hyphens; write an international name in its xn-- form)`},
		{"bücher.example", `"bücher.example": "bücher" is not a DNS label (letters, digits and hyphens; write an international name in its xn-- form)`},
		{strings.Repeat("a", 64) + ".example", `"` + strings.Repeat("a", 64) + `.example": "` + strings.Repeat("a", 64) + `" is not a DNS label`},
	} {
		err := CheckDomain(tc.name)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err {
			t.Errorf("CheckDomain(%q) = %q, want %q", tc.name, got, tc.err)
		}
	}
}

func TestCacheFolder(t *testing.T) {
	for dir, want := range map[string]string{
		LetsEncrypt: "/d/acme-v02.api.letsencrypt.org-directory",
		"https://acme-staging-v02.api.letsencrypt.org/directory": "/d/acme-staging-v02.api.letsencrypt.org-directory",
		"https://127.0.0.1:14000/dir":                            "/d/127.0.0.1-14000-dir",
		"https://ca.internal/acme/acme/directory":                "/d/ca.internal-acme-acme-directory",
	} {
		if got := CacheFolder("/d", dir); got != want {
			t.Errorf("CacheFolder(%q) = %q, want %q", dir, got, want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		cfg Config
		err string
	}{
		{Config{CacheDir: dir}, "acmecert: no host name to obtain a certificate for"},
		{Config{Domains: []string{"relay.example.com", "10.0.0.1"}, CacheDir: dir}, `acmecert: "10.0.0.1" is an IP address: ACME certificates are for host names (point a DNS name at this machine)`},
		{Config{Domains: []string{"relay.example.com"}, DirectoryURL: "http://ca.example/dir", CacheDir: dir}, `acmecert: "http://ca.example/dir": want the CA's ACME directory as an https URL, such as https://acme-v02.api.letsencrypt.org/directory`},
		{Config{Domains: []string{"relay.example.com"}}, "acmecert: no cache folder"},
	} {
		if _, err := New(tc.cfg); err == nil || err.Error() != tc.err {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.err)
		}
	}
}

// The cache folders are the relay's secrets (the account key, the
// certificates' keys): 0700, also when they existed with looser modes.
func TestNewMakesPrivateCacheFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acme")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Domains: []string{"Relay.Example.com."}, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.CacheDir() != filepath.Join(dir, "acme-v02.api.letsencrypt.org-directory") || m.Directory() != LetsEncrypt || strings.Join(m.Domains(), ",") != "relay.example.com" {
		t.Fatalf("manager: cache %s, directory %s, domains %v", m.CacheDir(), m.Directory(), m.Domains())
	}
	for _, d := range []string{dir, m.CacheDir()} {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", d, st.Mode().Perm(), err)
		}
	}
}

func TestHTTPHandler(t *testing.T) {
	m, err := New(Config{Domains: []string{"relay.example.com", "happy.example.org"}, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tc := range []struct {
		port, method, host, target string
		code                       int
		location, body             string
	}{
		{"8443", "GET", "relay.example.com", "/v1/sessions?x=1", 302, "https://relay.example.com:8443/v1/sessions?x=1", ""},
		{"8443", "HEAD", "HAPPY.example.org:80", "/", 302, "https://happy.example.org:8443/", ""},
		{"443", "GET", "relay.example.com", "/?next=%2F", 302, "https://relay.example.com/?next=%2F", ""},
		{"", "GET", "relay.example.com:80", "/a", 302, "https://relay.example.com/a", ""},
		// A host the request chose is never where the browser is sent.
		{"443", "GET", "evil.example", "/x", 302, "https://relay.example.com/x", ""},
		{"443", "POST", "relay.example.com", "/v1/auth", 400, "", `{"error":"this relay answers only over https: use https://relay.example.com/"}` + "\n"},
		{"8443", "PUT", "evil.example", "/v1/auth", 400, "", `{"error":"this relay answers only over https: use https://relay.example.com:8443/"}` + "\n"},
		// Challenges: no token is waiting; another host is refused.
		{"443", "GET", "relay.example.com:80", "/.well-known/acme-challenge/abc", 404, "", "acme/autocert: certificate cache miss\n"},
		{"443", "GET", "evil.example", "/.well-known/acme-challenge/abc", 403, "", "acme/autocert: host \"evil.example\" not configured in HostWhitelist\n"},
	} {
		r := httptest.NewRequest(tc.method, "http://x"+tc.target, nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		m.HTTPHandler(tc.port).ServeHTTP(w, r)
		body := w.Body.String()
		if tc.code == 302 {
			body = ""
		}
		if w.Code != tc.code || w.Header().Get("Location") != tc.location || body != tc.body {
			t.Errorf("%s http://%s%s (https port %q) = %d %q %q, want %d %q %q", tc.method, tc.host, tc.target, tc.port, w.Code, w.Header().Get("Location"), body, tc.code, tc.location, tc.body)
		}
	}
}

// fakeSource records the server names it is asked for.
type fakeSource struct{ names []string }

func (f *fakeSource) GetCertificate(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.names = append(f.names, h.ServerName)
	return nil, errors.New("fake")
}

func (f *fakeSource) HTTPHandler(fallback http.Handler) http.Handler { return fallback }

// A client that dialled an IP address sends no server name: it gets the
// first name's certificate, not a failed handshake.
func TestGetCertificateWithoutServerName(t *testing.T) {
	src := &fakeSource{}
	m := &Manager{src: src, domains: []string{"relay.example.com", "b.example"}}
	_, _ = m.GetCertificate(&tls.ClientHelloInfo{})
	_, _ = m.GetCertificate(&tls.ClientHelloInfo{ServerName: "b.example"})
	if strings.Join(src.names, ",") != "relay.example.com,b.example" {
		t.Fatalf("asked for %v", src.names)
	}
	cfg := m.TLSConfig()
	if cfg.MinVersion != tls.VersionTLS12 || strings.Join(cfg.NextProtos, ",") != "http/1.1,acme-tls/1" {
		t.Fatalf("TLS config: min %x, ALPN %v", cfg.MinVersion, cfg.NextProtos)
	}
}

// After Close nothing reaches the CA: Obtain fails with ErrClosed before
// any connection is made.
func TestCloseStopsTalkingToTheCA(t *testing.T) {
	var hits atomic.Int32
	ca := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer ca.Close()
	m, err := New(Config{Domains: []string{"relay.example.com"}, DirectoryURL: ca.URL + "/dir", CacheDir: t.TempDir(), HTTPClient: ca.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	_, err = m.Obtain(t.Context())
	if !errors.Is(err, ErrClosed) || !strings.HasPrefix(err.Error(), "acmecert: certificate for relay.example.com from "+ca.URL+"/dir: ") {
		t.Fatalf("Obtain after Close = %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the CA got %d requests after Close", n)
	}
}
