package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay/wire"
)

// DefaultRequestTimeout bounds one HTTP request when HTTPConfig leaves it zero.
const DefaultRequestTimeout = 15 * time.Second

// maxResponseBytes caps a response body read into memory (a page of 500
// large messages stays well below it).
const maxResponseBytes = 256 << 20

// HTTPConfig configures an API client.
type HTTPConfig struct {
	// BaseURL is the relay base URL, e.g. "http://127.0.0.1:3005" (see
	// settings.ServerURL). Required.
	BaseURL string
	// Token is the bearer token of the account; empty for the auth routes.
	Token string
	// ClientName is sent as X-Happy-Client ("cli/<version>" style); optional.
	ClientName string
	// RequestTimeout bounds every request (DefaultRequestTimeout when zero),
	// also when the caller's context has a later deadline.
	RequestTimeout time.Duration
	// HTTPClient sends the requests (a fresh client when nil).
	HTTPClient *http.Client
}

// API is the relay's HTTP API (reference contract, "HTTP used by happy-cli"
// and "Auth"): plain request/response calls, no retries, no state. Every call
// is bounded by the request timeout. It is safe for concurrent use.
type API struct {
	base    string
	token   string
	client  string
	timeout time.Duration
	hc      *http.Client
}

// NewAPI checks cfg and returns an API client. An invalid BaseURL is an error
// wrapping settings.ErrBadServerURL.
func NewAPI(cfg HTTPConfig) (*API, error) {
	base, err := settings.NormalizeServerURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// Own transport, so CloseIdleConnections touches only this client.
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	t := cfg.RequestTimeout
	if t <= 0 {
		t = DefaultRequestTimeout
	}
	return &API{base: base, token: cfg.Token, client: cfg.ClientName, timeout: t, hc: hc}, nil
}

// BaseURL is the relay base URL without a trailing slash.
func (a *API) BaseURL() string { return a.base }

// CloseIdleConnections closes the HTTP connections kept for reuse.
func (a *API) CloseIdleConnections() { a.hc.CloseIdleConnections() }

// WithToken returns a copy of a that authenticates with token.
func (a *API) WithToken(token string) *API {
	c := *a
	c.token = token
	return &c
}

// do sends one JSON request and decodes a JSON answer into out (when not nil).
// Errors: *StatusError for non-2xx, ErrUnavailable for transport failures and
// timeouts, ErrProtocol for an undecodable body.
func (a *API) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	u := a.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("relay: %s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("relay: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if a.client != "" {
		req.Header.Set("X-Happy-Client", a.client)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("relay: %s %s: no answer within %s: %w", method, path, a.timeout, ErrUnavailable)
		}
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return fmt.Errorf("relay: %s %s: %w", method, path, err)
		}
		return fmt.Errorf("relay: %s %s: %w: %v", method, path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("relay: %s %s: read answer: %w: %v", method, path, ErrUnavailable, err)
	}
	if len(b) > maxResponseBytes {
		return fmt.Errorf("relay: %s %s: answer larger than %d bytes: %w", method, path, maxResponseBytes, ErrProtocol)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: errorText(b)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("relay: %s %s: decode answer: %w: %v", method, path, ErrProtocol, err)
	}
	return nil
}

// errorText extracts {"error": "..."} from an error body, or the body's start.
func errorText(b []byte) string {
	var e struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		if s, ok := e.Error.(string); ok && s != "" {
			return s
		}
		if e.Message != "" {
			return e.Message
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = string(linereader.Prefix([]byte(s), 200)) + "…"
	}
	return s
}

// Health is GET /health: nil when the relay answers 2xx with status "ok".
func (a *API) Health(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
	}
	if err := a.do(ctx, http.MethodGet, "/health", nil, nil, &out); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("relay: GET /health: status %q: %w", out.Status, ErrUnavailable)
	}
	return nil
}

