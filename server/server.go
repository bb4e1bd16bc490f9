// Package server is `happy server`: a relay implementing the reference relay
// contract (HTTP JSON routes plus Socket.IO v4 at /v1/updates), storing only
// the clients' opaque ciphertext.
//
// Shapes, error texts and rules follow the reference relay (happy-server) as
// described in the relay contract: token auth (compact JWS, EdDSA), sessions
// (get-or-create by tag), machines, v3 message batches with per-session seqs
// and localId idempotency, compare-and-set on versioned values over
// Socket.IO, presence with an idle window, and RPC forwarding between an
// account's own sockets. Where the reference stays silent (no ack for an
// unknown session, a dropped oversized packet, a skewed client clock) this
// server answers explicitly instead; each case is documented on its handler.
//
// Storage is behind store.Store; New opens the embedded SQLite backend under
// Config.DataDir, or the PostgreSQL database of Config.Database, unless
// Config.Store is given.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/zishang520/socket.io/servers/socket/v3"

	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/relayid"
	"github.com/happy-dev/happy/server/bus"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/backend"
	"github.com/happy-dev/happy/server/token"
	"github.com/happy-dev/happy/server/wstransport"
	"github.com/happy-dev/happy/webapp"
)

// Defaults of Config (the reference relay's values where it has one).
const (
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultSweepInterval    = time.Minute
	DefaultClockTolerance   = 10 * time.Minute
	DefaultRPCCallTimeout   = 30 * time.Second
	DefaultRPCGrace         = 15 * time.Second
	DefaultMaxBodyBytes     = 8 << 20
	DefaultMaxAttachment    = 10 << 20
	DefaultMaxSocketPayload = 1_000_000
	DefaultSocketHardLimit  = 16 << 20
	DefaultMaxSocketBacklog = 16 << 20
	DefaultPingInterval     = 15 * time.Second
	DefaultPingTimeout      = 45 * time.Second
	DefaultStoppedTTL       = time.Minute
	DefaultActiveWindow     = 15 * time.Minute
	DefaultDrainTimeout     = 10 * time.Second
	// PresenceWriteThreshold is how far a keep-alive must move the last
	// activity time before it is written to the store.
	PresenceWriteThreshold = 30 * time.Second
)

// DefaultFanoutShare is Config.FanoutShare's default: while other
// accounts post, an account's fan-out rests nine times as long as its
// round took (BenchmarkGenFairness: another account's ingest under a
// 1,000-socket flood went from 0.79 of its speed alone at 0.25 to 0.91).
const DefaultFanoutShare = 0.1

// DefaultFanoutQueue is Config.FanoutQueue's default.
const DefaultFanoutQueue = 4

