// Package control is the format and the checks of happy's control inputs:
// everything another device sends to make a machine act (a prompt row, a
// session RPC such as permission, answer or abort, a machine RPC such as
// spawn or stop) travels as a sealed Envelope that names its target, its
// method, a unique id and its issue time, inside the AEAD plaintext where the
// relay cannot change it. The receiver checks it (Guard.Check) and records
// the id as consumed in a durable Ledger before it acts, so a relay operator
// or a token thief can neither replay a captured input, nor aim it at another
// session, nor send one without the key (docs/ARCHITECTURE.md, "Trust").
//
// Answers to RPCs are sealed and bound to the request's id (Answer), so a
// caller can tell the session's own answer from one a relay forged or
// replayed.
//
// This package knows JSON and files only; the relay client seals and opens.
package control

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Version is the envelope format's version, the value of its "happyControl"
// member. A receiver refuses any other value.
const Version = 1

// MethodPrompt is the method of a prompt row's envelope (prompts are
// messages, not RPCs, but are bound the same way).
const MethodPrompt = "prompt"

// Window is how old a control input may be when it arrives: one issued
// earlier is refused as stale. It covers a phone sending while the session's
// happy reconnects, and leaves far more room than the clock difference
// `happy doctor` warns about (10 s).
const Window = 10 * time.Minute

// MaxAhead is how far in the future an issue time may be (the sender's clock
// runs ahead of ours): later ones are refused as stale.
const MaxAhead = 2 * time.Minute

// Envelope is a control input as sealed by its sender. Its JSON form, inside
// the ciphertext, is
//
//	{"happyControl":1,"id":"<32 hex>","target":"<session or machine id>",
//	 "method":"<method>","iat":<unix ms>,"params":<any JSON>}
//
// id is 128 random bits written as 32 lowercase hex digits; target is the
// relay session id (session RPCs and prompts) or the machine id (machine
// RPCs); method is the RPC's name without its "<target>:" scope, or
// MethodPrompt; params is absent for a prompt (the prompt is the rest of the
// row).
type Envelope struct {
	ID       string          `json:"id"`
	Target   string          `json:"target"`
	Method   string          `json:"method"`
	IssuedAt int64           `json:"iat"`
	Params   json.RawMessage `json:"params,omitempty"`
}

