package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// bothWays decodes frames with a decoder taking the one-pass forms and
// with one taking the general path throughout, Finish included, and
// fails when their events differ in any field.
func bothWays(t *testing.T, name string, frames []jsonrpc.Frame) int {
	t.Helper()
	fast, slow := NewDecoder(), NewDecoder()
	slow.general = true
	var a, b []agent.Event
	var seen []string // each one-pass event encoded as it came out
	for _, f := range frames {
		evs := fast.Decode(f)
		for _, e := range evs {
			seen = append(seen, dumpEvent(e))
		}
		a = append(a, evs...)
		b = append(b, slow.Decode(f)...)
	}
	a = append(a, fast.Finish()...)
	b = append(b, slow.Finish()...)
	// The one pass shares values between events and keeps arrays a later
	// update writes over (pooled tools, content written in place): an
	// event must read at the end as it did when it came out.
	for i := range seen {
		if now := dumpEvent(a[i]); now != seen[i] {
			t.Fatalf("%s: event %d changed after it came out:\nthen %s\nnow  %s", name, i, seen[i], now)
		}
	}
	if !reflect.DeepEqual(a, b) {
		for i := range min(len(a), len(b)) {
			if !reflect.DeepEqual(a[i], b[i]) {
				t.Fatalf("%s: event %d differs:\none pass %s\ngeneral  %s", name, i, dumpEvent(a[i]), dumpEvent(b[i]))
			}
		}
		t.Fatalf("%s: %d events one pass, %d general", name, len(a), len(b))
	}
	return len(a)
}

var sessionRE = regexp.MustCompile(`"sessionId":"[^"]*"`)

