package server_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

func TestAppServing(t *testing.T) {
	app := fstest.MapFS{
		"index.html":                {Data: []byte("<!doctype html><p>app</p>")},
		"js/main.js":                {Data: []byte("export {}")},
		"app.css":                   {Data: []byte("body{}")},
		"lib/lib-1.0.0/lib.min.js":  {Data: []byte("!function(){}()")},
		"lib/lib-1.0.0/LICENSE":     {Data: []byte("MIT")},
		"lib/lib-1.0.0/unknown.bin": {Data: []byte{1, 2}},
	}
	r := servertest.StartConfig(t, server.Config{App: app, AppConnectSrc: []string{"https://relay.example:8443", "::bad"}})
	const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
		"connect-src 'self' https://relay.example:8443 wss://relay.example:8443; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	tests := []struct {
		method, path string
		status       int
		ctype, cache string
		body         string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", "no-cache", "<!doctype html><p>app</p>"},
		{"GET", "/index.html", 200, "text/html; charset=utf-8", "no-cache", "<!doctype html><p>app</p>"},
		{"GET", "/js/main.js", 200, "text/javascript; charset=utf-8", "no-cache", "export {}"},
		{"GET", "/app.css", 200, "text/css; charset=utf-8", "no-cache", "body{}"},
		{"GET", "/lib/lib-1.0.0/lib.min.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", "!function(){}()"},
		{"GET", "/lib/lib-1.0.0/LICENSE", 200, "text/plain; charset=utf-8", "public, max-age=31536000, immutable", "MIT"},
		{"GET", "/lib/lib-1.0.0/unknown.bin", 200, "application/octet-stream", "public, max-age=31536000, immutable", "\x01\x02"},
		{"HEAD", "/app.css", 200, "text/css; charset=utf-8", "no-cache", ""},
		{"GET", "/missing.js", 404, "text/plain; charset=utf-8", "", "not found\n"},
		{"GET", "/../index.html", 200, "text/html; charset=utf-8", "no-cache", "<!doctype html><p>app</p>"},
		{"POST", "/index.html", 405, "text/plain; charset=utf-8", "", "method not allowed\n"},
		// The relay's routes are never the app's.
		{"GET", "/v1/nothing", 404, "application/json; charset=utf-8", "", `{"error":"Route GET /v1/nothing not found"}`},
		{"GET", "/v9/x", 404, "application/json; charset=utf-8", "", `{"error":"Route GET /v9/x not found"}`},
		{"GET", "/socket.io/", 404, "application/json; charset=utf-8", "", `{"error":"Route GET /socket.io/ not found"}`},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, r.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if got := resp.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if strings.TrimSpace(string(body)) != strings.TrimSpace(tc.body) {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			if strings.HasPrefix(tc.path, "/v") || strings.HasPrefix(tc.path, "/socket.io") {
				return
			}
			if got := resp.Header.Get("Content-Security-Policy"); got != csp {
				t.Errorf("CSP %q\nwant %q", got, csp)
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
		})
	}

	// A known ETag revalidates to 304 without a body.
	resp, err := http.Get(r.URL + "/app.css")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	// (The client asked for gzip, as Go's transport does by itself.)
	if !regexp.MustCompile(`^"[0-9a-f]{32}-gz"$`).MatchString(etag) {
		t.Fatalf("ETag %q, want 32 hex digits and -gz, quoted", etag)
	}
	req, _ := http.NewRequest("GET", r.URL+"/app.css", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: status %d, want 304", resp.StatusCode)
	}
}

