package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/internal/linereader"
)

// unmarshalFast decodes line into a fastRecord as decodeRecord's
// encoding/json path does (toolUseResult cut out and kept raw).
func unmarshalFast(line []byte) (fastRecord, error) {
	var f fastRecord
	body, tur, cut := line, []byte(nil), false
	if bytes.Contains(line, toolUseResultKey) {
		if body, tur, cut = jsonlex.CutField(line, "toolUseResult"); !cut {
			body = line
		}
	}
	err := json.Unmarshal(body, &f)
	if cut {
		f.ToolUseResult = tur
	}
	return f, err
}

// referenceRecord decodes line with encoding/json as decodeRecord does
// (the fast shape, else the general record after a type error) and puts
// the result in the form lexRecord gives it: message content as blocks
// (contentBlocks, as apiMessage.blocks would decode it later), a
// tool_result's string content as resultText, null content as none.
// Errors: json.Unmarshal's, or the content's when it does not decode.
func referenceRecord(line []byte) (record, error) {
	fr, err := unmarshalFast(line)
	var typeErr *json.UnmarshalTypeError
	if err == nil {
		return fr.general(), nil
	}
	if !errors.As(err, &typeErr) {
		return record{}, err
	}
	var r record
	body, tur, cut := line, []byte(nil), false
	if bytes.Contains(line, toolUseResultKey) {
		if body, tur, cut = jsonlex.CutField(line, "toolUseResult"); !cut {
			body = line
		}
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return record{}, err
	}
	if cut {
		r.ToolUseResult = tur
	}
	if m := r.Message; m != nil && !m.parsedOK {
		blocks, err := contentBlocks(m.Content)
		if err != nil {
			return record{}, err
		}
		for i := range blocks {
			b := &blocks[i]
			switch jsonlex.KindOf(b.Content) {
			case jsonlex.KindString:
				s, err := jsonlex.Unquote(b.Content)
				if err != nil {
					return record{}, err
				}
				b.resultText, b.Content = &s, nil
			case jsonlex.KindNull:
				b.Content = nil
			}
		}
		if blocks == nil && m.Content != nil {
			blocks = []contentBlock{}
		}
		m.parsed, m.parsedOK, m.Content = blocks, true, nil
	}
	return r, nil
}