// Config configures New. Only DataDir is required; zero values take the
// defaults above.
type Config struct {
	// DataDir holds the signing secret (secret.key, 0600), the identity
	// key (identity.key, 0600: internal/relayid), the Web Push VAPID key
	// (vapid.key, 0600; webpush.go) and, with the embedded
	// store, the SQLite file (happy.db) and attachments/. It is
	// created (0700) when missing.
	DataDir string
	// Database names the store (backend.Parse): "" is the embedded SQLite
	// file in DataDir; "postgres://…" a PostgreSQL database that several
	// relays may share (attachments are kept in it).
	Database string
	// Logger receives the server's logs.
	Logger zerolog.Logger
	// Store replaces the embedded SQLite backend (the server then does not
	// close it).
	Store store.Store
	// Synchronous is SQLite's synchronous setting: "NORMAL" (default) or
	// "FULL" (ignored with PostgreSQL).
	Synchronous string
	// PublicURL is the base URL put into attachment upload/download URLs;
	// empty means the request's own scheme and Host.
	PublicURL string
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// IdleTimeout is how long a session or machine stays active without a
	// keep-alive.
	IdleTimeout time.Duration
	// SweepInterval is how often idle sessions and machines are looked for.
	SweepInterval time.Duration
	// ClockTolerance is how far a client's time may lag the server's before
	// the server uses its own time instead (B29).
	ClockTolerance time.Duration
	// StoppedTTL is how long keep-alives are ignored after a session ended or
	// was archived (lifted when the session is requested again by tag).
	StoppedTTL time.Duration
	// RPCCallTimeout bounds the wait for the callee's answer to rpc-request.
	RPCCallTimeout time.Duration
	// RPCGrace is how long rpc-call waits for a method to be registered.
	RPCGrace time.Duration

	// MaxBodyBytes limits JSON request bodies (413 beyond).
	MaxBodyBytes int64
	// MaxAttachmentBytes limits attachment uploads (413 beyond).
	MaxAttachmentBytes int64
	// MaxSocketPayload limits one Socket.IO event's payload: larger events get
	// an explicit error (ack or `event-error`) instead of being processed.
	MaxSocketPayload int64
	// SocketHardLimit is the websocket frame limit; a larger frame closes the
	// connection (it must stay well above MaxSocketPayload).
	SocketHardLimit int64
	// MaxSocketBacklog is how many bytes of updates may wait, unwritten,
	// for one socket that does not read them; beyond it the socket is
	// closed (its client reconnects and catches up over HTTP).
	MaxSocketBacklog int64
	// FanoutShare is the most of the time (0 < share <= 1) one account's
	// fan-out takes while other accounts have messages being stored
	// (docs/ARCHITECTURE.md "Fan-out"): after a round of d its worker
	// rests d×(1−share)/share before the next; 1 never rests.
	// DefaultFanoutShare when zero or negative.
	FanoutShare float64
	// FanoutQueue is how many updates may wait for an account's fan-out
	// before a request that sends more waits (4 when zero or negative): a
	// larger queue lets one poster feeding many sockets fill larger rounds
	// (more deliveries a second) at the price of a longer wait per message
	// (docs/ARCHITECTURE.md "Fan-out").
	FanoutQueue int
	// PingInterval and PingTimeout are Engine.IO's heartbeat settings.
	PingInterval time.Duration
	PingTimeout  time.Duration

	// StreamHeartbeat is how often a message stream sends a comment line
	// (DefaultStreamHeartbeat when zero).
	StreamHeartbeat time.Duration
	// StreamRetry is the reconnection delay a message stream announces with
	// `retry:` (DefaultStreamRetry when zero).
	StreamRetry time.Duration
	// PairingTTL is how long a terminal pairing request lives from its
	// creation (DefaultPairingTTL when zero): after it, the request cannot
	// be answered or looked up, its answer is never delivered, and the next
	// POST /v1/auth/request of its key starts a new request (pairing.go).
	PairingTTL time.Duration
	// PairingPlainToken makes POST /v1/auth/request hand the token of an
	// answered request out in plain (field token, beside sealedToken), once,
	// to whoever polls with the request's public key, as the reference
	// relay does: only for reference CLIs that cannot open a sealed token
	// (happy server --pairing-plain-token). Off, the token is only sent
	// sealed for the request's key (pairing.go).
	PairingPlainToken bool
	// RevocationRefresh is how long a cached token generation of an
	// account is trusted before the store is asked again
	// (DefaultRevocationRefresh when zero): how late a revocation made by
	// another relay on the same database is seen here.
	RevocationRefresh time.Duration
	// CORSOrigins are the origins (scheme://host[:port]) whose pages may
	// call the relay from a browser, on the HTTP routes and the Socket.IO
	// handshake; empty allows any origin, as the reference relay does
	// (cors.go). A page served by the relay itself is always allowed.
	CORSOrigins []string
	// TrustProxy makes the relay believe X-Forwarded-Proto,
	// X-Forwarded-Host and X-Forwarded-For (set it only behind a reverse
	// proxy that sets them; see README, "Behind a reverse proxy").
	TrustProxy bool

	// StreamWriteTimeout is how long a message stream waits for its reader
	// to take a write before it drops the connection
	// (DefaultStreamWriteTimeout when zero).
	StreamWriteTimeout time.Duration

	// App is the web app's files (webapp.Files), served at / for every GET
	// or HEAD whose path is not one of the relay's routes (/v1…, /v2…, /v3…,
	// /socket.io, /health) by webapp.Handler; nil serves no app.
	App fs.FS
	// Bus connects this relay to the other instances on the same database
	// (bus.Memory in tests); the caller closes it after Close. BusURL
	// (nats://…, postgres://…) makes New open one and Close close it. With
	// neither the relay is alone (docs/ARCHITECTURE.md, "Several relays").
	Bus    bus.Bus
	BusURL string
	// ReorderWait is how long an update from another instance waits for
	// its predecessors (DefaultReorderWait when zero).
	ReorderWait time.Duration
	// SecretFile names the token signing secret shared by relays on one
	// database (secret.go); empty: the database's, or the data folder's.
	SecretFile string
	// DrainTimeout bounds the drain when Serve's context ends: the
	// listener closes, sockets are told to reconnect (elsewhere), and
	// requests in flight get this long to finish (DefaultDrainTimeout when
	// zero).
	DrainTimeout time.Duration
	// MaxOpenFiles is the open-file limit the relay keeps headroom under:
	// a connection accepted with fewer than a few descriptors to spare is
	// answered 503 and closed at once (fdguard.go). Zero is the process's
	// soft RLIMIT_NOFILE; where that is unknown, no check is made.
	MaxOpenFiles int

	// AppConnectSrc lists further relay base URLs ("https://relay.example")
	// the app may connect to, added to its Content-Security-Policy
	// connect-src next to the app's own origin.
	AppConnectSrc []string

	// Limits (docs/ARCHITECTURE.md, "Limits"; limits.go). HeaderTimeout
	// bounds the reading of a request's headers (DefaultHeaderTimeout
	// when zero). A request body gets BodyTimeout, then must keep coming
	// at MinBodyRate bytes a second on average, else it is cut off with
	// 408 (DefaultBodyTimeout, DefaultMinBodyRate when zero; a negative
	// BodyTimeout: no bound). IdleConnTimeout is how long a keep-alive
	// connection waits for its next request (DefaultIdleConnTimeout).
	// Message streams and websockets carry no body and are not bounded
	// by these.
	HeaderTimeout   time.Duration
	BodyTimeout     time.Duration
	MinBodyRate     int64
	IdleConnTimeout time.Duration
	// MaxConnsPerAddr is how many connections one client address (an
	// IPv4 address, an IPv6 /64) may hold: a connection beyond it is
	// answered 429 and closed. With TrustProxy, where every connection
	// is the proxy's, it counts the requests in progress (a websocket
	// until it closes) of each forwarded address instead.
	// DefaultMaxConnsPerAddr when zero; negative: no cap. Applies to
	// Serve's listener (and the request count to Handler).
	MaxConnsPerAddr int
	// Rate limits, answered 429 with Retry-After (the Default…Rate values
	// when zero; Unlimited turns one off): AuthRate every POST /v1/auth
	// and AccountRate those creating an account, per address; PairingRate
	// POST /v1/auth/request, per address; LookupRate GET
	// /v1/auth/request/lookup and SessionRate POST /v1/sessions, per
	// account.
	AuthRate, AccountRate, PairingRate, LookupRate, SessionRate Limit
	// ChallengeWindow is how far the time inside a timestamped sign-in
	// challenge may be from the relay's (DefaultChallengeWindow when
	// zero; auth.go).
	ChallengeWindow time.Duration

	// ExpoPushURL is Expo's push API, to which push-events go as
	// notifications for the account's Expo push tokens (the reference
	// app); "" sends none (`happy server --expo-push-url`, whose default
	// is DefaultExpoPushURL). PushTimeout bounds the device pushes of one
	// push-event (DefaultPushTimeout when zero).
	ExpoPushURL string
	PushTimeout time.Duration
	// WebPushSubject is the VAPID contact ("mailto:…" or an https URL) the
	// relay's Web Push messages name; empty: PublicURL when it is https,
	// else a placeholder address.
	WebPushSubject string
	// WebPushServices are the host names a Web Push subscription's
	// endpoint may name ("*.example" matches any subdomain); nil is
	// DefaultWebPushServices. An endpoint must be https, except on a
	// loopback address listed here (tests).
	WebPushServices []string

	// clusterAlive is the bus heartbeat (DefaultClusterAlive when zero;
	// this package's tests shorten it).
	clusterAlive time.Duration
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.IdleTimeout, DefaultIdleTimeout)
	set(&c.SweepInterval, DefaultSweepInterval)
	set(&c.ClockTolerance, DefaultClockTolerance)
	set(&c.StoppedTTL, DefaultStoppedTTL)
	set(&c.RPCCallTimeout, DefaultRPCCallTimeout)
	set(&c.RPCGrace, DefaultRPCGrace)
	set(&c.PingInterval, DefaultPingInterval)
	set(&c.PingTimeout, DefaultPingTimeout)
	set(&c.PairingTTL, DefaultPairingTTL)
	set(&c.RevocationRefresh, DefaultRevocationRefresh)
	set(&c.ReorderWait, DefaultReorderWait)
	set(&c.DrainTimeout, DefaultDrainTimeout)
	set(&c.PushTimeout, DefaultPushTimeout)
	seti := func(d *int64, v int64) {
		if *d <= 0 {
			*d = v
		}
	}
	seti(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	seti(&c.MaxAttachmentBytes, DefaultMaxAttachment)
	seti(&c.MaxSocketPayload, DefaultMaxSocketPayload)
	seti(&c.SocketHardLimit, DefaultSocketHardLimit)
	seti(&c.MaxSocketBacklog, DefaultMaxSocketBacklog)
	if c.SocketHardLimit < c.MaxSocketPayload+64<<10 {
		c.SocketHardLimit = c.MaxSocketPayload + 64<<10
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	set(&c.ChallengeWindow, DefaultChallengeWindow)
	c.limitDefaults()
}

// Server is a running relay: HTTP routes, the Socket.IO server and the
// presence sweeper. Build it with New, serve it with Serve (or mount
// Handler), stop it with Close.
type Server struct {
	cfg Config
	// msocks counts the machine-scoped sockets of this instance per
	// machine: a machine RPC to a machine with none fails at once.
	msocks   machineSockets
	identity []byte // the data folder's relayid key (identity.go)
	log      zerolog.Logger
	st       store.Store
	ownStore bool
	tok      *token.Signer

	io      *socket.Server
	events  map[string]eventHandler // the client events' handlers (events.go)
	handler http.Handler
	app     http.Handler // webapp.Handler of Config.App; nil without an app
	rpc     *rpcRegistry
	pres    *presence

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	httpSrvs  []*http.Server
	closeErr  error
	closeOnce sync.Once

	// testConn, when set (tests and benchmarks of this package), sees each
	// accepted socket.
	testConn func(*socket.Socket)
	acctMu   accountLocks
	// lock holds the data folder (lockDataDir) until Close.
	lock *os.File
	// ws is the websocket transport factory (and its counters).
	ws *wstransport.Ctor
	// out queues and writes every account's updates and ephemerals
	// (fanout.go).
	out *fanout
	// testWrite, when set (the fan-out benchmark), runs after each
	// websocket frame is handed to the kernel.
	testWrite atomic.Pointer[func()]
	// streams are the open message streams (sse.go).
	streams streamHub
	// gens caches the accounts' token generations (revoke.go).
	gens generations
	// cl is the relay's part among several (cluster.go); nil alone.
	cl      *cluster
	ownBus  bool
	metrics *metrics
	// draining is set once Serve's context ended: /ready answers 503.
	draining atomic.Bool
	// lim are the rate limits and conns the connections per address
	// (limits.go).
	lim   *limiters
	conns addrConns
	// push delivers push-events to devices (push.go, webpush.go).
	push *pusher
}

// afterWrite runs the testWrite hook, if any.
func (s *Server) afterWrite() {
	if f := s.testWrite.Load(); f != nil {
		(*f)()
	}
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("server: closed")

// New prepares a server: creates DataDir, loads or creates the signing
// secret, opens the store and applies migrations, and starts the presence
// sweeper. It listens on nothing; see Serve and Handler.
func New(cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: DataDir is required")
	}
	cfg.defaults()
	if err := private.Dir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("server: data folder: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, lock: lock, lim: newLimiters(cfg), conns: addrConns{max: cfg.MaxConnsPerAddr}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	fail := func(err error) (*Server, error) {
		if s.ownStore {
			_ = s.st.Close()
		}
		s.cancel()
		_ = lock.Close()
		return nil, err
	}
	if cfg.Store != nil {
		s.st = cfg.Store
	} else {
		st, err := openStore(s.ctx, cfg)
		if err != nil {
			return fail(err)
		}
		s.st = st
		s.ownStore = true
	}
	if s.identity, err = relayid.LoadOrCreate(cfg.DataDir); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	key, from, created, err := s.signingKey(s.ctx, filepath.Join(cfg.DataDir, token.SecretFile))
	if err != nil {
		return fail(err)
	}
	s.tok = token.New(key)
	if created {
		s.log.Info().Str("where", from).Msg("stored the signing secret")
	}
	b := cfg.Bus
	if b == nil && cfg.BusURL != "" {
		octx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		b, err = bus.Open(octx, cfg.BusURL)
		cancel()
		if err != nil {
			return fail(fmt.Errorf("server: %w", err))
		}
		s.ownBus = true
	}
	if b != nil {
		s.cl = newCluster(s, b)
	}
	s.rpc = newRPCRegistry()
	if s.cl != nil {
		s.rpc.self = s.cl.self
	}
	s.pres = newPresence(cfg.StoppedTTL)
	s.io = s.newSocketServer()
	if cfg.App != nil {
		s.app = webapp.Handler(cfg.App, cfg.AppConnectSrc)
	}
	s.metrics = newMetrics(s)
	vapid, vfrom, vcreated, err := s.vapidKey(s.ctx)
	if err != nil {
		s.io.Close(nil)
		return fail(err)
	}
	if vcreated {
		s.log.Info().Str("where", vfrom).Msg("stored the Web Push (VAPID) key")
	}
	s.push = newPusher(s, s.metrics.reg, vapid)
	s.handler = s.routes()
	if s.cl != nil {
		if err := s.cl.start(); err != nil {
			if s.ownBus {
				_ = b.Close()
			}
			s.io.Close(nil)
			return fail(fmt.Errorf("server: %w", err))
		}
	}
	s.wg.Add(1)
	go s.sweepLoop()
	return s, nil
}

// openStore opens the store named by cfg.Database (the SQLite file in the
// data folder when empty).
func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	name := cfg.Database
	if name == "" {
		name = "sqlite:" + filepath.Join(cfg.DataDir, backend.DefaultFile)
	}
	spec, err := backend.Parse(name)
	if err != nil {
		return nil, fmt.Errorf("server: open store: %w", err)
	}
	st, err := backend.Open(ctx, spec, backend.Options{Synchronous: cfg.Synchronous, AttachmentsDir: filepath.Join(cfg.DataDir, "attachments")})
	if err != nil {
		return nil, fmt.Errorf("server: open store %s: %w", spec, err)
	}
	return st, nil
}

