package store

import (
	"regexp"
	"testing"
)

func TestNewMessageID(t *testing.T) {
	shape := regexp.MustCompile(`^c[0-9a-z]{24}$`)
	tests := []struct {
		ms     int64
		prefix string
	}{
		{0, "c000000000"},
		{35, "c00000000z"},
		{36, "c000000010"},
		{1_764_547_200_000, "c0mimdudc0"},
	}
	for _, tt := range tests {
		id := NewMessageID(tt.ms)
		if !shape.MatchString(id) {
			t.Errorf("NewMessageID(%d) = %q: not c + 24 of [0-9a-z]", tt.ms, id)
		}
		if id[:10] != tt.prefix {
			t.Errorf("NewMessageID(%d) = %q, want prefix %q", tt.ms, id, tt.prefix)
		}
	}
	// Later ids sort after earlier ones; ids of the same millisecond differ.
	prev := NewMessageID(1000)
	for ms := int64(1001); ms < 3000; ms += 7 {
		id := NewMessageID(ms)
		if id <= prev {
			t.Fatalf("NewMessageID(%d) = %q sorts before %q", ms, id, prev)
		}
		prev = id
	}
	seen := map[string]bool{}
	for range 1000 {
		id := NewMessageID(42)
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}
