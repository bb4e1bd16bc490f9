package codex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// trafficFiles are every recorded and synthetic traffic log of the
// package's testdata.
func trafficFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"testdata/captures/*/rpc-traffic.jsonl", "testdata/synthetic/*.jsonl"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, paths...)
	}
	if len(files) < 5 {
		t.Fatalf("found %d traffic logs, want the captures and synthetic logs", len(files))
	}
	return files
}

func trafficFrames(t testing.TB, path string) []jsonrpc.Frame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := jsonrpc.ReadTraffic(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr.Frames
}

// decodeBothWays feeds frames (reps times over) to a decoder that uses
// the one-pass readers and to one that decodes everything with
// encoding/json, and returns their events.
func decodeBothWays(frames []jsonrpc.Frame, reps int) (fast, general []agent.Event) {
	a, b := NewAppServerDecoder(), NewAppServerDecoder()
	b.general = true
	for range reps {
		for _, f := range frames {
			fast = append(fast, a.Decode(f)...)
			general = append(general, b.Decode(f)...)
		}
	}
	return fast, general
}

// TestLexTrafficSameEvents decodes every traffic log and regression
// script of testdata both ways (once, and replayed three times into the
// same decoder, which takes the paths of items and requests seen before):
// the same events, exactly.
func TestLexTrafficSameEvents(t *testing.T) {
	logs := map[string][]jsonrpc.Frame{}
	for _, path := range trafficFiles(t) {
		logs[path] = trafficFrames(t, path)
	}
	regressions, _ := filepath.Glob("testdata/regressions/*.jsonl")
	for _, path := range regressions {
		logs[path] = regressionFrames(t, path)
	}
	for path, frames := range logs {
		for _, reps := range []int{1, 3} {
			fast, general := decodeBothWays(frames, reps)
			if len(general) == 0 && filepath.Base(filepath.Dir(path)) != "codex0150-mcp-server" {
				t.Errorf("%s: no events", path)
			}
			if !reflect.DeepEqual(fast, general) {
				t.Errorf("%s x%d: one-pass and encoding/json events differ\none pass:\n%s\nencoding/json:\n%s",
					path, reps, dumpEvents(fast), dumpEvents(general))
			}
		}
	}
}

// TestLexDecodeCases decodes short scripts both ways (one frame a line,
// as FuzzLexDecode reads its input): the same events.
func TestLexDecodeCases(t *testing.T) {
	start := `c{"id":1,"method":"thread/start","params":{}}
a{"id":1,"result":{"thread":{"id":"th"}}}
a{"method":"turn/started","params":{"threadId":"th","turn":{"id":"tu"}}}
`
	for _, script := range []string{
		// A child thread with an empty id: a notification without
		// threadId is still refused.
		start + `a{"method":"item/started","params":{"threadId":"th","item":{"type":"collabAgentToolCall","id":"c","tool":"spawn","receiverThreadIds":[""]}}}
a{"method":"item/agentMessage/delta","params":{"threadId":"","itemId":"m","delta":"x"}}`,
		// Ids in other cases, escapes, repeats and types.
		start + `a{"method":"item/agentMessage/delta","params":{"threadId":"th","ItemId":"m","delta":"x"}}
a{"method":"item/agentMessage/delta","params":{"threadId":"t\u0068","itemId":"m","delta":"y","delta":5}}
a{"method":"item/agentMessage/delta","params":{"threadId":"th","itemId":"m","delta":"z"},"emittedAtMs":1.5}
a{"method":"thread/tokenUsage/updated","params":{"threadId":"th","tokenUsage":{"last":{"inputTokens":3},"Last":null}}}
a{"method":"thread/tokenUsage/updated","params":{"threadId":"th","tokenUsage":{"last":{"inputTokens":3.0}}}}
a{"method":"error","params":{"threadId":"th","turnId":"tu","error":{"message":"m"},"willRetry":false}}
a{"method":"thread/compacted","params":{"threadId":"th","turnId":"tu"}}
a{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"tu","status":"failed","items":[{"id":"i","type":"agentMessage","text":"t"}],"error":{"message":"e"}}}}
x{}`,
	} {
		var frames []jsonrpc.Frame
		for i, line := range bytes.Split([]byte(script), []byte("\n")) {
			dir := map[byte]trafficlog.Dir{'a': trafficlog.A2C, 'c': trafficlog.C2A, 'x': trafficlog.Exit}[line[0]]
			frames = append(frames, jsonrpc.NewFrame(int64(i+1), dir, line[1:]))
		}
		fast, general := decodeBothWays(frames, 1)
		if len(general) < 3 || !reflect.DeepEqual(fast, general) {
			t.Errorf("one pass:\n%s\nencoding/json:\n%s", dumpEvents(fast), dumpEvents(general))
		}
	}
}

