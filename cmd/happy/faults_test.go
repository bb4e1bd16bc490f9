//go:build faults

package main

// The fault suite (make faults): real processes, real kill -9, real
// full disks. Each test here is a fault a user meets (a relay that dies,
// a disk that fills) played against the real binary, with a reader on
// another home told the truth throughout. docs/ARCHITECTURE.md, "Tests",
// lists the suite.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
)

// relayProcess is `happy server` run as a process of its own on a fixed
// address and data folder, so that it can be killed and started again.
type relayProcess struct {
	t    *testing.T
	addr string
	data string
	c    *child
}

// startRelayProcess starts happy server on a free loopback port and a new
// data folder and waits until it answers.
func startRelayProcess(t *testing.T) *relayProcess {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rp := &relayProcess{t: t, addr: l.Addr().String(), data: t.TempDir()}
	l.Close()
	rp.start()
	return rp
}

func (rp *relayProcess) url() string { return "http://" + rp.addr }

// start starts the relay on its address and folder, trying again while the
// killed relay's port is not yet free, and waits for its /health.
func (rp *relayProcess) start() {
	t := rp.t
	t.Helper()
	env := map[string]string{"HAPPY_HOME_DIR": t.TempDir(), "PATH": agentFreePath()}
	waitfor.Poll{Within: 20 * time.Second}.Until(t, "the relay answering on "+rp.addr, func() bool {
		if rp.c == nil || rp.c.exited() {
			rp.c = startChild(t, env, "server", "--listen", rp.addr, "--data", rp.data)
		}
		conn, err := net.DialTimeout("tcp", rp.addr, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

// kill ends the relay with SIGKILL and waits for it to be gone.
func (rp *relayProcess) kill() {
	rp.t.Helper()
	if err := syscall.Kill(-rp.c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		rp.t.Fatal(err)
	}
	<-rp.c.done
	rp.c = nil
}

// outText is what the child wrote on stdout so far.
func (c *child) outText() string {
	b, _ := os.ReadFile(c.stdout.Name())
	return string(b)
}

// exited says whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// twoHomes makes an account on url and two homes that hold it: the writer's
// and another device's.
func twoHomes(t *testing.T, url string) (writer, reader map[string]string) {
	t.Helper()
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := relay.CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	home := func() map[string]string {
		h := t.TempDir()
		if err := creds.Save(filepath.Join(h, crypto.CredentialsFileName)); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"HAPPY_SERVER_URL": url, "HAPPY_HOME_DIR": h, "PATH": agentFreePath()}
	}
	return home(), home()
}

// TestFaultRelayKilledLateInATurn: the relay is killed with SIGKILL when a
// long turn is nine tenths done, while another home follows the session
// live; the agent finishes the turn with the relay down, and the relay
// comes back up to two seconds later. Ten runs, and in every one: the
// writer delivers its backlog and exits 0, the follower prints every step
// and the answer, exactly as happy log prints the stored session (below
// the header), and only then says the session ended (docs/ARCHITECTURE.md, "A session's life").
func TestFaultRelayKilledLateInATurn(t *testing.T) {
	const runs, steps = 10, 40
	rp := startRelayProcess(t)
	writer, reader := twoHomes(t, rp.url())
	for run := 1; run <= runs; run++ {
		bin, dir := fakeACP(t, "none")
		writer["HAPPY_OPENCODE_PATH"] = bin
		w := startChild(t, writer, "opencode", "-p", fmt.Sprintf("long %d", steps), "--flush-timeout", "2m")
		sid := w.sessionID(t)
		f := startChild(t, reader, "log", sid, "--follow")
		waitfor.Poll{Within: 60 * time.Second}.Until(t, "the turn nine tenths done", func() bool {
			_, err := os.Stat(filepath.Join(dir, "at90"))
			return err == nil
		})
		if !(waitfor.Poll{Within: 30 * time.Second}).True(func() bool {
			return strings.Contains(f.outText(), fmt.Sprintf("bash echo %d — completed", steps*9/10))
		}) {
			t.Fatalf("run %d: the follower did not print the first nine tenths: %q %q", run, f.outText(), f.errText())
		}
		rp.kill()
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitfor.Poll{Within: 60 * time.Second}.Until(t, "the agent's turn finished", func() bool {
			return strings.Contains(readFileString(filepath.Join(dir, "calls")), "finished\n")
		})
		down, _ := rand.Int(rand.Reader, big.NewInt(2000))
		time.Sleep(time.Duration(down.Int64()) * time.Millisecond) // the outage: how long is the fault, not a wait for a result
		rp.start()

		if code := w.wait(t); code != exitOK {
			t.Fatalf("run %d: the writer exited %d: %s", run, code, w.errText())
		}
		if code := f.wait(t); code != exitOK || !strings.Contains(f.errText(), "ended") {
			t.Fatalf("run %d: the follower exited %d: %s", run, code, f.errText())
		}
		code, plain, stderr := runHappy(t, reader, "log", sid)
		if code != exitOK {
			t.Fatalf("run %d: happy log = %d %s", run, code, stderr)
		}
		for i := 1; i <= steps; i++ {
			if !strings.Contains(plain, fmt.Sprintf("● bash echo %d — completed  [call-%d]\n  │ out %d\n", i, i, i)) {
				t.Fatalf("run %d: step %d is not in the stored session:\n%s", run, i, plain)
			}
		}
		if !strings.Contains(plain, fmt.Sprintf("finished %d steps", steps)) {
			t.Fatalf("run %d: the answer is not in the stored session:\n%s", run, plain)
		}
		// The header's title is the one known when the follower started
		// (the title is written in the background): the rest is compared.
		_, got, _ := strings.Cut(f.outText(), "\n")
		if _, want, _ := strings.Cut(plain, "\n"); got != want {
			t.Fatalf("run %d: the follower printed\n%s\n--- happy log prints\n%s", run, got, plain)
		}
	}
}

// readFileString is the file's content, or "" when it cannot be read.
func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// tmpfsPrefix is a startChildUnder prefix that runs the process in a mount
// namespace of its own with a tmpfs of size (e.g. "8m") mounted on dir,
// after copying the files of seed into it. The test fails (CI) or is
// skipped (a developer's machine) where mounting is not allowed.
func tmpfsPrefix(t *testing.T, dir, size string, seed ...string) []string {
	t.Helper()
	probe := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$0"`, t.TempDir())
	if out, err := probe.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a small file system for the full-disk faults: unshare -m and mount -t tmpfs: %v %s", err, out)
		}
		t.Skipf("needs unshare -m and mount -t tmpfs (root): %v %s", err, out)
	}
	script := `d=$1 s=$2 n=$3; shift 3
mount -t tmpfs -o size="$s",mode=0700 tmpfs "$d" || exit 97
while [ "$n" -gt 0 ]; do cp -p "$1" "$d"/ || exit 97; shift; n=$((n-1)); done
exec "$@"`
	return append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", dir, size, strconv.Itoa(len(seed))}, seed...)
}

// fill writes zeros to the file path until the file system is full and
// returns how many bytes it wrote.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// inNamespace is path as the process pid sees it in its mount namespace.
func inNamespace(pid int, path string) string {
	return filepath.Join("/proc", strconv.Itoa(pid), "root", path)
}

// TestFaultRelayDiskFull: the relay's data folder is on a small file
// system that fills up late in a turn. While it is full the relay answers
// a write 507 with the cause disk_full (not 500), the writer keeps the
// turn in its outbox, and once space is freed everything lands: the
// writer exits 0 and another home reads every step and the answer.
func TestFaultRelayDiskFull(t *testing.T) {
	const steps = 40
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rp := &relayProcess{t: t, addr: l.Addr().String(), data: t.TempDir()}
	l.Close()
	env := map[string]string{"HAPPY_HOME_DIR": t.TempDir(), "PATH": agentFreePath()}
	rp.c = startChildUnder(t, env, tmpfsPrefix(t, rp.data, "16m"), "server", "--listen", rp.addr, "--data", rp.data)
	waitfor.Poll{Within: 20 * time.Second}.Until(t, "the relay answering", func() bool {
		conn, err := net.DialTimeout("tcp", rp.addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	writer, reader := twoHomes(t, rp.url())
	bin, dir := fakeACP(t, "none")
	writer["HAPPY_OPENCODE_PATH"] = bin
	w := startChild(t, writer, "opencode", "-p", fmt.Sprintf("long %d", steps), "--flush-timeout", "2m")
	sid := w.sessionID(t)
	waitfor.Poll{Within: 60 * time.Second}.Until(t, "the turn nine tenths done", func() bool {
		_, err := os.Stat(filepath.Join(dir, "at90"))
		return err == nil
	})
	filler := inNamespace(rp.c.cmd.Process.Pid, filepath.Join(rp.data, "filler"))
	fill(t, filler)

	// Writes now: 507 with the cause, from the relay itself. SQLite first
	// reuses the free pages its files hold, so a few writes of 512 KiB (new
	// sessions, apart from the turn's) may still land before one fails.
	creds, err := crypto.LoadCredentials(filepath.Join(writer["HAPPY_HOME_DIR"], crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	meta := strings.Repeat("A", 512<<10)
	for i := 0; ; i++ {
		req, _ := http.NewRequest("POST", rp.url()+"/v1/sessions", strings.NewReader(fmt.Sprintf(`{"tag":"probe-%d","metadata":%q}`, i, meta)))
		req.Header.Set("Authorization", "Bearer "+creds.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusInsufficientStorage && strings.Contains(string(body), `"cause":"disk_full"`) {
			break
		}
		if resp.StatusCode != http.StatusOK || i == 32 {
			t.Fatalf("write %d to the full relay = %d %.200s, want 507 with cause disk_full", i, resp.StatusCode, body)
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitfor.Poll{Within: 60 * time.Second}.Until(t, "the agent's turn finished", func() bool {
		return strings.Contains(readFileString(filepath.Join(dir, "calls")), "finished\n")
	})
	if w.exited() {
		t.Fatalf("the writer exited %d while the relay's disk was full: %s", w.code, w.errText())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != exitOK {
		t.Fatalf("the writer exited %d: %s", code, w.errText())
	}
	code, plain, stderr := runHappy(t, reader, "log", sid)
	if code != exitOK {
		t.Fatalf("happy log = %d %s", code, stderr)
	}
	for i := 1; i <= steps; i++ {
		if !strings.Contains(plain, fmt.Sprintf("● bash echo %d — completed  [call-%d]\n  │ out %d\n", i, i, i)) {
			t.Fatalf("step %d is not in the stored session:\n%s", i, plain)
		}
	}
	if !strings.Contains(plain, fmt.Sprintf("finished %d steps", steps)) || strings.Contains(plain, "dropped") {
		t.Fatalf("the stored session:\n%s", plain)
	}
}

// TestFaultHomeDiskFull: the writer's happy home is on a small file system
// that fills up late in a turn and is freed before the turn ends. happy
// says so once on stderr (the outbox
// cannot be written, and what that means), not once per write or log
// line, says once when writing works again after space is freed, and the
// turn reaches the relay whole.
func TestFaultHomeDiskFull(t *testing.T) {
	const steps = 40
	rp := startRelayProcess(t)
	writer, reader := twoHomes(t, rp.url())
	bin, dir := fakeACP(t, "none")
	if err := os.WriteFile(filepath.Join(dir, "hold"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	writer["HAPPY_OPENCODE_PATH"] = bin
	home := writer["HAPPY_HOME_DIR"]
	seed := filepath.Join(t.TempDir(), crypto.CredentialsFileName)
	if err := os.Rename(filepath.Join(home, crypto.CredentialsFileName), seed); err != nil {
		t.Fatal(err)
	}
	w := startChildUnder(t, writer, tmpfsPrefix(t, home, "8m", seed), "opencode", "-p", fmt.Sprintf("long %d", steps), "--flush-timeout", "2m")
	sid := w.sessionID(t)
	waitfor.Poll{Within: 60 * time.Second}.Until(t, "the turn nine tenths done", func() bool {
		_, err := os.Stat(filepath.Join(dir, "at90"))
		return err == nil
	})
	filler := inNamespace(w.cmd.Process.Pid, filepath.Join(home, "filler"))
	fill(t, filler)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitfor.Poll{Within: 60 * time.Second}.Until(t, "happy saying the outbox cannot be written", func() bool {
		return strings.Contains(w.errText(), "happy: the outbox cannot be written (")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "end"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != exitOK {
		t.Fatalf("the writer exited %d: %s", code, w.errText())
	}
	errText := w.errText()
	if n := strings.Count(errText, "happy: the outbox cannot be written ("); n != 1 ||
		!strings.Contains(errText, "no space left on device): messages are kept in memory only and are lost if happy stops\n") ||
		strings.Count(errText, "happy: the outbox can be written again") != 1 ||
		strings.Count(errText, "\n") > 8 {
		t.Fatalf("happy's stderr:\n%s", errText)
	}
	code, plain, stderr := runHappy(t, reader, "log", sid)
	if code != exitOK {
		t.Fatalf("happy log = %d %s", code, stderr)
	}
	for i := 1; i <= steps; i++ {
		if !strings.Contains(plain, fmt.Sprintf("● bash echo %d — completed  [call-%d]\n  │ out %d\n", i, i, i)) {
			t.Fatalf("step %d is not in the stored session:\n%s", i, plain)
		}
	}
	if !strings.Contains(plain, fmt.Sprintf("finished %d steps", steps)) {
		t.Fatalf("the stored session:\n%s", plain)
	}
}
