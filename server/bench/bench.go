// Package bench is the load generator of `happy server bench`: it drives a
// relay through the public relay contract only (the HTTP v1/v3 routes and
// Socket.IO at /v1/updates, docs/ARCHITECTURE.md), so it measures happy's
// relay and the reference relay alike.
//
// Each run (Ingest, Fanout, Sockets, RPC) returns a Result: latency
// percentiles in milliseconds, throughput per second, error counts and,
// when Target.Pid names a relay process on this machine, the relay's CPU
// use and resident memory read from /proc (Linux only).
package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Target is the relay under test.
type Target struct {
	// URL is the relay's base URL (http://127.0.0.1:3005).
	URL string
	// Token is the account's bearer token; empty creates a new account
	// with a fresh key (NewAccount).
	Token string
	// Pid, when > 0, is the relay's process id on this machine: its CPU
	// and memory are reported (Result.Relay).
	Pid int
	// HTTP is the client of the HTTP routes (a shared keep-alive client
	// when nil).
	HTTP *http.Client
}

// Latency holds percentiles of a run's samples, in milliseconds.
type Latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

// Relay is what /proc said about the relay process during a run.
type Relay struct {
	// CPUPercent is the process's CPU time over the run's wall time, in
	// percent of one core (200 = two cores busy).
	CPUPercent float64 `json:"cpu_percent"`
	// RSSKiB is the resident memory at the end of the run; RSSBeforeKiB
	// at its start.
	RSSKiB       int64 `json:"rss_kib"`
	RSSBeforeKiB int64 `json:"rss_before_kib"`
	// KiBPerSocket is (RSSKiB - RSSBeforeKiB) / sockets (Sockets only);
	// 0 when the resident memory did not grow (memory the process gave
	// back during the run hides the sockets': no figure).
	KiBPerSocket float64 `json:"kib_per_socket,omitempty"`
}

// Result is one run's outcome.
type Result struct {
	// Kind is "ingest", "fanout", "sockets" or "rpc".
	Kind string `json:"kind"`
	// Ops counts what the run did: messages acknowledged (ingest),
	// updates delivered to sockets (fanout), sockets connected (sockets),
	// round trips answered (rpc).
	Ops int64 `json:"ops"`
	// Errors counts failed requests, refused or lost sockets, missing
	// deliveries and failed calls.
	Errors int64 `json:"errors"`
	// Seconds is the measured wall time.
	Seconds float64 `json:"seconds"`
	// Throughput is Ops per second, in Unit.
	Throughput float64 `json:"throughput"`
	Unit       string  `json:"unit"`
	// Latency: per POST (ingest), from a message's POST to its delivery
	// on the last socket (fanout), per connect (sockets), per call (rpc).
	Latency Latency `json:"latency_ms"`
	// FirstError is the text of the run's first error ("" for none).
	FirstError string `json:"first_error,omitempty"`
	// Stopped says why the run ended early: "interrupted" (its context
	// was cancelled: SIGINT, SIGTERM) or "50 failures in a row"
	// (maxInARow; FirstError says what failed); "" when it ran its
	// course. Work
	// cut short by an interruption is not counted as errors.
	Stopped string `json:"stopped,omitempty"`
	// Relay is set when Target.Pid was given.
	Relay *Relay `json:"relay,omitempty"`
	// Params echoes the run's options.
	Params map[string]any `json:"params"`
}

// String renders r as a few human-readable lines.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d ops in %.2fs = %.0f %s, %d errors\n", r.Kind, r.Ops, r.Seconds, r.Throughput, r.Unit, r.Errors)
	if r.Stopped != "" {
		fmt.Fprintf(&b, "  stopped early: %s\n", r.Stopped)
	}
	if r.FirstError != "" {
		fmt.Fprintf(&b, "  first error: %s\n", r.FirstError)
	}
	fmt.Fprintf(&b, "  latency ms (%d samples): p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", r.Latency.Samples, r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
	if r.Relay != nil {
		fmt.Fprintf(&b, "  relay: cpu %.0f%% of one core  rss %d KiB (before %d KiB)", r.Relay.CPUPercent, r.Relay.RSSKiB, r.Relay.RSSBeforeKiB)
		if r.Relay.KiBPerSocket != 0 {
			fmt.Fprintf(&b, "  %.1f KiB per socket", r.Relay.KiBPerSocket)
		} else if r.Kind == "sockets" {
			b.WriteString("  (no per-socket figure: the resident memory did not grow)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// percentiles summarises samples (any order).
func percentiles(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) float64 {
		i := int(float64(len(s)-1)*p + 0.5)
		return float64(s[i]) / 1e6
	}
	return Latency{Samples: len(s), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(s[len(s)-1]) / 1e6}
}

var defaultHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}, Timeout: 60 * time.Second}

func (t Target) client() *http.Client {
	if t.HTTP != nil {
		return t.HTTP
	}
	return defaultHTTP
}

// postJSON sends body as JSON and decodes a 200 answer into out (may be
// nil); any other status is an error with the answer's text.
func (t Target) postJSON(ctx context.Context, path, token string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(t.URL, "/")+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := t.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, cut(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("POST %s: %w", path, err)
		}
	}
	return nil
}