// TestLexCoversCaptures checks the one-pass readers take the shapes real
// app-server traffic has: every notification's params, item, turn and
// thread of the captures, every request and response read in one pass.
func TestLexCoversCaptures(t *testing.T) {
	counts := map[string]int{}
	paths, _ := filepath.Glob("testdata/captures/codex-app*/rpc-traffic.jsonl")
	for _, path := range paths {
		for _, f := range trafficFrames(t, path) {
			if !f.HasMsg() {
				continue
			}
			m := &f.Msg
			fail := func(what string) { t.Errorf("%s: %s %s not read in one pass: %s", path, m.Method, what, m.Raw) }
			if raw := m.EmittedAtMs(); raw != nil {
				if _, ok := lexEmitted(raw); !ok {
					fail("emittedAtMs")
				}
			}
			switch {
			case m.Kind == jsonrpc.KindNotification && f.Dir == trafficlog.A2C:
				var p noteParams
				if _, ignored := ignoredNotification(m.Method); ignored {
					continue
				}
				if !p.scan(m.Params) {
					fail("params")
					continue
				}
				counts["notification"]++
				if p.item != nil {
					var it itemHead
					if !lexItem(p.item, &it) {
						fail("item")
					}
					counts["item"]++
				}
				if p.turn != nil {
					var tu turn
					if !lexTurn(p.turn, &tu) {
						fail("turn")
					}
					for _, it := range tu.Items {
						if _, ok := lexItemID(it); !ok {
							fail("turn item id")
						}
					}
					counts["turn"]++
				}
				if p.thread != nil {
					var ti threadInfo
					if !lexThread(p.thread, &ti) {
						fail("thread")
					}
					counts["thread"]++
				}
				if p.tokenUsage != nil {
					if _, ok := lexTokenUsage(p.tokenUsage); !ok {
						fail("tokenUsage")
					}
					counts["tokenUsage"]++
				}
			case m.Kind == jsonrpc.KindRequest && f.Dir == trafficlog.A2C:
				var p requestParams
				if !lexRequest(m.Params, &p) {
					fail("params")
				}
				counts["request"]++
			case m.Kind == jsonrpc.KindRequest:
				if _, ok := lexStringMember(m.Params, threadIDKeys); !ok {
					fail("params")
				}
			case m.Kind == jsonrpc.KindResponse && f.Dir == trafficlog.C2A && m.Error == nil:
				if _, ok := lexDecision(m.Result); !ok {
					fail("decision")
				}
				counts["decision"]++
			}
		}
	}
	for _, k := range []string{"notification", "item", "turn", "thread", "tokenUsage", "request", "decision"} {
		if counts[k] == 0 {
			t.Errorf("no %s read in one pass", k)
		}
	}
}

// lexCase is one value for a one-pass reader: whether it takes it (when
// it does, encoding/json must fill the same struct).
type lexCase struct {
	raw string
	ok  bool
}

// checkLex runs lex and json.Unmarshal on each case into fresh values
// made by newV and compares.
func checkLex[T any](t *testing.T, name string, cases []lexCase, lex func([]byte, *T) bool) {
	t.Helper()
	for _, c := range cases {
		var got T
		ok := lex([]byte(c.raw), &got)
		if ok != c.ok {
			t.Errorf("%s(%s) ok = %v, want %v", name, c.raw, ok, c.ok)
			continue
		}
		if ok {
			compareJSON(t, name, []byte(c.raw), got)
		}
	}
}

// compareJSON checks json.Unmarshal accepts raw and fills what got holds.
func compareJSON[T any](t testing.TB, name string, raw []byte, got T) {
	t.Helper()
	var want T
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s accepted %s, which json.Unmarshal refuses: %v", name, raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s(%s) =\n%#v\nencoding/json:\n%#v", name, raw, got, want)
	}
}