func dumpEvent(e agent.Event) string {
	b, err := json.Marshal(e)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestOnePassCaptures decodes every real capture and regression scenario
// both ways: the same events, exactly.
func TestOnePassCaptures(t *testing.T) {
	for _, name := range captures {
		frames, _, err := readFrames(bytes.NewReader(readCapture(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		if n := bothWays(t, name, frames); n == 0 {
			t.Fatalf("%s: no events", name)
		}
		// Three times to one decoder, as MapTraffic's x10 feeds it: the
		// tools of later turns reuse the tool structs earlier ones gave
		// back (resetTools, toolPool), which must hold nothing of them.
		var thrice []jsonrpc.Frame
		for range 3 {
			thrice = append(thrice, frames...)
		}
		bothWays(t, name+" x3", thrice)
	}
	for name, frames := range regressionCases(t) {
		bothWays(t, name, frames)
	}
}

// TestDecodersShareToolPool decodes every capture in several goroutines
// at once, a decoder each, as a daemon runs sessions: the tool structs
// one decoder gives back at a turn's end (toolPool) are taken by the
// others. Each run's events, encoded once the run is over, must be those
// of the same capture decoded alone; a *tool kept past its turn would
// show here as a changed event, and under -race as a data race.
func TestDecodersShareToolPool(t *testing.T) {
	type capture struct {
		name   string
		frames []jsonrpc.Frame
		want   []string
	}
	var caps []capture
	decodeAll := func(frames []jsonrpc.Frame) []string {
		dec := NewDecoder()
		var evs []agent.Event
		for _, f := range frames {
			evs = append(evs, dec.Decode(f)...)
		}
		evs = append(evs, dec.Finish()...)
		out := make([]string, len(evs))
		for i, e := range evs {
			out[i] = dumpEvent(e)
		}
		return out
	}
	for _, name := range captures {
		frames, _, err := readFrames(bytes.NewReader(readCapture(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		caps = append(caps, capture{name, frames, decodeAll(frames)})
	}
	const workers, rounds = 4, 5
	errs := make(chan string, workers*rounds*len(caps))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				for i := range caps {
					c := caps[(i+w)%len(caps)]
					if got := decodeAll(c.frames); !slices.Equal(got, c.want) {
						errs <- fmt.Sprintf("worker %d round %d: %s: events differ from the capture decoded alone", w, r, c.name)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// FuzzOnePass feeds arbitrary frames (as FuzzDecoder does: '<' agent,
// '>' happy, '#' note, '!' exit, after a preamble that opens session "s"
// with a prompt in flight) to both paths: the same events.
func FuzzOnePass(f *testing.F) {
	for _, name := range captures {
		raw, err := os.ReadFile(filepath.Join("testdata", "captures", name, "rpc-traffic.jsonl"))
		if err != nil {
			f.Fatal(err)
		}
		frames, _, err := readFrames(bytes.NewReader(raw))
		if err != nil {
			f.Fatal(err)
		}
		// The agent's frames of each capture, a few at a time (after the
		// preamble their session is not open, so the session id is
		// rewritten to "s").
		var seed [][]byte
		for _, fr := range frames {
			if fr.Dir != trafficlog.A2C || !fr.HasMsg() || len(fr.Data) > 4096 {
				continue
			}
			seed = append(seed, []byte("< "+sessionRE.ReplaceAllString(string(fr.Data), `"sessionId":"s"`)))
		}
		for i := 0; i+4 <= len(seed); i += 4 {
			f.Add(bytes.Join(seed[i:i+4], []byte("\n")))
		}
	}
	// The same input again, written otherwise (TestRepeatedInputOtherText).
	f.Add([]byte("< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","kind":"execute","status":"pending","rawInput":{"command":"ls","x":1}}}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"in_progress","rawInput":{ "x" : 1, "command" : "ls" }}}}`))
	// States the captures' agent frames alone do not reach: an OpenCode
	// agent (tools named by their first title), an input the parse must
	// read (not UTF-8) under part members, a file write happy answered,
	// and a second turn.
	f.Add([]byte("> " + `{"jsonrpc":"2.0","id":90,"method":"initialize","params":{"protocolVersion":1}}` +
		"\n< " + `{"jsonrpc":"2.0","id":90,"result":{"protocolVersion":1,"agentInfo":{"name":"OpenCode","version":"1"}}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"o1","title":"bash","kind":"execute","status":"pending","rawInput":{"command":"ls"}}}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"o1","title":"ls -la","status":"completed","rawOutput":{"output":"a"}}}}`))
	f.Add([]byte("< " + "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"u\",\"kind\":\"read\",\"status\":\"pending\",\"rawInput\":{\"path\":\"/w/a\xff\",\"extra\":1}}}}" +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"u","locations":[{"path":"/w/a"}]}}}` +
		"\n< " + `{"jsonrpc":"2.0","id":91,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/w/b.txt","content":"x"}}` +
		"\n> " + `{"jsonrpc":"2.0","id":91,"result":null}` +
		"\n< " + `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}` +
		"\n> " + `{"jsonrpc":"2.0","id":92,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"again"}]}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"u","kind":"edit","status":"pending","rawInput":{"path":"/w/b.txt"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := script(opened...)
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			dir := trafficlog.A2C
			switch line[0] {
			case '>':
				dir = trafficlog.C2A
			case '#':
				dir = trafficlog.Note
			case '!':
				dir = trafficlog.Exit
			}
			frames = append(frames, frame(int64(10+i), dir, string(bytes.TrimSpace(line[1:]))))
		}
		bothWays(t, "fuzz", frames)
	})
}

// FuzzMembers checks obj against jsonlex.ObjectMap (what json.Unmarshal
// into a map[string]json.RawMessage gives): for every valid object, the
// same verdict and the same value for each name.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x","a":[2]}`, `{"se\u0073sionId":"s","sessionId":"t"}`, `{}`, ` {"k" : null } `, `[1]`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonlex.Valid(data) {
			return
		}
		o, ok := members(data)
		var m map[string]json.RawMessage
		var err error
		if isObject(data) {
			m, err = jsonlex.ObjectMap(bytes.TrimSpace(data))
		}
		if ok != (isObject(data) && err == nil) {
			t.Fatalf("members ok = %v, ObjectMap error %v", ok, err)
		}
		if !ok {
			return
		}
		n := 0
		for k, v := range m {
			if got := o.get(k); !bytes.Equal(got, v) {
				t.Fatalf("get(%q) = %s, want %s", k, got, v)
			}
			n++
		}
		if (o.n == 0) != (n == 0) {
			t.Fatalf("%d members, map has %d", o.n, n)
		}
		if o.get("\x00absent") != nil {
			t.Fatal("a name the object lacks has a value")
		}
	})
}

// FuzzStrings checks stringsOf against json.Unmarshal into a []string.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{`["bash","-lc","ls \u00e9"]`, `null`, `[]`, `["a",null]`, `["a",1]`, `{"a":1}`, ` [ "x" ] `, `"\xff"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonlex.Valid(data) {
			return
		}
		got, ok := stringsOf(data)
		var want []string
		err := json.Unmarshal(data, &want)
		if ok != (err == nil) || (ok && (len(got) != len(want) || !reflect.DeepEqual(append([]string{}, got...), append([]string{}, want...)))) {
			t.Fatalf("stringsOf(%s) = %q, %v; json.Unmarshal %q, %v", data, got, ok, want, err)
		}
	})
}

