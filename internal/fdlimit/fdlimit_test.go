//go:build linux

package fdlimit

import (
	"os"
	"syscall"
	"testing"
)

func TestRaiseAndOpen(t *testing.T) {
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &before) })
	// Lower the soft limit so that Raise has something to do.
	low := before
	low.Cur = min(before.Max, 256)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	if got := Soft(); got != low.Cur {
		t.Fatalf("Soft = %d, want %d", got, low.Cur)
	}
	soft, hard, err := Raise()
	if err != nil || soft != before.Max || hard != before.Max {
		t.Fatalf("Raise = %d, %d, %v; want %d, %d", soft, hard, err, before.Max, before.Max)
	}
	if got := Soft(); got != before.Max {
		t.Fatalf("Soft after Raise = %d, want %d", got, before.Max)
	}
	n, ok := Open()
	if !ok || n < 3 {
		t.Fatalf("Open = %d %v", n, ok)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, _ := Open(); m != n+1 {
		t.Fatalf("Open with one more file = %d, want %d", m, n+1)
	}
}
