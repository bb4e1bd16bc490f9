//go:build linux

package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/waitfor"
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

// Running is true for a live process with its start time, false for
// another start time, and false for a zombie (a child not reaped yet).
func TestRunning(t *testing.T) {
	self, _ := StartTicks(os.Getpid())
	if !Running(os.Getpid(), self) || Running(os.Getpid(), self+1) || Running(os.Getpid(), 0) {
		t.Fatalf("Running(self) with ticks %d, +1, 0: want true, false, false", self)
	}
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Skip("no /bin/sh:", err)
	}
	pid := cmd.Process.Pid
	ticks, ok := StartTicks(pid)
	if !ok {
		t.Fatal("no start time of the child")
	}
	// The exit of a child we deliberately do not reap yet.
	waitfor.Poll{Every: 5 * time.Millisecond}.Until(t, "the child to be a zombie", func() bool {
		st, ok := readStat(pid)
		return !ok || st.state == 'Z'
	})
	if Running(pid, ticks) {
		t.Error("Running(zombie) = true")
	}
	_ = cmd.Wait()
	if Running(pid, ticks) {
		t.Error("Running(reaped) = true")
	}
}