// Handler returns the server's HTTP handler: the JSON routes and the
// Socket.IO endpoint at /v1/updates.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on l until ctx ends or Close is called. It
// returns nil after a clean stop, ErrClosed when the server was already
// closed, or the listener's error.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	// The HTTP server's own complaints (a failed TLS handshake from a
	// scanner, a client that hung up) go to the debug log, not to stderr.
	// IdleConnTimeout: without one net/http waits for a keep-alive
	// connection's next request forever (HeaderTimeout starts with its
	// first bytes), so idle connections would hold descriptors until the
	// open-file guard (fdguard.go) refused every new client. Its default
	// is longer than the 90 s after which Go's default HTTP transport
	// drops its own idle connections, so that such clients close them
	// first and no request races the relay's close. The body's bound is
	// per request (bodyDeadlines): ReadTimeout would also end message
	// streams and websockets.
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: s.cfg.HeaderTimeout, IdleTimeout: max(s.cfg.IdleConnTimeout, 0), ErrorLog: log.New(httpErrorLog{s.log}, "", 0)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrClosed
	}
	s.httpSrvs = append(s.httpSrvs, hs)
	s.mu.Unlock()
	unused := &unusedConns{}
	hs.ConnState = unused.track
	hs.RegisterOnShutdown(func() {
		s.streams.shutdown(hs)
		if n := unused.closeAll(); n > 0 {
			s.log.Debug().Int("connections", n).Msg("shutdown: closed connections that had not sent a request")
		}
	})
	if tl, ok := l.(*tlsListener); ok {
		tl.inner = s.capListener(s.guardListener(tl.inner))
	} else {
		l = s.capListener(s.guardListener(l))
	}
	s.log.Info().Str("listen", l.Addr().String()).Str("data", s.cfg.DataDir).Msg("relay listening")
	cl := &closeSignal{Listener: l, closed: make(chan struct{})}
	drained := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(drained)
		s.drain(hs, cl)
	})
	defer func() {
		if !stop() {
			<-drained
		}
	}()
	err := hs.Serve(cl)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("server: serve %s: %w", l.Addr(), err)
}

