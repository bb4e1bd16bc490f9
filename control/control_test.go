package control

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func TestEnvelopeRoundTrip(t *testing.T) {
	e, err := New("sess1", "permission", map[string]any{"callID": "c1", "decision": "once"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !validID(e.ID) {
		t.Fatalf("id %q is not 32 hex digits", e.ID)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"happyControl":1,"id":"` + e.ID + `","target":"sess1","method":"permission","iat":1800000000000,"params":{"callID":"c1","decision":"once"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != e.ID || back.Target != "sess1" || back.Method != "permission" || back.IssuedAt != t0.UnixMilli() || string(back.Params) != `{"callID":"c1","decision":"once"}` {
		t.Fatalf("parsed %+v", back)
	}
	// A prompt's envelope has no params.
	p, _ := New("sess1", MethodPrompt, nil, t0)
	b, _ = json.Marshal(p)
	if strings.Contains(string(b), "params") {
		t.Fatalf("prompt envelope with params: %s", b)
	}
}

func TestParseRefusals(t *testing.T) {
	id := strings.Repeat("ab", 16)
	cases := []struct {
		name, in string
		notEnv   bool
		detail   string
	}{
		{"reference dialect", `{"id":"x","approved":true}`, true, ""},
		{"not an object", `[1]`, false, "not a JSON object"},
		{"not JSON", `{"happyControl":`, false, "not valid JSON"},
		{"empty", ``, false, "not a JSON object"},
		{"other version", `{"happyControl":2,"id":"` + id + `","target":"s","method":"m","iat":1}`, false, "envelope version 2"},
		{"short id", `{"happyControl":1,"id":"abc","target":"s","method":"m","iat":1}`, false, `id "abc" is not 32 hex digits`},
		{"upper-case id", `{"happyControl":1,"id":"` + strings.ToUpper(id) + `","target":"s","method":"m","iat":1}`, false, "is not 32 hex digits"},
		{"no target", `{"happyControl":1,"id":"` + id + `","method":"m","iat":1}`, false, "no target"},
		{"no method", `{"happyControl":1,"id":"` + id + `","target":"s","iat":1}`, false, "no method"},
		{"no time", `{"happyControl":1,"id":"` + id + `","target":"s","method":"m"}`, false, "no issue time"},
		{"null params", `{"happyControl":1,"id":"` + id + `","target":"s","method":"m","iat":1,"params":null}`, false, "params are null"},
		{"version not a number", `{"happyControl":"1","id":"` + id + `","target":"s","method":"m","iat":1}`, false, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if c.notEnv {
				if !errors.Is(err, ErrNotEnvelope) {
					t.Fatalf("err = %v, want ErrNotEnvelope", err)
				}
				return
			}
			r, ok := ReasonOf(err)
			if !ok || r != ReasonMalformed || !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("err = %v, want malformed containing %q", err, c.detail)
			}
		})
	}
}

func newGuard(t *testing.T, dir, target string, now *time.Time) *Guard {
	t.Helper()
	l, err := OpenLedger(dir, target, *now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &Guard{Target: target, Ledger: l, Now: func() time.Time { return *now }}
}

func TestGuard(t *testing.T) {
	dir := t.TempDir()
	now := t0
	g := newGuard(t, dir, "sessA", &now)
	mk := func(target, method string, at time.Time) Envelope {
		e, err := New(target, method, map[string]any{}, at)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	reason := func(err error) Reason {
		if err == nil {
			return ""
		}
		r, ok := ReasonOf(err)
		if !ok {
			t.Fatalf("not a refusal: %v", err)
		}
		return r
	}
	ok := mk("sessA", "abort", now)
	if err := g.Check(ok, "abort"); err != nil {
		t.Fatalf("fresh input refused: %v", err)
	}
	cases := []struct {
		name   string
		env    Envelope
		method string
		want   Reason
	}{
		{"the same input again", ok, "abort", ReasonReplayed},
		{"another session's input", mk("sessB", "abort", now), "abort", ReasonWrongTarget},
		{"sealed for another method", mk("sessA", "abort", now), "permission", ReasonWrongTarget},
		{"older than the window", mk("sessA", "abort", now.Add(-Window-time.Second)), "abort", ReasonStale},
		{"too far ahead", mk("sessA", "abort", now.Add(MaxAhead+time.Second)), "abort", ReasonStale},
		{"at the window's edge", mk("sessA", "abort", now.Add(-Window)), "abort", ""},
		{"a clock a minute ahead", mk("sessA", "abort", now.Add(time.Minute)), "abort", ""},
	}
	for _, c := range cases {
		if got := reason(g.Check(c.env, c.method)); got != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.want)
		}
	}
	// A refused input is not consumed: the same envelope, right, passes.
	wrong := mk("sessA", "permission", now)
	if got := reason(g.Check(wrong, "abort")); got != ReasonWrongTarget {
		t.Fatalf("reason %q", got)
	}
	if err := g.Check(wrong, "permission"); err != nil {
		t.Fatalf("after a wrong-method try: %v", err)
	}

	// The ledger survives a restart: the same id is refused by a new
	// guard on the same folder.
	g.Ledger.Close()
	now = now.Add(time.Minute)
	g2 := newGuard(t, dir, "sessA", &now)
	if got := reason(g2.Check(ok, "abort")); got != ReasonReplayed {
		t.Fatalf("after reopening: reason %q, want replayed", got)
	}
	// Past the window the entry is pruned, and the input is stale anyway.
	now = now.Add(Window + MaxAhead + time.Minute)
	g2.Ledger.Close()
	g3 := newGuard(t, dir, "sessA", &now)
	if got := reason(g3.Check(ok, "abort")); got != ReasonStale {
		t.Fatalf("after the window: reason %q, want stale", got)
	}
	if n := g3.Ledger.Len(); n != 0 {
		t.Fatalf("%d entries kept past their time", n)
	}
}

func TestDialectOncePerCiphertext(t *testing.T) {
	dir := t.TempDir()
	now := t0
	g := newGuard(t, dir, "m-1", &now)
	if err := g.CheckDialect([]byte("sealed-1")); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckDialect([]byte("sealed-2")); err != nil {
		t.Fatal(err)
	}
	if r, _ := ReasonOf(g.CheckDialect([]byte("sealed-1"))); r != ReasonReplayed {
		t.Fatalf("replayed ciphertext: reason %q", r)
	}
	// Kept for ever: a year later, after a restart, still refused.
	g.Ledger.Close()
	now = now.Add(365 * 24 * time.Hour)
	g2 := newGuard(t, dir, "m-1", &now)
	if r, _ := ReasonOf(g2.CheckDialect([]byte("sealed-2"))); r != ReasonReplayed {
		t.Fatalf("after a year: reason %q", r)
	}
}

func TestLedgerFileAndTarget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "control")
	for _, bad := range []string{"", "../x", "a/b", "a b", strings.Repeat("x", 129)} {
		if _, err := OpenLedger(dir, bad, t0); err == nil {
			t.Errorf("target %q accepted", bad)
		}
	}
	l, err := OpenLedger(dir, "sess_1-A", t0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fresh, err := l.Consume("id:"+strings.Repeat("0", 32), 0); err != nil || !fresh {
		t.Fatalf("consume: %v %v", fresh, err)
	}
	st, err := os.Stat(filepath.Join(dir, "sess_1-A.consumed"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("ledger mode %v, want 0600", st.Mode().Perm())
	}
	dst, _ := os.Stat(dir)
	if dst.Mode().Perm() != 0o700 {
		t.Fatalf("folder mode %v, want 0700", dst.Mode().Perm())
	}
	b, _ := os.ReadFile(filepath.Join(dir, "sess_1-A.consumed"))
	if string(b) != "id:"+strings.Repeat("0", 32)+" 0\n" {
		t.Fatalf("ledger file %q", b)
	}
	// A torn last line (a crash mid-write) is ignored on the next open.
	f, _ := os.OpenFile(filepath.Join(dir, "sess_1-A.consumed"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("id:1234")
	f.Close()
	l.Close()
	l2, err := OpenLedger(dir, "sess_1-A", t0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.Len() != 1 {
		t.Fatalf("entries %d, want 1", l2.Len())
	}
}

func TestAnswerBinding(t *testing.T) {
	id := strings.Repeat("cd", 16)
	ok, _ := json.Marshal(Answer{Re: id, Result: json.RawMessage(`{"ok":true}`)})
	if string(ok) != `{"happyControl":1,"re":"`+id+`","result":{"ok":true}}` {
		t.Fatalf("answer %s", ok)
	}
	res, err := OpenAnswer(ok, id)
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("open: %s %v", res, err)
	}
	// Bound to another request: refused as unbound.
	if r, _ := ReasonOf(func() error { _, err := OpenAnswer(ok, strings.Repeat("ef", 16)); return err }()); r != ReasonUnbound {
		t.Fatalf("other request: reason %q", r)
	}
	// An old-style answer (no envelope): unbound, never success.
	if r, _ := ReasonOf(func() error { _, err := OpenAnswer([]byte(`{"ok":true}`), id); return err }()); r != ReasonUnbound {
		t.Fatalf("plain answer: reason %q", r)
	}
	// The callee's refusal with a reason.
	ref, _ := json.Marshal(Answer{Re: id, Error: "id x was used before", Reason: ReasonReplayed})
	_, err = OpenAnswer(ref, id)
	var ce *CalleeError
	if !errors.As(err, &ce) || ce.Reason != ReasonReplayed {
		t.Fatalf("callee refusal: %v", err)
	}
	if r, ok := ReasonOf(err); !ok || r != ReasonReplayed {
		t.Fatalf("reason %q", r)
	}
	if err.Error() != "refused control input (replayed): id x was used before" {
		t.Fatalf("text %q", err)
	}
	// The callee's other errors keep their text.
	plainErr, _ := json.Marshal(Answer{Re: id, Error: `no tool call "c9" waits for permission`})
	_, err = OpenAnswer(plainErr, id)
	if err == nil || err.Error() != `no tool call "c9" waits for permission` {
		t.Fatalf("callee error %v", err)
	}
	if _, ok := ReasonOf(err); ok {
		t.Fatal("a plain callee error has a refusal reason")
	}
	// No result: null.
	empty, _ := json.Marshal(Answer{Re: id})
	if res, err := OpenAnswer(empty, id); err != nil || string(res) != "null" {
		t.Fatalf("empty: %s %v", res, err)
	}
}

func FuzzParse(f *testing.F) {
	id := strings.Repeat("ab", 16)
	f.Add([]byte(`{"happyControl":1,"id":"` + id + `","target":"s","method":"m","iat":1,"params":{}}`))
	f.Add([]byte(`{"id":"x","approved":true}`))
	f.Add([]byte(`{"happyControl":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrNotEnvelope) {
				if _, ok := ReasonOf(err); !ok {
					t.Fatalf("error without a reason: %v", err)
				}
			}
			return
		}
		if !validID(e.ID) || e.Target == "" || e.Method == "" {
			t.Fatalf("accepted an invalid envelope %+v", e)
		}
		// What was accepted encodes and parses back the same.
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(out)
		if err != nil || back.ID != e.ID || back.Target != e.Target || back.Method != e.Method || back.IssuedAt != e.IssuedAt {
			t.Fatalf("round trip: %+v %v", back, err)
		}
	})
}

func FuzzOpenAnswer(f *testing.F) {
	id := strings.Repeat("cd", 16)
	f.Add([]byte(`{"happyControl":1,"re":"`+id+`","result":{"ok":true}}`), id)
	f.Add([]byte(`{"happyControl":1,"re":"`+id+`","error":"x","reason":"replayed"}`), id)
	f.Add([]byte(`{"ok":true}`), id)
	f.Fuzz(func(t *testing.T, b []byte, want string) {
		res, err := OpenAnswer(b, want)
		if err == nil && res == nil {
			t.Fatal("success without a result")
		}
		if err == nil {
			var w struct {
				Re string `json:"re"`
			}
			if json.Unmarshal(b, &w) != nil || w.Re != want {
				t.Fatalf("accepted an answer for %q as one for %q", w.Re, want)
			}
		}
	})
}
