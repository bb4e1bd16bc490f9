//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	igolden "github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/relay"
)

// happyBin is the happy binary built once by TestMain.
var happyBin string

const netnsEnv = "HAPPY_E2E_IN_NETNS"

// TestMain builds happy, then (where the machine allows) runs the tests
// again inside a fresh network namespace with only loopback up, so that
// neither happy nor a real agent can reach anything but 127.0.0.1.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(netnsEnv) == "" {
		dir, err := os.MkdirTemp("", "happy-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin := filepath.Join(dir, "happy")
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/happy-dev/happy/internal/buildinfo.Version=e2e-test", "-o", bin, "../cmd/happy")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			os.Exit(1)
		}
		os.Setenv("HAPPY_E2E_BIN", bin)
		if exec.Command("unshare", "-rn", "ip", "link", "set", "lo", "up").Run() == nil {
			args := append([]string{"-rn", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0]}, os.Args[1:]...)
			cmd := exec.Command("unshare", args...)
			cmd.Env = append(os.Environ(), netnsEnv+"=1")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			err := cmd.Run()
			os.RemoveAll(dir)
			if ee, ok := err.(*exec.ExitError); ok {
				os.Exit(ee.ExitCode())
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "unshare:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "e2e: no network namespace available; running on the host's loopback")
		code := m.Run()
		printMatrix()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	happyBin = os.Getenv("HAPPY_E2E_BIN")
	code := m.Run()
	printMatrix() // the real-agent matrix's table, after every test's output
	os.Exit(code)
}

// agentBinary returns the path of a pinned agent CLI installed by
// scripts/install-agents.sh (env HAPPY_E2E_<NAME>). Without it the test is
// skipped, except in CI, where it fails.
func agentBinary(t *testing.T, name string) string {
	t.Helper()
	p := os.Getenv("HAPPY_E2E_" + name)
	if p == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("HAPPY_E2E_%s is not set: run make e2e (it installs the agents)", name)
		}
		t.Skipf("HAPPY_E2E_%s not set (make e2e installs the agents)", name)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("agent binary: %v", err)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// relayProc is a `happy server` child process.
type relayProc struct {
	t    *testing.T
	URL  string
	addr string
	data string
	cmd  *exec.Cmd
	log  *bytes.Buffer
}

func startRelay(t *testing.T) *relayProc {
	t.Helper()
	port := freePort(t)
	r := &relayProc{t: t, addr: "127.0.0.1:" + strconv.Itoa(port), URL: "http://127.0.0.1:" + strconv.Itoa(port), data: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *relayProc) start() {
	r.t.Helper()
	r.log = &bytes.Buffer{}
	r.cmd = exec.Command(happyBin, "server", "--listen", r.addr, "--data", r.data)
	r.cmd.Env = append(os.Environ(), "HAPPY_HOME_DIR="+r.data)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(r.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("relay did not answer /health:\n%s", r.log)
}

// stop ends the relay (SIGTERM to its group, SIGKILL after 5 s).
func (r *relayProc) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	r.cmd = nil
}

// newAccount creates an account with a fresh secret on the relay at url.
func newAccount(t *testing.T, url string) *crypto.Credentials {
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
		t.Fatalf("create account: %v", err)
	}
	return creds
}

