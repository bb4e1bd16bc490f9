package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/home"
)

// A session the daemon started notifies through notify-send when a tool
// waits and when a turn ends; other sessions, the setting off and a missing
// command send nothing.
func TestNotifier(t *testing.T) {
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "sent")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s|' \"$a\" >> " + out + "; done\necho >> " + out + "\n"
	if err := os.WriteFile(filepath.Join(bin, NotifyCommand), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Home: h, Log: zerolog.Nop()}
	daemonRun := SessionOptions{StartedBy: "daemon", Flavor: "codex", Dir: "/w"}

	t.Setenv("PATH", bin)
	if n := newNotifier(env, SessionOptions{StartedBy: "terminal"}); n != nil {
		t.Fatal("a terminal session notifies")
	}
	n := newNotifier(env, daemonRun)
	if n == nil {
		t.Fatal("no notifier for a daemon session")
	}
	n.activity(true)
	n.waiting("call_1")
	n.wait()
	n.activity(false)
	n.activity(false) // no second end without a new turn
	n.wait()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "--app-name=happy|--|happy: codex waits for permission|/w|\n--app-name=happy|--|happy: codex finished its turn|/w|\n"
	if string(b) != want {
		t.Fatalf("sent %q, want %q", b, want)
	}

	if err := os.WriteFile(h.Settings(), []byte(`{"notifications": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if newNotifier(env, daemonRun) != nil || NotificationsOn(env) {
		t.Fatal("notifications off in settings, still a notifier")
	}
	if err := os.WriteFile(h.Settings(), []byte(`{"notifications": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if !NotificationsOn(env) {
		t.Fatal("notifications true read as off")
	}
	t.Setenv("PATH", t.TempDir())
	if newNotifier(env, daemonRun) != nil {
		t.Fatal("a notifier without notify-send")
	}
	var nilN *notifier
	nilN.waiting("x")
	nilN.activity(false)
	nilN.wait()
}
