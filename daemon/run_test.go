//go:build unix

package daemon

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
)

// fakeSessionEnv makes the test binary a fake session started by the
// daemon: "report" writes the spawn report and runs until SIGTERM, "fail"
// exits 3 at once, "silent" never reports, "events" serves a scripted
// event API (fakeEventsSession), "prompt" reads its first prompt from the
// descriptor --initial-prompt-fd names (fakePromptSession), then reports.
const fakeSessionEnv = "HAPPY_DAEMON_TEST_FAKE_SESSION"

func fakeSession(mode string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "fake session: cannot start the agent")
		return 3
	case "events":
		return fakeEventsSession(sig)
	case "prompt":
		if err := fakePromptSession(); err != nil {
			fmt.Fprintln(os.Stderr, "fake session:", err)
			return 3
		}
		fallthrough
	case "report":
		fd, _ := strconv.Atoi(os.Getenv(app.SpawnReportEnv))
		f := os.NewFile(uintptr(fd), "report")
		wd, _ := os.Getwd()
		fmt.Fprintf(f, `{"sessionId":"fake-%s-%d","pid":%d}`+"\n", filepath.Base(wd), os.Getpid(), os.Getpid())
		f.Close()
	}
	<-sig
	return 0
}

// runDaemon runs Run in-process on a new home against a fresh relay, its
// sessions fake ones in mode; it returns a connection of the account and
// a function that stops the daemon and returns Run's error.
func runDaemon(t *testing.T, mode string, spawnTimeout time.Duration, with ...func(*Options)) (*app.Conn, home.Dir, func() error) {
	t.Helper()
	r := servertest.Start(t)
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := relay.CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Save(filepath.Join(h.Path(), crypto.CredentialsFileName)); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"HAPPY_SERVER_URL": r.URL, "PATH": ""}
	lf, err := os.Create(testLog(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	env := app.Env{Home: h, Getenv: func(k string) string { return vars[k] },
		Log: zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), lf)).Level(zerolog.InfoLevel)}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	opts := Options{Env: env, SpawnTimeout: spawnTimeout, StopGrace: 2 * time.Second, Stop: stop,
		Command: func(args []string) *exec.Cmd {
			cmd := exec.Command(exe, args...)
			cmd.Env = append(os.Environ(), fakeSessionEnv+"="+mode, fakeTokenEnv+"="+h.EventsToken())
			return cmd
		}}
	for _, w := range with {
		w(&opts)
	}
	go func() { done <- Run(context.Background(), opts) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := ReadState(h); err == nil && st.Status == StatusRunning {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended at start: %v", err)
		case <-time.After(20 * time.Millisecond): // the state file is the signal
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon is not running after 30 s")
		}
	}
	conn, err := app.Connect(context.Background(), app.Env{Home: h, Getenv: env.Getenv, Log: zerolog.Nop()}, app.ConnectOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	finish := func() error {
		if stopped {
			return nil
		}
		stopped = true
		close(stop)
		err := <-done
		conn.Close()
		return err
	}
	t.Cleanup(func() { _ = finish() })
	return conn, h, finish
}

// testLog is the file runDaemon's daemon logs to (besides the test's log).
func testLog(h home.Dir) string { return h.Join("test-daemon.log") }

// machineID is the home's machine id (the daemon wrote it).
func machineID(t *testing.T, h home.Dir) string {
	t.Helper()
	st, err := ReadState(h)
	if err != nil || st.MachineID == "" {
		t.Fatalf("state %+v %v", st, err)
	}
	return st.MachineID
}

// The machine RPCs end to end against a relay: spawn (an asking reply for a
// missing folder, then success with the reported id), list-sessions,
// stop-session (the process group is gone), the daemon state on the relay,
// and stop-daemon; no goroutine outlives Run.
func TestRunServesMachineRPCs(t *testing.T) {
	conn, h, finish := runDaemon(t, "report", 10*time.Second)
	ctx := context.Background()
	mid := machineID(t, h)

	missing := filepath.Join(t.TempDir(), "a", "b")
	rep, err := SpawnOn(ctx, conn, mid, SpawnRequest{Agent: "codex", Directory: missing})
	if err != nil || rep != (SpawnReply{Type: SpawnApproveDirectory, Directory: missing}) {
		t.Fatalf("spawn in a missing folder = %+v, %v", rep, err)
	}
	rep, err = SpawnOn(ctx, conn, mid, SpawnRequest{Agent: "codex", Directory: missing, ApprovedNewDirectoryCreation: true})
	if err != nil || rep.Type != SpawnSuccess || rep.SessionID != "fake-b-"+strconv.Itoa(rep.PID) {
		t.Fatalf("approved spawn = %+v, %v", rep, err)
	}
	if st, err := os.Stat(missing); err != nil || !st.IsDir() {
		t.Fatalf("the approved folder: %v", err)
	}
	var list SessionsReply
	if err := Call(ctx, conn, mid, MethodListSessions, map[string]any{}, &list, 0); err != nil || len(list.Sessions) != 1 ||
		list.Sessions[0].SessionID != rep.SessionID || list.Sessions[0].Agent != "codex" || list.Sessions[0].Directory != missing || list.Sessions[0].PID != rep.PID {
		t.Fatalf("list-sessions = %+v, %v", list, err)
	}
	// The relay's daemon state lists the session (it is written in the
	// background).
	var ms []Machine
	listed := waitfor.Poll{Every: 50 * time.Millisecond}.True(func() bool {
		var err error
		if ms, err = Machines(ctx, conn, time.Now()); err != nil {
			t.Fatal(err)
		}
		var ds daemonState
		if len(ms) != 1 || ms[0].Daemon == nil || json.Unmarshal(*ms[0].Daemon, &ds) != nil || len(ds.Sessions) != 1 {
			return false
		}
		if ds.Status != StatusRunning || ds.PID != os.Getpid() || ds.Sessions[0].SessionID != rep.SessionID || !ms[0].Online {
			t.Fatalf("daemon state %+v, machine %+v", ds, ms[0])
		}
		return true
	})
	if !listed {
		t.Fatalf("the daemon state never listed the session: %+v", ms)
	}

	var stop StopReply
	if err := Call(ctx, conn, mid, MethodStopSession, map[string]string{"sessionId": "nope"}, &stop, 0); err != nil ||
		stop != (StopReply{Message: "session nope is not run by this daemon"}) {
		t.Fatalf("stop-session of another session = %+v, %v", stop, err)
	}
	if err := Call(ctx, conn, mid, MethodStopSession, map[string]string{"sessionId": rep.SessionID}, &stop, 0); err != nil ||
		stop != (StopReply{Success: true, Message: fmt.Sprintf("session %s stopped (pid %d)", rep.SessionID, rep.PID)}) {
		t.Fatalf("stop-session = %+v, %v", stop, err)
	}
	if err := syscall.Kill(-rep.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(-%d, 0) after stop-session = %v, want ESRCH", rep.PID, err)
	}
	// A second session is stopped with the daemon.
	rep2, err := SpawnOn(ctx, conn, mid, SpawnRequest{Agent: "claude", Directory: t.TempDir()})
	if err != nil || rep2.Type != SpawnSuccess {
		t.Fatalf("second spawn = %+v, %v", rep2, err)
	}
	if err := Call(ctx, conn, mid, MethodStopDaemon, map[string]any{}, &stop, 0); err != nil || !stop.Success {
		t.Fatalf("stop-daemon = %+v, %v", stop, err)
	}
	if err := finish(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := syscall.Kill(-rep2.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(-%d, 0) after the daemon stopped = %v, want ESRCH", rep2.PID, err)
	}
	if _, err := os.Stat(StatePath(h)); !os.IsNotExist(err) {
		t.Fatalf("the state file after a clean stop: %v", err)
	}
}

// A session that exits before reporting, or never reports, is an error
// reply naming what happened, never a hung call.
func TestSpawnFailuresAreReplies(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"fail", "happy codex ended before its session existed: fake session: cannot start the agent"},
		{"silent", "the session did not report its id within 1s; stopped it"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			conn, h, _ := runDaemon(t, tc.mode, time.Second)
			rep, err := SpawnOn(context.Background(), conn, machineID(t, h), SpawnRequest{Agent: "codex", Directory: t.TempDir()})
			if err != nil || rep.Type != SpawnError || !strings.HasPrefix(rep.ErrorMessage, tc.want) {
				t.Fatalf("spawn = %+v, %v; want an error starting %q", rep, err, tc.want)
			}
		})
	}
}