// homes creates n happy homes logged into one new account on the relay.
func homes(t *testing.T, url string, n int) []string {
	t.Helper()
	creds := newAccount(t, url)
	var out []string
	for i := 0; i < n; i++ {
		h := t.TempDir()
		if err := creds.Save(filepath.Join(h, crypto.CredentialsFileName)); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

// claudeHome prepares a throwaway HOME in which Claude Code starts without
// first-run dialogs for the folder work.
func claudeHome(t *testing.T, work, apiKey string) string {
	t.Helper()
	h := t.TempDir()
	cfg := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{apiKey[max(0, len(apiKey)-20):]}, "rejected": []string{}},
		"projects":               map[string]any{work: map[string]any{"hasTrustDialogAccepted": true}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(h, ".claude.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// claudeEnv is the environment of happy wrapping Claude against the fake model.
func claudeEnv(home, happyHome, relayURL, modelURL, claudeBin string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm-256color",
		"HAPPY_HOME_DIR=" + happyHome, "HAPPY_CLAUDE_PATH=" + claudeBin,
		"ANTHROPIC_BASE_URL=" + modelURL, "ANTHROPIC_API_KEY=sk-e2e-dummy-key-0123456789",
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	if relayURL != "" {
		env = append(env, "HAPPY_SERVER_URL="+relayURL)
	}
	return env
}

// happyRun runs happy to completion and returns its exit code and outputs.
func happyRun(t *testing.T, env []string, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, happyBin, args...)
	cmd.Env, cmd.Dir = env, dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("happy %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// bg is a happy process running in the background.
type bg struct {
	cmd       *exec.Cmd
	out, errb bytes.Buffer
	done      chan struct{}
	code      int
	wall      time.Duration
}

func happyStart(t *testing.T, env []string, dir string, args ...string) *bg {
	t.Helper()
	b := &bg{cmd: exec.Command(happyBin, args...), done: make(chan struct{})}
	b.cmd.Env, b.cmd.Dir = env, dir
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.errb
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go func() {
		err := b.cmd.Wait()
		b.wall = time.Since(start)
		if ee, ok := err.(*exec.ExitError); ok {
			b.code = ee.ExitCode()
		}
		close(b.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	})
	return b
}

func (b *bg) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-b.done:
		return b.code
	case <-time.After(d):
		t.Fatalf("happy did not exit within %s\nstdout: %s\nstderr: %s", d, b.out.String(), b.errb.String())
		return -1
	}
}

// waitFor polls fn until it returns true.
func waitFor(t *testing.T, d time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if fn() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

var (
	canonicalID = regexp.MustCompile(`^(ses|msg|prt|per|q)_[0-9a-zA-Z]+$`)
	uuidRe      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// normalize rewrites a transcript document so that runs compare: canonical
// ids become <prefix>_<n> in order of first appearance, times become 1 when
// set (absent stays absent, 0 stays 0), a prompt's receipt times are left
// out, and the given paths are replaced.
func normalize(t *testing.T, doc []byte, paths map[string]string) []byte {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("normalize: %v", err)
	}
	ids := map[string]string{}
	counts := map[string]int{}
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch x := v.(type) {
		case map[string]any:
			if key == "time" {
				// A prompt's receipts (time.received, handed, started)
				// depend on the machine's pace; their unit and command
				// tests check them.
				delete(x, "received")
				delete(x, "handed")
				delete(x, "started")
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				x[k] = walk(k, x[k])
			}
			return x
		case []any:
			for i := range x {
				x[i] = walk(key, x[i])
			}
			return x
		case json.Number:
			switch key {
			case "created", "updated", "completed", "start", "end", "decidedAt", "compacting", "time", "updatedAt", "duration_ms", "durationMs":
				if x.String() != "0" {
					return json.Number("1")
				}
			}
			return x
		case string:
			if canonicalID.MatchString(x) {
				if n, ok := ids[x]; ok {
					return n
				}
				prefix := x[:strings.IndexByte(x, '_')]
				counts[prefix]++
				n := fmt.Sprintf("%s_%d", prefix, counts[prefix])
				ids[x] = n
				return n
			}
			for from, to := range paths {
				x = strings.ReplaceAll(x, from, to)
			}
			return uuidRe.ReplaceAllStringFunc(x, func(u string) string {
				if n, ok := ids[u]; ok {
					return n
				}
				counts["uuid"]++
				n := fmt.Sprintf("<uuid-%d>", counts["uuid"])
				ids[u] = n
				return n
			})
		}
		return v
	}
	v = walk("", v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// golden compares got with testdata/name, rewriting it with -update (the
// flag internal/golden registers).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if igolden.Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (E2E_UPDATE=1 make e2e creates it)", err)
	}
	if d := igolden.Diff(want, got); d != "" {
		t.Fatalf("%s differs from the golden file (E2E_UPDATE=1 make e2e rewrites it), %s", path, d)
	}
}
