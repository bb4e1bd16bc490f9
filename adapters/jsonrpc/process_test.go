package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/trafficlog"
)

// TestMain lets the test binary act as a child JSON-RPC server when
// JSONRPC_TEST_CHILD is set: it answers every request with its method name,
// says hello on stderr, and exits with code 3 on "quit".
func TestMain(m *testing.M) {
	switch os.Getenv("JSONRPC_TEST_CHILD") {
	case "1":
		childServer()
		return
	case "escape":
		escapeChild()
		return
	case "sleep":
		time.Sleep(time.Minute)
		return
	}
	goleak.VerifyTestMain(m)
}

func childServer() {
	fmt.Fprintln(os.Stderr, "child ready")
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			os.Exit(0)
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal([]byte(line), &req)
		fmt.Printf(`{"method":"progress","params":{"of":%q}}`+"\n", req.Method)
		fmt.Printf(`{"id":%s,"result":{"echo":%q}}`+"\n", req.ID, req.Method)
		if req.Method == "quit" {
			os.Exit(3)
		}
	}
}

// escapeChild starts a grandchild in a new session (out of our process
// group) that inherits stdout and stderr and sleeps, reports its pid, and
// exits.
func escapeChild() {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "JSONRPC_TEST_CHILD=sleep")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf(`{"method":"spawned","params":{"pid":%d}}`+"\n", cmd.Process.Pid)
	os.Exit(0)
}

// TestProcessDetachedDescendant: the child exits leaving a detached
// grandchild that holds its stdout and stderr open; Exited still closes
// (about OutputDrain later), after the notification sent before the exit,
// and Stop returns.
func TestProcessDetachedDescendant(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "JSONRPC_TEST_CHILD=escape")
	var mu sync.Mutex
	grandchild := 0
	h := HandlerFunc(func(_ context.Context, in *Incoming) {
		var p struct{ Pid int }
		_ = json.Unmarshal(in.Params, &p)
		mu.Lock()
		grandchild = p.Pid
		mu.Unlock()
	})
	var log syncBuffer
	p, err := Start(context.Background(), cmd, h, Options{Recorder: TrafficRecorder(&log)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if grandchild > 0 {
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
		}
	}()
	select {
	case <-p.Exited():
	case <-time.After(OutputDrain + 10*time.Second):
		t.Fatal("Exited not closed while a detached grandchild holds the pipes")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(time.Second) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return")
	}
	mu.Lock()
	pid := grandchild
	mu.Unlock()
	if pid <= 0 {
		t.Fatal("the notification written before the exit was not read")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("grandchild %d not running (the test checks nothing): %v", pid, err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	last, err := trafficlog.Decode([]byte(lines[len(lines)-1]))
	if err != nil || last.Dir != trafficlog.Exit || string(last.Msg) != `{"code":0,"sig":null}` {
		t.Fatalf("last record %+v, %v", last, err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "JSONRPC_TEST_CHILD=1")
	var mu sync.Mutex
	var log bytes.Buffer
	var notes []string
	h := HandlerFunc(func(_ context.Context, in *Incoming) {
		mu.Lock()
		notes = append(notes, in.Method+string(in.Params))
		mu.Unlock()
	})
	p, err := Start(context.Background(), cmd, h, Options{OmitVersion: true, Recorder: TrafficRecorder(&log)})
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Echo string }
	if err := p.Call(context.Background(), "hello", nil, &res); err != nil || res.Echo != "hello" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	mu.Lock()
	if len(notes) != 1 || notes[0] != `progress{"of":"hello"}` {
		t.Fatalf("notifications = %q", notes)
	}
	mu.Unlock()
	if err := p.Call(context.Background(), "quit", nil, &res); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("child did not exit")
	}
	st, _ := p.Wait()
	if st == nil || st.ExitCode() != 3 {
		t.Fatalf("exit state %v", st)
	}
	var dirs []string
	var exitMsg, stderrMsg string
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		r, err := trafficlog.Decode([]byte(line))
		if err != nil {
			t.Fatalf("traffic log line %s: %v", line, err)
		}
		dirs = append(dirs, string(r.Dir))
		switch r.Dir {
		case trafficlog.Exit:
			exitMsg = string(r.Msg)
		case trafficlog.Stderr:
			stderrMsg, _ = trafficlog.Text(r.Msg)
		}
	}
	if dirs[len(dirs)-1] != "exit" || exitMsg != `{"code":3,"sig":null}` {
		t.Fatalf("dirs %v, exit %s", dirs, exitMsg)
	}
	if stderrMsg != "child ready\n" {
		t.Fatalf("stderr record %q", stderrMsg)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestStartRefusesBadCommand(t *testing.T) {
	if _, err := Start(context.Background(), exec.Command("/nonexistent/happy-agent"), nil, Options{}); err == nil {
		t.Fatal("started a missing binary")
	}
	cmd := exec.Command("true")
	cmd.Stdout = os.Stdout
	if _, err := Start(context.Background(), cmd, nil, Options{}); err == nil {
		t.Fatal("accepted a command with stdout set")
	}
}
