//go:build linux

package proc

import (
	"os"
	"testing"
)

func TestParseStartTicks(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10", 98765, true},
		{"42 (sh) S 1 42", 0, false},
		{"no paren", 0, false},
		{"1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber", 0, false},
	}
	for _, c := range cases {
		got, ok := parseStartTicks([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseStartTicks(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if v, ok := StartTicks(os.Getpid()); !ok || v == 0 {
		t.Errorf("StartTicks(self) = %d, %v", v, ok)
	}
}