// closeSignal is a listener that says when it was closed.
type closeSignal struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closeSignal) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// drain stops hs gracefully, within DrainTimeout: /ready answers 503, the
// listener closes (no new connections), every socket's connection is
// closed without a Socket.IO disconnect, so that its client reconnects on
// its own, through the load balancer, to another instance (after a
// server-side disconnect Socket.IO clients do not reconnect), message
// streams end (their clients resume elsewhere), and the requests in
// flight finish.
func (s *Server) drain(hs *http.Server, l *closeSignal) {
	s.draining.Store(true)
	s.log.Info().Dur("timeout", s.cfg.DrainTimeout).Msg("draining")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- hs.Shutdown(sctx) }()
	select {
	case <-l.closed:
	case <-sctx.Done():
	}
	// What is queued for the sockets goes out before they close, within
	// what is left of the drain timeout.
	if rest := time.Until(deadlineOf(sctx)); !s.out.flush(max(rest, 0)) {
		s.log.Warn().Msg("drain: updates still queued at the timeout")
	}
	n := 0
	s.io.Sockets().Sockets().Range(func(_ socket.SocketId, sock *socket.Socket) bool {
		n++
		sock.Conn().Close(false)
		return true
	})
	if err := <-done; err != nil {
		s.log.Warn().Err(err).Msg("drain: requests still running at the timeout")
	}
	s.log.Info().Int("sockets", n).Msg("drained")
}

