// Package embedded starts and stops the local relay that happy uses when no
// relay is configured (docs/ARCHITECTURE.md "Relay default"): `happy server` on
// loopback, in the background, with its data under the home folder. Verify
// proves that what answers on that address is this home's relay and not
// another program (or user) that took the port.
//
// The server runs detached in its own session (it outlives the command that
// started it) and its pid is kept in <home>/server/embedded.pid. Its output
// goes to a log file under <home>/logs.
package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/proc"
	"github.com/happy-dev/happy/internal/relayid"
	"github.com/happy-dev/happy/internal/settings"
)

// PIDFile is the name of the pid file inside <home>/server.
const PIDFile = "embedded.pid"

// ErrPortTaken is returned when the relay's address answers, but not as a
// happy relay: something else listens there.
var ErrPortTaken = errors.New("the local relay address is used by another program")

// Options say where the relay runs and how to start it.
type Options struct {
	Home home.Dir
	// URL is the relay URL, an http://127.0.0.1:PORT (or localhost) URL.
	URL string
	// Exe is the happy binary to start as `Exe server …` (os.Executable
	// when empty).
	Exe string
	// StartTimeout bounds the wait for /health after start (10 s when 0).
	StartTimeout time.Duration
	// Now is the clock for log file names (time.Now when nil).
	Now func() time.Time
}

// Healthy reports whether a happy relay answers GET <url>/health with
// {"status":"ok"}. A different answer from a listening program yields
// ErrPortTaken; nothing listening yields false and no error.
func Healthy(ctx context.Context, baseURL string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/health", nil)
	if err != nil {
		return false, fmt.Errorf("embedded relay: health request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil || h.Status != "ok" {
		return false, fmt.Errorf("%w (%s answered /health with HTTP %d)", ErrPortTaken, baseURL, resp.StatusCode)
	}
	return true, nil
}

// ErrNotOurs: the program answering at the embedded relay's address cannot
// prove that it is this home's relay (relayid.ErrNotOurs).
var ErrNotOurs = relayid.ErrNotOurs

// Verify proves that the relay answering at baseURL is the one of home h
// before anything else is sent to it (docs/ARCHITECTURE.md, "Relay
// default"): it checks the relay's answer to a fresh nonce against the
// identity key in h's server folder (relayid.Verify), within 5 seconds. A
// relay that cannot prove it (a squatter on the port, another user's
// relay, an older happy's relay, or no key in this home yet) is an error
// wrapping ErrNotOurs that names the program's address and the ways out;
// nothing answering is the connection's error.
func Verify(ctx context.Context, h home.Dir, baseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key, err := relayid.Load(h.Server())
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = fmt.Errorf("this home has no relay identity key yet (%s), so no relay it started is running: %w", filepath.Join(h.Server(), relayid.File), ErrNotOurs)
	case err != nil:
		return fmt.Errorf("embedded relay: %w", err)
	default:
		err = relayid.Verify(ctx, nil, baseURL, key)
	}
	if errors.Is(err, ErrNotOurs) {
		return fmt.Errorf("embedded relay: the program answering at %s cannot prove it is this home's relay (%w); nothing was sent to it. "+
			"If it is a relay an older happy started for this home, stop it with happy server stop and run again; otherwise stop that program, "+
			"set %s to another loopback address for the built-in relay, or set %s (or serverUrl in %s) to a relay you run",
			baseURL, err, settings.EnvEmbeddedURL, settings.EnvServerURL, h.Settings())
	}
	if err != nil {
		return fmt.Errorf("embedded relay: %w", err)
	}
	return nil
}

// listenAddr checks that u is a loopback http URL and returns host:port.
func listenAddr(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "http" || pu.Host == "" {
		return "", fmt.Errorf("embedded relay: %q is not an http:// URL", u)
	}
	host, port := pu.Hostname(), pu.Port()
	if port == "" {
		port = "80"
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("embedded relay: %q is not a loopback address; start a relay there yourself with happy server", u)
	}
	return net.JoinHostPort(host, port), nil
}

// Ensure makes sure the local relay answers at opts.URL: it returns at once
// when one does, else starts `happy server` in the background and waits for
// it. It returns whether it started one.
func Ensure(ctx context.Context, opts Options) (started bool, err error) {
	addr, err := listenAddr(opts.URL)
	if err != nil {
		return false, err
	}
	if ok, err := Healthy(ctx, opts.URL); ok || err != nil {
		return false, err
	}
	exe := opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return false, fmt.Errorf("embedded relay: find the happy binary: %w", err)
		}
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	dataDir := opts.Home.Server()
	if err := private.Dir(dataDir); err != nil {
		return false, fmt.Errorf("embedded relay: %w", err)
	}
	if err := private.Dir(opts.Home.Logs()); err != nil {
		return false, fmt.Errorf("embedded relay: %w", err)
	}
	logPath := filepath.Join(opts.Home.Logs(), now().UTC().Format("20060102T150405.000Z")+"-embedded-server.out")
	out, err := private.OpenAppend(logPath)
	if err != nil {
		return false, fmt.Errorf("embedded relay: open %s: %w", logPath, err)
	}
	defer out.Close()
	cmd := exec.Command(exe, "server", "--listen", addr, "--data", dataDir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), home.EnvHomeDir+"="+opts.Home.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives us, no terminal signals
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("embedded relay: start %s server: %w", exe, err)
	}
	pid := cmd.Process.Pid
	proc.Own(pid) // ours, though not started through proc.Start: an agent's end never touches it
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := private.WriteFile(filepath.Join(dataDir, PIDFile), []byte(strconv.Itoa(pid)+"\n")); err != nil {
		_ = cmd.Process.Kill()
		return false, fmt.Errorf("embedded relay: write pid file: %w", err)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			_ = os.Remove(filepath.Join(dataDir, PIDFile))
			return false, fmt.Errorf("embedded relay: happy server exited before answering (%v); see %s", err, logPath)
		case <-deadline.C:
			_ = cmd.Process.Kill()
			return false, fmt.Errorf("embedded relay: no answer at %s after %s; see %s", opts.URL, timeout, logPath)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return false, ctx.Err()
		case <-tick.C:
			if ok, err := Healthy(ctx, opts.URL); err != nil {
				_ = cmd.Process.Kill()
				return false, err
			} else if ok {
				_ = cmd.Process.Release()
				return true, nil
			}
		}
	}
}

// Stop ends the local relay started by Ensure for h (SIGTERM, then SIGKILL
// after wait) and removes its pid file. It returns false when none runs.
func Stop(h home.Dir, wait time.Duration) (bool, error) {
	pidPath := filepath.Join(h.Server(), PIDFile)
	b, err := os.ReadFile(pidPath)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("embedded relay: read %s: %w", pidPath, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		_ = os.Remove(pidPath)
		return false, fmt.Errorf("embedded relay: %s holds no pid", pidPath)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		_ = os.Remove(pidPath)
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("embedded relay: stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			_ = os.Remove(pidPath)
			return true, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	_ = os.Remove(pidPath)
	return true, nil
}
