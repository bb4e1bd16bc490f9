package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/media"
	"github.com/happy-dev/happy/mapper"
)

// Control-plane RPC method names, registered on the relay as
// "<relaySessionID>:<name>" (docs/ARCHITECTURE.md "The control plane").
const (
	MethodPermission = "permission"
	MethodAnswer     = "answer"
	MethodAbort      = "abort"
	MethodSwitch     = "switch"
)

// ErrBadControl is wrapped by every refusal of a control-plane input, so
// callers can answer the sender with an error instead of acting.
var ErrBadControl = errors.New("refused control input")

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadControl, fmt.Sprintf(format, a...))
}

// Answer is a decoded permission answer for one blocked tool call. Abort is
// set when the sender asked to abort the whole turn rather than decide; then
// Decision is DecisionReject and Reason is "cancelled" unless given.
type Answer struct {
	CallID     string
	Decision   agent.Decision
	Abort      bool
	Reason     string
	AllowTools []string // reference app: tools to allow for the session ("always")
	Mode       string   // reference app: permission mode to switch to, if any
}

// DecodePermission decodes the params of the "permission" RPC. Two shapes are
// accepted:
//
//	canonical: {"callID": "...", "decision": "once"|"always"|"reject", "reason"?: "..."}
//	reference app: {"id": "...", "approved": bool, "decision"?: "approved"|"approved_for_session"|"denied"|"abort",
//	                "reason"?, "mode"?, "allowTools"?: [...]}
//
// Anything else is refused with an error wrapping ErrBadControl: an unknown
// decision string, a missing call id, a missing approval, or an "approved"
// flag that contradicts the "decision" field. Nothing is ever mapped to allow
// by default (seed 002).
func DecodePermission(raw []byte) (Answer, error) {
	var p struct {
		CallID     *string         `json:"callID"`
		ID         *string         `json:"id"`
		Decision   *string         `json:"decision"`
		Approved   *bool           `json:"approved"`
		Reason     string          `json:"reason"`
		Mode       string          `json:"mode"`
		AllowTools json.RawMessage `json:"allowTools"`
	}
	if err := decodeObject(raw, &p); err != nil {
		return Answer{}, err
	}
	var a Answer
	a.Reason, a.Mode = p.Reason, p.Mode
	if len(p.AllowTools) > 0 && !bytes.Equal(p.AllowTools, []byte("null")) {
		if err := json.Unmarshal(p.AllowTools, &a.AllowTools); err != nil {
			return Answer{}, refuse("allowTools must be an array of strings")
		}
	}
	if p.CallID != nil {
		// Canonical shape.
		if *p.CallID == "" {
			return Answer{}, refuse("empty callID")
		}
		a.CallID = *p.CallID
		if p.Decision == nil {
			return Answer{}, refuse("missing decision")
		}
		d, err := agent.ParseDecision(*p.Decision)
		if err != nil {
			return Answer{}, refuse("decision %q is not once, always or reject", *p.Decision)
		}
		a.Decision = d
		return a, nil
	}
	if p.ID == nil || *p.ID == "" {
		return Answer{}, refuse("missing callID (or id)")
	}
	a.CallID = *p.ID
	if p.Decision != nil {
		switch *p.Decision {
		case "approved":
			a.Decision = agent.DecisionOnce
		case "approved_for_session":
			a.Decision = agent.DecisionAlways
		case "denied":
			a.Decision = agent.DecisionReject
		case "abort":
			a.Decision, a.Abort = agent.DecisionReject, true
			if a.Reason == "" {
				a.Reason = agent.ReasonCancelled
			}
		default:
			return Answer{}, refuse("decision %q is not approved, approved_for_session, denied or abort", *p.Decision)
		}
		if p.Approved != nil && *p.Approved != (a.Decision != agent.DecisionReject) {
			return Answer{}, refuse("approved=%t contradicts decision %q", *p.Approved, *p.Decision)
		}
		return a, nil
	}
	if p.Approved == nil {
		return Answer{}, refuse("missing approved (or decision)")
	}
	switch {
	case !*p.Approved:
		a.Decision = agent.DecisionReject
	case len(a.AllowTools) > 0:
		a.Decision = agent.DecisionAlways
	default:
		a.Decision = agent.DecisionOnce
	}
	return a, nil
}

// QuestionAnswer is a decoded answer to a question block: per question, the
// selected labels (or free text where the question allows it).
type QuestionAnswer struct {
	CallID  string
	Answers [][]string
}

// DecodeQuestionAnswer decodes the params of the "answer" RPC:
// {"callID": "...", "answers": [["label", …], …]}. A missing call id, a
// missing or non-array answers field, or a non-string label is refused.
func DecodeQuestionAnswer(raw []byte) (QuestionAnswer, error) {
	var p struct {
		CallID  string          `json:"callID"`
		Answers json.RawMessage `json:"answers"`
	}
	if err := decodeObject(raw, &p); err != nil {
		return QuestionAnswer{}, err
	}
	if p.CallID == "" {
		return QuestionAnswer{}, refuse("missing callID")
	}
	var answers [][]string
	if len(p.Answers) == 0 || bytes.Equal(p.Answers, []byte("null")) {
		return QuestionAnswer{}, refuse("missing answers")
	}
	if err := json.Unmarshal(p.Answers, &answers); err != nil {
		return QuestionAnswer{}, refuse("answers must be an array of arrays of strings")
	}
	if len(answers) == 0 {
		return QuestionAnswer{}, refuse("answers is empty")
	}
	for i := range answers {
		if answers[i] == nil {
			answers[i] = []string{}
		}
	}
	return QuestionAnswer{CallID: p.CallID, Answers: answers}, nil
}

