package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// Abuse limits (docs/ARCHITECTURE.md, "Limits"): how long a request's
// headers and body may take, how many connections one client address may
// hold, and how often an address or an account may sign in, create
// accounts and sessions, open pairing requests and look codes up. Each
// refusal is visible (429, 408 or a closed connection with an answer) and
// counted in happy_relay_refusals_total{reason}; the configured values are
// the gauges happy_relay_limit{limit}.

// Defaults of the limits in Config.
const (
	DefaultHeaderTimeout   = 10 * time.Second // Config.HeaderTimeout
	DefaultBodyTimeout     = 30 * time.Second // Config.BodyTimeout
	DefaultMinBodyRate     = 16 << 10         // Config.MinBodyRate, bytes a second
	DefaultIdleConnTimeout = 2 * time.Minute  // Config.IdleConnTimeout
	DefaultMaxConnsPerAddr = 1024             // Config.MaxConnsPerAddr, connections
)

// Limit is a rate limit: Burst requests at once, then one more each
// Every. The zero value takes the limit's default; a negative Burst turns
// the limit off (Unlimited).
type Limit struct {
	Every time.Duration
	Burst int
}

// Unlimited is a Limit that is off.
var Unlimited = Limit{Burst: -1}

// Default rate limits (per client address, or per account where said).
var (
	// DefaultAuthRate: POST /v1/auth, per address.
	DefaultAuthRate = Limit{Every: 2 * time.Second, Burst: 30}
	// DefaultAccountRate: POST /v1/auth with a key the relay does not
	// know (a new account), per address.
	DefaultAccountRate = Limit{Every: time.Minute, Burst: 20}
	// DefaultPairingRate: POST /v1/auth/request, per address (a waiting
	// terminal polls once a second).
	DefaultPairingRate = Limit{Every: 250 * time.Millisecond, Burst: 120}
	// DefaultLookupRate: GET /v1/auth/request/lookup, per account.
	DefaultLookupRate = Limit{Every: 3 * time.Second, Burst: 20}
	// DefaultSessionRate: POST /v1/sessions, per account.
	DefaultSessionRate = Limit{Every: time.Second, Burst: 100}
)

func (l Limit) off() bool { return l.Burst < 0 }

// String is the limit for people: "30 at once, then 1 every 2s", or "off".
func (l Limit) String() string {
	if l.off() {
		return "off"
	}
	return fmt.Sprintf("%d at once, then 1 every %s", l.Burst, l.Every)
}

// ParseLimit reads "BURST/EVERY" ("30/2s": 30 at once, then one every two
// seconds) or "off".
func ParseLimit(s string) (Limit, error) {
	if s == "off" {
		return Unlimited, nil
	}
	i := strings.LastIndex(s, "/")
	if i < 0 {
		return Limit{}, fmt.Errorf("limit %q: want BURST/EVERY (e.g. 30/2s) or off", s)
	}
	b, e := s[:i], s[i+1:]
	burst, err := strconv.Atoi(b)
	if err != nil || burst < 1 {
		return Limit{}, fmt.Errorf("limit %q: burst must be a whole number of at least 1", s)
	}
	every, err := time.ParseDuration(e)
	if err != nil || every <= 0 {
		return Limit{}, fmt.Errorf("limit %q: EVERY must be a positive duration such as 2s or 1m", s)
	}
	return Limit{Every: every, Burst: burst}, nil
}

// limitDefaults fills the zero limits of c.
func (c *Config) limitDefaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&c.HeaderTimeout, DefaultHeaderTimeout)
	set(&c.BodyTimeout, DefaultBodyTimeout)
	set(&c.IdleConnTimeout, DefaultIdleConnTimeout)
	if c.MinBodyRate <= 0 {
		c.MinBodyRate = DefaultMinBodyRate
	}
	if c.MaxConnsPerAddr == 0 {
		c.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	lim := func(l *Limit, d Limit) {
		switch {
		case l.Burst == 0 && l.Every == 0:
			*l = d
		case l.Burst > 0 && l.Every <= 0:
			l.Every = d.Every
		case l.Burst == 0:
			l.Burst = d.Burst
		}
	}
	lim(&c.AuthRate, DefaultAuthRate)
	lim(&c.AccountRate, DefaultAccountRate)
	lim(&c.PairingRate, DefaultPairingRate)
	lim(&c.LookupRate, DefaultLookupRate)
	lim(&c.SessionRate, DefaultSessionRate)
}

// limitValues are the configured limits as the gauges
// happy_relay_limit{limit} show them (0: off).
func (c *Config) limitValues() map[string]float64 {
	secs := func(d time.Duration) float64 { return max(d.Seconds(), 0) }
	out := map[string]float64{
		"header_timeout_seconds":    secs(c.HeaderTimeout),
		"body_timeout_seconds":      secs(c.BodyTimeout),
		"min_body_bytes_per_second": float64(c.MinBodyRate),
		"idle_conn_timeout_seconds": secs(c.IdleConnTimeout),
		"conns_per_address":         float64(max(c.MaxConnsPerAddr, 0)),
		"challenge_window_seconds":  secs(c.ChallengeWindow),
	}
	if c.BodyTimeout < 0 {
		out["min_body_bytes_per_second"] = 0
	}
	for name, l := range map[string]Limit{"auth": c.AuthRate, "account": c.AccountRate, "pairing": c.PairingRate, "lookup": c.LookupRate, "session": c.SessionRate} {
		if l.off() {
			out[name+"_burst"], out[name+"_per_second"] = 0, 0
			continue
		}
		out[name+"_burst"], out[name+"_per_second"] = float64(l.Burst), 1/l.Every.Seconds()
	}
	return out
}

