//go:build linux

package dual

import (
	"io"
	"testing"

	"github.com/creack/pty"
	"github.com/happy-dev/happy/agent"
	"golang.org/x/sys/unix"
)

func termios(t *testing.T, fd uintptr) *unix.Termios {
	t.Helper()
	st, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTerminalRawWhileRemote: on a real terminal, remote mode keeps it in
// raw mode while it waits for a key, the key is consumed (Claude does not
// get it), and the terminal settings are back as found at the end.
func TestTerminalRawWhileRemote(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no PTY: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	go func() { _, _ = io.Copy(io.Discard, master) }() // echo, if any
	before := termios(t, tty.Fd())
	if before.Lflag&unix.ICANON == 0 {
		t.Fatal("a new PTY should start in canonical mode")
	}

	r := newRun(t)
	r.keys = master
	r.startWith(r.options(tty))
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("two"); err != nil {
		t.Fatal(err)
	}
	r.turnEnded()
	during := termios(t, tty.Fd())
	if during.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 {
		t.Fatalf("terminal not raw in remote mode: lflag %#x", during.Lflag)
	}
	r.key("  ")
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
	r.key("three\r")
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.UserPrompt); return ok && e.Text == "three" })
	r.turnEnded()
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	after := termios(t, tty.Fd())
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag || after.Cflag != before.Cflag {
		t.Fatalf("terminal not restored: lflag %#x→%#x iflag %#x→%#x oflag %#x→%#x", before.Lflag, after.Lflag, before.Iflag, after.Iflag, before.Oflag, after.Oflag)
	}
}
