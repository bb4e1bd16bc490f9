// Package servertest starts an in-process relay (package server) for tests:
// a fresh data folder under t.TempDir(), a listener on 127.0.0.1, and
// cleanup when the test ends.
package servertest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

// Relay is a running in-process relay.
type Relay struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Server is the relay itself.
	Server *server.Server
	// DataDir is its data folder.
	DataDir string
}

// Start runs a relay with default settings, logging warnings and errors to
// the test log; see StartConfig.
func Start(t testing.TB) *Relay {
	return StartConfig(t, server.Config{Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
}

// EnvStore selects the store of the relays Start and StartConfig run when
// the test sets none: "postgres" gives each relay a fresh PostgreSQL
// database (pgtest: HAPPY_TEST_POSTGRES must name a server); empty or
// "sqlite" keeps the embedded SQLite file. It lets the relay tests of every
// package run against both backends.
const EnvStore = "HAPPY_TEST_STORE"

// StartConfig runs a relay with cfg (DataDir defaults to a temporary
// folder; the store to EnvStore's choice) on a loopback port. The relay is
// closed when the test ends. A zero cfg.Logger logs nothing.
func StartConfig(t testing.TB, cfg server.Config) *Relay {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Database == "" && cfg.Store == nil {
		switch v := os.Getenv(EnvStore); v {
		case "", "sqlite":
		case "postgres":
			cfg.Database = pgtest.URL(t)
		default:
			t.Fatalf("servertest: %s=%q: want sqlite or postgres", EnvStore, v)
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("servertest: new relay: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatalf("servertest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := srv.Close(); err != nil {
			t.Errorf("servertest: close relay: %v", err)
		}
		<-done
	})
	return &Relay{URL: "http://" + l.Addr().String(), Server: srv, DataDir: cfg.DataDir}
}

// Account is a relay account created through POST /v1/auth.
type Account struct {
	// Token is the bearer token.
	Token string
	// Key is the Ed25519 key the account was created with.
	Key ed25519.PrivateKey
}

// NewAccount creates an account on the relay at baseURL with a fresh
// Ed25519 key, the way the reference app does (challenge signed with the
// key), and returns its token.
func NewAccount(t testing.TB, baseURL string) Account {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("servertest: generate key: %v", err)
	}
	return SignIn(t, baseURL, priv)
}

// NewAccountClient is NewAccount through client (a relay over TLS).
func NewAccountClient(t testing.TB, client *http.Client, baseURL string) Account {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("servertest: generate key: %v", err)
	}
	return signIn(t, client, baseURL, priv)
}

// SignIn signs in to the account of key (POST /v1/auth, creating it on
// first use) and returns a fresh token.
func SignIn(t testing.TB, baseURL string, key ed25519.PrivateKey) Account {
	t.Helper()
	return signIn(t, http.DefaultClient, baseURL, key)
}

func signIn(t testing.TB, client *http.Client, baseURL string, key ed25519.PrivateKey) Account {
	t.Helper()
	pub, priv := key.Public().(ed25519.PublicKey), key
	challenge := make([]byte, 32)
	_, _ = rand.Read(challenge)
	body, _ := json.Marshal(map[string]string{
		"publicKey": base64.StdEncoding.EncodeToString(pub),
		"challenge": base64.StdEncoding.EncodeToString(challenge),
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(priv, challenge)),
	})
	resp, err := client.Post(baseURL+"/v1/auth", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("servertest: POST /v1/auth: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Success bool   `json:"success"`
		Token   string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || !out.Success || out.Token == "" {
		t.Fatalf("servertest: POST /v1/auth: status %d, %+v, %v", resp.StatusCode, out, err)
	}
	return Account{Token: out.Token, Key: priv}
}

// String describes the relay for test logs.
func (r *Relay) String() string { return fmt.Sprintf("relay %s (data %s)", r.URL, r.DataDir) }