// clientKey is the client address a limit counts by: the IP of
// remoteAddr (after proxied applied a trusted X-Forwarded-For), IPv6
// addresses by their /64 (one subscriber's prefix).
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// ---- rate limits ----

// maxLimiterKeys bounds the keys one limiter remembers; past it the idle
// ones are forgotten, and when none is idle, all.
const maxLimiterKeys = 100_000

// keyedLimiter is one rate limit per key (an address or an account). A
// key whose bucket is full again is idle and forgotten by sweep.
type keyedLimiter struct {
	reason string // refusal reason label
	what   string // what is limited, for the 429 text
	lim    Limit

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newKeyedLimiter(reason, what string, l Limit) *keyedLimiter {
	return &keyedLimiter{reason: reason, what: what, lim: l, m: map[string]*rate.Limiter{}}
}

// allow takes one token of key's bucket at now, or says how long until
// one is there.
func (k *keyedLimiter) allow(key string, now time.Time) (time.Duration, bool) {
	if k.lim.off() {
		return 0, true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.m[key]
	if l == nil {
		if len(k.m) >= maxLimiterKeys {
			k.sweepLocked(now)
			if len(k.m) >= maxLimiterKeys {
				clear(k.m)
			}
		}
		l = rate.NewLimiter(rate.Every(k.lim.Every), k.lim.Burst)
		k.m[key] = l
	}
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// sweep forgets the keys whose bucket is full again.
func (k *keyedLimiter) sweep(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweepLocked(now)
}

func (k *keyedLimiter) sweepLocked(now time.Time) {
	for key, l := range k.m {
		if l.TokensAt(now) >= float64(k.lim.Burst) {
			delete(k.m, key)
		}
	}
}

// limiters are the relay's rate limits.
type limiters struct {
	auth, account, pairing, lookup, session *keyedLimiter
}

func newLimiters(c Config) *limiters {
	return &limiters{
		auth:    newKeyedLimiter("rate_auth", "sign-ins from this address", c.AuthRate),
		account: newKeyedLimiter("rate_account", "new accounts from this address", c.AccountRate),
		pairing: newKeyedLimiter("rate_pairing", "pairing requests from this address", c.PairingRate),
		lookup:  newKeyedLimiter("rate_lookup", "pairing code lookups for this account", c.LookupRate),
		session: newKeyedLimiter("rate_session", "session creations for this account", c.SessionRate),
	}
}

func (l *limiters) all() []*keyedLimiter {
	return []*keyedLimiter{l.auth, l.account, l.pairing, l.lookup, l.session}
}

// limited takes a token of k for key; when there is none it answers 429
// with Retry-After (whole seconds, at least 1) and reports false.
func (s *Server) limited(w http.ResponseWriter, k *keyedLimiter, key string) bool {
	wait, ok := k.allow(key, s.cfg.Now())
	if ok {
		return true
	}
	s.metrics.refused(k.reason)
	secs := max(int64(math.Ceil(wait.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeErr(w, http.StatusTooManyRequests, fmt.Sprintf("Too many %s (limit %s); retry in %d s", k.what, k.lim, secs))
	return false
}

// ---- request bodies ----

// errSlowBody is the 408 text for a body that came too slowly.
const errSlowBody = "Request body too slow: the relay waits %s for a body, plus 1 s per %d bytes"

// slowBodyError is a body read cut by its deadline; it wraps
// os.ErrDeadlineExceeded.
type slowBodyError struct {
	read  int64
	grace time.Duration
	rate  int64
	err   error
}

func (e *slowBodyError) Error() string {
	return fmt.Sprintf("request body too slow: %d bytes read before the deadline: %v", e.read, e.err)
}

func (e *slowBodyError) Unwrap() error { return e.err }

// bodyDeadlines bounds the time a request's body may take: its first
// BodyTimeout is free, then it must come at MinBodyRate on average (the
// deadline for the byte after n is start + BodyTimeout + n/MinBodyRate),
// so a client trickling bytes is cut off while a large upload on a slow
// link goes through. The deadline is the connection's read deadline,
// set before each read and cleared at the body's end (net/http then
// waits for the next request under IdleConnTimeout). Requests without a
// body (message streams, websocket upgrades) are left alone.
func (s *Server) bodyDeadlines(h http.Handler) http.Handler {
	if s.cfg.BodyTimeout < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		b := &deadlineBody{rc: http.NewResponseController(w), rd: r.Body, start: time.Now(), grace: s.cfg.BodyTimeout, rate: s.cfg.MinBodyRate}
		if b.rc.SetReadDeadline(b.deadline()) != nil {
			// A writer without deadlines (a recorder, a wrapper): no bound.
			h.ServeHTTP(w, r)
			return
		}
		r.Body = b
		h.ServeHTTP(w, r)
		if b.cut {
			s.metrics.refused("slow_body")
			s.log.Debug().Str("path", r.URL.Path).Str("client", r.RemoteAddr).Int64("read", b.n).Msg("request body too slow: cut off")
		}
	})
}

// deadlineBody is a request body under bodyDeadlines.
type deadlineBody struct {
	rc    *http.ResponseController
	rd    io.ReadCloser
	start time.Time
	grace time.Duration
	rate  int64
	n     int64
	cut   bool
}

func (b *deadlineBody) deadline() time.Time {
	return b.start.Add(b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second)))
}

// Read implements io.Reader.
func (b *deadlineBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(b.deadline())
	n, err := b.rd.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		b.cut = true
		err = &slowBodyError{read: b.n, grace: b.grace, rate: b.rate, err: err}
	}
	return n, err
}

// Close implements io.Closer.
func (b *deadlineBody) Close() error { return b.rd.Close() }

// slowBodyAnswer is the 408 for a body cut off by bodyDeadlines, or nil
// for any other error.
func slowBodyAnswer(err error) *httpError {
	var se *slowBodyError
	if !errors.As(err, &se) {
		return nil
	}
	return &httpError{status: http.StatusRequestTimeout, msg: fmt.Sprintf(errSlowBody, se.grace, se.rate)}
}

// ---- connections per address ----

// addrConns counts the connections (or, behind a trusted proxy, the
// requests) of each client address.
type addrConns struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func (a *addrConns) acquire(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[key] >= a.max {
		return false
	}
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[key]++
	return true
}

func (a *addrConns) release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[key]--; a.n[key] <= 0 {
		delete(a.n, key)
	}
}

