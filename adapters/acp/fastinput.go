package acp

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
)

// encodeInput is agent.EncodeInput written straight for the canonical
// inputs of one level of strings, numbers and booleans (FuzzEncodeInput
// compares the two); the others (todos, questions) go to
// agent.EncodeInput.
func encodeInput(v any) json.RawMessage {
	if b, ok := encodeKnown(v); ok {
		return b
	}
	return agent.EncodeInput(v)
}

// encodeAs is the canonical input v encoded: by agent.EncodeInput in the
// general form (general), else by encodeInput. Generic so that the value
// is put in an interface apart for each: encodeKnown keeps none of it, so
// that one needs no allocation of its own (v of the one-pass form is not
// copied to the heap to be encoded).
func encodeAs[T any](general bool, v T) json.RawMessage {
	if !general {
		if b, ok := encodeKnown(v); ok {
			return b
		}
	}
	return agent.EncodeInput(v)
}

// encodeKnown is encodeInput for the inputs it writes itself; ok is false
// for the others (left to agent.EncodeInput). It keeps nothing of v.
func encodeKnown(v any) (json.RawMessage, bool) {
	w := inputWriter{b: make([]byte, 0, inputSize(v))}
	w.b = append(w.b, '{')
	switch v := v.(type) {
	case agent.BashInput:
		w.str("command", v.Command)
		w.str("description", v.Description)
		w.str("cwd", v.Cwd)
		w.int("timeout", v.Timeout)
	case agent.ReadInput:
		w.str("path", v.Path)
		w.int("offset", v.Offset)
		w.int("limit", v.Limit)
	case agent.WriteInput:
		w.str("path", v.Path)
		w.strPtr("content", v.Content)
	case agent.EditInput:
		w.str("path", v.Path)
		w.strPtr("oldString", v.OldString)
		w.strPtr("newString", v.NewString)
		if v.ReplaceAll != nil {
			w.name("replaceAll")
			w.b = strconv.AppendBool(w.b, *v.ReplaceAll)
		}
		w.str("diff", v.Diff)
	case agent.GlobInput:
		w.str("pattern", v.Pattern)
		w.str("path", v.Path)
	case agent.GrepInput:
		w.str("pattern", v.Pattern)
		w.str("path", v.Path)
		w.str("glob", v.Glob)
	case agent.FetchInput:
		w.str("url", v.URL)
		w.str("prompt", v.Prompt)
	case agent.SearchInput:
		w.str("query", v.Query)
	case agent.TaskInput:
		w.str("description", v.Description)
		w.str("prompt", v.Prompt)
		w.str("agent", v.Agent)
	case agent.PlanInput:
		w.str("plan", v.Plan)
	default:
		return nil, false
	}
	return append(w.b, '}'), true
}

// inputSize is room enough for encodeInput's JSON of v when its strings
// need no escapes: their lengths and 56 bytes for the names, quotes and
// numbers (an escape grows the slice as append does), so the input is
// one allocation of about its size, not a slice grown by doubling.
func inputSize(v any) int {
	n := 56
	add := func(p *string) {
		if p != nil {
			n += len(*p)
		}
	}
	switch v := v.(type) {
	case agent.BashInput:
		n += len(v.Command) + len(v.Description) + len(v.Cwd)
	case agent.ReadInput:
		n += len(v.Path)
	case agent.WriteInput:
		n += len(v.Path)
		add(v.Content)
	case agent.EditInput:
		n += len(v.Path) + len(v.Diff)
		add(v.OldString)
		add(v.NewString)
	case agent.GlobInput:
		n += len(v.Pattern) + len(v.Path)
	case agent.GrepInput:
		n += len(v.Pattern) + len(v.Path) + len(v.Glob)
	case agent.FetchInput:
		n += len(v.URL) + len(v.Prompt)
	case agent.SearchInput:
		n += len(v.Query)
	case agent.TaskInput:
		n += len(v.Description) + len(v.Prompt) + len(v.Agent)
	case agent.PlanInput:
		n += len(v.Plan)
	}
	return n
}

// inputWriter writes the members of a JSON object as encoding/json writes
// the fields of a struct: in order, omitempty ones left out.
type inputWriter struct {
	b    []byte
	some bool
}

func (w *inputWriter) name(n string) {
	if w.some {
		w.b = append(w.b, ',')
	}
	w.some = true
	w.b = append(w.b, '"')
	w.b = append(w.b, n...)
	w.b = append(w.b, '"', ':')
}

func (w *inputWriter) str(n, v string) {
	if v != "" {
		w.name(n)
		w.b = appendString(w.b, v)
	}
}

func (w *inputWriter) strPtr(n string, v *string) {
	if v != nil {
		w.name(n)
		w.b = appendString(w.b, *v)
	}
}

func (w *inputWriter) int(n string, v *int64) {
	if v != nil {
		w.name(n)
		w.b = strconv.AppendInt(w.b, *v, 10)
	}
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json writes it
// without HTML escaping: ", \ and control characters escaped (\b, \f, \n,
// \r, \t by name), bytes that are not UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
