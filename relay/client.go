package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay/outbox"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the relay base URL (settings.ServerURL). Required.
	BaseURL string
	// Credentials are the account's (crypto.LoadCredentials). Required.
	Credentials *crypto.Credentials
	// OutboxDir is the durable outbox folder (home.Dir.Outbox()). Required.
	OutboxDir string
	// ControlDir is the folder of the ledgers of consumed control inputs
	// (control.Ledger, one file per session or machine; home.Dir.Control()).
	// Empty: "control" beside OutboxDir.
	ControlDir string
	// ClientName is sent as X-Happy-Client (e.g. "cli/0.1.0").
	ClientName string
	// Logger receives the client's log lines (nothing when nil).
	Logger *zerolog.Logger
	// RequestTimeout bounds every HTTP request (DefaultRequestTimeout when zero).
	RequestTimeout time.Duration
	// AckTimeout bounds every socket acknowledgement and the wait for a
	// connection before an emit (DefaultAckTimeout when zero).
	AckTimeout time.Duration
	// Backoff bounds the retry delays of sending, fetching and reconnecting
	// (250 ms .. 30 s when zero).
	Backoff Backoff
	// HTTPClient sends the HTTP requests (a fresh client when nil).
	HTTPClient *http.Client
	// Dialer opens sockets (SIODialer when nil).
	Dialer Dialer
	// Now is the clock for heartbeat times (time.Now when nil).
	Now func() time.Time
	// NoResume, when true, keeps the client from draining the outbox rows of
	// sessions no live process owns (see Client). Tests use it.
	NoResume bool
}

// DefaultAckTimeout bounds a socket acknowledgement when Config leaves it zero.
const DefaultAckTimeout = 10 * time.Second

// Client is a relay client for one account on one relay: the HTTP API, the
// durable outbox, and the sessions and machine opened through it.
//
// On New it starts draining, in the background, the outbox rows of sessions
// of this account and relay that no live process owns (a session whose
// process was killed): their rows are already encrypted, so no key is
// needed. It rescans every 30 s. Close stops everything; rows not yet
// acknowledged stay in the outbox for the next start.
type Client struct {
	cfg     Config
	api     *API
	creds   *crypto.Credentials
	store   *outbox.Store
	account string // fingerprint of the account's content public key
	local   crypto.Cipher
	log     zerolog.Logger
	dial    Dialer
	now     func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	open    map[string]bool   // tags of sessions open in this process
	drains  map[string]*drain // tags being drained as orphans
	closed  bool
	drained int64
}

type drain struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New opens the outbox and returns a client. It does not contact the relay:
// a relay that is down is not an error (messages wait in the outbox).
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Credentials.Validate(); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if cfg.OutboxDir == "" {
		return nil, errors.New("relay: OutboxDir is required")
	}
	api, err := NewAPI(HTTPConfig{BaseURL: cfg.BaseURL, Token: cfg.Credentials.Token, ClientName: cfg.ClientName,
		RequestTimeout: cfg.RequestTimeout, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, err
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := zerolog.Nop()
	if cfg.Logger != nil {
		log = cfg.Logger.With().Str("component", "relay").Logger()
	}
	dial := cfg.Dialer
	if dial == nil {
		dial = SIODialer(5 * time.Second)
	}
	st, err := outbox.Open(ctx, cfg.OutboxDir, outbox.Options{})
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	c := &Client{cfg: cfg, api: api, creds: cfg.Credentials, store: st, log: log, dial: dial, now: cfg.Now,
		open: map[string]bool{}, drains: map[string]*drain{}}
	c.account, c.local = accountIdentity(cfg.Credentials)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if !cfg.NoResume {
		c.wg.Add(1)
		go c.resumeLoop()
	}
	return c, nil
}

// AccountID is a stable, non-secret fingerprint of the account behind
// creds: hex of the first 16 bytes of SHA-256 of its content public key
// (32 hex characters). Every machine of the account, legacy or dataKey,
// computes the same value; `happy auth status` prints it.
func AccountID(creds *crypto.Credentials) string {
	id, _ := accountIdentity(creds)
	return id
}

// accountIdentity returns a stable fingerprint of the account (hex SHA-256 of
// its content public key, 16 bytes) and the cipher that seals local secrets
// at rest (the machine key, or the account secret for legacy credentials).
func accountIdentity(cr *crypto.Credentials) (string, crypto.Cipher) {
	var pub [32]byte
	var local crypto.Cipher
	if cr.DataKey != nil {
		pub = cr.DataKey.ContentPublicKey
		local = crypto.NewDataKeyCipher(cr.DataKey.MachineKey)
	} else {
		pub, _ = crypto.ContentKeyPair(*cr.AccountSecret)
		local = crypto.NewLegacyCipher(*cr.AccountSecret)
	}
	sum := sha256.Sum256(pub[:])
	return hex.EncodeToString(sum[:16]), local
}

// API is the client's HTTP API (authenticated with the account token).
func (c *Client) API() *API { return c.api }

// Outbox is the client's durable outbox.
func (c *Client) Outbox() *outbox.Store { return c.store }

// Account is the account fingerprint the outbox rows are filed under.
func (c *Client) Account() string { return c.account }

// Close stops the background work and closes the outbox. Sessions and
// machines opened through c must be closed first. It is safe to call more
// than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.api.CloseIdleConnections()
	return c.store.Close()
}

