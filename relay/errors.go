package relay

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors from this package wrap at most one of them (test with
// errors.Is) and say what was being done.
var (
	// ErrUnauthorized: the relay refused the token (HTTP 401/403, or a socket
	// connect_error about authentication). Retrying will not help; log in again.
	ErrUnauthorized = errors.New("relay refused the credentials")

	// ErrNotFound: the relay does not know the session, machine or auth request
	// (HTTP 404).
	ErrNotFound = errors.New("not found on the relay")

	// ErrRejected: the relay refused the request itself (another HTTP 4xx, or an
	// ack saying error). Sending the same request again will fail again.
	ErrRejected = errors.New("relay rejected the request")

	// ErrUnavailable: the relay could not be reached or did not answer in time
	// (connection refused or reset, timeout, missing ack, HTTP 5xx). The request
	// may be retried.
	ErrUnavailable = errors.New("relay unavailable")

	// ErrProtocol: the relay answered with something that does not follow the
	// contract (not JSON, missing fields, wrong types).
	ErrProtocol = errors.New("relay protocol violation")

	// ErrVersionMismatch: a compare-and-set update kept losing to concurrent
	// writers until its retries ran out.
	ErrVersionMismatch = errors.New("version mismatch")

	// ErrDecrypt: a payload from the relay could not be decrypted with the
	// session's key (see DecryptError for the reason).
	ErrDecrypt = errors.New("cannot decrypt")

	// ErrClosed: the Session, Machine or Outbox was closed.
	ErrClosed = errors.New("closed")

	// ErrStreamUnsupported: the relay does not serve the message stream
	// (GET /v3/sessions/:id/messages/stream); follow with FetchMessages
	// instead.
	ErrStreamUnsupported = errors.New("relay has no message stream")

	// ErrRouteUnsupported: the relay does not offer a route that only
	// happy's own relay has (pairing code lookup, token revocation); the
	// reference relay answers 404.
	ErrRouteUnsupported = errors.New("relay does not offer this route")

	// ErrForeignSession: the relay answered a session's creation with a
	// session this client did not create, or without (or with another)
	// session key than the one it created it with (see
	// docs/ARCHITECTURE.md, "A session's life"). The session is not used.
	ErrForeignSession = errors.New("relay answered with a session this client did not create")

	// ErrFingerprint: a key the relay returned for a pairing code does not
	// have that code (a relay trying to substitute its own key).
	ErrFingerprint = errors.New("pairing code does not match the key")
)

// StatusError is an HTTP answer outside 2xx. It wraps ErrUnauthorized (401,
// 403), ErrNotFound (404), ErrUnavailable (408, 429, 5xx) or ErrRejected (any
// other status).
type StatusError struct {
	Method  string // HTTP method, e.g. "POST"
	Path    string // request path, e.g. "/v3/sessions/abc/messages"
	Status  int    // HTTP status code
	Message string // the relay's {"error": …} text, or the start of the body
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.Status)
	}
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// Unwrap maps the status to the package's sentinels.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status == 401 || e.Status == 403:
		return ErrUnauthorized
	case e.Status == 404:
		return ErrNotFound
	case e.Status == 408 || e.Status == 429 || e.Status >= 500:
		return ErrUnavailable
	default:
		return ErrRejected
	}
}

// DecryptError is a relay payload (message, metadata, agent state, RPC
// params) that the session's key could not open. It wraps ErrDecrypt and the
// crypto package's reason (wrong key or variant, truncated, bad base64).
type DecryptError struct {
	What   string // "message", "metadata", "agentState", "rpc params"
	Seq    int64  // message seq, 0 for other payloads
	Reason error  // the underlying error (crypto sentinel or base64 error)
}

func (e *DecryptError) Error() string {
	if e.Seq > 0 {
		return fmt.Sprintf("decrypt %s seq %d: %v", e.What, e.Seq, e.Reason)
	}
	return fmt.Sprintf("decrypt %s: %v", e.What, e.Reason)
}

// Unwrap returns ErrDecrypt and the reason, so both errors.Is(err, ErrDecrypt)
// and errors.Is(err, crypto.ErrAuthFailed) hold.
func (e *DecryptError) Unwrap() []error { return []error{ErrDecrypt, e.Reason} }

// RecordError is a message of a session's stream that
// SessionOptions.CheckRecord refused: it decrypted, but is not the record
// version its localId names (a replay of another row's ciphertext).
type RecordError struct {
	Seq     int64  // its seq in the session
	LocalID string // the localId it was stored under
	Reason  error  // CheckRecord's error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("relay message seq %d (localId %q) refused: %v", e.Seq, e.LocalID, e.Reason)
}

// Unwrap returns the check's error.
func (e *RecordError) Unwrap() error { return e.Reason }