// wire is Envelope with its version marker.
type wire struct {
	Version *int            `json:"happyControl"`
	ID      string          `json:"id"`
	Target  string          `json:"target"`
	Method  string          `json:"method"`
	Issued  *int64          `json:"iat"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// New makes the envelope of one control input: a fresh random id, the
// target and method it is for, now as its issue time, and params encoded as
// JSON (nil params: none, as for a prompt). It fails only when params cannot
// be encoded or the system's random source fails.
func New(target, method string, params any, now time.Time) (Envelope, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Envelope{}, fmt.Errorf("control: random id: %w", err)
	}
	e := Envelope{ID: hex.EncodeToString(id[:]), Target: target, Method: method, IssuedAt: now.UnixMilli()}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return Envelope{}, fmt.Errorf("control: encode params of %s: %w", method, err)
		}
		e.Params = b
	}
	return e, nil
}

// MarshalJSON writes the envelope with its version marker.
func (e Envelope) MarshalJSON() ([]byte, error) {
	v, iat := Version, e.IssuedAt
	return json.Marshal(wire{Version: &v, ID: e.ID, Target: e.Target, Method: e.Method, Issued: &iat, Params: e.Params})
}

// ErrNotEnvelope is returned by Parse for a JSON object without the
// "happyControl" member: an input in another dialect (the reference app's),
// which the caller may accept with what its shape allows, or refuse as
// unsealed.
var ErrNotEnvelope = errors.New("control: not a control envelope")

// Parse reads an envelope from a sealed input's plaintext. A plaintext that
// is an object without "happyControl" gives ErrNotEnvelope; one with it but
// malformed (another version, an id that is not 32 hex digits, no target,
// method or issue time, params present but null) gives a *Refusal with
// reason ReasonMalformed. Unknown members are ignored, so a newer sender's
// additions do not break an older receiver.
func Parse(plain []byte) (Envelope, error) {
	var w wire
	trimmed := bytes.TrimSpace(plain)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Envelope{}, &Refusal{Reason: ReasonMalformed, Detail: "the input is not a JSON object"}
	}
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return Envelope{}, &Refusal{Reason: ReasonMalformed, Detail: "the input is not valid JSON: " + err.Error()}
	}
	if w.Version == nil {
		return Envelope{}, ErrNotEnvelope
	}
	return w.envelope()
}

func (w wire) envelope() (Envelope, error) {
	bad := func(format string, a ...any) (Envelope, error) {
		return Envelope{}, &Refusal{Reason: ReasonMalformed, Detail: fmt.Sprintf(format, a...)}
	}
	switch {
	case *w.Version != Version:
		return bad("envelope version %d, this happy reads %d", *w.Version, Version)
	case !validID(w.ID):
		return bad("id %q is not 32 hex digits", w.ID)
	case w.Target == "":
		return bad("no target")
	case w.Method == "":
		return bad("no method")
	case w.Issued == nil:
		return bad("no issue time")
	case bytes.Equal(w.Params, []byte("null")):
		return bad("params are null")
	}
	return Envelope{ID: w.ID, Target: w.Target, Method: w.Method, IssuedAt: *w.Issued, Params: w.Params}, nil
}

func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Reason says why a control input was refused. The values are the Dropped
// reasons happy records on the transcript and the texts callers see.
type Reason string

// The reasons a control input is refused.
const (
	ReasonReplayed    Reason = "replayed"     // its id (or, for the reference app's dialect, its ciphertext) was consumed before
	ReasonWrongTarget Reason = "wrong_target" // sealed for another session, machine or method
	ReasonStale       Reason = "stale"        // issued outside Window / MaxAhead
	ReasonUnsealed    Reason = "unsealed"     // absent, null or clear params, or a dialect this receiver does not accept here
	ReasonMalformed   Reason = "malformed"    // claims to be an envelope but is not a valid one
	ReasonUnbound     Reason = "unbound"      // an answer that is not bound to the request (forged or replayed by the relay)
)

// Refusal is the error of a refused control input: its reason and what was
// wrong, e.g. `refused control input (replayed): id 3f… was used at …`.
type Refusal struct {
	Reason Reason
	Detail string
}

// Error says the reason and the detail.
func (r *Refusal) Error() string {
	if r.Detail == "" {
		return fmt.Sprintf("refused control input (%s)", r.Reason)
	}
	return fmt.Sprintf("refused control input (%s): %s", r.Reason, r.Detail)
}

// ReasonOf returns the reason of a *Refusal in err's chain, and false when
// there is none.
func ReasonOf(err error) (Reason, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

// Shape is what a method accepts in the reference app's dialect (an input
// with no envelope): a JSON object whose members are all in Required or
// Optional, with every Required one present and not null. The dialect has
// no binding, so this is what stops other ciphertexts the relay holds under
// the same key (metadata, agent state, transcript rows, all JSON objects)
// from being taken for a control input: their members are not the
// method's. A method whose dialect input is {} (no members) can tell
// nothing apart and takes no dialect at all.
type Shape struct {
	Required []string
	Optional []string
}

// Check refuses (a *Refusal, reason unsealed) a plaintext that is not of
// the shape.
func (s Shape) Check(plain []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(plain, &m); err != nil || m == nil {
		return &Refusal{Reason: ReasonUnsealed, Detail: "no envelope, and not a JSON object"}
	}
	for _, k := range s.Required {
		if v, ok := m[k]; !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return &Refusal{Reason: ReasonUnsealed, Detail: fmt.Sprintf("no envelope, and not the reference app's params for this method (no %q)", k)}
		}
	}
	for k := range m {
		if !slices.Contains(s.Required, k) && !slices.Contains(s.Optional, k) {
			return &Refusal{Reason: ReasonUnsealed, Detail: fmt.Sprintf("no envelope, and not the reference app's params for this method (member %q)", k)}
		}
	}
	return nil
}