func TestLexItem(t *testing.T) {
	checkLex(t, "lexItem", []lexCase{
		{`{"type":"commandExecution","id":"c","command":"ls","cwd":"/w","status":"completed","commandActions":[{"type":"unknown"}],"aggregatedOutput":null,"exitCode":0,"durationMs":12,"processId":null}`, true},
		{`{"type":"agentMessage","id":"m","text":"a\u00e9\n","phase":null}`, true},
		{`{"type":"reasoning","id":"r","summary":["a",null,"b"],"content":[]}`, true},
		{`{"type":"reasoning","id":"r","summary":[]}`, true},
		{`{"type":"fileChange","id":"f","changes":[{"path":"a","diff":"d","kind":{"type":"add"}},null],"status":"completed"}`, true},
		{`{"type":"mcpToolCall","id":"x","server":"s","tool":"t","arguments":null,"result":{"content":[]},"error":null,"success":true}`, true},
		{`{"type":"collabAgentToolCall","id":"x","receiverThreadIds":["a"],"agentsStates":null,"prompt":null}`, true},
		{`{"type":"x","id":"a","text":"\ud800"}`, true},
		{`{"type":"x","id":"a","Text":"b"}`, false},             // another case
		{`{"type":"x","i\u0064":"a"}`, false},                   // escaped name
		{`{"type":"x","id":"a","id":"b"}`, false},               // repeated
		{`{"type":"x","exitCode":1.5}`, false},                  // not an int
		{`{"type":"x","exitCode":99999999999999999999}`, false}, // out of range
		{`{"type":7}`, false}, // another type
		{`{"type":"collabAgentToolCall","agentsStates":{"a":{}}}`, false}, // a map
		{`{"type":"reasoning","summary":[1]}`, false},                     // not strings
		{`{"type":"x","ſtatus":"a"}`, false},                              // non-ASCII name
		{`{"type":"x","changes":[{"path":"a","PATH":"b"}]}`, false},       // nested case
		{`{"type":"x","success":"yes"}`, false},                           // not a bool
		{`{"type":"x","whatever":{"id":[1,{"x":"}"}]},"id":"i"}`, true},   // unknown member
		{`{"type":"x","averyveryveryveryveryveryveryveryveryverylongmembernamethatisunknown":1}`, true},
	}, lexItem)
}

func TestLexTurnThreadRequest(t *testing.T) {
	checkLex(t, "lexTurn", []lexCase{
		{`{"id":"u","status":"completed","items":[{"id":"i"},null],"error":null}`, true},
		{`{"id":"u","status":"failed","error":{"message":"m","codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":502}},"additionalDetails":null}}`, true},
		{`{"id":"u","items":{}}`, false},
		{`{"id":"u","error":"x"}`, false},
		{`{"id":"u","error":{"message":"a"},"error":null}`, false},
	}, lexTurn)
	checkLex(t, "lexThread", []lexCase{
		{`{"id":"t","parentThreadId":null,"model":"m","modelProvider":"p","cwd":"/w","name":"n","agentNickname":null,"turns":[{"id":"u","status":"completed"},null],"status":{"type":"idle"}}`, true},
		{`{"id":"t","turns":[7]}`, false},
		{`{"id":"t","turns":[]}`, true},
	}, lexThread)
	checkLex(t, "lexRequest", []lexCase{
		{`{"threadId":"t","turnId":"u","itemId":"i","reason":"r","command":"ls","cwd":"/w","commandActions":[],"availableDecisions":["accept"],"proposedExecpolicyAmendment":null,"questions":null,"fileChanges":null}`, true},
		{`{"conversationId":"c","callId":"x","command":["ls","-l"],"grantRoot":null}`, true},
		{`{"itemId":"i","questions":[{"id":"q"}]}`, false},
		{`{"itemId":"i","fileChanges":{"a":{}}}`, false},
		{`{"ThreadId":"t"}`, false},
	}, lexRequest)
	checkLex(t, "lexTokens", []lexCase{
		{`{"inputTokens":10,"cachedInputTokens":null,"output_tokens":-0,"totalTokens":5}`, true},
		{`{"inputTokens":1e3}`, false},
	}, lexTokens)
}