// Close disconnects every socket, stops serving, stops the sweeper and closes
// the store (when the server opened it). Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		srvs := s.httpSrvs
		s.mu.Unlock()
		if s.cl != nil {
			// The others free the RPC methods this instance's sockets hold
			// at once rather than after its heartbeat stops.
			s.cl.publish(busMsg{Kind: busBye})
		}
		s.cancel()
		s.out.flush(wstransport.CloseWait)
		s.io.DisconnectSockets(true)
		// Let the DISCONNECT packets reach the sockets before the engine
		// closes the connections under them.
		s.ws.Drain(wstransport.CloseWait)
		done := make(chan struct{})
		s.io.Close(func(error) { close(done) })
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		var errs []error
		for _, hs := range srvs {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := hs.Shutdown(sctx); err != nil {
				// Requests still running at the timeout are cut.
				_ = hs.Close()
				errs = append(errs, fmt.Errorf("server: shutdown http: %w", err))
			}
			cancel()
		}
		s.wg.Wait()
		if s.cl != nil {
			s.cl.seqr.stop()
			if s.ownBus {
				if err := s.cl.bus.Close(); err != nil {
					errs = append(errs, fmt.Errorf("server: close bus: %w", err))
				}
			}
		}
		if s.ownStore {
			if err := s.st.Close(); err != nil {
				errs = append(errs, fmt.Errorf("server: close store: %w", err))
			}
		}
		_ = s.lock.Close() // releases the data folder
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *Server) nowMs() int64 { return s.cfg.Now().UnixMilli() }

// httpErrorLog writes net/http's error log lines to the debug log.
type httpErrorLog struct{ log zerolog.Logger }

func (h httpErrorLog) Write(p []byte) (int, error) {
	h.log.Debug().Str("component", "http").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// deadlineOf is ctx's deadline, or now when it has none.
func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now()
}