// AuthChallenge is POST /v1/auth with a signed challenge (see
// crypto.NewAuthRequest): it proves possession of the account's Ed25519 key and
// returns the bearer token. The relay creates the account on first use. A bad
// signature is a *StatusError wrapping ErrUnauthorized.
func (a *API) AuthChallenge(ctx context.Context, req crypto.AuthRequest) (string, error) {
	var out struct {
		Success bool   `json:"success"`
		Token   string `json:"token"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/auth", nil, req, &out); err != nil {
		return "", err
	}
	if !out.Success || out.Token == "" {
		return "", fmt.Errorf("relay: POST /v1/auth: no token in answer: %w", ErrProtocol)
	}
	return out.Token, nil
}

// AuthRequestState is the answer of POST /v1/auth/request.
type AuthRequestState struct {
	// State is "requested" while the other device has not answered, then
	// "authorized".
	State string `json:"state"`
	// Token is the account's bearer token in plain (only when authorized,
	// and only from the reference relay or happy's relay with
	// --pairing-plain-token).
	Token string `json:"token,omitempty"`
	// SealedToken is the base64 token sealed for the request's public key
	// (happy's relay, when authorized), to be opened with
	// crypto.OpenSealedToken and the request's secret key.
	SealedToken string `json:"sealedToken,omitempty"`
	// Response is the base64 sealed pairing bundle (only when authorized), to
	// be opened with crypto.OpenPairingResponse.
	Response string `json:"response,omitempty"`
}

// OpenToken returns the token of an authorized answer: SealedToken opened
// with secret, the request's box secret key, when the relay sealed it, else
// the plain Token (the reference relay). A relay that hands the token in
// plain harms nobody but the relay's own users: what matters is that
// happy's relay never does by default. Errors: crypto's (ErrAuthFailed for
// a token sealed for another key), ErrProtocol without any token.
func (st AuthRequestState) OpenToken(secret [32]byte) (string, error) {
	if st.SealedToken != "" {
		bundle, err := crypto.DecodeBase64(st.SealedToken)
		if err != nil {
			return "", fmt.Errorf("relay: pairing: sealed token: %w", err)
		}
		tok, err := crypto.OpenSealedToken(bundle, secret)
		if err != nil {
			return "", fmt.Errorf("relay: pairing: sealed token: %w", err)
		}
		return tok, nil
	}
	if st.Token == "" {
		return "", fmt.Errorf("relay: pairing: the answer has no token: %w", ErrProtocol)
	}
	return st.Token, nil
}

// AuthRequest is POST /v1/auth/request {publicKey, supportsV2:true}: it opens
// (or polls) a terminal pairing request for the terminal's box public key.
// An authorized answer without a response, or without any token (plain or
// sealed), is ErrProtocol.
func (a *API) AuthRequest(ctx context.Context, publicKey []byte) (AuthRequestState, error) {
	in := map[string]any{"publicKey": b64(publicKey), "supportsV2": true}
	var out AuthRequestState
	if err := a.do(ctx, http.MethodPost, "/v1/auth/request", nil, in, &out); err != nil {
		return AuthRequestState{}, err
	}
	switch out.State {
	case "requested":
	case "authorized":
		if (out.Token == "" && out.SealedToken == "") || out.Response == "" {
			return AuthRequestState{}, fmt.Errorf("relay: POST /v1/auth/request: authorized without token or response: %w", ErrProtocol)
		}
	default:
		return AuthRequestState{}, fmt.Errorf("relay: POST /v1/auth/request: unknown state %q: %w", out.State, ErrProtocol)
	}
	return out, nil
}

// PairingCollected is POST /v1/auth/request/collected {publicKey} with the
// token the request's answer carried (happy's relay only): the relay then
// removes the request, so its answer is not sent again. Errors are
// StatusError's: ErrNotFound both when the relay holds no answer of the key
// for this account (it removed it already) and from a relay without the
// route (the reference relay, which removes nothing).
func (a *API) PairingCollected(ctx context.Context, publicKey []byte) error {
	var out struct {
		Success bool `json:"success"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/auth/request/collected", nil, map[string]string{"publicKey": b64(publicKey)}, &out); err != nil {
		return err
	}
	if !out.Success {
		return fmt.Errorf("relay: POST /v1/auth/request/collected: success false: %w", ErrRejected)
	}
	return nil
}

