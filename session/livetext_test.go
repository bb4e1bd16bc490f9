package session

import (
	"errors"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

func TestLiveTextApply(t *testing.T) {
	d := func(off int64, s string) LiveDelta {
		return LiveDelta{MessageID: "m", PartID: "p", Offset: off, Delta: s}
	}
	cases := []struct {
		name   string
		stored *string // a stored version first
		deltas []LiveDelta
		want   []LiveOutcome
		text   string
	}{
		{"in order", nil, []LiveDelta{d(0, "ab"), d(2, "cd")}, []LiveOutcome{LiveApplied, LiveApplied}, "abcd"},
		{"duplicate", nil, []LiveDelta{d(0, "ab"), d(2, "cd"), d(2, "cd")}, []LiveOutcome{LiveApplied, LiveApplied, LiveDuplicate}, "abcd"},
		{"old delta after a longer one", nil, []LiveDelta{d(0, "abcd"), d(2, "cd")}, []LiveOutcome{LiveApplied, LiveDuplicate}, "abcd"},
		{"out of order is a gap", nil, []LiveDelta{d(0, "ab"), d(4, "ef"), d(2, "cd")}, []LiveOutcome{LiveApplied, LiveGap, LiveApplied}, "abcd"},
		{"unknown part not at 0", nil, []LiveDelta{d(3, "x")}, []LiveOutcome{LiveGap}, ""},
		{"overlap adds the tail", nil, []LiveDelta{d(0, "abc"), d(1, "bcde")}, []LiveOutcome{LiveApplied, LiveApplied}, "abcde"},
		{"overlap that differs", nil, []LiveDelta{d(0, "abc"), d(1, "xy")}, []LiveOutcome{LiveApplied, LiveConflict}, "abc"},
		{"after a stored version", ptr("hello"), []LiveDelta{d(5, " world"), d(0, "he")}, []LiveOutcome{LiveApplied, LiveDuplicate}, "hello world"},
		{"gap waits for the stored version", ptr("hi"), []LiveDelta{d(5, "x")}, []LiveOutcome{LiveGap}, "hi"},
		{"offsets in UTF-16 units", nil, []LiveDelta{d(0, "é😀"), d(3, "!"), d(1, "😀")}, []LiveOutcome{LiveApplied, LiveApplied, LiveDuplicate}, "é😀!"},
		{"offset inside a surrogate pair", nil, []LiveDelta{d(0, "😀"), d(1, "x")}, []LiveOutcome{LiveApplied, LiveConflict}, "😀"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := NewLiveText()
			if c.stored != nil {
				l.Stored("m", "p", *c.stored)
			}
			for i, dl := range c.deltas {
				if got, _ := l.Apply(dl); got != c.want[i] {
					t.Fatalf("delta %d %+v: outcome %d, want %d", i, dl, got, c.want[i])
				}
			}
			if got, _ := l.Text("m", "p"); got != c.text {
				t.Fatalf("text %q, want %q", got, c.text)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestLiveTextStored(t *testing.T) {
	l := NewLiveText()
	l.Apply(LiveDelta{MessageID: "m", PartID: "p", Offset: 0, Delta: "hello world"})
	// An older stored version (a prefix) keeps the live text.
	if got := l.Stored("m", "p", "hello"); got != "hello world" {
		t.Fatalf("older stored version: %q", got)
	}
	// A stored version that differs wins.
	if got := l.Stored("m", "p", "goodbye"); got != "goodbye" {
		t.Fatalf("differing stored version: %q", got)
	}
	l.Forget("m", "p")
	if _, ok := l.Text("m", "p"); ok {
		t.Fatal("forgotten part still known")
	}
}

func TestLiveEmitter(t *testing.T) {
	e := NewLiveEmitter()
	base := mapper.PartBase{ID: "p", MessageID: "m", SessionID: "s"}
	end := int64(9)
	got := e.Observe([]mapper.BusEvent{
		&mapper.MessagePartUpdated{Part: &mapper.TextPart{PartBase: base, Text: "hé"}},
		&mapper.MessagePartDelta{SessionID: "s", MessageID: "m", PartID: "p", Field: "text", Delta: "llo"},
		&mapper.MessagePartDelta{SessionID: "s", MessageID: "x", PartID: "unknown", Field: "text", Delta: "z"},
		&mapper.MessagePartDelta{SessionID: "s", MessageID: "m", PartID: "p", Field: "state.raw", Delta: "q"},
		&mapper.MessagePartUpdated{Part: &mapper.TextPart{PartBase: base, Text: "héllo!", Time: &mapper.PartTime{End: &end}}},
	})
	want := []LiveDelta{
		{MessageID: "m", PartID: "p", Offset: 0, Delta: "hé"},
		{MessageID: "m", PartID: "p", Offset: 2, Delta: "llo"},
		{MessageID: "m", PartID: "p", Offset: 5, Delta: "!"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delta %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(e.parts) != 0 {
		t.Fatalf("a completed part is still held: %v", e.parts)
	}
	// A rewritten text (same length, other bytes) sends nothing.
	e.Observe([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: &mapper.TextPart{PartBase: base, Text: "abc"}}})
	if got := e.Observe([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: &mapper.TextPart{PartBase: base, Text: "xyzw"}}}); len(got) != 0 {
		t.Fatalf("rewritten part sent %+v", got)
	}
}

func TestDecodeLiveDelta(t *testing.T) {
	good := `{"messageId":"m","partId":"p","offset":3,"delta":"x","extra":1}`
	d, err := DecodeLiveDelta([]byte(good))
	if err != nil || d != (LiveDelta{MessageID: "m", PartID: "p", Offset: 3, Delta: "x"}) {
		t.Fatalf("DecodeLiveDelta(%s) = %+v, %v", good, d, err)
	}
	for _, bad := range []string{``, `[]`, `{"messageId":"","partId":"p","offset":0,"delta":"x"}`,
		`{"messageId":"m","offset":0,"delta":"x"}`, `{"messageId":"m","partId":"p","offset":-1,"delta":"x"}`,
		`{"messageId":"m","partId":"p","offset":1.5,"delta":"x"}`, `{"messageId":"m","partId":"p","offset":"1","delta":"x"}`,
		`{"messageId":"m","partId":"p","offset":0,"delta":""}`, `{"messageId":"m","partId":"p","offset":0}`} {
		if _, err := DecodeLiveDelta([]byte(bad)); !errors.Is(err, ErrLiveDelta) {
			t.Errorf("DecodeLiveDelta(%q) error %v, want ErrLiveDelta", bad, err)
		}
	}
}

func FuzzDecodeLiveDelta(f *testing.F) {
	f.Add([]byte(`{"messageId":"m","partId":"p","offset":3,"delta":"x"}`))
	f.Add([]byte(`{"messageId":"m","partId":"p","offset":9007199254740993,"delta":"\ud83d"}`))
	f.Add([]byte(`{"offset":1e3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeLiveDelta(b)
		if err != nil {
			return
		}
		enc, err := EncodeLiveDelta(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := DecodeLiveDelta(enc)
		if err != nil || d2 != d {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", d, enc, d2, err)
		}
		l := NewLiveText()
		l.Apply(LiveDelta{MessageID: d.MessageID, PartID: d.PartID, Delta: "seed"})
		l.Apply(d)
	})
}