// count is the number held by key.
func (a *addrConns) count(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[key]
}

// errTooManyConns is the 429 text of the connection cap.
const errTooManyConns = "Too many connections from this address (limit %d); close some and retry"

// connRefusal is the whole answer to a connection over the cap.
func connRefusal(limit int) string {
	body := fmt.Sprintf(`{"error":%q}`, fmt.Sprintf(errTooManyConns, limit))
	return fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// capListener returns l behind a capListener, or l itself with
// TrustProxy (capRequests counts then) or without a cap.
func (s *Server) capListener(l net.Listener) net.Listener {
	if s.cfg.TrustProxy || s.cfg.MaxConnsPerAddr < 0 {
		return l
	}
	return &capListener{Listener: l, s: s}
}

// capListener refuses a connection from an address that holds
// MaxConnsPerAddr already: it is answered 429 and closed. Used when the
// relay sees its clients' own addresses (no TrustProxy).
type capListener struct {
	net.Listener
	s *Server
}

// Accept implements net.Listener.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr().String())
		if l.s.conns.acquire(key) {
			return &releasedConn{Conn: c, release: func() { l.s.conns.release(key) }}, nil
		}
		l.s.metrics.refused("connections")
		l.s.log.Debug().Str("client", key).Int("limit", l.s.cfg.MaxConnsPerAddr).Msg("connection refused: too many from this address")
		go refuseConn(c, connRefusal(l.s.cfg.MaxConnsPerAddr))
	}
}

// releasedConn runs release once when closed.
type releasedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// SyscallConn implements syscall.Conn with the wrapped connection's raw
// access (errors.ErrUnsupported when it has none): the websocket
// transport needs it (package wstransport).
func (c *releasedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite half-closes the wrapped connection (errors.ErrUnsupported
// when it cannot).
func (c *releasedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Close implements net.Conn.
func (c *releasedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// capRequests is the cap behind a trusted proxy, where every connection
// comes from the proxy: each request holds a place of its client's
// forwarded address while it runs, a websocket until its connection
// closes. Over the cap a request is answered 429.
func (s *Server) capRequests(h http.Handler) http.Handler {
	if !s.cfg.TrustProxy || s.cfg.MaxConnsPerAddr < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := clientKey(r.RemoteAddr)
		if !s.conns.acquire(key) {
			s.metrics.refused("connections")
			w.Header().Set("Retry-After", "1")
			writeErr(w, http.StatusTooManyRequests, fmt.Sprintf(errTooManyConns, s.cfg.MaxConnsPerAddr))
			return
		}
		hw := &hijackRelease{ResponseWriter: w, release: func() { s.conns.release(key) }}
		defer func() {
			if !hw.hijacked {
				hw.release()
			}
		}()
		h.ServeHTTP(hw, r)
	})
}

// hijackRelease hands its release to the connection a handler hijacks.
type hijackRelease struct {
	http.ResponseWriter
	release  func()
	hijacked bool
}

// Hijack implements http.Hijacker.
func (w *hijackRelease) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	return &releasedConn{Conn: c, release: w.release}, brw, nil
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *hijackRelease) Unwrap() http.ResponseWriter { return w.ResponseWriter }
