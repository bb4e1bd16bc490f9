package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

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

// isAPIPath tells the relay's own routes from the app's: /v<digit>… (the
// HTTP API and Socket.IO at /v1/updates), /socket.io, /health. The app is
// never served there, so an unknown API route stays a JSON 404.
func isAPIPath(p string) bool {
	if len(p) >= 3 && p[0] == '/' && p[1] == 'v' && p[2] >= '0' && p[2] <= '9' {
		return true
	}
	return p == "/health" || p == "/socket.io" || strings.HasPrefix(p, "/socket.io/")
}

// appCSP is the Content-Security-Policy of every app response: scripts,
// styles and images from the app's own origin only, network connections to
// the origin and to the configured relays (with their ws/wss form), no
// frames, no plugins, no base or form targets.
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
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + strings.Join(connect, " ") + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// serveApp answers GET and HEAD for a path of the web app: "/" is
// index.html; a file of Config.App with its content type, an ETag (SHA-256
// of its bytes) and Cache-Control: no-cache, except files under vendor/
// (their folder names carry the library version), which are immutable for a
// year. A missing file is a plain-text 404; other methods get 405.
func (s *Server) serveApp(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", s.csp)
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
	data, err := fs.ReadFile(s.cfg.App, name)
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
	h.Set("Content-Type", ct)
	h.Set("ETag", etag)
	if strings.HasPrefix(name, "vendor/") {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}
