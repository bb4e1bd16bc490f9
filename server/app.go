package server

import "strings"

// isAPIPath tells the relay's own routes from the app's: /v<digit>… (the
// HTTP API and Socket.IO at /v1/updates), /socket.io, /health. The app is
// never served there, so an unknown API route stays a JSON 404.
func isAPIPath(p string) bool {
	if len(p) >= 3 && p[0] == '/' && p[1] == 'v' && p[2] >= '0' && p[2] <= '9' {
		return true
	}
	return p == "/health" || p == "/socket.io" || strings.HasPrefix(p, "/socket.io/")
}
