package relay

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/crypto"
)

// newAccount creates a fresh account on the relay at url and returns
// credentials that hold the account secret.
func newAccount(t testing.TB, url string) *crypto.Credentials {
	t.Helper()
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api, err := NewAPI(HTTPConfig{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// testConfig is a client configuration with short retry delays.
func testConfig(t testing.TB, url string, creds *crypto.Credentials, outboxDir string) Config {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
	if os.Getenv("RELAY_TEST_LOG") != "" {
		log = log.Level(zerolog.DebugLevel)
	}
	return Config{
		BaseURL:        url,
		Credentials:    creds,
		OutboxDir:      outboxDir,
		ClientName:     "cli/test",
		Logger:         &log,
		RequestTimeout: 5 * time.Second,
		AckTimeout:     5 * time.Second,
		Backoff:        Backoff{Min: 20 * time.Millisecond, Max: 400 * time.Millisecond},
		Dialer:         SIODialer(time.Second),
		NoResume:       true,
	}
}

func newTestClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func openTestSession(t testing.TB, c *Client, opts SessionOptions) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.OpenSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTag(t testing.TB) string {
	t.Helper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// envelope is the plaintext the tests enqueue: the docs/ARCHITECTURE.md message
// envelope with a payload naming the record and version.
func envelope(record string, version int64) []byte {
	b, _ := json.Marshal(map[string]any{"kind": "message", "version": version, "info": map[string]any{"id": record}, "parts": []any{}})
	return b
}

// relayMessage is one stored message as a reader sees it after decrypting.
type relayMessage struct {
	Seq     int64
	LocalID string
	Record  string
	Version int64
}

// readAll fetches every message of the session from the relay and decrypts
// it with ci, failing the test on any decrypt or format error.
func readAll(t testing.TB, api *API, sid string, ci crypto.Cipher) []relayMessage {
	t.Helper()
	var out []relayMessage
	after := int64(0)
	for {
		p, err := api.FetchMessages(context.Background(), sid, after, MaxFetchLimit)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			plain, err := openPayload(ci, "message", m.Seq, m.Content.C)
			if err != nil {
				t.Fatalf("seq %d: %v", m.Seq, err)
			}
			var env struct {
				Version int64 `json:"version"`
				Info    struct {
					ID string `json:"id"`
				} `json:"info"`
			}
			if err := json.Unmarshal(plain, &env); err != nil {
				t.Fatalf("seq %d: %v", m.Seq, err)
			}
			// The other device's user messages carry no record id; they are
			// kept with Record "" (readOwn leaves them out).
			out = append(out, relayMessage{Seq: m.Seq, LocalID: m.LocalIDOrEmpty(), Record: env.Info.ID, Version: env.Version})
			after = m.Seq
		}
		if !p.HasMore || len(p.Messages) == 0 {
			return out
		}
	}
}

// checkExactlyOnce asserts that msgs hold every version 1..want[record] of
// every record exactly once, in ascending version order per record, with
// localIds "<record>.<version>", and nothing else.
func checkExactlyOnce(t testing.TB, msgs []relayMessage, want map[string]int64) {
	t.Helper()
	seen := map[string]int64{}
	total := int64(0)
	for _, m := range msgs {
		if m.LocalID != fmt.Sprintf("%s.%d", m.Record, m.Version) {
			t.Fatalf("seq %d: localId %q for %s v%d", m.Seq, m.LocalID, m.Record, m.Version)
		}
		if m.Version != seen[m.Record]+1 {
			t.Fatalf("seq %d: %s version %d after %d (duplicate or out of order)", m.Seq, m.Record, m.Version, seen[m.Record])
		}
		seen[m.Record] = m.Version
	}
	for r, v := range want {
		if seen[r] != v {
			t.Fatalf("record %s: relay has versions up to %d, want %d", r, seen[r], v)
		}
		total += v
	}
	if int64(len(msgs)) != total || len(seen) != len(want) {
		t.Fatalf("relay has %d messages over %d records, want %d over %d", len(msgs), len(seen), total, len(want))
	}
}

// sharedClient is a second client of the account (its own outbox) whose
// outbox holds session s as s's own client's does: a second device on the
// same session. (happy itself never opens a session another home created:
// a relay's answer to a creation is checked, docs/ARCHITECTURE.md "A
// session's life".)
func sharedClient(t testing.TB, url string, creds *crypto.Credentials, s *Session) *Client {
	t.Helper()
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	ctx := context.Background()
	relayID, raw, ok, err := s.c.store.Session(ctx, s.tag)
	if err != nil || !ok {
		t.Fatalf("session state of %s: %v %v", s.tag, ok, err)
	}
	if err := c.store.PutSession(ctx, s.tag, relayID, raw); err != nil {
		t.Fatal(err)
	}
	return c
}