// NewAccount creates an account with a fresh Ed25519 key through
// POST /v1/auth {publicKey, challenge, signature} and returns its token.
func NewAccount(ctx context.Context, t Target) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	ch := make([]byte, 32)
	_, _ = rand.Read(ch)
	b64 := base64.StdEncoding.EncodeToString
	var out struct {
		Token string `json:"token"`
	}
	if err := t.postJSON(ctx, "/v1/auth", "", map[string]string{"publicKey": b64(pub), "challenge": b64(ch), "signature": b64(ed25519.Sign(priv, ch))}, &out); err != nil {
		return "", fmt.Errorf("bench: create account: %w", err)
	}
	if out.Token == "" {
		return "", errors.New("bench: create account: no token in the answer")
	}
	return out.Token, nil
}

// NewSession gets or creates the account's session with tag through
// POST /v1/sessions and returns its id.
func NewSession(ctx context.Context, t Target, token, tag string) (string, error) {
	var out struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	// The relay stores metadata as opaque ciphertext: any base64 will do.
	meta := base64.StdEncoding.EncodeToString([]byte(`{"bench":true}`))
	if err := t.postJSON(ctx, "/v1/sessions", token, map[string]any{"tag": tag, "metadata": meta}, &out); err != nil {
		return "", fmt.Errorf("bench: create session: %w", err)
	}
	if out.Session.ID == "" {
		return "", errors.New("bench: create session: no id in the answer")
	}
	return out.Session.ID, nil
}

// token returns t.Token or a new account's.
func (t Target) token(ctx context.Context) (string, error) {
	if t.Token != "" {
		return t.Token, nil
	}
	return NewAccount(ctx, t)
}

// runID makes the tags and localIds of one run unique.
func runID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// content returns n bytes of base64 text (what an encrypted message looks
// like to the relay).
func content(n int) string {
	raw := make([]byte, n*3/4+3)
	_, _ = rand.Read(raw)
	s := base64.StdEncoding.EncodeToString(raw)
	return s[:n]
}

// maxAnswer is the most of an answer the generator reads: more than any
// relay answer it asks for (a batch's stored messages are a few KiB).
const maxAnswer = 4 << 20

// readAnswer reads an HTTP answer's body, refusing one longer than
// maxAnswer (a server that streams without end must not take the
// generator's memory).
func readAnswer(body io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxAnswer {
		return nil, fmt.Errorf("answer longer than %d bytes: not a relay's", maxAnswer)
	}
	return data, nil
}

// maxInARow is how many operations may fail in a row before a run stops
// (a relay killed or cut off mid-run, or one at its limits), instead of
// looping on refused connections until its end; the first error says
// which.
const maxInARow = 50

// failures counts a run's failed operations and keeps the first error. A
// failure after the run's context ended (an interruption, or the stop
// below) is not counted: it is work cut short, not an error of the relay.
// maxInARow failures in a row cancel the run (cancel, with errInARow).
type failures struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	n      atomic.Int64
	inARow atomic.Int64
	mu     sync.Mutex
	first  string
}

// errInARow is the cause a run is cancelled with by failures.
var errInARow = errors.New("too many failures in a row")

// newFailures returns the run's context (cancelled by maxInARow failures
// in a row) and its failure count.
func newFailures(ctx context.Context) (context.Context, *failures) {
	f := &failures{}
	f.ctx, f.cancel = context.WithCancelCause(ctx)
	return f.ctx, f
}

// fail records a failed operation.
func (f *failures) fail(err error) {
	if f.ctx.Err() != nil {
		return
	}
	if f.n.Add(1) == 1 {
		f.mu.Lock()
		f.first = err.Error()
		f.mu.Unlock()
	}
	if f.inARow.Add(1) >= maxInARow {
		f.cancel(errInARow)
	}
}

// ok records a successful operation.
func (f *failures) ok() { f.inARow.Store(0) }

// done ends the run's context and fills res's FirstError and Stopped
// (parent is the context the run was called with).
func (f *failures) done(parent context.Context, res *Result) {
	f.mu.Lock()
	res.FirstError = f.first
	f.mu.Unlock()
	switch {
	case parent.Err() != nil:
		res.Stopped = "interrupted"
	case errors.Is(context.Cause(f.ctx), errInARow):
		res.Stopped = fmt.Sprintf("%d failures in a row", maxInARow)
	}
	f.cancel(nil)
}
