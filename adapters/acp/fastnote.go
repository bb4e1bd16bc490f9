package acp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// This file holds the one-pass forms of happy's own records in the
// traffic: a note (happyNote) and the id it names. Each gives what
// json.Unmarshal gives (FuzzNote); a note whose names encoding/json would
// match without their exact spelling (it folds case) takes json.Unmarshal.

// noteFields are the JSON names of happyNote's fields.
var noteFields = [...]string{"happy", "request", "decision", "reason", "path", "existed", "before", "beforeOmitted"}

// noteGeneral reads a note with json.Unmarshal (apart, so that noteOf's
// own note stays on its stack).
func noteGeneral(data []byte) (happyNote, bool) {
	var n happyNote
	err := json.Unmarshal(data, &n)
	return n, err == nil
}

// noteOf reads a note as json.Unmarshal into a happyNote does; ok is
// false where it fails. data is a valid JSON object (a frame jsonrpc
// validated).
func noteOf(data []byte) (happyNote, bool) {
	var n happyNote
	o, ok := members(data)
	if !ok {
		return noteGeneral(data)
	}
	for i := range o.n {
		m := o.at(i)
		k := string(m.k)
		field := -1
		for j, f := range noteFields {
			if k == f {
				field = j
				break
			}
			if strings.EqualFold(k, f) || !ascii(k) {
				// encoding/json would match this name to a field too.
				return noteGeneral(data)
			}
		}
		if field < 0 {
			continue
		}
		v := m.v
		null := isNull(v)
		switch field {
		case 1: // request: json.RawMessage, copied, null included
			n.Request = bytes.Clone(bytes.TrimSpace(v))
		case 5: // existed: bool
			switch string(bytes.TrimSpace(v)) {
			case "true":
				n.Existed = true
			case "false":
				n.Existed = false
			case "null":
			default:
				return happyNote{}, false
			}
		case 7: // beforeOmitted: int64
			if null {
				continue
			}
			x, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return happyNote{}, false
			}
			n.BeforeOmitted = x
		default: // strings
			if null {
				continue
			}
			s, ok := noteWords[string(v)] // a known word written plainly: no string made
			if !ok || field > 3 {
				if s, ok = str(v); !ok {
					return happyNote{}, false
				}
			}
			switch field {
			case 0:
				n.Happy = s
			case 2:
				n.Decision = s
			case 3:
				n.Reason = s
			case 4:
				n.Path = s
			case 6:
				n.Before = s
			}
		}
	}
	return n, true
}

// noteWords are the words of the happy, decision and reason members of
// happy's notes, by their JSON text (quoted), each its string.
var noteWords = func() map[string]string {
	m := map[string]string{}
	for _, w := range []string{noteDecision, noteFSWrite, noteAbandoned, noteRestart, noteHistoryKnown,
		string(agent.DecisionOnce), string(agent.DecisionAlways), string(agent.DecisionReject),
		agent.ReasonCancelled, agent.ReasonAgentExited, agent.ReasonTimeout, agent.ReasonAnsweredInAgent,
		agent.ReasonWrapperExited, agent.ReasonRule} {
		m[strconv.Quote(w)] = w
	}
	return m
}()

// at returns the i-th member of o, in order.
func (o *obj) at(i int) member {
	if i < inlineMembers {
		return o.kv[i]
	}
	return o.more[i-inlineMembers]
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// idKeyOf is rawIDKey read in one pass: a string quoted, null as the
// empty string, a number as written, anything else "". raw is valid JSON
// (a member of a validated frame).
func idKeyOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return rawIDKey(raw)
	}
	switch c := raw[0]; {
	case c == '"':
		if s, ok := str(raw); ok {
			return strconv.Quote(s)
		}
	case c == 'n':
		if string(raw) == "null" {
			return `""`
		}
	case c == '-' || c >= '0' && c <= '9':
		if jsonlex.Valid(raw) {
			return string(raw)
		}
	}
	return rawIDKey(raw)
}

// outcomeFast is outcomeGeneral read in one pass (FuzzOutcome compares
// them); known is false for what it leaves to encoding/json: a name it
// would fold to "outcome" or "optionId", or a result that is not valid
// JSON.
func outcomeFast(result json.RawMessage) (o Outcome, ok, known bool) {
	result = bytes.TrimSpace(result)
	if len(result) == 0 || result[0] != '{' {
		return Outcome{}, false, true
	}
	if !jsonlex.Valid(result) {
		return Outcome{}, false, false
	}
	r, ok := members(result)
	if !ok {
		return Outcome{}, false, false
	}
	// The decoded *struct{Outcome string; OptionID *string}: a repeated
	// "outcome" object decodes into the same struct; null drops it.
	var (
		have    bool
		outcome string
		option  *string
	)
	for i := range r.n {
		m := r.at(i)
		switch k := string(m.k); {
		case k == "outcome":
		case strings.EqualFold(k, "outcome") || !ascii(k):
			return Outcome{}, false, false
		default:
			continue
		}
		v := bytes.TrimSpace(m.v)
		if string(v) == "null" {
			have, outcome, option = false, "", nil
			continue
		}
		in, ok := members(v)
		if !ok {
			return Outcome{}, false, true // not an object: a type error
		}
		if !have {
			have, outcome, option = true, "", nil
		}
		for j := range in.n {
			im := in.at(j)
			iv := bytes.TrimSpace(im.v)
			switch k := string(im.k); {
			case k == "outcome":
				if string(iv) == "null" {
					continue
				}
				s, ok := str(iv)
				if !ok {
					return Outcome{}, false, true
				}
				outcome = s
			case k == "optionId":
				if string(iv) == "null" {
					option = nil
					continue
				}
				s, ok := str(iv)
				if !ok {
					return Outcome{}, false, true
				}
				option = &s
			case strings.EqualFold(k, "outcome") || strings.EqualFold(k, "optionId") || !ascii(k):
				return Outcome{}, false, false
			}
		}
	}
	if !have {
		return Outcome{}, false, true
	}
	switch outcome {
	case "cancelled":
		return Outcome{Cancelled: true}, true, true
	case "selected":
		if option != nil {
			return Outcome{OptionID: *option}, true, true
		}
	}
	return Outcome{}, false, true
}