// resumeLoop drains orphaned sessions now and every 30 s.
func (c *Client) resumeLoop() {
	defer c.wg.Done()
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		c.ResumeOrphans(c.ctx)
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ResumeOrphans starts draining every session with pending outbox rows that
// belongs to this account and relay and is not owned by a live process (its
// lock is free). It returns the number of sessions it started; each drain
// runs in the background until the session's rows are acknowledged or the
// client closes. Use WaitOrphans to wait for them.
func (c *Client) ResumeOrphans(ctx context.Context) int {
	tags, err := c.store.Sessions(ctx)
	if err != nil {
		c.log.Warn().Err(err).Msg("list outbox sessions")
		return 0
	}
	started := 0
	for _, tag := range tags {
		c.mu.Lock()
		busy := c.closed || c.open[tag] || c.drains[tag] != nil
		c.mu.Unlock()
		if busy {
			continue
		}
		relayID, raw, ok, err := c.store.Session(ctx, tag)
		if err != nil || !ok {
			c.log.Warn().Err(err).Str("tag", tag).Msg("outbox rows without session state; left in place")
			continue
		}
		st, err := decodeSessionState(raw)
		if err != nil {
			c.log.Warn().Err(err).Str("tag", tag).Msg("unreadable session state; rows left in place")
			continue
		}
		if st.Account != c.account || st.Relay != c.api.BaseURL() {
			continue // another account's or relay's rows: never sent elsewhere
		}
		unlock, err := c.store.Lock(tag)
		if err != nil {
			continue // a live process owns it
		}
		dctx, cancel := context.WithCancel(c.ctx)
		d := &drain{cancel: cancel, done: make(chan struct{})}
		c.mu.Lock()
		if c.closed || c.open[tag] {
			c.mu.Unlock()
			cancel()
			unlock()
			continue
		}
		c.drains[tag] = d
		c.mu.Unlock()
		started++
		c.log.Info().Str("tag", tag).Str("session", relayID).Msg("resuming outbox of a session without owner")
		snd := newSender(c, tag, relayID, st, nil)
		snd.rewrite = c.drainRewriter(tag, st)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer close(d.done)
			defer unlock()
			snd.run(dctx, true)
			c.mu.Lock()
			if c.drains[tag] == d {
				delete(c.drains, tag)
			}
			c.drained++
			c.mu.Unlock()
		}()
	}
	return started
}

// drainRewriter is an orphan drain's sender.rewrite: it writes a
// conflicted version again from the outbox alone (the session's key is in
// its state, its last versions in the versions table; the drain holds the
// session's lock, so nobody else appends). Nil when the key does not open
// here (a legacy session without the account secret): the conflict is
// then only noted.
func (c *Client) drainRewriter(tag string, st sessionState) func(context.Context, outbox.Item) (string, error) {
	ci, err := c.sessionCipher(st)
	if err != nil {
		c.log.Warn().Err(err).Str("tag", tag).Msg("orphan drain without the session key: conflicts are noted, not written again")
		return nil
	}
	return func(ctx context.Context, it outbox.Item) (string, error) {
		last, err := c.store.LastVersions(ctx, tag)
		if err != nil {
			return "", err
		}
		if last[it.Record] > it.Version {
			return "", nil
		}
		v := last[it.Record] + 1
		content, err := reseal(ci, it, v)
		if err != nil {
			return "", err
		}
		if err := c.store.Append(ctx, outbox.Entry{Session: tag, Record: it.Record, Version: v, Content: content}); err != nil {
			return "", err
		}
		return outbox.LocalID(it.Record, v), nil
	}
}

// WaitOrphans waits until every orphan drain started so far has finished
// (all its rows acknowledged) or ctx ends.
func (c *Client) WaitOrphans(ctx context.Context) error {
	for {
		c.mu.Lock()
		var d *drain
		for _, x := range c.drains {
			d = x
			break
		}
		c.mu.Unlock()
		if d == nil {
			return nil
		}
		select {
		case <-d.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// claim marks tag as open in this process, stopping an orphan drain of it
// first, and takes its outbox lock.
func (c *Client) claim(tag string) (func(), error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.open[tag] {
		c.mu.Unlock()
		return nil, fmt.Errorf("relay: session %q is already open in this process: %w", tag, outbox.ErrLocked)
	}
	c.open[tag] = true
	d := c.drains[tag]
	c.mu.Unlock()
	if d != nil {
		d.cancel()
		<-d.done
	}
	unlock, err := c.store.Lock(tag)
	if err != nil {
		c.mu.Lock()
		delete(c.open, tag)
		c.mu.Unlock()
		return nil, fmt.Errorf("relay: session %q is open in another process: %w", tag, err)
	}
	return func() {
		unlock()
		c.mu.Lock()
		delete(c.open, tag)
		c.mu.Unlock()
	}, nil
}