// FuzzPatterns checks patternsOf against agent.ToolPatterns for every
// canonical tool name (and an MCP tool and an unknown one).
func FuzzPatterns(f *testing.F) {
	for _, s := range []string{`{"command":"ls -la"}`, `{"path":"/a/b","command":1}`, `{"pattern":"*.go","pattern":"x"}`,
		`{"url":null}`, `{"query":""}`, `{"agent":"\u00e9\ud800"}`, `{"p\u0061th":"y"}`, `[1]`, `null`, ``, ` {"command" : "x" } `} {
		f.Add([]byte(s))
	}
	names := []string{agent.ToolBash, agent.ToolRead, agent.ToolWrite, agent.ToolEdit, agent.ToolGlob, agent.ToolGrep,
		agent.ToolFetch, agent.ToolSearch, agent.ToolTask, agent.ToolTodo, agent.ToolOther, agent.MCPTool("srv", "t"), "mcp__x"}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range names {
			got, ok := patternsOf(name, data)
			want, wok := agent.ToolPatterns(name, data)
			if ok != wok || !reflect.DeepEqual(got, want) {
				t.Fatalf("patternsOf(%q, %s) = %q, %v; agent.ToolPatterns %q, %v", name, data, got, ok, want, wok)
			}
		}
	})
}

