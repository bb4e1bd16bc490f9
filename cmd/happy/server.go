//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/internal/fdlimit"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/acmecert"
	"github.com/happy-dev/happy/server/store/backend"
	"github.com/happy-dev/happy/webapp"
)

// serverOptions are the flags of `happy server`.
type serverOptions struct {
	listen      string
	dataDir     string
	synchronous string
	db          string
	tlsCert     string
	tlsKey      string
	corsOrigins []string
	trustProxy  bool
	pairingTTL  time.Duration
	plainToken  bool
	bus         string
	secretFile  string
	drain       time.Duration
	fanoutShare float64
	fanoutQueue int
	expoPushURL string
	pushSubject string

	// Limits (server.Config, docs/ARCHITECTURE.md "Limits").
	headerTimeout   time.Duration
	bodyTimeout     time.Duration
	minBodyRate     int64
	idleTimeout     time.Duration
	maxConnsPerAddr int
	challengeWindow time.Duration
	rateAuth        string
	rateAccount     string
	ratePairing     string
	rateLookup      string
	rateSession     string
	// --domain: a certificate by ACME (server/acmecert).
	domains       []string
	acmeDirectory string
	acmeEmail     string
	httpListen    string
	// Tests only: the ACME client's HTTP client (trusting a test CA's
	// listener) and how early certificates are renewed.
	acmeHTTPClient  *http.Client
	acmeRenewBefore time.Duration
}

// defaultListen is where the relay listens without --listen: loopback, or
// every address's port 443 with --domain.
const (
	defaultListen       = "127.0.0.1:3005"
	defaultDomainListen = ":443"
	defaultHTTPListen   = ":80"
)