func TestAppGzip(t *testing.T) {
	body := strings.Repeat("export const x = 1;\n", 200)
	r := servertest.StartConfig(t, server.Config{App: fstest.MapFS{"js/a.js": {Data: []byte(body)}, "i.png": {Data: []byte("PNG")}}})
	tests := []struct {
		path, accept string
		gzipped      bool
	}{
		{"/js/a.js", "gzip, deflate, br", true},
		{"/js/a.js", "br;q=1, gzip;q=0.5", true},
		{"/js/a.js", "gzip;q=0", false},
		{"/js/a.js", "", false},
		{"/i.png", "gzip", false},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest("GET", r.URL+tc.path, nil)
		req.Header.Set("Accept-Encoding", tc.accept) // set by hand: the transport then does not decode
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tc.gzipped {
			t.Errorf("%s with %q: gzipped %v, want %v", tc.path, tc.accept, got, tc.gzipped)
			continue
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s: Vary %q", tc.path, resp.Header.Get("Vary"))
		}
		if !tc.gzipped {
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		if string(plain) != body || len(raw) >= len(body) {
			t.Errorf("%s: gunzipped %d bytes from %d (want the %d-byte file, smaller)", tc.path, len(plain), len(raw), len(body))
		}
	}
}

func TestNoAppIsJSON404(t *testing.T) {
	r := servertest.Start(t)
	resp, err := http.Get(r.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 404 || strings.TrimSpace(string(body)) != `{"error":"Route GET / not found"}` {
		t.Errorf("got %d %s, want the JSON 404", resp.StatusCode, body)
	}
}

// FuzzAppPath serves any path and method: the app handler answers 200, 304,
// 404 or 405 (the relay's routes keep their own answers) and never panics.
func FuzzAppPath(f *testing.F) {
	for _, s := range []string{"/", "/index.html", "/../../etc/passwd", "/js/%2e%2e/x", "//x", "/lib/", "/v1", "/v1x", "/socket.iox", "/%00", "/a?b#c"} {
		f.Add("GET", s)
	}
	f.Add("HEAD", "/")
	f.Add("DELETE", "/app.css")
	r := servertest.StartConfig(f, server.Config{App: fstest.MapFS{"index.html": {Data: []byte("i")}, "app.css": {Data: []byte("c")}}})
	f.Fuzz(func(t *testing.T, method, path string) {
		if method != "GET" && method != "HEAD" && method != "POST" && method != "DELETE" {
			method = "GET"
		}
		req, err := http.NewRequest(method, r.URL+"/", nil)
		if err != nil {
			t.Skip()
		}
		req.URL.Path, req.URL.RawPath = path, ""
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t") {
			t.Skip()
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Skip() // the client refused to send it
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case 200, 301, 304, 400, 404, 405:
		default:
			t.Fatalf("%s %q: status %d", method, path, resp.StatusCode)
		}
	})
}

// TestReferenceAppServerCheck: before the reference app accepts a custom
// server URL it fetches it with Accept: text/plain and wants the reference
// relay's banner in the answer. A browser still gets the web app at "/",
// and a relay without the app answers the banner to that request too (any
// other GET / stays the JSON 404 of TestNoAppIsJSON404).
func TestReferenceAppServerCheck(t *testing.T) {
	withApp := servertest.StartConfig(t, server.Config{App: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><p>app</p>")}}})
	noApp := servertest.Start(t)
	const banner = "Welcome to Happy Server!"
	for _, tc := range []struct {
		base, method, path, accept string
		ctype, body                string
	}{
		{withApp.URL, "GET", "/", "text/plain", "text/plain; charset=utf-8", banner},
		{withApp.URL, "GET", "", "text/plain;q=0.9, */*;q=0.1", "text/plain; charset=utf-8", banner},
		{withApp.URL, "HEAD", "/", "text/plain", "text/plain; charset=utf-8", ""},
		{withApp.URL, "GET", "/", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html; charset=utf-8", "<!doctype html><p>app</p>"},
		{withApp.URL, "GET", "/", "*/*", "text/html; charset=utf-8", "<!doctype html><p>app</p>"},
		{withApp.URL, "GET", "/", "", "text/html; charset=utf-8", "<!doctype html><p>app</p>"},
		{withApp.URL, "GET", "/index.html", "text/plain", "text/html; charset=utf-8", "<!doctype html><p>app</p>"},
		{noApp.URL, "GET", "/", "text/plain", "text/plain; charset=utf-8", banner},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || string(body) != tc.body {
			t.Errorf("%s %s%s (Accept %q) = %d %q %q, want 200 %q %q", tc.method, tc.base, tc.path, tc.accept, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.ctype, tc.body)
		}
	}
}
