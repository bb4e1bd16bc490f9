package dual

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/waitfor"
)

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func nextKey(t *testing.T, k *keyWait) keyResult {
	t.Helper()
	select {
	case res := <-k.keys:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("no key reported")
		return keyResult{}
	}
}

// TestKeyWaitReadsEveryKey: everything typed at once is one read, reads
// are reported in order, and the keys read but not taken are returned by
// stop.
func TestKeyWaitReadsEveryKey(t *testing.T) {
	r, w := pipe(t)
	k, err := waitKey(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("\x1b[A")); err != nil {
		t.Fatal(err)
	}
	res := nextKey(t, k)
	if res.err != nil || string(res.key) != "\x1b[A" {
		t.Fatalf("key %q err %v", res.key, res.err)
	}
	if _, err := w.Write([]byte(" ")); err != nil {
		t.Fatal(err)
	}
	if res := nextKey(t, k); string(res.key) != " " {
		t.Fatalf("second key %q err %v", res.key, res.err)
	}
	for i, s := range []string{"a", "b", "c"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		waitfor.Until(t, "key read", func() bool { return len(k.keys) == i+1 })
	}
	left, err := k.stop()
	if err != nil || string(left) != "abc" {
		t.Fatalf("stop: keys left %q err %v", left, err)
	}
	if left, err := k.stop(); err != nil || left != nil {
		t.Fatalf("second stop: %q %v", left, err)
	}
}

// TestKeyWaitStopLeavesInput: stopping the wait reads nothing more, so the
// next key goes to whoever owns the terminal next.
func TestKeyWaitStopLeavesInput(t *testing.T) {
	r, w := pipe(t)
	k, err := waitKey(r)
	if err != nil {
		t.Fatal(err)
	}
	if left, err := k.stop(); err != nil || left != nil {
		t.Fatalf("stop: %q %v", left, err)
	}
	select {
	case res := <-k.keys:
		t.Fatalf("stopped wait reported %+v", res)
	default:
	}
	if _, err := w.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "z" {
		t.Fatalf("next reader got %q %v", buf[:n], err)
	}
}

// TestKeyWaitInputEnded: a closed input is reported, not taken for a key.
func TestKeyWaitInputEnded(t *testing.T) {
	r, w := pipe(t)
	k, err := waitKey(r)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	res := nextKey(t, k)
	if !errors.Is(res.err, errInputEnded) || res.key != nil {
		t.Fatalf("result %+v", res)
	}
	_, _ = k.stop()
}

// TestKeyWaitSignals: SIGHUP (as SIGINT and SIGTERM) is caught while
// waiting, so happy is not ended with the terminal in raw mode.
func TestKeyWaitSignals(t *testing.T) {
	k, err := waitKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case sig := <-k.sigs:
		if sig != syscall.SIGHUP {
			t.Fatalf("signal %v", sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("signal not caught")
	}
}