// newServerCmd builds `happy server`: the relay, in the foreground.
func newServerCmd(f *factory) *cobra.Command {
	opts := serverOptions{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the relay (HTTP + Socket.IO) in the foreground",
		Long: `Run happy's own relay in the foreground. It implements the reference relay
contract, stores only ciphertext in an embedded SQLite file under the data
folder (or, with --db postgres://…, in a PostgreSQL database that several
relays may share), and creates its token signing secret there on first start.
Schema migrations are applied at start; "happy server migrate" applies them,
or copies a relay's data between databases, without serving.

Listen on loopback by default. A phone needs https: browsers give the web
app WebCrypto, which it decrypts with, only on https pages (and on
localhost). With a DNS name pointing at this machine, --domain NAME obtains
a certificate by ACME (Let's Encrypt; --acme-directory for another CA) and
renews it, keeping the account and certificates in the data folder's acme/
(mode 0700); the relay then serves HTTPS on :443 and, on :80
(--http-listen), the HTTP-01 challenge and a redirect to https. Binding
ports below 1024 takes root or CAP_NET_BIND_SERVICE. Otherwise serve TLS
with your own certificate (--tls-cert and --tls-key), or stay on loopback
behind a TLS reverse proxy or tunnel and pass --trust-proxy so that the
relay believes its X-Forwarded-Proto, -Host and -For headers (the README's
"From your phone" has the steps). Browsers of any origin may call the
relay unless --cors-origin names the ones allowed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServer(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.listen, "listen", "", "address to listen on (host:port; default "+defaultListen+", or "+defaultDomainListen+" with --domain)")
	cmd.Flags().StringVar(&opts.dataDir, "data", "", "data folder (default $HAPPY_HOME_DIR/server)")
	cmd.Flags().StringVar(&opts.synchronous, "synchronous", "NORMAL", "SQLite synchronous setting: NORMAL (survives a crash of the process) or FULL (also a power loss)")
	cmd.Flags().StringVar(&opts.db, "db", "", "database: postgres://user:password@host:port/db?sslmode=… (default: the SQLite file in the data folder)")
	cmd.Flags().StringVar(&opts.tlsCert, "tls-cert", "", "serve HTTPS and WSS with this PEM certificate (chain) file; needs --tls-key")
	cmd.Flags().StringVar(&opts.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	cmd.Flags().StringSliceVar(&opts.domains, "domain", nil, "obtain and renew a certificate for this DNS name by ACME and serve HTTPS (repeat or comma-separate for more names; excludes --tls-cert)")
	cmd.Flags().StringVar(&opts.acmeDirectory, "acme-directory", "", "with --domain: the CA's ACME directory URL (default "+acmecert.LetsEncrypt+", Let's Encrypt; using it accepts its terms of service)")
	cmd.Flags().StringVar(&opts.acmeEmail, "acme-email", "", "with --domain: contact address given to the CA (it writes there about expiring or revoked certificates)")
	cmd.Flags().StringVar(&opts.httpListen, "http-listen", "", "with --domain: where to serve the HTTP-01 challenge and the redirect to https (default "+defaultHTTPListen+"); off: none, the TLS-ALPN-01 challenge on --listen only")
	cmd.Flags().StringSliceVar(&opts.corsOrigins, "cors-origin", nil, "origin (scheme://host[:port]) whose web pages may call the relay; repeat or comma-separate; default any origin")
	cmd.Flags().BoolVar(&opts.trustProxy, "trust-proxy", false, "believe X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-For (only behind a reverse proxy that sets them)")
	cmd.Flags().StringVar(&opts.bus, "bus", "", "bus between relays sharing one --db: nats://host:port, postgres://… (LISTEN/NOTIFY), or none; default with a postgres --db: LISTEN/NOTIFY on that database")
	cmd.Flags().StringVar(&opts.secretFile, "secret-file", "", "token signing secret shared by relays (created when missing); default: the PostgreSQL database's, else the data folder's secret.key")
	cmd.Flags().DurationVar(&opts.drain, "drain-timeout", server.DefaultDrainTimeout, "on SIGTERM: how long requests in flight get to finish after the sockets were told to reconnect")
	cmd.Flags().Float64Var(&opts.fanoutShare, "fanout-share", server.DefaultFanoutShare, "the most of the relay's time (0.01 to 1; 0 is the default; at 0.01 a fan-out rests 99 times as long as it wrote) one account's fan-out takes while other accounts' messages are being stored")
	cmd.Flags().IntVar(&opts.fanoutQueue, "fanout-queue", server.DefaultFanoutQueue, "updates that may wait for an account's fan-out before its next request waits (1 to 4096; 0 is the default): larger gives a poster feeding many sockets more deliveries a second, and each message a longer wait")
	cmd.Flags().DurationVar(&opts.pairingTTL, "pairing-ttl", server.DefaultPairingTTL, "how long a pairing request (happy auth login, happy web) stays usable, 10s to 1h")
	cmd.Flags().BoolVar(&opts.plainToken, "pairing-plain-token", false, "also hand an approved pairing request's token out in plain, once, to whoever polls with its public key, as the reference relay does (only while reference CLIs still pair with this relay: anyone who learns a waiting terminal's key can then take its token)")
	fl := cmd.Flags()
	fl.StringVar(&opts.expoPushURL, "expo-push-url", server.DefaultExpoPushURL, "Expo's push API, to which notifications for the reference app go (a fixed title, the folder's name, the session id: nothing of the session); empty: send none")
	fl.StringVar(&opts.pushSubject, "web-push-subject", "", "contact (mailto:you@example.org or an https URL) the relay's Web Push messages name for the push services; default: the relay's https public URL")
	fl.DurationVar(&opts.headerTimeout, "header-timeout", server.DefaultHeaderTimeout, "how long a request's headers may take to arrive")
	fl.DurationVar(&opts.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "how long a request body may take before --min-body-rate applies (a slower body gets 408)")
	fl.Int64Var(&opts.minBodyRate, "min-body-rate", server.DefaultMinBodyRate, "bytes a second a request body must average after --body-timeout")
	fl.DurationVar(&opts.idleTimeout, "idle-timeout", server.DefaultIdleConnTimeout, "how long a keep-alive connection may wait for its next request")
	fl.IntVar(&opts.maxConnsPerAddr, "max-conns-per-addr", server.DefaultMaxConnsPerAddr, "connections one client address (IPv4, or IPv6 /64) may hold, more are answered 429; with --trust-proxy, requests in progress (a websocket while open) of one forwarded address; -1: no cap")
	fl.DurationVar(&opts.challengeWindow, "challenge-window", server.DefaultChallengeWindow, "how far the time in a timed sign-in challenge may be from the relay's clock")
	rate := func(p *string, name string, d server.Limit, what string) {
		fl.StringVar(p, name, limitFlag(d), what+", as BURST/EVERY (so many at once, then one every EVERY) or off")
	}
	rate(&opts.rateAuth, "rate-auth", server.DefaultAuthRate, "sign-ins (POST /v1/auth) per client address")
	rate(&opts.rateAccount, "rate-account", server.DefaultAccountRate, "new accounts per client address")
	rate(&opts.ratePairing, "rate-pairing", server.DefaultPairingRate, "pairing requests and polls (POST /v1/auth/request) per client address")
	rate(&opts.rateLookup, "rate-lookup", server.DefaultLookupRate, "pairing code lookups per account")
	rate(&opts.rateSession, "rate-session", server.DefaultSessionRate, "session creations (POST /v1/sessions) per account")
	cmd.AddCommand(newServerMigrateCmd(f), newServerBenchCmd(f))
	return cmd
}

// checkOrigin accepts "*" or scheme://host[:port] with scheme http or https
// and nothing after the host.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--cors-origin %q: want scheme://host[:port] (http or https, no path) or *", o)
	}
	return nil
}

// limitFlag is a rate limit as its flag takes it.
func limitFlag(l server.Limit) string {
	if l.Burst < 0 {
		return "off"
	}
	return fmt.Sprintf("%d/%s", l.Burst, l.Every)
}

// serverLimits checks the limit flags and puts them into cfg (a zero
// value, or an empty rate, is the default).
func serverLimits(opts serverOptions, cfg *server.Config) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--header-timeout", opts.headerTimeout}, {"--body-timeout", opts.bodyTimeout}, {"--idle-timeout", opts.idleTimeout}, {"--challenge-window", opts.challengeWindow}} {
		if d.v != 0 && (d.v < time.Second || d.v > 24*time.Hour) {
			return fmt.Errorf("%s must be between 1s and 24h, got %s", d.name, d.v)
		}
	}
	if opts.minBodyRate < 0 {
		return fmt.Errorf("--min-body-rate must be at least 1 (bytes a second), got %d", opts.minBodyRate)
	}
	if opts.maxConnsPerAddr < -1 {
		return fmt.Errorf("--max-conns-per-addr must be at least 1, or -1 for no cap, got %d", opts.maxConnsPerAddr)
	}
	cfg.HeaderTimeout, cfg.BodyTimeout, cfg.MinBodyRate, cfg.IdleConnTimeout = opts.headerTimeout, opts.bodyTimeout, opts.minBodyRate, opts.idleTimeout
	cfg.MaxConnsPerAddr, cfg.ChallengeWindow = opts.maxConnsPerAddr, opts.challengeWindow
	for _, r := range []struct {
		name string
		v    string
		to   *server.Limit
	}{{"--rate-auth", opts.rateAuth, &cfg.AuthRate}, {"--rate-account", opts.rateAccount, &cfg.AccountRate}, {"--rate-pairing", opts.ratePairing, &cfg.PairingRate},
		{"--rate-lookup", opts.rateLookup, &cfg.LookupRate}, {"--rate-session", opts.rateSession, &cfg.SessionRate}} {
		if r.v == "" {
			continue
		}
		l, err := server.ParseLimit(r.v)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		*r.to = l
	}
	return nil
}

func runServer(ctx context.Context, f *factory, opts serverOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// A bad flag is refused before anything is created on disk.
	opts.synchronous = strings.ToUpper(opts.synchronous)
	if opts.synchronous != "NORMAL" && opts.synchronous != "FULL" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--synchronous must be NORMAL or FULL, got %q", opts.synchronous)}
	}
	if opts.db != "" {
		if _, err := backend.Parse(opts.db); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--db: %w", err)}
		}
	}
	busURL, err := busFor(opts.bus, opts.db)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if opts.drain == 0 {
		opts.drain = server.DefaultDrainTimeout
	}
	if opts.drain < 0 || opts.drain > 10*time.Minute {
		return &exitError{code: exitUsage, err: fmt.Errorf("--drain-timeout must be between 1ms and 10m, got %s", opts.drain)}
	}
	if opts.pairingTTL == 0 {
		opts.pairingTTL = server.DefaultPairingTTL
	}
	if opts.pairingTTL < 10*time.Second || opts.pairingTTL > time.Hour {
		return &exitError{code: exitUsage, err: fmt.Errorf("--pairing-ttl must be between 10s and 1h, got %s", opts.pairingTTL)}
	}
	if opts.fanoutShare == 0 {
		opts.fanoutShare = server.DefaultFanoutShare
	}
	if opts.fanoutQueue == 0 {
		opts.fanoutQueue = server.DefaultFanoutQueue
	}
	if !(opts.fanoutShare >= 0.01 && opts.fanoutShare <= 1) {
		return &exitError{code: exitUsage, err: fmt.Errorf("--fanout-share must be between 0.01 and 1, got %g", opts.fanoutShare)}
	}
	if opts.fanoutQueue < 1 || opts.fanoutQueue > 4096 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--fanout-queue must be between 1 and 4096, got %d", opts.fanoutQueue)}
	}
	if err := checkACMEFlags(&opts); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if u, err := url.Parse(opts.expoPushURL); opts.expoPushURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
		return &exitError{code: exitUsage, err: fmt.Errorf("--expo-push-url %q: want an http(s) URL, or empty to send no Expo pushes", opts.expoPushURL)}
	}
	if s := opts.pushSubject; s != "" && !strings.HasPrefix(s, "mailto:") && !strings.HasPrefix(s, "https://") {
		return &exitError{code: exitUsage, err: fmt.Errorf("--web-push-subject %q: want mailto:address or an https URL", s)}
	}
	if (opts.tlsCert == "") != (opts.tlsKey == "") {
		return &exitError{code: exitUsage, err: errors.New("--tls-cert and --tls-key go together")}
	}
	cfg := server.Config{Database: opts.db, Synchronous: opts.synchronous, TrustProxy: opts.trustProxy, PairingTTL: opts.pairingTTL, PairingPlainToken: opts.plainToken, App: webapp.Files(),
		BusURL: busURL, SecretFile: opts.secretFile, DrainTimeout: opts.drain, FanoutShare: opts.fanoutShare, FanoutQueue: opts.fanoutQueue,
		ExpoPushURL: opts.expoPushURL, WebPushSubject: opts.pushSubject}
	if err := serverLimits(opts, &cfg); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	origins := make([]string, 0, len(opts.corsOrigins))
	for _, o := range opts.corsOrigins {
		o = strings.TrimSuffix(strings.TrimSpace(o), "/")
		if err := checkOrigin(o); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		origins = append(origins, o)
	}
	cfg.CORSOrigins = origins
	data := opts.dataDir
	if data == "" {
		h, err := f.home()
		if err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("server: %w", err)}
		}
		data = h.Server()
	}
	lg, lerr := f.log("server")
	if lerr != nil {
		fmt.Fprintln(f.stderr, "happy: logging disabled:", lerr)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.DataDir, cfg.Logger = data, lg.Logger
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	var acme *acmecert.Manager
	if len(opts.domains) > 0 {
		acme, err = acmecert.New(acmecert.Config{Domains: opts.domains, DirectoryURL: opts.acmeDirectory, Email: opts.acmeEmail,
			CacheDir: filepath.Join(data, "acme"), RenewBefore: opts.acmeRenewBefore, HTTPClient: opts.acmeHTTPClient, Logger: lg.Logger})
		if err != nil {
			_ = srv.Close()
			return &exitError{code: exitFailed, err: err}
		}
		defer acme.Close()
	}
	l, err := net.Listen("tcp", opts.listen)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("server: listen on %s: %w%s", opts.listen, err, lowPortHint(err, ""))
	}
	scheme := "http"
	if opts.tlsCert != "" || acme != nil {
		var tl net.Listener
		if acme != nil {
			tl, err = server.NewTLSListener(l, acme.TLSConfig())
		} else {
			tl, err = server.TLSListener(l, opts.tlsCert, opts.tlsKey)
		}
		if err != nil {
			_ = l.Close()
			_ = srv.Close()
			return &exitError{code: exitFailed, err: err}
		}
		l, scheme = tl, "https"
	}
	var hl net.Listener
	if acme != nil && opts.httpListen != "off" {
		if hl, err = net.Listen("tcp", opts.httpListen); err != nil {
			_ = l.Close()
			_ = srv.Close()
			return fmt.Errorf("server: listen on %s for the ACME HTTP-01 challenge: %w%s", opts.httpListen, err, lowPortHint(err, "; or pass --http-listen off to answer only the TLS-ALPN-01 challenge, on "+opts.listen))
		}
	}
	where := "data " + data
	if spec, err := backend.Parse(opts.db); err == nil {
		where += ", database " + spec.String()
	}
	if busURL != "" {
		where += ", bus " + busName(busURL)
	}
	fmt.Fprintf(f.stdout, "happy relay listening on %s://%s (%s)\n", scheme, l.Addr(), where)
	if acme != nil {
		fmt.Fprintf(f.stdout, "web app: %s\n", domainURL(acme.Domains()[0], l.Addr()))
		fmt.Fprintf(f.stdout, "certificates: by ACME from %s for %s (account and certificates in %s), renewed automatically\n", acme.Directory(), strings.Join(acme.Domains(), ", "), acme.CacheDir())
		if hl != nil {
			fmt.Fprintf(f.stdout, "ACME HTTP-01 challenge and redirect to https on http://%s\n", hl.Addr())
		}
	} else {
		fmt.Fprintf(f.stdout, "web app: %s\n", webAppURL(scheme, l.Addr()))
	}
	if soft, hard, err := fdlimit.Raise(); err != nil {
		fmt.Fprintf(f.stderr, "happy: open-file limit not raised: %v\n", err)
	} else if soft > 0 {
		// Each socket is one open file: past the limit, less a small
		// reserve, new connections are answered 503.
		fmt.Fprintf(f.stdout, "open files: limit %d (hard %d)\n", soft, hard)
	}
	serverWarnings(f.stderr, l.Addr(), scheme == "https", opts.trustProxy)
	if opts.plainToken {
		fmt.Fprintln(f.stderr, "happy: warning: --pairing-plain-token: an approved pairing request's token goes, in plain, to whoever polls with its public key first (the reference CLI's way); happy's own clients do not need it")
	}
	var side sync.WaitGroup
	sideCtx, stopSide := context.WithCancel(ctx)
	if acme != nil {
		side.Go(func() { reportCertificate(sideCtx, f, acme) })
	}
	if hl != nil {
		_, port, _ := net.SplitHostPort(l.Addr().String())
		side.Go(func() { serveRedirect(sideCtx, f, hl, acme.HTTPHandler(port)) })
	}
	serveErr := srv.Serve(ctx, l)
	stopSide()
	if acme != nil {
		_ = acme.Close()
	}
	side.Wait()
	closeErr := srv.Close()
	if serveErr != nil {
		return serveErr
	}
	return closeErr
}

// checkACMEFlags checks --domain and the flags that go with it, and fills
// in the default addresses (--listen :443 and --http-listen :80 with
// --domain, else --listen 127.0.0.1:3005).
func checkACMEFlags(o *serverOptions) error {
	if len(o.domains) == 0 {
		if o.acmeDirectory != "" || o.acmeEmail != "" || o.httpListen != "" {
			return errors.New("--acme-directory, --acme-email and --http-listen go with --domain")
		}
		if o.listen == "" {
			o.listen = defaultListen
		}
		return nil
	}
	if o.tlsCert != "" || o.tlsKey != "" {
		return errors.New("--domain obtains the certificate by ACME: leave out --tls-cert and --tls-key (they serve a certificate you obtain yourself)")
	}
	for _, d := range o.domains {
		if err := acmecert.CheckDomain(d); err != nil {
			return fmt.Errorf("--domain: %w", err)
		}
	}
	if o.acmeDirectory != "" {
		if err := acmecert.CheckDirectory(o.acmeDirectory); err != nil {
			return fmt.Errorf("--acme-directory: %w", err)
		}
	}
	if e := o.acmeEmail; e != "" && (strings.Count(e, "@") != 1 || strings.HasPrefix(e, "@") || strings.HasSuffix(e, "@") || strings.ContainsAny(e, " \t,;<>:")) {
		return fmt.Errorf("--acme-email %q: want one email address, such as ops@example.com", e)
	}
	if o.listen == "" {
		o.listen = defaultDomainListen
	}
	if o.httpListen == "" {
		o.httpListen = defaultHTTPListen
	}
	return nil
}

// lowPortHint names the way out of a refused bind of a port below 1024,
// then more; empty for any other error.
func lowPortHint(err error, more string) string {
	if !errors.Is(err, syscall.EACCES) {
		return ""
	}
	return " (ports below 1024 take root or the CAP_NET_BIND_SERVICE capability: AmbientCapabilities=CAP_NET_BIND_SERVICE in a systemd unit, or setcap cap_net_bind_service=+ep on the binary" + more + ")"
}

// domainURL is the relay's https URL under its name: the port of addr
// unless it is 443.
func domainURL(domain string, addr net.Addr) string {
	if _, port, err := net.SplitHostPort(addr.String()); err == nil && port != "443" {
		return "https://" + net.JoinHostPort(domain, port) + "/"
	}
	return "https://" + domain + "/"
}

// reportCertificate asks for the first name's certificate at start, so
// that a name that does not reach the relay shows at once, not at a
// client's first handshake.
func reportCertificate(ctx context.Context, f *factory, acme *acmecert.Manager) {
	leaf, err := acme.Obtain(ctx)
	if ctx.Err() != nil {
		return
	}
	name := acme.Domains()[0]
	if err != nil {
		fmt.Fprintf(f.stderr, "happy: warning: no certificate for %s yet: %v; check that %s resolves to this machine and that its ports 443 and 80 reach this relay (the relay asks again at the next connection)\n", name, err, name)
		return
	}
	fmt.Fprintf(f.stdout, "certificate for %s: valid until %s\n", name, leaf.NotAfter.UTC().Format("2006-01-02 15:04:05 MST"))
}

// serveRedirect serves h (ACME HTTP-01 answers, redirects to https) on l
// until ctx ends.
func serveRedirect(ctx context.Context, f *factory, l net.Listener, h http.Handler) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	})
	defer stop()
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(f.stderr, "happy: warning: the HTTP listener on %s stopped: %v; certificates are then obtained by the TLS-ALPN-01 challenge only\n", l.Addr(), err)
	}
}

// busFor resolves --bus: "none" is no bus; empty is LISTEN/NOTIFY on a
// PostgreSQL --db (docs/ARCHITECTURE.md, "Several relays": the default
// needs nothing more than the database) and no bus with SQLite, where one
// relay owns the data folder; a nats:// or postgres:// URL is that bus.
func busFor(flag, db string) (string, error) {
	pg := strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
	switch {
	case flag == "none":
		return "", nil
	case flag == "" && pg:
		return db, nil
	case flag == "":
		return "", nil
	case !pg:
		return "", errors.New("--bus joins relays that share a PostgreSQL database: it needs --db postgres://…")
	case strings.HasPrefix(flag, "nats://"), strings.HasPrefix(flag, "tls://"), strings.HasPrefix(flag, "postgres://"), strings.HasPrefix(flag, "postgresql://"):
		return flag, nil
	}
	return "", fmt.Errorf("--bus %q: want nats://host:port, postgres://…, or none", flag)
}

// busName is a bus URL for the console: its scheme and host, no credentials.
func busName(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unreadable URL)"
	}
	if p.Scheme == "postgres" || p.Scheme == "postgresql" {
		return "postgres LISTEN/NOTIFY on " + p.Host + p.Path
	}
	return p.Scheme + "://" + p.Host
}

// webAppURL is the address of the web app the relay serves at "/": the
// listening address, or this machine's host name when the relay listens on
// every address.
func webAppURL(scheme string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// serverWarnings warns when the relay can be reached from other machines
// without TLS: bearer tokens and pairing answers would cross the network in
// clear text, and the web app cannot run in another machine's browser.
func serverWarnings(w io.Writer, addr net.Addr, tls, trustProxy bool) {
	if tls {
		return
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return
	}
	if trustProxy {
		fmt.Fprintf(w, "happy: warning: listening on %s without TLS: tokens and pairing answers cross the network in clear text; "+
			"the hop from the reverse proxy to the relay is not encrypted: listen on loopback, or pass --tls-cert and --tls-key\n", addr)
		return
	}
	// The web app URL printed next to this warning opens in no browser of
	// another machine: say so, and how to serve the phone.
	fmt.Fprintf(w, "happy: warning: listening on %s without TLS: tokens and pairing answers cross the network in clear text, "+
		"and browsers of other machines (a phone) cannot run the web app from it (they give it WebCrypto only on https pages); "+
		"pass --domain NAME, or --tls-cert and --tls-key, or listen on loopback behind a TLS reverse proxy or tunnel with --trust-proxy (README, \"From your phone\")\n", addr)
}