// TestLexScalars covers the readers of single members against what
// encoding/json (or idString) makes of them.
func TestLexScalars(t *testing.T) {
	for _, raw := range []string{`1795964187565`, `0`, `-5`, `null`, ``, `1.5`, `"7"`, `1e3`, `-`, `99999999999999999999`} {
		var want int64
		jerr := json.Unmarshal([]byte(raw), &want)
		n, ok := lexEmitted([]byte(raw))
		if !ok {
			continue
		}
		if jerr != nil && raw != "" || n != want {
			t.Errorf("lexEmitted(%s) = %d, encoding/json %d (%v)", raw, n, want, jerr)
		}
	}
	for _, raw := range []string{`0`, `17`, `-1`, `1.5`, `"a"`, `"\u00e9\ud800"`, `null`, `true`, `{}`, `[]`, ``} {
		if k, ok := rawIDKey([]byte(raw)); ok && k != idString(json.RawMessage(raw)) {
			t.Errorf("rawIDKey(%s) = %q, idString %q", raw, k, idString(json.RawMessage(raw)))
		}
	}
	for _, id := range []jsonrpc.ID{{Num: 0}, {Num: 1 << 62}, {Str: "a<b>&\u2028", IsString: true}, {Str: "", IsString: true}, {Str: "\xff", IsString: true}} {
		want := idString(mustObject(id))
		if k, ok := idKey(id); ok && k != want {
			t.Errorf("idKey(%v) = %q, idString %q", id, k, want)
		} else if !ok && utf8Valid(id.Str) {
			t.Errorf("idKey(%v) refused a UTF-8 id", id)
		}
	}
}

func utf8Valid(s string) bool { return bytes.Equal([]byte(s), bytes.ToValidUTF8([]byte(s), nil)) }

