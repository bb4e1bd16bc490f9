// Package app wires happy's packages into what the commands run: connecting
// to the relay (starting the embedded one and a local account when nothing is
// configured), opening a relay session for an agent, running the session
// runner, and reading sessions back. Commands in cmd/happy parse flags and
// call it; it holds no protocol knowledge of its own.
package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/internal/embedded"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
)

// Errors commands map to exit codes.
var (
	// ErrLoggedOut: there are no credentials and none may be created (a
	// configured relay): run happy auth login.
	ErrLoggedOut = errors.New("not logged in: run happy auth login to pair with your phone or another device, or happy auth login --new-account to start a new account")
	// ErrRelay: the relay cannot be used at start (bad URL, embedded relay
	// cannot start, refused credentials).
	ErrRelay = errors.New("relay unusable")
)

// Env is what every app function needs from the command.
type Env struct {
	Home   home.Dir
	Getenv func(string) string
	Log    zerolog.Logger
	Stderr io.Writer // for notices to the person (never while an agent owns the terminal)
	Now    func() time.Time
}

// Conn is a connection to the relay for one account.
type Conn struct {
	URL     string
	Source  settings.Source
	Creds   *crypto.Credentials
	Client  *relay.Client
	API     *relay.API
	Created bool // a local account was created by this call

	settleCancel context.CancelFunc
	settleDone   chan struct{}
	settleMu     sync.Mutex
	settleRound  chan struct{} // closed when the round in progress ends; nil while idle
}

// settleGrace is how long Close lets an orphan settlement in progress
// finish before it stops it (the orphan then stays for the next happy).
const settleGrace = 3 * time.Second

// settleEvery is how often a connection that settles orphans looks again
// (the outbox drain rescans as often).
const settleEvery = 30 * time.Second

// Close stops the orphan settlement (after at most settleGrace) and closes
// the relay client.
func (c *Conn) Close() error {
	if c == nil || c.Client == nil {
		return nil
	}
	if c.settleDone != nil {
		c.settleMu.Lock()
		round := c.settleRound
		c.settleMu.Unlock()
		if round != nil {
			t := time.NewTimer(settleGrace)
			select {
			case <-round:
			case <-t.C:
			}
			t.Stop()
		}
		c.settleCancel()
		<-c.settleDone
		c.settleDone = nil
	}
	return c.Client.Close()
}

// settleLoop settles orphaned sessions now and every settleEvery until ctx
// ends; Close waits for the round in progress.
func (c *Conn) settleLoop(ctx context.Context, env Env) {
	defer close(c.settleDone)
	t := time.NewTicker(settleEvery)
	defer t.Stop()
	for {
		round := make(chan struct{})
		c.settleMu.Lock()
		c.settleRound = round
		c.settleMu.Unlock()
		if _, err := SettleOrphans(ctx, env, c); err != nil && ctx.Err() == nil {
			env.Log.Warn().Err(err).Msg("settle orphaned sessions")
		}
		c.settleMu.Lock()
		c.settleRound = nil
		c.settleMu.Unlock()
		close(round)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ConnectOptions tune Connect.
type ConnectOptions struct {
	// AllowCreate creates a local account on the embedded relay when there
	// are no credentials and no relay is configured.
	AllowCreate bool
	// NoResume keeps the client from draining other sessions' outbox rows
	// and from settling orphaned sessions (SettleOrphans): readers set it.
	NoResume bool
}

// ClientName is sent to the relay as X-Happy-Client.
func ClientName() string { return "cli/" + buildinfo.Version }

// LookupURL returns the relay URL and where it came from as ResolveURL
// does, without starting the embedded relay (for checks that must not
// change anything).
func LookupURL(env Env) (string, settings.Source, error) {
	st, err := settings.Load(env.Home.Settings())
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrRelay, err)
	}
	url, src, err := settings.ServerURL(env.Getenv, st)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrRelay, err)
	}
	return url, src, nil
}

// ResolveURL returns the relay URL (HAPPY_SERVER_URL, then serverUrl in
// settings.json, then the embedded default) and where it came from. The
// embedded relay is started when it is the one chosen and not running, and
// whatever answers there must prove it is this home's (embedded.Verify)
// before the URL is returned: otherwise the error wraps ErrRelay and
// embedded.ErrNotOurs.
func ResolveURL(ctx context.Context, env Env) (string, settings.Source, error) {
	st, err := settings.Load(env.Home.Settings())
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrRelay, err)
	}
	url, src, err := settings.ServerURL(env.Getenv, st)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrRelay, err)
	}
	if src == settings.SourceDefault {
		started, err := embedded.Ensure(ctx, embedded.Options{Home: env.Home, URL: url, Now: env.Now})
		if err != nil {
			return "", "", fmt.Errorf("%w: embedded relay at %s: %w", ErrRelay, url, err)
		}
		if started {
			env.Log.Info().Str("url", url).Msg("started the embedded relay")
			if env.Stderr != nil {
				fmt.Fprintf(env.Stderr, "happy: started a local relay at %s (data in %s; stop it with: happy server stop)\n", url, env.Home.Server())
			}
		}
		// Anything may listen on the loopback port (another user's
		// program, another home's relay): it gets nothing, not even a
		// token, until it proves it is this home's.
		if err := embedded.Verify(ctx, env.Home, url); err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrRelay, err)
		}
	}
	return url, src, nil
}

// Connect resolves the relay, loads (or, for the embedded relay, creates)
// the account credentials and opens a relay client.
func Connect(ctx context.Context, env Env, opts ConnectOptions) (*Conn, error) {
	url, src, err := ResolveURL(ctx, env)
	if err != nil {
		return nil, err
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: url, ClientName: ClientName()})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRelay, err)
	}
	conn := &Conn{URL: url, Source: src}
	creds, err := crypto.LoadCredentials(env.Home.AccessKey())
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && opts.AllowCreate && src == settings.SourceDefault:
		var secret [32]byte
		if _, err := rand.Read(secret[:]); err != nil {
			return nil, fmt.Errorf("create local account: %w", err)
		}
		if err := env.Home.Ensure(); err != nil {
			return nil, err
		}
		creds, err = relay.CreateAccount(ctx, api, secret)
		if err != nil {
			return nil, fmt.Errorf("%w: create local account: %w", ErrRelay, err)
		}
		if err := creds.Save(env.Home.AccessKey()); err != nil {
			return nil, fmt.Errorf("save credentials: %w", err)
		}
		conn.Created = true
		env.Log.Info().Str("url", url).Msg("created a local account")
		if env.Stderr != nil {
			fmt.Fprintf(env.Stderr, "happy: created a local account on %s (see its backup key with: happy auth backup)\n", url)
		}
	case errors.Is(err, os.ErrNotExist):
		return nil, ErrLoggedOut
	default:
		return nil, fmt.Errorf("%w: %w", ErrRelay, err)
	}
	conn.Creds = creds
	conn.API = api.WithToken(creds.Token)
	lg := env.Log
	client, err := relay.New(ctx, relay.Config{BaseURL: url, Credentials: creds, OutboxDir: env.Home.Outbox(),
		ClientName: ClientName(), Logger: &lg, NoResume: opts.NoResume})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRelay, err)
	}
	conn.Client = client
	if !opts.NoResume {
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		conn.settleCancel, conn.settleDone = cancel, make(chan struct{})
		go conn.settleLoop(sctx, env)
	}
	return conn, nil
}
