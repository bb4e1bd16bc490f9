package mapper

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestMakeIDShape(t *testing.T) {
	cases := []struct {
		prefix string
		pos    uint64
		wantPo string
	}{
		{PrefixSession, 0, "000000000000"},
		{PrefixMessage, 1, "000000000001"},
		{PrefixPart, 0xabc, "000000000abc"},
		{PrefixPermission, 1 << 40, "010000000000"},
		{PrefixQuestion, 1<<48 - 1, "ffffffffffff"},
	}
	for _, c := range cases {
		id := MakeID(c.prefix, "relay-1", c.pos, "k")
		re := regexp.MustCompile("^" + regexp.QuoteMeta(c.prefix) + c.wantPo + "[0-9a-f]{16}$")
		if !re.MatchString(id) {
			t.Errorf("MakeID(%q, pos %d) = %q, want %s", c.prefix, c.pos, id, re)
		}
		pos, ok := IDPosition(id, c.prefix)
		if !ok || pos != c.pos {
			t.Errorf("IDPosition(%q) = %d, %v; want %d, true", id, pos, ok, c.pos)
		}
	}
}

// The hash field is FNV-1a over relay, prefix and identity with NUL
// separators; recompute it independently.
func TestMakeIDHash(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte("relay-1\x00msg_\x00call_1"))
	want := fmt.Sprintf("msg_000000000007%016x", h.Sum64())
	if got := MakeID(PrefixMessage, "relay-1", 7, "call_1"); got != want {
		t.Fatalf("MakeID = %q, want %q", got, want)
	}
}

func TestIDSourceDeterministicAndAscending(t *testing.T) {
	keys := []string{"msg_a", "", "call_9", "call_1", "", "block-0"}
	gen := func(relay string) []string {
		s := NewIDSource(relay)
		var out []string
		for _, k := range keys {
			out = append(out, s.Next(PrefixPart, k))
		}
		if s.Position() != uint64(len(keys)) {
			t.Fatalf("Position = %d, want %d", s.Position(), len(keys))
		}
		return out
	}
	a, b := gen("relay-1"), gen("relay-1")
	if !slices.Equal(a, b) {
		t.Fatalf("same input gave different ids:\n%v\n%v", a, b)
	}
	if !slices.IsSorted(a) {
		t.Fatalf("ids not in order of first appearance: %v", a)
	}
	if len(slices.Compact(slices.Clone(a))) != len(a) {
		t.Fatalf("duplicate ids: %v", a)
	}
	c := gen("relay-2")
	for i := range a {
		if a[i] == c[i] {
			t.Errorf("position %d: same id %q in two relay sessions", i, a[i])
		}
	}
}

// Sorting holds across many positions (fixed width), including past the
// points where a narrower encoding would compare wrongly (9→10, f→10).
func TestMakeIDSortsByPosition(t *testing.T) {
	var ids []string
	for _, pos := range []uint64{0, 9, 10, 15, 16, 255, 256, 4095, 4096, 1 << 32, 1<<48 - 1} {
		ids = append(ids, MakeID(PrefixMessage, "r", pos, "zzzz"))
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("not sorted: %v", ids)
	}
}

func TestIDPositionRefuses(t *testing.T) {
	for _, id := range []string{
		"", "msg_", "prt_000000000001aaaaaaaaaaaaaaaa", // wrong prefix
		"msg_00000000001aaaaaaaaaaaaaaaa",   // too short
		"msg_00000000000gaaaaaaaaaaaaaaaa",  // not hex
		"msg_000000000001aaaaaaaaaaaaaaaz",  // hash not hex
		"msg_-00000000001aaaaaaaaaaaaaaaa",  // sign
		"msg_0000000000001aaaaaaaaaaaaaaa!", // junk
	} {
		if pos, ok := IDPosition(id, PrefixMessage); ok {
			t.Errorf("IDPosition(%q) = %d, true; want false", id, pos)
		}
	}
}

func FuzzIDPosition(f *testing.F) {
	f.Add("msg_000000000001aaaaaaaaaaaaaaaa", uint64(3), "id")
	f.Add("", uint64(0), "")
	f.Fuzz(func(t *testing.T, s string, pos uint64, identity string) {
		if p, ok := IDPosition(s, PrefixMessage); ok && !strings.HasPrefix(s, PrefixMessage) {
			t.Fatalf("IDPosition(%q) = %d, true without the prefix", s, p)
		}
		id := MakeID(PrefixMessage, "r", pos, identity)
		got, ok := IDPosition(id, PrefixMessage)
		if !ok || got != pos {
			t.Fatalf("round trip of %d via %q = %d, %v", pos, id, got, ok)
		}
	})
}