// DecodePrompt decodes a decrypted relay message that may be a prompt. It
// returns ok=false (and no error) for records that are not user prompts
// (assistant messages, session and todo records): those are for readers, not
// for the runner. Accepted prompt shapes:
//
//	canonical relay envelope: {"kind":"message","version":N,"info":{"role":"user",…},"parts":[{"type":"text","text":…},…]}
//	reference app legacy:     {"role":"user","content":{"type":"text","text":"…"}, …}
//
// A user record with no text and no file is refused, as is a legacy record
// whose content is not a text object.
func DecodePrompt(raw []byte) (p agent.Prompt, ok bool, err error) {
	var head struct {
		Kind    string          `json:"kind"`
		Role    string          `json:"role"`
		Info    json.RawMessage `json:"info"`
		Parts   json.RawMessage `json:"parts"`
		Content json.RawMessage `json:"content"`
	}
	if err := decodeObject(raw, &head); err != nil {
		return agent.Prompt{}, false, err
	}
	switch {
	case head.Kind == "message":
		var info struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		}
		if err := json.Unmarshal(head.Info, &info); err != nil {
			return agent.Prompt{}, false, refuse("message info is not an object")
		}
		if info.Role != string(mapper.RoleUser) {
			return agent.Prompt{}, false, nil
		}
		if info.ID == "" {
			return agent.Prompt{}, false, refuse("user message without id")
		}
		var parts []struct {
			Type     string          `json:"type"`
			Text     string          `json:"text"`
			Mime     string          `json:"mime"`
			Filename string          `json:"filename"`
			URL      string          `json:"url"`
			Source   json.RawMessage `json:"source"`
		}
		if err := json.Unmarshal(head.Parts, &parts); err != nil {
			return agent.Prompt{}, false, refuse("user message parts are not an array")
		}
		p.MessageID = info.ID
		var texts []string
		for _, part := range parts {
			switch part.Type {
			case string(mapper.PartText):
				texts = append(texts, part.Text)
			case string(mapper.PartFile):
				// A file part needs a type to be recorded (seed 001); one
				// without is given its name's, else octet-stream, a claim
				// the download checks.
				mime := part.Mime
				if mime == "" {
					mime = media.TypeByName(part.Filename)
				}
				if mime == "" {
					mime = "application/octet-stream"
				}
				p.Files = append(p.Files, agent.PromptFile{Mime: mime, Filename: part.Filename, URL: part.URL, Source: part.Source})
			}
		}
		p.Text = strings.Join(texts, "\n")
	case head.Kind == "" && head.Role == "user":
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(head.Content, &c); err != nil || c.Type != "text" {
			return agent.Prompt{}, false, refuse("legacy user message content is not {type:\"text\", text}")
		}
		p.Text = c.Text
	default:
		return agent.Prompt{}, false, nil
	}
	if strings.TrimSpace(p.Text) == "" && len(p.Files) == 0 {
		return agent.Prompt{}, false, refuse("empty prompt")
	}
	return p, true, nil
}

// decodeObject unmarshals raw into v, refusing anything that is not a JSON
// object with a reason (unparseable_json / not_an_object in the Dropped
// vocabulary).
func decodeObject(raw []byte, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if !json.Valid(trimmed) {
		return refuse("%s: not valid JSON", agent.DropUnparseableJSON)
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return refuse("%s: params must be a JSON object", agent.DropNotAnObject)
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return refuse("%s: %v", agent.DropInvalidField, err)
	}
	return nil
}

// StaleError is the refusal of an answer for a tool call that does not
// wait for one (already answered, never asked, or a typo): it names the
// call ids that do wait, in arrival order, so the person can retry with the
// right one. It unwraps to agent.ErrStale.
type StaleError struct {
	CallID   string   // the call id the answer named
	Question bool     // the answer was to a question (else to a permission)
	Waiting  []string // call ids waiting for the same kind of answer, oldest first
}

// Error says which call ids wait, e.g. `no tool call "x" waits for
// permission; waiting: call_1, call_2`.
func (e *StaleError) Error() string {
	what := "permission"
	if e.Question {
		what = "an answer"
	}
	if len(e.Waiting) == 0 {
		return fmt.Sprintf("no tool call %q waits for %s; nothing in this session waits for %s now", e.CallID, what, what)
	}
	return fmt.Sprintf("no tool call %q waits for %s; waiting: %s", e.CallID, what, strings.Join(e.Waiting, ", "))
}

// Unwrap returns agent.ErrStale.
func (e *StaleError) Unwrap() error { return agent.ErrStale }