// FuzzLexItem checks the one-pass readers against encoding/json: whenever
// one takes a valid value, json.Unmarshal takes it too and fills the same
// struct.
func FuzzLexItem(f *testing.F) {
	for _, path := range trafficFiles(f) {
		for _, fr := range trafficFrames(f, path) {
			if !fr.HasMsg() {
				continue
			}
			f.Add(append([]byte(nil), fr.Msg.Params...))
			if item, ok := jsonlex.Field(fr.Msg.Params, "item"); ok {
				f.Add(append([]byte(nil), item...))
			}
			if fr.Msg.Result != nil {
				f.Add(append([]byte(nil), fr.Msg.Result...))
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !jsonlex.Valid(raw) {
			return
		}
		raw = bytes.TrimSpace(raw)
		if it := (itemHead{}); lexItem(raw, &it) {
			compareJSON(t, "lexItem", raw, it)
		}
		if tu := (turn{}); raw[0] == '{' && lexTurn(raw, &tu) {
			compareJSON(t, "lexTurn", raw, tu)
		}
		if ti := (threadInfo{}); raw[0] == '{' && lexThread(raw, &ti) {
			compareJSON(t, "lexThread", raw, ti)
		}
		if r := (threadResult{}); lexThreadResult(raw, &r) {
			compareJSON(t, "lexThreadResult", raw, r)
		}
		if p := (requestParams{}); lexRequest(raw, &p) {
			compareJSON(t, "lexRequest", raw, p)
		}
		if b := (tokenBreakdown{}); lexTokens(raw, &b) {
			compareJSON(t, "lexTokens", raw, b)
		}
		if last, ok := lexTokenUsage(raw); ok && raw[0] == '{' {
			compareJSON(t, "lexTokenUsage", raw, struct {
				Last *tokenBreakdown `json:"last"`
			}{last})
		}
		if d, r, ok := decisionOf(raw, false); true {
			if wd, wr, wok := decision(raw); d != wd || r != wr || ok != wok {
				t.Fatalf("decisionOf(%s) = %q %q %v, decision %q %q %v", raw, d, r, ok, wd, wr, wok)
			}
		}
		if parts, ok := lexUserParts(raw); ok {
			compareJSON(t, "lexUserParts", raw, parts)
		}
		if id, ok := lexItemID(raw); ok {
			compareJSON(t, "lexItemID", raw, struct {
				ID string `json:"id"`
			}{id})
		}
		if d, ok := lexDecision(raw); ok {
			compareJSON(t, "lexDecision", raw, struct {
				Decision json.RawMessage `json:"decision"`
			}{d})
		}
		if k, ok := rawIDKey(raw); ok && k != idString(raw) {
			t.Fatalf("rawIDKey(%s) = %q, idString %q", raw, k, idString(raw))
		}
		if n, ok := lexEmitted(raw); ok {
			var want int64
			if json.Unmarshal(raw, &want) != nil || n != want {
				t.Fatalf("lexEmitted(%s) = %d, encoding/json %d", raw, n, want)
			}
		}
	})
}

// FuzzLexDecode feeds arbitrary frames to a decoder that uses the
// one-pass readers and to one that decodes with encoding/json: the same
// events (drops included) for every input. Each line is one frame: its
// first byte picks the direction (a: a2c, c: c2a, x: exit, n: note), the
// rest is the message.
func FuzzLexDecode(f *testing.F) {
	dirs := map[byte]trafficlog.Dir{'a': trafficlog.A2C, 'c': trafficlog.C2A, 'x': trafficlog.Exit, 'n': trafficlog.Note}
	for _, path := range trafficFiles(f) {
		var lines [][]byte
		for _, fr := range trafficFrames(f, path) {
			for k, d := range dirs {
				if d == fr.Dir {
					lines = append(lines, append([]byte{k}, fr.Data...))
				}
			}
			if len(lines) == 12 {
				f.Add(bytes.Join(lines, []byte("\n")))
				lines = lines[:0]
			}
		}
		f.Add(bytes.Join(lines, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var frames []jsonrpc.Frame
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			dir, ok := dirs[line[0]]
			if !ok {
				dir = trafficlog.Stderr
			}
			frames = append(frames, jsonrpc.NewFrame(int64(i), dir, line[1:]))
		}
		fast, general := decodeBothWays(frames, 2)
		if !reflect.DeepEqual(fast, general) {
			t.Fatalf("one pass:\n%s\nencoding/json:\n%s", dumpEvents(fast), dumpEvents(general))
		}
	})
}

func dumpEvents(evs []agent.Event) string {
	var b bytes.Buffer
	for _, e := range evs {
		line, err := agent.EncodeEvent(e)
		if err != nil {
			b.WriteString(err.Error())
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// FuzzShellCallMeta checks shellCall's metadata, made without encoding,
// against agent.ToolMetadata of the two inputs encoded.
func FuzzShellCallMeta(f *testing.F) {
	f.Add("commandExecution", "echo hi", "/bin/bash -lc 'echo hi'", "/w")
	f.Add("exec_command", "ls", "", "")
	f.Add("", "", "", "")
	f.Add("x", "a\u2028<b>&\"\\", "a\u2028<b>&\"\\", "\t")
	f.Add("x", "\xff", "", "")
	f.Fuzz(func(t *testing.T, tool, cmd, wrapped, cwd string) {
		in, meta := shellCall(tool, cmd, wrapped, cwd)
		given := cmd
		if wrapped != "" {
			given = wrapped
		}
		want := shellMeta(tool, given, cwd, in)
		if wrapped != "" {
			want["rawCommand"] = wrapped
		}
		if !reflect.DeepEqual(meta, want) {
			t.Fatalf("shellCall(%q, %q, %q, %q) metadata %#v, agent.ToolMetadata %#v", tool, cmd, wrapped, cwd, meta, want)
		}
	})
}

func TestLexUserParts(t *testing.T) {
	checkLex(t, "lexUserParts", []lexCase{
		{`[{"type":"text","text":"hi","text_elements":[]}]`, true},
		{`[{"type":"image","url":"data:image/png;base64,AA"},null,{"type":"localImage","path":"/a/b.png"}]`, true},
		{`[{"type":"mention","name":"n","path":"p","text":null}]`, true},
		{`[]`, true},
		{`null`, true},
		{`[{"type":"text","text":"a\u00e9"}]`, true},
		{`[{"type":"text","Text":"b"}]`, false},      // another case
		{`[{"type":"text","text":1}]`, false},        // another type
		{`[{"type":"text"},"x"]`, false},             // an element of another type
		{`[{"type":"a","type":"b"}]`, false},         // repeated
		{`{"type":"text"}`, false},                   // not an array
		{`[{"t\u0079pe":"text","text":"c"}]`, false}, // escaped name
	}, func(raw []byte, p *[]userPart) bool {
		parts, ok := lexUserParts(raw)
		*p = parts
		return ok
	})
}