func TestLexRecord(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
	}{
		{`{"type":"assistant","uuid":"u","parentUuid":null,"message":{"id":"m","role":"assistant","content":[{"type":"text","text":"a\nb"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":4}}}`, true},
		{`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out","is_error":false}]},"toolUseResult":{"stdout":"out"}}`, true},
		{`{"type":"summary","summary":"s \u00e9","leafUuid":"x"}`, true},
		{`{"type":"system","subtype":"api_error","retryAttempt":2,"error":{"status":529},"total_cost_usd":0.5,"isMeta":null}`, true},
		{`{"type":"user","message":{"content":"plain prompt \u00e9"}}`, true},
		{`{"type":"user","message":{"content":[{"type":"tool_result","content":[]}]}}`, true},
		{`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","data":"x"}}]}]}}`, true},
		{`{"type":"user","message":{"content":[{"type":"tool_result","content":"a","content":[1]},{"type":"tool_result","content":{},"content":"b"},{"type":"tool_result","content":7,"content":null}]}}`, true},
		{`{"type":"assistant","message":{"content":[{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"u"}]}]}}`, true},
		{`{"type":"user","message":{"content":[]}}`, true},
		{`{"type":"user","message":{"content":null}}`, false},
		{`{"type":"user","message":{"content":7}}`, false},
		{`{"type":"user","message":{"content":"a","content":[]}}`, false}, // repeated content
		{`{"type":"user","message":{"content":[{"type":"text"},7]}}`, false},
		{`{"Type":"user"}`, false},                                          // another case
		{`{"ty\u0070e":"user"}`, false},                                     // escaped name
		{`{"type":"system","retryAttempt":1.5}`, false},                     // not an int
		{`{"type":"system","error":null}`, false},                           // null raw value
		{`{"type":"x","message":{"id":"a"},"message":{"role":"b"}}`, false}, // repeated object
		{`{"type":"x","message":{"content":[{"type":"image","source":{"type":"base64"}}]}}`, false},
		{`{"type":"result","is_error":"yes"}`, false},
	}
	for _, tt := range tests {
		var f record
		ok := lexRecord([]byte(tt.line), &f)
		if ok != tt.ok {
			t.Errorf("lexRecord(%s) ok = %v, want %v", tt.line, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		want, err := referenceRecord([]byte(tt.line))
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if !reflect.DeepEqual(f, want) {
			t.Errorf("lexRecord(%s) =\n%+v\nwant\n%+v", tt.line, f, want)
		}
	}
}

// FuzzLexRecord checks the one-pass record decoder against encoding/json:
// whenever it accepts a valid line, json.Unmarshal accepts it too and
// fills the same struct.
func FuzzLexRecord(f *testing.F) {
	fuzzSeeds(f, func(l []byte) { f.Add(l) })
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"\ud83d\ude00 \u0000","signature":"s"}],"usage":{"input_tokens":-0}}}`))
	f.Add([]byte(`{"type":"user","message":{"content":"a\u00e9\nb"}}`))
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}],"content":"y"}]}}`))
	f.Add([]byte(`{"type":"user","isSidechain":true,"message":{"content":[{"type":"tool_result","tool_use_id":"t","content":null,"is_error":true}]},"toolUseResult":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if !jsonlex.Valid(line) || bytes.TrimSpace(line)[0] != '{' {
			return
		}
		var got record
		if !lexRecord(line, &got) {
			return
		}
		want, err := referenceRecord(line)
		if err != nil {
			t.Fatalf("lexRecord accepted a line json.Unmarshal refuses (%v): %s", err, line)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("lexRecord(%s) =\n%+v\nencoding/json\n%+v", line, got, want)
		}
	})
}

// FuzzLexDecode feeds the same lines to a decoder that decodes records in
// one pass and to one that decodes every record with encoding/json: they
// emit the same events (compared at the end, after the line reader reused
// its buffer: no event aliases a line).
func FuzzLexDecode(f *testing.F) {
	var seed [][]byte
	fuzzSeeds(f, func(l []byte) {
		if len(l) < 4096 {
			seed = append(seed, l)
		}
	})
	for i := 0; i+3 <= len(seed); i += 3 {
		f.Add(bytes.Join(seed[i:i+3], []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, form := range []Form{FormSessionJSONL, FormStreamJSON, FormTrafficLog} {
			fast, _ := NewDecoder(form, Options{Recent: 16})
			slow, _ := NewDecoder(form, Options{Recent: 16})
			slow.noLex = true
			lr, _ := linereader.New(bytes.NewReader(data), linereader.Options{ReadSize: 16})
			var a, b []agent.Event
			for {
				l, err := lr.Next()
				if err != nil {
					break
				}
				a = append(a, fast.DecodeLine(l)...)
				b = append(b, slow.DecodeLine(l)...)
			}
			a = append(a, fast.Finish(EndOfStream{})...)
			b = append(b, slow.Finish(EndOfStream{})...)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("one pass\n%s\nencoding/json\n%s", dumpEvents(a), dumpEvents(b))
			}
		}
	})
}

// TestLexDecodeCaptures decodes every capture both ways: the same events.
func TestLexDecodeCaptures(t *testing.T) {
	n, lexed := 0, 0
	fuzzSeeds(t, func(l []byte) {
		n++
		if jsonlex.Valid(l) && lexRecord(l, new(record)) {
			lexed++
		}
	})
	if n == 0 || lexed*2 < n {
		t.Fatalf("%d of %d capture lines decoded in one pass, want most", lexed, n)
	}
}

func dumpEvents(evs any) string {
	b, _ := json.MarshalIndent(evs, "", " ")
	return string(b)
}

// numberByDecoder is what preferFullOutput did before numberOf: a
// json.Decoder with UseNumber.
func numberByDecoder(v []byte) (json.Number, bool) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	return n, dec.Decode(&n) == nil
}

func TestNumberOf(t *testing.T) {
	tests := []struct {
		raw  string
		want json.Number
		ok   bool
	}{
		{`106000`, "106000", true},
		{`-1.5e3`, "-1.5e3", true},
		{`null`, "", true},
		{`"42"`, "42", true},
		{`"4\u0032"`, "42", true},
		{`"x"`, "", false},
		{`""`, "", false},
		{`true`, "", false},
		{`{}`, "", false},
		{``, "", false},
	}
	for _, tt := range tests {
		got, ok := numberOf([]byte(tt.raw))
		if got != tt.want || ok != tt.ok {
			t.Errorf("numberOf(%s) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
		if ref, refOK := numberByDecoder([]byte(tt.raw)); ref != got || refOK != ok {
			t.Errorf("numberOf(%s) = %q, %v; encoding/json %q, %v", tt.raw, got, ok, ref, refOK)
		}
	}
}

// FuzzNumberOf compares numberOf with encoding/json on valid values.
func FuzzNumberOf(f *testing.F) {
	for _, s := range []string{`1`, `"2"`, `null`, `"1e"`, `[1]`, `"\u0031"`, `-0.0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !jsonlex.Valid(raw) || len(bytes.TrimSpace(raw)) != len(raw) {
			return
		}
		got, ok := numberOf(raw)
		if ref, refOK := numberByDecoder(raw); ref != got || refOK != ok {
			t.Fatalf("numberOf(%s) = %q, %v; encoding/json %q, %v", raw, got, ok, ref, refOK)
		}
	})
}
