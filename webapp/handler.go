package webapp

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
)

// Handler serves the web app's files (Files(), or any fs.FS whose root
// holds index.html) to a browser: GET and HEAD only (405 otherwise), "/"
// as index.html, each file with its content type, an ETag and caching
// (see appHandler.ServeHTTP), gzip for text when the browser accepts it,
// and on every answer a strict Content-Security-Policy whose connect-src is
// the page's own origin plus relays, base URLs such as
// "https://relay.example:8443" (their ws/wss form is added; an entry that
// is not a URL with a host is skipped). Whoever mounts it decides which
// paths reach it (happy server keeps its API routes for itself).
func Handler(files fs.FS, relays []string) http.Handler {
	return &appHandler{files: files, csp: appCSP(relays)}
}

// appHandler is Handler's http.Handler.
type appHandler struct {
	files fs.FS
	csp   string
	gz    sync.Map // "name etag" -> gzipped bytes
}

// appContentTypes maps the extensions the web app ships to their media
// types; a file with any other extension is served as application/octet-stream.
var appContentTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".ico":         "image/x-icon",
	".txt":         "text/plain; charset=utf-8",
	"":             "text/plain; charset=utf-8", // LICENSE files
}

// appCSP is the Content-Security-Policy of every app response: scripts,
// styles and images from the app's own origin only (images also as data:
// and blob: URLs, the decrypted attachments), network connections to
// the origin and to the configured relays (with their ws/wss form), the
// manifest and the service worker from the origin, no frames, no plugins,
// no base or form targets. The service worker's own script gets the same
// policy, which is the one it runs under.
func appCSP(relays []string) string {
	connect := []string{"'self'"}
	for _, r := range relays {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			continue
		}
		origin := u.Scheme + "://" + u.Host
		connect = append(connect, origin)
		switch u.Scheme {
		case "http":
			connect = append(connect, "ws://"+u.Host)
		case "https":
			connect = append(connect, "wss://"+u.Host)
		}
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
		"connect-src " + strings.Join(connect, " ") + "; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// ServeHTTP answers GET and HEAD for a path of the web app: "/" is
// index.html; a file of the app's files with its content type, an ETag (the
// first 16 bytes of its SHA-256 in hex, "-gz" added for the gzipped form,
// which text files get when the browser accepts gzip) and Cache-Control:
// no-cache, except files under lib/ (their folder names carry the library
// version), which are immutable for a year. A missing file is a plain-text
// 404; other methods get 405.
func (a *appHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", a.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	data, err := fs.ReadFile(a.files, name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ct, ok := appContentTypes[path.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	gz := acceptsGzip(r.Header.Get("Accept-Encoding")) && compressible(ct)
	if gz {
		// Each encoding is its own representation, with its own ETag.
		etag = etag[:len(etag)-1] + `-gz"`
	}
	h.Set("Content-Type", ct)
	h.Set("ETag", etag)
	if strings.HasPrefix(name, "lib/") {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Vary", "Accept-Encoding")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if gz {
		data = a.gzipped(name, etag, data)
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

// acceptsGzip reads an Accept-Encoding header: gzip listed without q=0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// compressible tells the text types worth gzipping from images.
func compressible(contentType string) bool {
	return strings.HasPrefix(contentType, "text/") || strings.Contains(contentType, "json") || strings.HasPrefix(contentType, "image/svg")
}

// gzipped returns data gzipped, computed once per file version (keyed by
// name and ETag) and kept for the life of the server: the app is a few
// dozen small files.
func (a *appHandler) gzipped(name, etag string, data []byte) []byte {
	key := name + " " + etag
	if v, ok := a.gz.Load(key); ok {
		return v.([]byte)
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(data)
	_ = zw.Close()
	v, _ := a.gz.LoadOrStore(key, b.Bytes())
	return v.([]byte)
}
