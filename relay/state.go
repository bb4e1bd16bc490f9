package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay/wire"
)

// MaxCASAttempts bounds the tries of a compare-and-set update that keeps
// losing to other writers.
const MaxCASAttempts = 8

// Updater computes a new value from the current one (plaintext JSON; nil for
// an agent state that is null). Returning nil sets null (agent state and
// daemon state only). It may be called several times: once per attempt,
// each time with the value the relay holds.
type Updater func(current json.RawMessage) (json.RawMessage, error)

// casSpec describes one versioned value of the relay (reference contract,
// "update-metadata", "update-state", "machine-update-*").
type casSpec struct {
	event    string // e.g. "update-metadata"
	idKey    string // "sid" or "machineId"
	id       string
	valueKey string // "metadata", "agentState" or "daemonState"
	nullable bool
	cipher   crypto.Cipher
	get      func() (json.RawMessage, int64)
	set      func(json.RawMessage, int64)
}

// decodeCASReply reads the first acknowledgement argument: {result:
// "success"|"version-mismatch"|"error", version, <valueKey>: b64|null,
// message?}. Errors wrap ErrProtocol.
func decodeCASReply(args []any, valueKey string) (result string, version int64, value *string, message string, err error) {
	if len(args) == 0 {
		return "", 0, nil, "", fmt.Errorf("empty acknowledgement: %w", ErrProtocol)
	}
	b, err := json.Marshal(args[0])
	if err != nil {
		return "", 0, nil, "", fmt.Errorf("acknowledgement: %w: %v", ErrProtocol, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return "", 0, nil, "", fmt.Errorf("acknowledgement is not an object: %w", ErrProtocol)
	}
	if err := json.Unmarshal(m["result"], &result); err != nil || result == "" {
		return "", 0, nil, "", fmt.Errorf("acknowledgement without result: %w", ErrProtocol)
	}
	if raw, ok := m["message"]; ok {
		_ = json.Unmarshal(raw, &message)
	}
	switch result {
	case "success", "version-mismatch":
		var v float64
		if err := json.Unmarshal(m["version"], &v); err != nil || v < 0 || v != float64(int64(v)) {
			return "", 0, nil, "", fmt.Errorf("acknowledgement %q without a valid version: %w", result, ErrProtocol)
		}
		version = int64(v)
		if raw, ok := m[valueKey]; ok && string(raw) != "null" {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", 0, nil, "", fmt.Errorf("acknowledgement %s is not a string: %w", valueKey, ErrProtocol)
			}
			value = &s
		}
	case "error":
	default:
		return "", 0, nil, "", fmt.Errorf("acknowledgement result %q: %w", result, ErrProtocol)
	}
	return result, version, value, message, nil
}

// compareAndSet applies fn to the cached value and writes it with
// expectedVersion; on version-mismatch it adopts the relay's value and
// version and tries again (with a short back-off), at most MaxCASAttempts
// times (then ErrVersionMismatch). A missing acknowledgement is an error
// wrapping ErrUnavailable after ackTimeout, never a hang.
func compareAndSet(ctx context.Context, cn *conn, ackTimeout time.Duration, spec casSpec, fn Updater) error {
	b := Backoff{Min: 20 * time.Millisecond, Max: time.Second}
	for attempt := 1; attempt <= MaxCASAttempts; attempt++ {
		cur, ver := spec.get()
		next, err := fn(cur)
		if err != nil {
			return err
		}
		var payload any
		if next == nil {
			if !spec.nullable {
				return fmt.Errorf("relay: %s: %s cannot be null: %w", spec.event, spec.valueKey, ErrRejected)
			}
		} else {
			if !json.Valid(next) {
				return fmt.Errorf("relay: %s: new %s is not JSON: %w", spec.event, spec.valueKey, ErrRejected)
			}
			sealed, err := spec.cipher.Seal(next)
			if err != nil {
				return fmt.Errorf("relay: %s: seal: %w", spec.event, err)
			}
			payload = b64(sealed)
		}
		actx, cancel := context.WithTimeout(ctx, ackTimeout)
		sock, err := cn.wait(actx)
		if err != nil {
			cancel()
			return fmt.Errorf("relay: %s: %w", spec.event, err)
		}
		args, err := sock.Call(actx, spec.event, map[string]any{spec.idKey: spec.id, spec.valueKey: payload, "expectedVersion": ver})
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
				return fmt.Errorf("relay: %s: no acknowledgement within %s: %w", spec.event, ackTimeout, ErrUnavailable)
			}
			return fmt.Errorf("relay: %s: %w", spec.event, err)
		}
		result, version, value, message, err := decodeCASReply(args, spec.valueKey)
		if err != nil {
			return fmt.Errorf("relay: %s: %w", spec.event, err)
		}
		switch result {
		case "success":
			spec.set(next, version)
			return nil
		case "error":
			if message == "" {
				message = "error"
			}
			return fmt.Errorf("relay: %s: %s: %w", spec.event, message, ErrRejected)
		}
		// version-mismatch: adopt the relay's value, then retry.
		var adopted json.RawMessage
		if value != nil {
			adopted, err = openPayload(spec.cipher, spec.valueKey, 0, *value)
			if err != nil {
				return fmt.Errorf("relay: %s: current value: %w", spec.event, err)
			}
		}
		spec.set(adopted, version)
		if attempt < MaxCASAttempts && !sleep(ctx, b.Next()) {
			return fmt.Errorf("relay: %s: %w", spec.event, ctx.Err())
		}
	}
	return fmt.Errorf("relay: %s: lost %d times to concurrent writers: %w", spec.event, MaxCASAttempts, ErrVersionMismatch)
}