// FuzzNote checks noteOf against json.Unmarshal into a happyNote, and
// idKeyOf against rawIDKey, for every valid JSON value.
func FuzzNote(f *testing.F) {
	for _, s := range []string{`{"happy":"decision","request":"a-1","decision":"once"}`, `{"happy":"fs-write","request":7,"path":"/a","existed":true,"before":"x\u00e9","beforeOmitted":12}`,
		`{"happy":"x","happy":null}`, `{"Happy":"x"}`, `{"happy":1}`, `{"existed":null,"beforeOmitted":1.5}`, `{"request":null}`, `{"requeſt":1}`,
		`{"beforeOmitted":-0,"existed":"true"}`, `[1]`, `"s"`, `-1.5e3`, `null`, `true`, `{"reason":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonlex.Valid(data) {
			return
		}
		if got, want := idKeyOf(data), rawIDKey(data); got != want {
			t.Fatalf("idKeyOf(%s) = %q, rawIDKey %q", data, got, want)
		}
		if !isObject(data) {
			return
		}
		got, ok := noteOf(data)
		var want happyNote
		err := json.Unmarshal(data, &want)
		if ok != (err == nil) || ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("noteOf(%s) = %+v, %v; json.Unmarshal %+v, %v", data, got, ok, want, err)
		}
	})
}

// FuzzOutcome checks outcomeOf (one pass where it can) against
// outcomeGeneral (json.Unmarshal).
func FuzzOutcome(f *testing.F) {
	for _, s := range []string{`{"outcome":{"outcome":"selected","optionId":"allow"}}`, `{"outcome":{"outcome":"cancelled"}}`,
		`{"outcome":{"outcome":"selected","optionId":"a"},"outcome":{"outcome":"selected"}}`, `{"outcome":{"optionId":"a"},"outcome":null}`,
		`{"Outcome":{"outcome":"cancelled"}}`, `{"outcome":{"OptionId":"x","outcome":"selected"}}`, `{"outcome":"selected"}`,
		`{"outcome":{"outcome":1}}`, `{"outcome":{"outcome":"selected","optionId":null}}`, `[]`, `null`, `{"x":1}`, `{"outcome":{"outcome":"\u0063ancelled"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := outcomeOf(data)
		want, wok := outcomeGeneral(data)
		if ok != wok || got != want {
			t.Fatalf("outcomeOf(%s) = %+v, %v; outcomeGeneral %+v, %v", data, got, ok, want, wok)
		}
	})
}

// FuzzEncodeInput checks encodeInput against agent.EncodeInput for each
// canonical input, its strings and numbers taken from the fuzzer.
func FuzzEncodeInput(f *testing.F) {
	f.Add("ls -la", "list <files> & \"more\"", int64(5000), true)
	f.Add("", "", int64(0), false)
	f.Add("a\x00b\x1f\b\f\n\r\t\\\u2028\u2029\xff\xc3", "\u00e9\U0001F600", int64(-1), true)
	f.Fuzz(func(t *testing.T, a, b string, n int64, yes bool) {
		pa, pb, pn, py := &a, &b, &n, &yes
		if n%2 == 0 {
			pb, py = nil, nil
		}
		for _, v := range []any{
			agent.BashInput{Command: a, Description: b, Cwd: a + b, Timeout: pn},
			agent.BashInput{Command: a},
			agent.ReadInput{Path: a, Offset: pn, Limit: pn},
			agent.ReadInput{},
			agent.WriteInput{Path: a, Content: pb},
			agent.EditInput{Path: b, OldString: pa, NewString: pb, ReplaceAll: py, Diff: a},
			agent.EditInput{},
			agent.GlobInput{Pattern: a, Path: b},
			agent.GrepInput{Pattern: a, Path: b, Glob: a},
			agent.FetchInput{URL: a, Prompt: b},
			agent.SearchInput{Query: a},
			agent.TaskInput{Description: a, Prompt: b, Agent: a},
			agent.PlanInput{Plan: b},
			agent.TodoInput{Todos: []agent.TodoItem{{Content: a}}},
		} {
			if got, want := encodeInput(v), agent.EncodeInput(v); !bytes.Equal(got, want) {
				t.Fatalf("encodeInput(%#v) = %s, agent.EncodeInput %s", v, got, want)
			}
		}
	})
}

// TestSameMerged checks sameMerged against sameMeta of the union it
// stands for.
func TestSameMerged(t *testing.T) {
	one := json.Number("1")
	objs := []agent.Object{nil, {}, {"a": "x"}, {"a": "y"}, {"b": one}, {"a": "x", "b": one}, {"a": nil}, {"a": []any(nil)}, {"a": []any{}}}
	n := 0
	for _, a := range objs {
		for _, meta := range objs {
			for _, part := range objs {
				union := agent.Object{}
				maps.Copy(union, meta)
				maps.Copy(union, part)
				if got, want := sameMerged(a, meta, part), sameMeta(a, union); got != want {
					t.Errorf("sameMerged(%v, %v, %v) = %v, sameMeta %v", a, meta, part, got, want)
				}
				if sameMeta(a, union) {
					n++
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no case is the same")
	}
}

// TestOnePassToolCache changes one field at a time of a tool whose other
// fields stay, so a cached canonical input, metadata or announcement that
// missed the change would differ from the general path.
func TestOnePassToolCache(t *testing.T) {
	lines := append(append([]string{}, opened...),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"r","kind":"read","title":"Read","status":"pending"}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","locations":[{"path":"/w/a"}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","locations":[{"path":"/w/b","line":3}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","title":"Read b"}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","kind":"edit","content":[{"type":"diff","path":"/w/b","oldText":"x","newText":"y"}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","content":[{"type":"diff","path":"/w/b","oldText":"x","newText":"z"}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","content":[{"type":"diff","path":"/w/b","newText":"z"}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","rawInput":{"path":"/w/c"}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","rawInput":{"path":"/w/c"},"status":"in_progress"}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","rawInput":{"path":"/w/d"}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"r","_meta":{"claudeCode":{"toolName":"Write"}}}`),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"x","kind":"execute","title":"ls","status":"pending"}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"x","content":[{"type":"content","content":{"type":"text","text":"[current working directory /w] (list)"}}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"x","content":[{"type":"content","content":{"type":"text","text":"[current working directory /v] (list)"}}]}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"completed","rawOutput":{"output":"a"}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"completed","rawOutput":{"output":"b"}}`),
	)
	if n := bothWays(t, "tool cache", script(lines...)); n < 10 {
		t.Fatalf("%d events", n)
	}
}

// FuzzArray checks the one-pass array split (into a caller's buffer)
// against json.Unmarshal into a []json.RawMessage: the same verdict and
// the same elements, for every valid JSON value.
func FuzzArray(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `null`, `[1,"a",{"b":[2]},null]`, `["x\"]",[[]]]`, `{"a":1}`, `"s"`, `[1,2,3,4,5,6,7,8,9,10]`} {
		f.Add([]byte(s))
	}
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonlex.Valid(data) {
			return
		}
		var buf [4]json.RawMessage
		got, ok := d.array(buf[:0], data)
		var want []json.RawMessage
		err := json.Unmarshal(data, &want)
		if ok != (err == nil) || len(got) != len(want) {
			t.Fatalf("array(%s) = %q, %v; json.Unmarshal %q, %v", data, got, ok, want, err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("array(%s)[%d] = %s, want %s", data, i, got[i], want[i])
			}
		}
	})
}

// FuzzInt checks int64Of's one-pass form against json.Unmarshal into an
// int64 (null counting as no value).
func FuzzInt(f *testing.F) {
	for _, s := range []string{`0`, `-0`, `7`, ` 42 `, `-12`, `123456789012345678`, `1234567890123456789`, `9223372036854775808`,
		`1.5`, `1e3`, `null`, `"5"`, `[1]`, ``, `01`} {
		f.Add([]byte(s))
	}
	fast, slow := NewDecoder(), NewDecoder()
	slow.general = true
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonlex.Valid(data) {
			return
		}
		got, ok := fast.int64Of(data)
		var want int64
		err := json.Unmarshal(data, &want)
		wok := err == nil && !isNull(data)
		if ok != wok || (ok && got != want) {
			t.Fatalf("int64Of(%q) = %d, %v; json.Unmarshal %d, %v", data, got, ok, want, err)
		}
		if g, gok := slow.int64Of(data); gok != ok || g != got {
			t.Fatalf("general int64Of(%q) = %d, %v; one pass %d, %v", data, g, gok, got, ok)
		}
	})
}

