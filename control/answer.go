package control

import (
	"bytes"
	"encoding/json"
)

// Answer is an RPC's answer to an Envelope, sealed by the callee with the
// same key. Its JSON form is
//
//	{"happyControl":1,"re":"<the request's id>","result":<any JSON>}
//	{"happyControl":1,"re":"<the request's id>","error":"<text>","reason":"<Reason>"?}
//
// re binds it to one request: an answer the relay kept from an earlier call,
// or one a squatting socket made up (it cannot seal), does not pass
// OpenAnswer.
type Answer struct {
	Re     string          `json:"re"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Reason Reason          `json:"reason,omitempty"`
}

// MarshalJSON writes the answer with its version marker.
func (a Answer) MarshalJSON() ([]byte, error) {
	type plain Answer
	return json.Marshal(struct {
		Version int `json:"happyControl"`
		plain
	}{Version, plain(a)})
}

// CalleeError is OpenAnswer's error when the callee answered with an error
// (it refused the input, or acting on it failed). Its text is the callee's;
// it unwraps to a *Refusal when the callee gave a reason.
type CalleeError struct {
	Msg    string
	Reason Reason // "" when the callee refused for another cause (e.g. nothing waits for that call)
}

// Error is the callee's text, with the refusal's reason when it gave one.
func (e *CalleeError) Error() string {
	if e.Reason != "" {
		return (&Refusal{Reason: e.Reason, Detail: e.Msg}).Error()
	}
	return e.Msg
}

// Unwrap returns the callee's *Refusal, or nil.
func (e *CalleeError) Unwrap() error {
	if e.Reason == "" {
		return nil
	}
	return &Refusal{Reason: e.Reason, Detail: e.Msg}
}

// OpenAnswer checks an answer's plaintext against the request id it must
// answer and returns its result. It fails with a *Refusal of reason
// ReasonUnbound when the plaintext is not an Answer or answers another
// request; with a *CalleeError when the callee answered with an error.
func OpenAnswer(plain []byte, requestID string) (json.RawMessage, error) {
	var w struct {
		Version *int            `json:"happyControl"`
		Re      string          `json:"re"`
		Result  json.RawMessage `json:"result"`
		Error   string          `json:"error"`
		Reason  Reason          `json:"reason"`
	}
	trimmed := bytes.TrimSpace(plain)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &w) != nil || w.Version == nil {
		return nil, &Refusal{Reason: ReasonUnbound, Detail: "the answer is not a sealed control answer (an older happy, or not the session's)"}
	}
	if *w.Version != Version || w.Re != requestID {
		return nil, &Refusal{Reason: ReasonUnbound, Detail: "the answer is for another request (replayed or forged by the relay)"}
	}
	if w.Error != "" {
		return nil, &CalleeError{Msg: w.Error, Reason: w.Reason}
	}
	if len(w.Result) == 0 {
		return json.RawMessage("null"), nil
	}
	return w.Result, nil
}