// Metadata returns the session's metadata (plaintext JSON, nil before the
// relay answered) and its version.
func (s *Session) Metadata() (json.RawMessage, int64) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.metadata, s.metaVer
}

// AgentState returns the session's agent state (nil when null) and its
// version.
func (s *Session) AgentState() (json.RawMessage, int64) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.agentState, s.agentVer
}

// UpdateMetadata sets the metadata with compare-and-set (update-metadata),
// retrying fn on the relay's newer value when another device wrote first.
// It waits for the session to exist and for a connection, bounded by ctx
// and the ack timeout. Errors wrap ErrUnavailable (no connection or no
// acknowledgement), ErrVersionMismatch, ErrRejected or ErrDecrypt.
func (s *Session) UpdateMetadata(ctx context.Context, fn Updater) error {
	sid, err := s.WaitCreated(ctx)
	if err != nil {
		return err
	}
	return compareAndSet(ctx, s.conn, s.c.cfg.AckTimeout, casSpec{
		event: "update-metadata", idKey: "sid", id: sid, valueKey: "metadata", cipher: s.cipher,
		get: s.Metadata,
		set: func(v json.RawMessage, ver int64) {
			s.stateMu.Lock()
			s.metadata, s.metaVer = v, ver
			s.stateMu.Unlock()
		},
	}, fn)
}

// UpdateAgentState sets the agent state with compare-and-set (update-state);
// see UpdateMetadata. fn may return nil to set null.
func (s *Session) UpdateAgentState(ctx context.Context, fn Updater) error {
	sid, err := s.WaitCreated(ctx)
	if err != nil {
		return err
	}
	return compareAndSet(ctx, s.conn, s.c.cfg.AckTimeout, casSpec{
		event: "update-state", idKey: "sid", id: sid, valueKey: "agentState", nullable: true, cipher: s.cipher,
		get: s.AgentState,
		set: func(v json.RawMessage, ver int64) {
			s.stateMu.Lock()
			s.agentState, s.agentVer = v, ver
			s.stateMu.Unlock()
		},
	}, fn)
}

// update is a decoded `update` event (reference contract, "Server → client").
type update struct {
	Seq  int64 `json:"seq"`
	Body struct {
		T           string          `json:"t"`
		SID         string          `json:"sid"`
		ID          string          `json:"id"`
		MachineID   string          `json:"machineId"`
		Message     *StoredMessage  `json:"message"`
		Metadata    *wire.Versioned `json:"metadata"`
		AgentState  *wire.Versioned `json:"agentState"`
		DaemonState *wire.Versioned `json:"daemonState"`
	} `json:"body"`
}

// decodeUpdate reads the first argument of an `update` event. Errors wrap
// ErrProtocol; an unknown body kind is not an error (T tells).
func decodeUpdate(args []any) (update, error) {
	var u update
	if len(args) == 0 {
		return u, fmt.Errorf("update without arguments: %w", ErrProtocol)
	}
	b, err := json.Marshal(args[0])
	if err != nil {
		return u, fmt.Errorf("update: %w: %v", ErrProtocol, err)
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return u, fmt.Errorf("update: %w: %v", ErrProtocol, err)
	}
	if u.Body.T == "" {
		return u, fmt.Errorf("update without body.t: %w", ErrProtocol)
	}
	if u.Body.T == "new-message" && (u.Body.Message == nil || u.Body.Message.Seq <= 0) {
		return u, fmt.Errorf("new-message without a message seq: %w", ErrProtocol)
	}
	return u, nil
}

// handleUpdate routes an `update` event of the session's socket.
func (s *Session) handleUpdate(args []any, _ func(...any)) {
	u, err := decodeUpdate(args)
	if err != nil {
		s.c.log.Warn().Err(err).Str("tag", s.tag).Msg("bad update event")
		s.rcv.kick() // whatever it was, a fetch finds any message it carried
		return
	}
	sid := s.ID()
	switch u.Body.T {
	case "new-message":
		if u.Body.SID == sid {
			s.rcv.pushLive(*u.Body.Message)
		}
	case "update-session":
		if u.Body.ID != sid {
			return
		}
		var changed StateUpdate
		s.stateMu.Lock()
		if v := u.Body.Metadata; v != nil && v.Version > s.metaVer && v.Value != nil {
			if md, err := s.open("metadata", 0, *v.Value); err == nil {
				s.metadata, s.metaVer = md, v.Version
				changed.Metadata = true
			} else {
				s.stateMu.Unlock()
				s.countDecrypt(err)
				s.stateMu.Lock()
			}
		}
		if v := u.Body.AgentState; v != nil && v.Version > s.agentVer {
			if v.Value == nil {
				s.agentState, s.agentVer = nil, v.Version
				changed.AgentState = true
			} else if as, err := s.open("agentState", 0, *v.Value); err == nil {
				s.agentState, s.agentVer = as, v.Version
				changed.AgentState = true
			} else {
				s.stateMu.Unlock()
				s.countDecrypt(err)
				s.stateMu.Lock()
			}
		}
		s.stateMu.Unlock()
		if (changed.Metadata || changed.AgentState) && s.opts.OnStateUpdate != nil {
			s.opts.OnStateUpdate(changed)
		}
	}
}
