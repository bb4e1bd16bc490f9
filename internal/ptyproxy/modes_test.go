package ptyproxy

import (
	"bytes"
	"testing"
)

func TestModeTrackerReset(t *testing.T) {
	cases := []struct {
		name, out, want string
	}{
		{"nothing", "hello \x1b[31mred\x1b[0m\r\n", ""},
		{"cursor hidden", "\x1b[?25l", "\x1b[?25h"},
		{"cursor hidden then shown", "\x1b[?25l...\x1b[?25h", ""},
		{"bracketed paste and alt screen", "\x1b[?1049h\x1b[?2004h", "\x1b[?2004l\x1b[?1049l"},
		{"several in one", "\x1b[?1000;1006;25l\x1b[?1000;1006h", "\x1b[?1000l\x1b[?1006l\x1b[?25h"},
		{"focus, app keys, sync", "\x1b[?1004h\x1b[?1h\x1b[?2026h", "\x1b[?1l\x1b[?1004l\x1b[?2026l"},
		{"untracked mode", "\x1b[?12h\x1b[?7l", ""},
		{"kitty keyboard pushes", "\x1b[>1u\x1b[>3u\x1b[<u", "\x1b[<1u"},
		{"kitty popped all", "\x1b[>1u\x1b[<5u", ""},
		{"not private", "\x1b[25l\x1b[2004h", ""},
		{"abandoned sequence", "\x1b[?20\x1b[?2004h", "\x1b[?2004l"},
		{"too long", "\x1b[?" + string(bytes.Repeat([]byte("1;"), 40)) + "2004h", ""},
		{"intermediate byte", "\x1b[?2004$h", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			whole := newModeTracker()
			whole.Write([]byte(c.out))
			if got := string(whole.Reset()); got != c.want {
				t.Fatalf("reset %q, want %q", got, c.want)
			}
			// Split at every byte: the same result.
			split := newModeTracker()
			for i := range len(c.out) {
				split.Write([]byte{c.out[i]})
			}
			if got := string(split.Reset()); got != c.want {
				t.Fatalf("byte by byte: reset %q, want %q", got, c.want)
			}
		})
	}
}

func FuzzModeTracker(f *testing.F) {
	f.Add([]byte("\x1b[?1049h\x1b[?25l\x1b[>1u"), 3)
	f.Add([]byte("\x1b[?2004;1000h"), 1)
	f.Fuzz(func(t *testing.T, out []byte, cut int) {
		whole := newModeTracker()
		whole.Write(out)
		want := whole.Reset()
		if cut < 0 || cut > len(out) {
			cut = len(out) / 2
		}
		split := newModeTracker()
		split.Write(out[:cut])
		split.Write(out[cut:])
		if got := split.Reset(); !bytes.Equal(got, want) {
			t.Fatalf("split at %d: %q, whole: %q", cut, got, want)
		}
		// The reset itself leaves nothing on.
		again := newModeTracker()
		again.Write(out)
		again.Write(want)
		if rest := again.Reset(); len(rest) != 0 {
			t.Fatalf("after the reset %q is left", rest)
		}
	})
}
