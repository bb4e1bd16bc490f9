package mapper

// Low-level JSON for the transcript codec.
//
// Reading goes through internal/jsonlex: a document is checked once with
// json.Valid, then split into object members and array elements kept as
// raw byte slices, so that the decoder checks presence, JSON type,
// duplicates and unknown members itself, and names the exact path of every
// refusal.
//
// Writing: a hand-written appender produces the canonical form: members in
// a fixed order per type, map keys sorted, no insignificant whitespace, no
// HTML escaping, invalid UTF-8 replaced by U+FFFD, numbers in free-form
// objects written with their exact text.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// DecodeObject decodes a JSON object (tool input, metadata) into an Object,
// keeping every number's exact text as a json.Number (jsonlex.DecodeObject).
// Anything but an object is refused: a JSON array in particular is never
// turned into an object (seed 002: tool arguments that are an array are
// refused, because [1,2] shown as {"0":1,"1":2} misrepresents what a person
// authorises). The error is a *FieldError wrapping ErrInvalid, with reason
// unparseable_json or not_an_object.
func DecodeObject(raw []byte) (agent.Object, error) {
	o, err := jsonlex.DecodeObject(raw)
	if err != nil {
		return nil, rootError(err)
	}
	return o, nil
}

// rootError translates an error of jsonlex.Root or jsonlex.DecodeObject
// into a *FieldError with its drop reason.
func rootError(err error) error {
	var ke *jsonlex.KindError
	switch {
	case errors.As(err, &ke):
		return &FieldError{Reason: agent.DropNotAnObject, Msg: err.Error()}
	case errors.Is(err, jsonlex.ErrSyntax):
		return &FieldError{Reason: agent.DropUnparseableJSON, Msg: "not valid JSON"}
	}
	return &FieldError{Reason: agent.DropInvalidField, Msg: err.Error()}
}

// EncodeObject writes an Object in canonical form: keys sorted, numbers as
// given, no HTML escaping. A nil Object is written as {}.
func EncodeObject(o agent.Object) ([]byte, error) {
	var e encoder
	if err := e.object(o); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// parseInt reads a JSON number that must be an integer in int64 range.
func parseInt(raw []byte) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("integer %s is out of range", agent.CutUTF8(string(raw), 32))
	}
	return 0, fmt.Errorf("want an integer, got %s", agent.CutUTF8(string(raw), 32))
}

// parseFloat reads a JSON number as a finite float64.
func parseFloat(raw []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("number %s is out of range", agent.CutUTF8(string(raw), 32))
	}
	return v, nil
}

// encoder appends canonical JSON to buf.
type encoder struct {
	buf []byte
}

// sep writes the comma that separates this member or element from the
// previous one: none right after an opening brace or bracket.
func (e *encoder) sep() {
	if n := len(e.buf); n > 0 && e.buf[n-1] != '{' && e.buf[n-1] != '[' {
		e.buf = append(e.buf, ',')
	}
}

func (e *encoder) key(k string) {
	e.sep()
	e.str(k)
	e.buf = append(e.buf, ':')
}

const hexDigits = "0123456789abcdef"

// str writes a JSON string: control characters, quote and backslash
// escaped, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD, nothing else.
func (e *encoder) str(s string) {
	b := append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	e.buf = append(b, '"')
}

func (e *encoder) int(v int64) { e.buf = strconv.AppendInt(e.buf, v, 10) }

// float writes a float64 the way encoding/json does (shortest text that
// reads back to the same value; exponent form below 1e-6 and from 1e21).
func (e *encoder) float(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("cannot encode %v as JSON", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(e.buf, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	e.buf = b
	return nil
}

func (e *encoder) bool(v bool) {
	if v {
		e.buf = append(e.buf, "true"...)
	} else {
		e.buf = append(e.buf, "false"...)
	}
}

// object writes a free-form object with sorted keys; nil is written as {}.
func (e *encoder) object(o map[string]any) error {
	e.buf = append(e.buf, '{')
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.key(k)
		if err := e.any(o[k]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) strings(a []string) {
	e.buf = append(e.buf, '[')
	for _, s := range a {
		e.sep()
		e.str(s)
	}
	e.buf = append(e.buf, ']')
}

// any writes a free-form value. Values of types outside the representation
// jsonlex.ParseAny produces (structs, typed maps and slices) are converted
// through encoding/json and jsonlex.ParseAny first, so their encoding is as
// canonical as anything read back.
func (e *encoder) any(v any) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.bool(x)
	case string:
		e.str(x)
	case json.Number:
		if !jsonlex.IsNumber(string(x)) {
			return fmt.Errorf("invalid number literal %q", agent.CutUTF8(string(x), 32))
		}
		e.buf = append(e.buf, x...)
	case float64:
		return e.float(x)
	case float32:
		return e.float(float64(x))
	case int:
		e.int(int64(x))
	case int64:
		e.int(x)
	case int32:
		e.int(int64(x))
	case uint64:
		e.buf = strconv.AppendUint(e.buf, x, 10)
	case map[string]any:
		return e.object(x)
	case []any:
		e.buf = append(e.buf, '[')
		for i, el := range x {
			e.sep()
			if err := e.any(el); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		e.buf = append(e.buf, ']')
	case []string:
		e.strings(x)
	case json.RawMessage:
		raw := bytes.TrimSpace(x)
		if !json.Valid(raw) {
			return errors.New("invalid raw JSON value")
		}
		p, err := jsonlex.ParseAny(raw)
		if err != nil {
			return err
		}
		return e.any(p)
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		p, err := jsonlex.ParseAny(raw)
		if err != nil {
			return err
		}
		return e.any(p)
	}
	return nil
}

// raw writes an opaque JSON value in canonical form (as a free-form value:
// sorted keys, numbers as given).
func (e *encoder) raw(r json.RawMessage) error {
	if jsonlex.KindOf(bytes.TrimSpace(r)) == jsonlex.KindNull {
		return errors.New("null is not a value here; leave the field empty")
	}
	return e.any(r)
}