// AuthRequestStatus is GET /v1/auth/request/status: "pending", "not_found"
// or "authorized" for the terminal's public key (the approving device's view).
func (a *API) AuthRequestStatus(ctx context.Context, publicKey []byte) (string, error) {
	q := url.Values{"publicKey": {b64(publicKey)}}
	var out struct {
		Status string `json:"status"`
	}
	if err := a.do(ctx, http.MethodGet, "/v1/auth/request/status", q, nil, &out); err != nil {
		return "", err
	}
	if out.Status == "" {
		return "", fmt.Errorf("relay: GET /v1/auth/request/status: no status: %w", ErrProtocol)
	}
	return out.Status, nil
}

// AuthResponse is POST /v1/auth/response (with the approving account's
// token): it answers the pairing request of terminalPublicKey with the sealed
// bundle (crypto.SealPairingResponse).
func (a *API) AuthResponse(ctx context.Context, terminalPublicKey, bundle []byte) error {
	in := map[string]string{"publicKey": b64(terminalPublicKey), "response": b64(bundle)}
	var out struct {
		Success bool `json:"success"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/auth/response", nil, in, &out); err != nil {
		return err
	}
	if !out.Success {
		return fmt.Errorf("relay: POST /v1/auth/response: success false: %w", ErrRejected)
	}
	return nil
}

// SessionInfo is a session as the relay returns it (wire.Session). Metadata
// and AgentState are base64 ciphertext; times are milliseconds since the
// Unix epoch.
type SessionInfo = wire.Session

// SessionCreate is the body of POST /v1/sessions (wire.SessionCreate).
// Metadata is base64 ciphertext; DataEncryptionKey is base64 of
// crypto.WrapDataKey's bundle (nil for a legacy session). The relay ignores
// AgentState on create; set it with Session.UpdateAgentState.
type SessionCreate = wire.SessionCreate

// CreateSession is POST /v1/sessions. The same Tag for the same account
// returns the existing session unchanged, so the call is idempotent.
func (a *API) CreateSession(ctx context.Context, in SessionCreate) (SessionInfo, error) {
	if in.Tag == "" {
		return SessionInfo{}, fmt.Errorf("relay: create session: empty tag: %w", ErrRejected)
	}
	var out struct {
		Session *SessionInfo `json:"session"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/sessions", nil, in, &out); err != nil {
		return SessionInfo{}, err
	}
	if out.Session == nil || out.Session.ID == "" {
		return SessionInfo{}, fmt.Errorf("relay: POST /v1/sessions: no session in answer: %w", ErrProtocol)
	}
	return *out.Session, nil
}

// ListSessions is GET /v1/sessions: the account's newest sessions (at most
// 150 on the reference relay).
func (a *API) ListSessions(ctx context.Context) ([]SessionInfo, error) {
	var out struct {
		Sessions []SessionInfo `json:"sessions"`
	}
	if err := a.do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// ArchiveSession is POST /v1/sessions/:id/archive (marks it inactive).
func (a *API) ArchiveSession(ctx context.Context, sessionID string) error {
	return a.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/archive", nil, struct{}{}, nil)
}

// DeleteSession is DELETE /v1/sessions/:id (the session and all its messages).
func (a *API) DeleteSession(ctx context.Context, sessionID string) error {
	return a.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(sessionID), nil, nil, nil)
}

// MachineInfo is a machine as the relay returns it (wire.Machine: base64
// ciphertext fields, millisecond times).
type MachineInfo = wire.Machine

// MachineCreate is the body of POST /v1/machines (wire.MachineCreate). ID
// is the machineId from settings.json.
type MachineCreate = wire.MachineCreate

