package server

import (
	"net/http"
	"strings"
)

// Banner is the reference relay's answer to GET /. The reference app asks
// for it (Accept: text/plain) before it accepts a custom server URL, and
// refuses a server whose answer does not contain it.
const Banner = "Welcome to Happy Server!"

// wantsBanner says whether a GET / asks for text rather than a page: its
// Accept names text/plain and not text/html (the reference app's check);
// a browser, curl (*/*) and a client that sends no Accept get the web app
// (or, on a relay without it, the JSON 404 of an unknown route).
func wantsBanner(r *http.Request) bool {
	a := strings.ToLower(r.Header.Get("Accept"))
	return strings.Contains(a, "text/plain") && !strings.Contains(a, "text/html")
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
