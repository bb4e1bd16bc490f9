package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Browser access and reverse proxies (docs/ARCHITECTURE.md, section
// "Reaching the relay").

// schemeKey is the context key of the scheme a trusted proxy reported.
type schemeKey struct{}

// proxied applies X-Forwarded-Proto, X-Forwarded-Host and the last
// address of X-Forwarded-For to r (its scheme, Host and RemoteAddr) when
// Config.TrustProxy is set; otherwise the headers are ignored. Malformed
// values are ignored too.
func (s *Server) proxied(h http.Handler) http.Handler {
	if !s.cfg.TrustProxy {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := strings.ToLower(strings.TrimSpace(firstValue(r.Header.Get("X-Forwarded-Proto")))); p == "http" || p == "https" {
			r = r.WithContext(context.WithValue(r.Context(), schemeKey{}, p))
		}
		if host := strings.TrimSpace(firstValue(r.Header.Get("X-Forwarded-Host"))); validHost(host) {
			r.Host = host
		}
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			// The proxy appends the address it saw: the last one is the
			// only one it vouches for.
			all := strings.Split(strings.Join(xff, ","), ",")
			if ip := net.ParseIP(strings.TrimSpace(all[len(all)-1])); ip != nil {
				r.RemoteAddr = net.JoinHostPort(ip.String(), "0")
			}
		}
		h.ServeHTTP(w, r)
	})
}

func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return first
}

// validHost accepts host or host:port with no path, user or space.
func validHost(h string) bool {
	if h == "" || strings.ContainsAny(h, "/\\@ \t?#") {
		return false
	}
	u, err := url.Parse("http://" + h)
	return err == nil && u.Host == h
}

// scheme is "https" for a TLS connection or a trusted proxy that says so,
// "http" otherwise.
func (s *Server) scheme(r *http.Request) string {
	if p, ok := r.Context().Value(schemeKey{}).(string); ok {
		return p
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// corsMethods are the methods a page may use (the reference relay's list).
const corsMethods = "GET, POST, PUT, DELETE"

// errOriginRefused is the 403 text for a page of an origin not allowed.
const errOriginRefused = "Origin not allowed"

// originAllowed reports whether a page of origin may call the relay:
// any origin when Config.CORSOrigins is empty (or holds "*"), the
// relay's own origin, or one listed.
func (s *Server) originAllowed(r *http.Request, origin string) bool {
	if len(s.cfg.CORSOrigins) == 0 {
		return true
	}
	if strings.EqualFold(origin, s.scheme(r)+"://"+r.Host) {
		return true
	}
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// cors answers preflight requests and adds CORS headers to the answers of
// requests that carry an Origin header. A request from an origin not
// allowed gets 403 "Origin not allowed", preflight or not, so a page of
// another site can neither read nor cause anything; this covers the
// Socket.IO websocket handshake, which browsers never preflight. Requests
// without Origin (every non-browser client) are not affected.
func (s *Server) cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		if !s.originAllowed(r, origin) {
			writeErr(w, http.StatusForbidden, errOriginRefused)
			return
		}
		hdr := w.Header()
		socketIO := r.URL.Path == "/v1/updates" || strings.HasPrefix(r.URL.Path, "/v1/updates/")
		if !socketIO { // the Socket.IO server writes its own CORS headers
			if len(s.cfg.CORSOrigins) == 0 {
				hdr.Set("Access-Control-Allow-Origin", "*")
			} else {
				hdr.Set("Access-Control-Allow-Origin", origin)
				hdr.Add("Vary", "Origin")
			}
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" && !socketIO {
			hdr.Set("Access-Control-Allow-Methods", corsMethods)
			if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
				hdr.Set("Access-Control-Allow-Headers", rh)
			}
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TLSListener wraps l so that it serves TLS (HTTPS, and WSS for the
// Socket.IO endpoint) with the PEM certificate chain and key in certFile
// and keyFile, TLS 1.2 or later. It fails when the pair does not load.
func TLSListener(l net.Listener, certFile, keyFile string) (net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate %s, key %s: %w", certFile, keyFile, err)
	}
	return NewTLSListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
}

// NewTLSListener wraps l so that it serves TLS with cfg, for instance an
// ACME manager's (server/acmecert), whose GetCertificate picks the
// certificate at each handshake, so that a renewed one is served without a
// restart. Serve keeps its open-file guard under the TLS layer, as with
// TLSListener. cfg must have a certificate or GetCertificate and a
// MinVersion of TLS 1.2 or later; it is used as it is.
func NewTLSListener(l net.Listener, cfg *tls.Config) (net.Listener, error) {
	if cfg == nil || (len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil) {
		return nil, errors.New("server: TLS listener without a certificate")
	}
	if cfg.MinVersion < tls.VersionTLS12 {
		return nil, errors.New("server: TLS listener: MinVersion below TLS 1.2")
	}
	return &tlsListener{inner: l, cfg: cfg}, nil
}

// tlsListener is tls.NewListener's listener, with its inner listener
// reachable so that Serve can put the open-file guard (fdguard.go) under
// the TLS layer: net/http recognises TLS connections by their type.
type tlsListener struct {
	inner net.Listener
	cfg   *tls.Config
}

// Accept implements net.Listener: the next connection, as a server-side
// TLS connection (its handshake runs on first use).
func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.inner.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, l.cfg), nil
}

// Close implements net.Listener.
func (l *tlsListener) Close() error { return l.inner.Close() }

// Addr implements net.Listener.
func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }
