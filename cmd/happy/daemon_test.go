package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/daemon"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
)

// daemonHomes returns the environment of a daemon's home (with the fake
// Codex) against a fresh relay, and of a second home of the same account.
func daemonHomes(t *testing.T, fc *fakeCodex) (envA, envB map[string]string) {
	t.Helper()
	envA = codexTestEnv(t, fc)
	envB = map[string]string{"HAPPY_SERVER_URL": envA["HAPPY_SERVER_URL"], "HAPPY_HOME_DIR": t.TempDir()}
	creds, err := crypto.LoadCredentials(filepath.Join(envA["HAPPY_HOME_DIR"], crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	// Another device of the account has a machine key of its own (as one
	// logged in with the backup key has): it reaches the daemon's machine
	// through that machine's wrapped key, never its own.
	if creds.DataKey != nil {
		if _, err := rand.Read(creds.DataKey.MachineKey[:]); err != nil {
			t.Fatal(err)
		}
	}
	if err := creds.Save(filepath.Join(envB["HAPPY_HOME_DIR"], crypto.CredentialsFileName)); err != nil {
		t.Fatal(err)
	}
	return envA, envB
}

// interactiveCodex is a fake Codex whose capture has no exit at the end: the
// session stays open after its turn.
func interactiveCodex(t *testing.T) *fakeCodex {
	t.Helper()
	fc := newFakeCodex(t, "codex-cli 0.171.0\n", "codex-app", "")
	log, err := os.ReadFile(filepath.Join(fc.dir, "app-server.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(log), `{"t":1795964187836,"dir":"exit"`)
	if !ok {
		t.Fatal("the capture does not end with Codex's exit")
	}
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	return fc
}

// startDaemon runs happy daemon start on env's home; the daemon and every
// session it started are killed when the test ends.
func startDaemon(t *testing.T, env map[string]string) daemon.State {
	t.Helper()
	old := selfExec
	selfExec = testSelfExec(env)
	defer func() { selfExec = old }()
	code, stdout, stderr := runHappy(t, env, "daemon", "start")
	if code != exitOK || !strings.HasPrefix(stdout, "happy: daemon started (pid ") {
		t.Fatalf("happy daemon start = %d %q %q", code, stdout, stderr)
	}
	h := testHome(t, env)
	st, err := daemon.ReadState(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := daemon.ReadState(h); err == nil {
			for _, c := range s.Sessions {
				_ = syscall.Kill(-c.PID, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	})
	return st
}

func testHome(t *testing.T, env map[string]string) home.Dir {
	t.Helper()
	h, err := home.New(env["HAPPY_HOME_DIR"])
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// machines is happy machines --json.
func machines(t *testing.T, env map[string]string) []daemon.Machine {
	t.Helper()
	code, stdout, stderr := runHappy(t, env, "machines", "--json")
	if code != exitOK {
		t.Fatalf("happy machines: %d %s", code, stderr)
	}
	var ms []daemon.Machine
	if err := json.Unmarshal([]byte(stdout), &ms); err != nil {
		t.Fatalf("happy machines --json: %v\n%s", err, stdout)
	}
	return ms
}

// waitFor polls cond (it reads other processes' writes: nothing to wait
// on) until it holds, failing after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Poll{Every: 50 * time.Millisecond, Within: 30 * time.Second}.Until(t, what, cond)
}

// groupGone reports whether process group pgid has no process left. The
// test process may be a child subreaper (agent commands run in-process
// make it one), so a leader re-parented to it is reaped here first.
func groupGone(pgid int) bool {
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pgid, &ws, syscall.WNOHANG, nil)
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// spawnPID is the pid in happy spawn's notice.
func spawnPID(t *testing.T, stderr string) int {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "(pid ")
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	if !ok || n == 0 {
		t.Fatalf("no pid in %q", stderr)
	}
	return n
}

// A daemon on one home serves another home of the account: it is listed
// as an online machine with its agents, refuses a missing folder until the
// creation is approved, starts a Codex session that reports its id and is
// marked startedBy daemon, the session takes a prompt and an approval
// from the second home, and happy stop ends it through the daemon with
// its process group gone. happy daemon stop ends the daemon and what it
// still runs.
func TestDaemonSpawnPromptApproveStop(t *testing.T) {
	fc := interactiveCodex(t)
	envA, envB := daemonHomes(t, fc)
	st := startDaemon(t, envA)

	// One daemon per home.
	old := selfExec
	selfExec = testSelfExec(envA)
	code, _, stderr := runHappy(t, envA, "daemon", "start")
	selfExec = old
	if code != exitFailed || !strings.Contains(stderr, "a daemon already runs on this home (pid "+itoa(st.PID)+", since ") {
		t.Fatalf("second daemon start = %d %q", code, stderr)
	}
	code, stdout, _ := runHappy(t, envA, "daemon", "status", "--json")
	var s daemon.Status
	if err := json.Unmarshal([]byte(stdout), &s); code != exitOK || err != nil || !s.Running || s.State == nil || s.State.Status != daemon.StatusRunning || s.State.PID != st.PID {
		t.Fatalf("daemon status = %d %s", code, stdout)
	}

	if code, stdout, _ := runHappy(t, envA, "daemon", "logs"); code != exitOK || !strings.Contains(stdout, `"message":"daemon running: machine registered"`) {
		t.Fatalf("daemon logs = %d %q", code, stdout)
	}

	// The machine is online with its agents.
	var m daemon.Machine
	waitFor(t, "the machine with its agents", func() bool {
		ms := machines(t, envB)
		if len(ms) != 1 || len(ms[0].Agents) == 0 {
			return false
		}
		m = ms[0]
		return true
	})
	host, _ := os.Hostname()
	if m.ID != st.MachineID || !m.Online || m.Host != host || m.HomeDir != envA["HAPPY_HOME_DIR"] || m.Version != "dev" {
		t.Fatalf("machine %+v", m)
	}
	code, stdout, _ = runHappy(t, envB, "machines")
	if lines := strings.Split(stdout, "\n"); code != exitOK || len(lines) != 3 || !strings.HasPrefix(lines[0], "MACHINE ") ||
		!strings.HasPrefix(lines[1], m.ID+"  "+host+" ") || !strings.Contains(lines[1], " online ") || !strings.Contains(lines[1], " codex ") || !strings.HasSuffix(lines[1], " 0") {
		t.Fatalf("happy machines = %d\n%s", code, stdout)
	}
	var codexAgent app.InstalledAgent
	for _, a := range m.Agents {
		if a.Name == "codex" {
			codexAgent = a
		}
	}
	if !codexAgent.Installed || codexAgent.Path != fc.path || codexAgent.Version != "codex-cli 0.171.0" {
		t.Fatalf("codex in the machine's agents: %+v", codexAgent)
	}

	// A missing folder needs an explicit approval; an unknown agent is refused.
	dir := filepath.Join(t.TempDir(), "new", "project")
	code, stdout, stderr = runHappy(t, envB, "spawn", "--machine", host, "--dir", dir, "--agent", "codex")
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "the folder "+dir+" does not exist on "+host+"; add --create-dir to create it") {
		t.Fatalf("spawn in a missing folder = %d %q %q", code, stdout, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the folder was created without approval: %v", err)
	}
	code, _, stderr = runHappy(t, envB, "spawn", "--machine", host, "--dir", dir, "--agent", "sh")
	if code != exitFailed || !strings.Contains(stderr, `unknown agent "sh" (this daemon starts claude, codex, gemini, openclaw, opencode)`) {
		t.Fatalf("spawn of an unknown agent = %d %q", code, stderr)
	}

	code, stdout, stderr = runHappy(t, envB, "spawn", "--machine", m.ID[:8], "--dir", dir, "--agent", "codex", "--create-dir")
	if code != exitOK {
		t.Fatalf("spawn = %d %q %q", code, stdout, stderr)
	}
	sid := strings.TrimSpace(stdout)
	pid := spawnPID(t, stderr)
	o, _ := readSession(t, envB, sid)
	if o.Metadata.StartedBy != "daemon" || o.Metadata.Flavor != "codex" || o.Metadata.Path != dir || o.Metadata.MachineID != st.MachineID || o.Metadata.HostPid != pid {
		t.Fatalf("spawned session metadata %+v (pid %d)", o.Metadata, pid)
	}
	code, stdout, _ = runHappy(t, envA, "daemon", "status")
	if code != exitOK || !strings.Contains(stdout, "  session "+sid+"  codex  "+dir+"  pid "+itoa(pid)+"\n") {
		t.Fatalf("daemon status with the session = %d %q", code, stdout)
	}

	// A prompt and an approval from the second home.
	if code, _, stderr := runHappy(t, envB, "send", sid, "Run `echo hi > hi.txt` in the shell and tell me what happened"); code != exitOK {
		t.Fatalf("happy send: %d %s", code, stderr)
	}
	var callID string
	waitFor(t, "a blocked tool", func() bool {
		_, tr := readSession(t, envB, sid)
		for _, tp := range toolsOf(tr) {
			if tp.State.Status == mapper.StatusBlocked {
				callID = tp.CallID
				return true
			}
		}
		return false
	})
	if code, stdout, stderr := runHappy(t, envB, "approve", sid, callID); code != exitOK {
		t.Fatalf("happy approve: %d %s %s", code, stdout, stderr)
	}
	waitFor(t, "the answer", func() bool {
		_, tr := readSession(t, envB, sid)
		n := len(tr.Messages)
		return n > 0 && fmtParts(tr.Messages[n-1].Parts) == "Done: the command printed hi."
	})
	if m := fc.mismatch(t); m != "" {
		t.Fatalf("happy's traffic differs from the script:\n%s", m)
	}

	// happy stop goes through the daemon; the process group is gone.
	code, stdout, stderr = runHappy(t, envB, "stop", sid)
	if code != exitOK || !strings.HasPrefix(stdout, "happy: session "+sid+": stopped by the daemon of machine "+st.MachineID+": session "+sid+" stopped (pid "+itoa(pid)+")") {
		t.Fatalf("happy stop = %d %q %q", code, stdout, stderr)
	}
	waitFor(t, "the session's process group to go", func() bool { return groupGone(pid) })
	waitFor(t, "the session to end", func() bool {
		o, _ := readSession(t, envB, sid)
		return o.Metadata.LifecycleState == app.LifecycleEnded
	})
	code, stdout, _ = runHappy(t, envB, "stop", sid)
	if code != exitFailed {
		t.Fatalf("happy stop of an ended session = %d %q", code, stdout)
	}

	// happy daemon stop stops the daemon and the sessions it runs.
	dir2 := t.TempDir()
	code, stdout, stderr = runHappy(t, envB, "spawn", "--machine", m.ID, "--dir", dir2, "--agent", "codex")
	if code != exitOK {
		t.Fatalf("second spawn = %d %q %q", code, stdout, stderr)
	}
	sid2, pid2 := strings.TrimSpace(stdout), spawnPID(t, stderr)
	code, stdout, stderr = runHappy(t, envA, "daemon", "stop")
	if code != exitOK || stdout != "happy: daemon stopped (pid "+itoa(st.PID)+", 1 session(s) stopped with it)\n" {
		t.Fatalf("daemon stop = %d %q %q", code, stdout, stderr)
	}
	if !groupGone(pid2) {
		t.Fatalf("the session %d outlived its daemon's stop", pid2)
	}
	if o, _ := readSession(t, envB, sid2); o.Metadata.LifecycleState != app.LifecycleEnded {
		t.Fatalf("the second session after daemon stop: %+v", o.Metadata)
	}
	if code, stdout, _ := runHappy(t, envA, "daemon", "status"); code != exitFailed || !strings.HasPrefix(stdout, "not running") {
		t.Fatalf("status after stop = %d %q", code, stdout)
	}
	// At once, not after the heartbeat's 90 s: the daemon's last word.
	ms := machines(t, envB)
	if len(ms) != 1 || ms[0].Online || ms[0].Daemon == nil {
		t.Fatalf("machines right after daemon stop: %+v", ms)
	}
	var ds map[string]any
	if err := json.Unmarshal(*ms[0].Daemon, &ds); err != nil {
		t.Fatal(err)
	}
	if ds["status"] != daemon.StatusOffline || ds["pid"] != float64(st.PID) || len(ds["sessions"].([]any)) != 0 || ds["shutdownSource"] != "signal" {
		t.Fatalf("the daemon state right after daemon stop: %v", ds)
	}
	code, stdout, _ = runHappy(t, envB, "machines")
	if code != exitOK || !strings.Contains(stdout, "offline") {
		t.Fatalf("happy machines after daemon stop = %d %q", code, stdout)
	}
	// A spawn to it fails at once, saying why.
	start := time.Now()
	code, stdout, stderr = runHappy(t, envB, "spawn", "--machine", m.ID, "--dir", dir2, "--agent", "codex")
	took := time.Since(start)
	want := "happy: the daemon of machine " + m.ID + " is not running (last seen " + time.UnixMilli(ms[0].LastSeen).Format(time.RFC3339) + ")\n"
	if code != exitFailed || stdout != "" || stderr != want {
		t.Fatalf("spawn after daemon stop = %d %q %q, want %q", code, stdout, stderr, want)
	}
	if took > 5*time.Second {
		t.Fatalf("spawn after daemon stop took %s, want at once (the relay's grace is 15 s)", took)
	}
	b, err := os.ReadFile(daemon.LogPath(testHome(t, envA)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"message":"spawn: the directory does not exist; asking for approval"`, `"message":"spawn refused"`,
		`"message":"spawn: session reported its id"`, `"message":"stop-session: stopping"`, `"message":"daemon stopped"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the daemon log lacks %s", want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A daemon killed with kill -9 leaves its sessions running; the next daemon
// on the home adopts the one still alive (listed in its state and on the
// relay, stopped by happy stop through it, its end noticed) and leaves the
// one that died meanwhile to the orphan settlement, which ends it.
func TestKilledDaemonsLiveSessionsAreAdopted(t *testing.T) {
	fc := interactiveCodex(t)
	envA, envB := daemonHomes(t, fc)
	h := testHome(t, envA)
	st := startDaemon(t, envA)
	waitFor(t, "the machine", func() bool { return len(machines(t, envB)) == 1 })
	spawn := func() (string, int) {
		code, stdout, stderr := runHappy(t, envB, "spawn", "--machine", st.MachineID, "--dir", t.TempDir(), "--agent", "codex")
		if code != exitOK {
			t.Fatalf("spawn = %d %q %q", code, stdout, stderr)
		}
		return strings.TrimSpace(stdout), spawnPID(t, stderr)
	}
	live, livePID := spawn()
	dead, deadPID := spawn()

	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed daemon's lock to be free", func() bool { return !daemon.Running(h) })
	if groupGone(livePID) || groupGone(deadPID) {
		t.Fatal("a session died with its daemon; the test proves nothing")
	}
	if err := syscall.Kill(-deadPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dead session's group to go", func() bool { return groupGone(deadPID) })

	st2 := startDaemon(t, envA)
	if st2.PID == st.PID {
		t.Fatal("the same daemon")
	}
	if len(st2.Sessions) != 1 || st2.Sessions[0].SessionID != live || st2.Sessions[0].PID != livePID {
		t.Fatalf("the new daemon's sessions %+v, want %s (pid %d) alone", st2.Sessions, live, livePID)
	}
	waitFor(t, "the dead session to be settled", func() bool {
		o, _ := readSession(t, envB, dead)
		return o.Metadata.LifecycleState == app.LifecycleEnded
	})
	if groupGone(livePID) {
		t.Fatal("the new daemon killed the live session")
	}
	if o, _ := readSession(t, envB, live); o.Metadata.LifecycleState == app.LifecycleEnded {
		t.Fatal("the live session was settled as an orphan")
	}
	waitFor(t, "the adopted session in the daemon state on the relay", func() bool {
		ms := machines(t, envB)
		if len(ms) != 1 || ms[0].Daemon == nil {
			return false
		}
		var ds struct {
			PID      int `json:"pid"`
			Sessions []struct {
				SessionID string `json:"sessionId"`
				PID       int    `json:"pid"`
			} `json:"sessions"`
		}
		_ = json.Unmarshal(*ms[0].Daemon, &ds)
		return ds.PID == st2.PID && len(ds.Sessions) == 1 && ds.Sessions[0].SessionID == live && ds.Sessions[0].PID == livePID
	})
	b, _ := os.ReadFile(daemon.LogPath(h))
	if !strings.Contains(string(b), `"pid":`+itoa(livePID)+`,"session":"`+live+`","agent":"codex"`) ||
		!strings.Contains(string(b), `"message":"adopted a session of the previous daemon that still runs"`) {
		t.Errorf("the daemon log does not name the adopted session:\n%s", b)
	}

	// The adopted session is stopped through the daemon, which notices its end.
	code, stdout, stderr := runHappy(t, envB, "stop", live)
	if code != exitOK || !strings.HasPrefix(stdout, "happy: session "+live+": stopped by the daemon of machine "+st.MachineID+": session "+live+" stopped (pid "+itoa(livePID)+")") {
		t.Fatalf("happy stop = %d %q %q", code, stdout, stderr)
	}
	waitFor(t, "the adopted session's process group to go", func() bool { return groupGone(livePID) })
	waitFor(t, "the adopted session to leave the daemon state", func() bool {
		s, err := daemon.ReadState(h)
		return err == nil && s.PID == st2.PID && len(s.Sessions) == 0
	})
	waitFor(t, "the adopted session to end", func() bool {
		o, _ := readSession(t, envB, live)
		return o.Metadata.LifecycleState == app.LifecycleEnded
	})
	if code, _, stderr := runHappy(t, envA, "daemon", "stop"); code != exitOK {
		t.Fatalf("daemon stop: %d %s", code, stderr)
	}
}

// restartableRelay is an in-process relay on a fixed loopback address that
// restart stops and starts again on the same data.
type restartableRelay struct {
	t      *testing.T
	addr   string
	dir    string
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error
}

func startRestartableRelay(t *testing.T) *restartableRelay {
	t.Helper()
	r := &restartableRelay{t: t, addr: "127.0.0.1:0", dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartableRelay) url() string { return "http://" + r.addr }

func (r *restartableRelay) start() {
	r.t.Helper()
	srv, err := server.New(server.Config{DataDir: r.dir, Logger: zerolog.Nop()})
	if err != nil {
		r.t.Fatal(err)
	}
	var l net.Listener
	// The old listener's port may still be being released.
	if !(waitfor.Poll{Every: 50 * time.Millisecond, Within: 5 * time.Second}).True(func() bool {
		l, err = net.Listen("tcp", r.addr)
		return err == nil
	}) {
		r.t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	r.srv, r.cancel, r.done = srv, cancel, make(chan error, 1)
	go func() { r.done <- srv.Serve(ctx, l) }()
}

func (r *restartableRelay) stop() {
	if r.srv == nil {
		return
	}
	r.cancel()
	_ = r.srv.Close()
	<-r.done
	r.srv = nil
}

// A relay restart while the daemon runs: the machine comes back online
// (a heartbeat after the restart) and its RPCs answer again.
func TestDaemonSurvivesRelayRestart(t *testing.T) {
	fc := interactiveCodex(t)
	rr := startRestartableRelay(t)
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: rr.url()})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := relay.CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	envA := map[string]string{"HAPPY_SERVER_URL": rr.url(), "HAPPY_HOME_DIR": t.TempDir(), "HAPPY_CODEX_PATH": fc.path}
	envB := map[string]string{"HAPPY_SERVER_URL": rr.url(), "HAPPY_HOME_DIR": t.TempDir()}
	for _, e := range []map[string]string{envA, envB} {
		if err := creds.Save(filepath.Join(e["HAPPY_HOME_DIR"], crypto.CredentialsFileName)); err != nil {
			t.Fatal(err)
		}
	}
	st := startDaemon(t, envA)
	waitFor(t, "the machine online", func() bool { ms := machines(t, envB); return len(ms) == 1 && ms[0].Online })

	rr.stop()
	restarted := time.Now()
	rr.start()
	waitFor(t, "the machine online after the restart", func() bool {
		ms := machines(t, envB)
		return len(ms) == 1 && ms[0].Online && ms[0].LastSeen >= restarted.UnixMilli()-1000
	})
	code, stdout, stderr := runHappy(t, envB, "spawn", "--machine", st.MachineID, "--dir", t.TempDir(), "--agent", "codex")
	if code != exitOK {
		t.Fatalf("spawn after the restart = %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := runHappy(t, envA, "daemon", "stop"); code != exitOK {
		t.Fatalf("daemon stop: %d %s", code, stderr)
	}
}

// happy daemon install --dry-run prints the unit and changes nothing;
// uninstall --dry-run says what it would remove; commands on a home without
// a daemon say so.
func TestDaemonCommandsWithoutDaemon(t *testing.T) {
	env := map[string]string{"HAPPY_HOME_DIR": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir(), "PATH": "/usr/bin"}
	code, stdout, stderr := runHappy(t, env, "daemon", "install", "--dry-run")
	h := testHome(t, env)
	u, err := daemon.NewUnit(daemon.UnitOptions{Home: h, Executable: mustExe(t), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	want := "# " + u.Path + "\n" + u.Text + "# then: systemctl --user daemon-reload && systemctl --user enable --now " + u.Name + "\n"
	if code != exitOK || stdout != want || stderr != "" {
		t.Fatalf("install --dry-run = %d\n%s\nwant\n%s\n%s", code, stdout, want, stderr)
	}
	if _, err := os.Stat(u.Path); !os.IsNotExist(err) {
		t.Fatalf("a dry run wrote the unit: %v", err)
	}
	code, stdout, _ = runHappy(t, env, "daemon", "uninstall", "--dry-run")
	if code != exitOK || stdout != "would run: systemctl --user disable --now "+u.Name+"\nwould remove: "+u.Path+"\nwould run: systemctl --user daemon-reload\n" {
		t.Fatalf("uninstall --dry-run = %d %q", code, stdout)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"daemon", "status"}, exitFailed, "not running (start it with: happy daemon start; log: " + daemon.LogPath(h) + ")\n"},
		{[]string{"daemon", "status", "--json"}, exitFailed, "{\n  \"running\": false,\n  \"log\": \"" + daemon.LogPath(h) + "\"\n}\n"},
		{[]string{"daemon", "stop"}, exitOK, "happy: no daemon runs on this home\n"},
		{[]string{"daemon", "logs"}, exitFailed, ""},
		{[]string{"spawn", "--dir", "/x"}, exitUsage, ""},
		{[]string{"stop"}, exitUsage, ""},
		{[]string{"daemon", "frob"}, exitUsage, ""},
		{[]string{"daemon", "start", "--events-listen", "0.0.0.0:4097"}, exitUsage, ""},
		{[]string{"daemon", "run", "--events-listen", ":4097"}, exitUsage, ""},
	} {
		code, stdout, stderr := runHappy(t, env, tc.args...)
		if code != tc.code || stdout != tc.stdout {
			t.Errorf("happy %q = %d %q %q; want %d %q", tc.args, code, stdout, stderr, tc.code, tc.stdout)
		}
	}
}

func mustExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// happy stop of a session no daemon runs uses the session's own
// killSession: it ends on the relay and its happy exits 0.
func TestStopWithoutDaemon(t *testing.T) {
	fc := interactiveCodex(t)
	env := codexTestEnv(t, fc)
	c := startChild(t, env, "codex", "--codex-protocol", "app-server")
	sid := c.sessionID(t)
	code, stdout, stderr := runHappy(t, env, "stop", sid)
	if code != exitOK || stdout != "happy: session "+sid+": the session ended itself: the session is ending\n" {
		t.Fatalf("happy stop = %d %q %q", code, stdout, stderr)
	}
	if code := c.wait(t); code != exitOK {
		t.Fatalf("the stopped happy exited %d: %s", code, c.errText())
	}
	if o, _ := readSession(t, env, sid); o.Metadata.LifecycleState != app.LifecycleEnded || o.Metadata.StartedBy != "terminal" {
		t.Fatalf("metadata after stop %+v", o.Metadata)
	}
}

// happy daemon logs -f prints the log and what is appended to it, until
// interrupted (exit 0).
func TestDaemonLogsFollow(t *testing.T) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	env := map[string]string{"HAPPY_HOME_DIR": t.TempDir()}
	h := testHome(t, env)
	if err := os.MkdirAll(h.Logs(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(daemon.LogPath(h), []byte("first line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	f := newFactory(strings.NewReader(""), stdout, stderr, func(k string) string { return env[k] })
	done := make(chan int, 1)
	go func() { done <- run([]string{"daemon", "logs", "-f"}, f) }()
	waitOutput(t, "stdout", stdout, "first line\n", done)
	lf, err := os.OpenFile(daemon.LogPath(h), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lf.WriteString("second line\n"); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	waitOutput(t, "stdout", stdout, "first line\nsecond line\n", done)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitOK || stdout.String() != "first line\nsecond line\n" {
			t.Fatalf("logs -f = %d %q %q", code, stdout.String(), stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("logs -f did not end on SIGINT")
	}
}