// TestPlainInt pins the integers read in place and those left to
// json.Unmarshal.
func TestPlainInt(t *testing.T) {
	for _, c := range []struct {
		in string
		n  int64
		ok bool
	}{{"0", 0, true}, {"-0", 0, true}, {"17", 17, true}, {"-3", -3, true}, {"999999999999999999", 999999999999999999, true},
		{"1000000000000000000", 0, false}, {"01", 0, false}, {"-", 0, false}, {"", 0, false}, {"1.0", 0, false}, {"1e2", 0, false}} {
		if n, ok := plainInt([]byte(c.in)); n != c.n || ok != c.ok {
			t.Errorf("plainInt(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.ok)
		}
	}
	// Absent and null are no value, both ways.
	fast, slow := NewDecoder(), NewDecoder()
	slow.general = true
	for _, raw := range []string{"", " ", "null", " null "} {
		for _, d := range []*Decoder{fast, slow} {
			if n, ok := d.int64Of([]byte(raw)); ok || n != 0 {
				t.Errorf("int64Of(%q) = %d, %v (general %v)", raw, n, ok, d.general)
			}
		}
	}
	if n, ok := fast.int64Of(nil); ok || n != 0 {
		t.Errorf("int64Of(nil) = %d, %v", n, ok)
	}
}

// FuzzMembersLast checks membersLast against members: the same members
// of the object, and, when it splits the last member too, the same
// members as members of that member's value.
func FuzzMembersLast(f *testing.F) {
	for _, s := range []string{`{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}`, `{"update":{"a":1},"sessionId":"s"}`,
		`{"update":{"a":1}} `, ` { "a" : 1 , "update" : { "b" : "}" } } `, `{"upd\u0061te":{"x":[1]}}`, `{"update":{"a":1},"update":{"b":2}}`,
		`{"update":[1]}`, `{"update":1}`, `{}`, `[1]`, `{"update":{}}`, `{"update":{"a":{"b":{}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonlex.Valid(data) {
			return
		}
		o, u, ok, uok := membersLast(data, "update")
		want, wok := members(data)
		if ok != wok || !sameMembers(&o, &want) {
			t.Fatalf("membersLast(%s) = %v, %v; members %v, %v", data, ok, o, wok, want)
		}
		if !uok {
			return
		}
		wu, wuok := members(want.get("update"))
		if !wuok || !sameMembers(&u, &wu) {
			t.Fatalf("membersLast(%s) update = %v; members %v, %v", data, u, wu, wuok)
		}
	})
}

// sameMembers reports whether a and b hold the same members in the same
// order.
func sameMembers(a, b *obj) bool {
	if a.n != b.n || len(a.more) != len(b.more) {
		return false
	}
	for i := range min(a.n, inlineMembers) {
		if !bytes.Equal(a.kv[i].k, b.kv[i].k) || !bytes.Equal(a.kv[i].v, b.kv[i].v) {
			return false
		}
	}
	for i := range a.more {
		if !bytes.Equal(a.more[i].k, b.more[i].k) || !bytes.Equal(a.more[i].v, b.more[i].v) {
			return false
		}
	}
	return true
}