// CreateMachine is POST /v1/machines. An existing id is returned unchanged
// (the body is ignored), so the call is idempotent.
func (a *API) CreateMachine(ctx context.Context, in MachineCreate) (MachineInfo, error) {
	if in.ID == "" {
		return MachineInfo{}, fmt.Errorf("relay: create machine: empty id: %w", ErrRejected)
	}
	var out struct {
		Machine *MachineInfo `json:"machine"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/machines", nil, in, &out); err != nil {
		return MachineInfo{}, err
	}
	if out.Machine == nil || out.Machine.ID == "" {
		return MachineInfo{}, fmt.Errorf("relay: POST /v1/machines: no machine in answer: %w", ErrProtocol)
	}
	return *out.Machine, nil
}

// StoredMessage is a message row of a session (wire.Message): Content.C is
// base64 ciphertext, LocalID the sender's idempotency key (nil when the row
// has none; LocalIDOrEmpty reads it as "").
type StoredMessage = wire.Message

// MessageContent is the relay's envelope of a message (wire.Content):
// {"t":"encrypted","c":<b64>}.
type MessageContent = wire.Content

// MessagePage is one page of GET /v3/sessions/:id/messages.
type MessagePage struct {
	Messages []StoredMessage `json:"messages"`
	HasMore  bool            `json:"hasMore"`
}

// MaxFetchLimit is the largest page the relay serves.
const MaxFetchLimit = 500

// FetchMessages is GET /v3/sessions/:id/messages?after_seq=N&limit=L: the
// messages with seq > afterSeq in ascending seq order, at most limit (1..500;
// other values are clamped). The answer is checked: seqs must ascend and be
// greater than afterSeq, or the error wraps ErrProtocol.
func (a *API) FetchMessages(ctx context.Context, sessionID string, afterSeq int64, limit int) (MessagePage, error) {
	if limit <= 0 {
		limit = 100
	}
	if limit > MaxFetchLimit {
		limit = MaxFetchLimit
	}
	q := url.Values{"after_seq": {strconv.FormatInt(afterSeq, 10)}, "limit": {strconv.Itoa(limit)}}
	path := "/v3/sessions/" + url.PathEscape(sessionID) + "/messages"
	var out MessagePage
	if err := a.do(ctx, http.MethodGet, path, q, nil, &out); err != nil {
		return MessagePage{}, err
	}
	last := afterSeq
	for _, m := range out.Messages {
		if m.Seq <= last {
			return MessagePage{}, fmt.Errorf("relay: GET %s: seq %d after %d: %w", path, m.Seq, last, ErrProtocol)
		}
		last = m.Seq
	}
	return out, nil
}

// OutgoingMessage is one message of a v3 batch (wire.OutgoingMessage):
// base64 ciphertext and the deterministic localId ("<recordId>.<version>").
type OutgoingMessage = wire.OutgoingMessage

// SentMessage is the relay's receipt for one message of a batch
// (wire.MessageRef). New is true when this post stored the row (happy's
// relay says so); false when the localId was already taken, so the row may
// be someone else's, or from a relay that does not say (the reference
// relay).
type SentMessage = wire.MessageRef

// MaxBatch is the largest number of messages the relay accepts in one POST.
const MaxBatch = 100

// SendMessages is POST /v3/sessions/:id/messages with 1..MaxBatch messages.
// The relay stores each localId once: resending a batch returns the original
// rows (same seq), and a localId someone else took first returns their row
// (SentMessage.New tells). The receipts come back sorted by seq; every
// localId sent must be present in them, or the error wraps ErrProtocol.
func (a *API) SendMessages(ctx context.Context, sessionID string, msgs []OutgoingMessage) ([]SentMessage, error) {
	if len(msgs) == 0 || len(msgs) > MaxBatch {
		return nil, fmt.Errorf("relay: send messages: batch of %d (want 1..%d): %w", len(msgs), MaxBatch, ErrRejected)
	}
	path := "/v3/sessions/" + url.PathEscape(sessionID) + "/messages"
	var out struct {
		Messages []SentMessage `json:"messages"`
	}
	if err := a.do(ctx, http.MethodPost, path, nil, map[string]any{"messages": msgs}, &out); err != nil {
		return nil, err
	}
	got := make(map[string]bool, len(out.Messages))
	for _, m := range out.Messages {
		if m.Seq <= 0 {
			return nil, fmt.Errorf("relay: POST %s: receipt without seq: %w", path, ErrProtocol)
		}
		got[m.LocalIDOrEmpty()] = true
	}
	for _, m := range msgs {
		if !got[m.LocalID] {
			return nil, fmt.Errorf("relay: POST %s: no receipt for localId %q: %w", path, m.LocalID, ErrProtocol)
		}
	}
	return out.Messages, nil
}

// ListMachines is GET /v1/machines: the account's machines (a bare array on
// the wire), metadata and daemon state as base64 ciphertext.
func (a *API) ListMachines(ctx context.Context) ([]MachineInfo, error) {
	var out []MachineInfo
	if err := a.do(ctx, http.MethodGet, "/v1/machines", nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
