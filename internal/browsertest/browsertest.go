//go:build unix

// Package browsertest starts a headless Chromium for tests and drives it
// through the DevTools protocol (chromedp). The browser runs with a fresh
// profile, no sandbox, no GPU, and nothing that reaches the network on its
// own (no QUIC, no background networking, no component updates, no sync); it
// leads its own process group, and the whole group is killed when the test
// ends (chromedp reaps the leader).
package browsertest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
)

// DefaultPath is where Chromium is looked for first; HAPPY_CHROMIUM
// overrides it, then "chromium" and "chromium-browser" on PATH are tried.
const DefaultPath = "/usr/bin/chromium"

// Flags are the command-line flags every test browser gets (besides its
// own --user-data-dir and the DevTools port).
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-dev-shm-usage", "--no-default-browser-check",
}

// Path returns the Chromium binary to run, or "" when there is none. A
// HAPPY_CHROMIUM that names no file means none (nothing else is tried).
func Path() string {
	if p := os.Getenv("HAPPY_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		return DefaultPath
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Start launches Chromium (talking DevTools over a pipe, no port) and
// returns the context of a tab in it. Without Chromium the test is skipped
// with a message saying so, unless the environment variable CI is set: then
// it fails, so a CI run never passes without its browser tests. The browser
// leads its own process group, which is killed when the test ends.
func Start(t testing.TB) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		msg := "chromium not found (looked at $HAPPY_CHROMIUM, " + DefaultPath + " and PATH)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " and CI is set: the browser tests must run in CI")
		}
		t.Skip(msg + ": skipping the browser tests")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.Setpgid = true
			dieWithParent(cmd.SysProcAttr)
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			cmd.Cancel = func() error {
				// Kill the whole group, not only the leader.
				if cmd.Process != nil {
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
				return nil
			}
		}),
	}
	for _, f := range Flags {
		opts = append(opts, chromedp.Flag(strings.TrimPrefix(f, "--"), true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}
