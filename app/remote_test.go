package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/claude/dual"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app/remotefs"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/confine"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// rawRPC calls a session RPC the way the reference app does and returns the
// decrypted reply as it came (CallRPC takes {"error"} replies for errors).
func rawRPC(t *testing.T, conn *Conn, o Opened, method string, params any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain, _ := json.Marshal(params)
	sealed, err := o.Cipher.Seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	sock, err := relay.SIODialer(10*time.Second)(ctx, conn.URL, map[string]any{"token": conn.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	reply, err := sock.Call(ctx, "rpc-call", map[string]any{"method": o.Info.ID + ":" + method, "params": crypto.EncodeBase64(sealed)})
	if err != nil || len(reply) == 0 {
		t.Fatalf("%s: %v %v", method, reply, err)
	}
	ack, _ := reply[0].(map[string]any)
	if ok, _ := ack["ok"].(bool); !ok {
		t.Fatalf("%s: %v", method, ack)
	}
	raw, err := crypto.DecodeBase64(ack["result"].(string))
	if err != nil {
		t.Fatal(err)
	}
	out, err := o.Cipher.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// runIn runs a session of ag in dir on device A and returns device B's
// view of it, the session's end and a stop.
func runIn(t *testing.T, ag agent.Agent, dir string, vars map[string]string, prompt string) (Opened, *Conn, <-chan error) {
	t.Helper()
	noLeaks(t)
	envA, connA, connB := twoDevices(t)
	get := envA.Getenv
	envA.Getenv = func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return get(k)
	}
	ids := make(chan string, 1)
	done := make(chan error, 1)
	finished := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-finished })
	go func() {
		defer close(finished)
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "fake", Dir: dir, Prompt: prompt, ProviderID: "test",
			OnCreated: func(id string) { ids <- id }})
		done <- err
	}()
	var id string
	select {
	case id = <-ids:
	case <-time.After(20 * time.Second):
		t.Fatal("session not created")
	}
	o, err := FindSession(context.Background(), connB, id)
	if err != nil {
		t.Fatal(err)
	}
	// The handlers are registered right after the session is created.
	waitfor.Until(t, "an answer to listDirectory", func() bool {
		_, err := CallRPC(context.Background(), connB, o, "listDirectory", map[string]any{"path": "."}, 5*time.Second)
		return err == nil
	})
	return o, connB, done
}

// noLeaks checks, once the test and its cleanups are done, that no
// goroutine it started is left.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
}

func remoteDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "proj")
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main\n"), 0o644)
	os.WriteFile(filepath.Join(base, "secret"), []byte("no\n"), 0o644)
	os.Symlink(filepath.Join(base, "secret"), filepath.Join(dir, "leak"))
	real, _ := filepath.EvalSymlinks(dir)
	return real
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestRemoteFileAndShellRPCs(t *testing.T) {
	dir := remoteDir(t)
	ag := newScriptedAgent()
	o, b, done := runIn(t, ag, dir, map[string]string{"HAPPY_REMOTE_SHELL": "1"}, "")
	helloHash := confine.Hash([]byte("hello\n"))
	newHash := confine.Hash([]byte("new\n"))
	for _, c := range []struct {
		name, method string
		params       any
		want         any
	}{
		{"read", "readFile", map[string]any{"path": "README"}, map[string]any{"success": true, "content": b64("hello\n")}},
		{"read absolute", "readFile", map[string]any{"path": filepath.Join(dir, "src", "main.go")}, map[string]any{"success": true, "content": b64("package main\n")}},
		{"read outside", "readFile", map[string]any{"path": "../secret"}, map[string]any{"success": false, "error": "path is outside the session folder: ../secret"}},
		{"read through a link outside", "readFile", map[string]any{"path": "leak"}, map[string]any{"success": false,
			"error": "path is outside the session folder: leak (a symbolic link leads to " + filepath.Join(filepath.Dir(dir), "secret") + ")"}},
		// Without an envelope only the reference app's exact shape is
		// taken: this is not it.
		{"read missing path", "readFile", map[string]any{}, map[string]any{"error": `refused control input (unsealed): no envelope, and not the reference app's params for this method (no "path")`}},
		{"write new", "writeFile", map[string]any{"path": "new.txt", "content": b64("new\n")}, map[string]any{"success": true, "hash": newHash}},
		{"write stale hash", "writeFile", map[string]any{"path": "README", "content": b64("x"), "expectedHash": newHash}, map[string]any{"success": false,
			"error": "file hash mismatch: expected " + newHash + ", actual " + helloHash}},
		{"write right hash", "writeFile", map[string]any{"path": "README", "content": b64("new\n"), "expectedHash": helloHash}, map[string]any{"success": true, "hash": newHash}},
		{"write existing as new", "writeFile", map[string]any{"path": "README", "content": b64("x"), "expectedHash": nil}, map[string]any{"success": false,
			"error": "file already exists but was expected to be new: README"}},
		{"bash", "bash", map[string]any{"command": "pwd; echo e >&2"}, map[string]any{"success": true, "stdout": dir + "\n", "stderr": "e\n", "exitCode": 0.0}},
		{"bash in a subfolder", "bash", map[string]any{"command": "pwd", "cwd": "src"}, map[string]any{"success": true, "stdout": filepath.Join(dir, "src") + "\n", "stderr": "", "exitCode": 0.0}},
		{"bash exit code", "bash", map[string]any{"command": "exit 7"}, map[string]any{"success": false, "stdout": "", "stderr": "", "exitCode": 7.0, "error": "Command failed with exit code 7"}},
		{"bash timeout", "bash", map[string]any{"command": "echo a; sleep 30", "timeout": 200}, map[string]any{"success": false, "stdout": "a\n", "stderr": "", "exitCode": -1.0, "error": "Command timed out"}},
		{"bash cwd outside", "bash", map[string]any{"command": "pwd", "cwd": "/etc"}, map[string]any{"success": false, "stdout": "", "stderr": "", "exitCode": -1.0, "error": "path is outside the session folder: /etc"}},
		{"list", "listDirectory", map[string]any{"path": "."}, nil},
		{"tree", "getDirectoryTree", map[string]any{"path": ".", "maxDepth": 1.0}, nil},
		{"tree without depth", "getDirectoryTree", map[string]any{"path": "."}, map[string]any{"success": false, "error": "bad params: missing maxDepth"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := rawRPC(t, b, o, c.method, c.params)
			switch c.name {
			case "list":
				var names []string
				for _, e := range got.(map[string]any)["entries"].([]any) {
					m := e.(map[string]any)
					names = append(names, fmt.Sprint(m["name"], ":", m["type"]))
				}
				if strings.Join(names, ",") != "src:directory,README:file,leak:other,new.txt:file" {
					t.Fatalf("entries %v", names)
				}
				return
			case "tree":
				tree := got.(map[string]any)["tree"].(map[string]any)
				var names []string
				for _, e := range tree["children"].([]any) {
					m := e.(map[string]any)
					names = append(names, fmt.Sprint(m["name"], ":", m["type"], ":", m["path"]))
				}
				if tree["path"] != dir || strings.Join(names, ",") != "src:directory:"+filepath.Join(dir, "src")+",README:file:"+filepath.Join(dir, "README")+",new.txt:file:"+filepath.Join(dir, "new.txt") {
					t.Fatalf("tree %v %v", tree["path"], names)
				}
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%s(%v)\n got %#v\nwant %#v", c.method, c.params, got, c.want)
			}
		})
	}
	// ripgrep: rg when installed, else a clear refusal.
	got := rawRPC(t, b, o, "ripgrep", map[string]any{"args": []string{"-l", "package"}})
	if _, err := execLookPath("rg"); err != nil {
		if !reflect.DeepEqual(got, map[string]any{"success": false, "error": "ripgrep (rg) is not installed on this machine"}) {
			t.Fatalf("ripgrep without rg: %v", got)
		}
	} else if m := got.(map[string]any); m["success"] != true || m["stdout"] != "src/main.go\n" {
		t.Fatalf("ripgrep: %v", got)
	}
	// killSession's dialect params are {}, which any ciphertext of the
	// session could pose as: it takes a sealed envelope only, and then
	// ends the session as SIGTERM would.
	if got := rawRPC(t, b, o, MethodKillSession, map[string]any{}); !reflect.DeepEqual(got, map[string]any{"error": "refused control input (unsealed): params are not a sealed control envelope"}) {
		t.Fatalf("killSession without an envelope: %v", got)
	}
	if got, err := CallRPC(context.Background(), b, o, MethodKillSession, map[string]any{}, 0); err != nil || string(got) != `{"success":true,"message":"the session is ending"}` {
		t.Fatalf("killSession: %s %v", got, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunSession after killSession: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("killSession did not end the session")
	}
	sessions, err := ListSessions(context.Background(), b, time.Now())
	if err != nil || len(sessions) != 1 || sessions[0].State != LifecycleEnded {
		t.Fatalf("after killSession: %+v %v", sessions, err)
	}
}

func TestRemoteShellOffByDefault(t *testing.T) {
	dir := remoteDir(t)
	o, b, _ := runIn(t, newScriptedAgent(), dir, nil, "")
	off := remotefs.ErrShellOff.Error()
	for _, c := range []struct {
		method string
		params any
		want   any
	}{
		{"bash", map[string]any{"command": "touch pwned"}, map[string]any{"success": false, "stdout": "", "stderr": "", "exitCode": -1.0, "error": off}},
		{"writeFile", map[string]any{"path": "pwned", "content": b64("x")}, map[string]any{"success": false, "error": off}},
		{"ripgrep", map[string]any{"args": []string{"--pre", "touch", "x"}}, map[string]any{"success": false, "error": off}},
		{"readFile", map[string]any{"path": "README"}, map[string]any{"success": true, "content": b64("hello\n")}},
	} {
		if got := rawRPC(t, b, o, c.method, c.params); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v want %#v", c.method, got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused call changed the folder: %v", err)
	}
}

// questionAgent asks two questions in its one turn and ends the turn when
// answered (or refused).
type questionAgent struct {
	*scriptedAgent
	mu      sync.Mutex
	answers [][]string
	decided []string
}

func (a *questionAgent) Prompt(_ context.Context, p agent.Prompt) error {
	in, _ := json.Marshal(map[string]any{})
	go func() {
		a.events <- &agent.TurnStarted{TurnID: "1"}
		a.events <- &agent.MessageStarted{Message: "m1"}
		a.events <- &agent.ToolCall{Message: "m1", CallID: "q-1", Tool: "question", Input: in}
		a.events <- &agent.ToolBlocked{CallID: "q-1", Question: &agent.QuestionRequest{Questions: []agent.QuestionInfo{
			{Question: "Which colour?", Header: "Colour", Options: []agent.QuestionOption{{Label: "red"}, {Label: "blue"}}},
			{Question: "Which size?", Header: "Size", Options: []agent.QuestionOption{{Label: "S"}, {Label: "L"}}},
		}}}
	}()
	return nil
}

func (a *questionAgent) end() {
	go func() {
		a.events <- &agent.ToolCompleted{CallID: "q-1", Output: "answered"}
		a.events <- &agent.StepFinished{Message: "m1", Finish: agent.FinishStop}
		a.events <- &agent.TurnEnded{TurnID: "1", Reason: agent.TurnCompleted}
	}()
}

func (a *questionAgent) AnswerQuestion(_ context.Context, callID string, answers [][]string) error {
	a.mu.Lock()
	a.answers = answers
	a.mu.Unlock()
	a.end()
	return nil
}

func (a *questionAgent) Decide(_ context.Context, callID string, d agent.Verdict) error {
	a.mu.Lock()
	a.decided = append(a.decided, callID+":"+string(d.Decision)+":"+d.Reason)
	a.mu.Unlock()
	a.end()
	return nil
}

func TestCommunicationAnswersAQuestion(t *testing.T) {
	for _, c := range []struct {
		name    string
		params  map[string]any
		answers [][]string
		decided []string
	}{
		{"answered by position and header", map[string]any{"id": "q-1", "kind": "form", "status": "answered", "answers": map[string]any{
			"0": map[string]any{"options": []string{"blue"}}, "Size": map[string]any{"options": []string{}, "custom": "XL"}}},
			[][]string{{"blue"}, {"XL"}}, nil},
		{"cancelled", map[string]any{"id": "q-1", "kind": "form", "status": "cancelled"}, nil, []string{"q-1:reject:cancelled"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ag := &questionAgent{scriptedAgent: newScriptedAgent()}
			o, b, _ := runIn(t, ag, t.TempDir(), nil, "ask")
			_, call := blocked(t, b, func() string { return o.Info.ID })
			if call != "q-1" {
				t.Fatalf("blocked %q", call)
			}
			if _, err := CallRPC(context.Background(), b, o, session.MethodCommunication, map[string]any{"id": "q-1", "kind": "form", "status": "answered",
				"answers": map[string]any{"Nope?": map[string]any{"options": []string{"x"}}}}, 0); err == nil || !strings.Contains(err.Error(), `no question "Nope?" in this form`) {
				t.Fatalf("unknown question: %v", err)
			}
			if _, err := CallRPC(context.Background(), b, o, session.MethodCommunication, c.params, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := CallRPC(context.Background(), b, o, session.MethodCommunication, c.params, 0); err == nil || !strings.Contains(err.Error(), `no tool call "q-1" waits for an answer`) {
				t.Fatalf("second answer: %v", err)
			}
			ag.mu.Lock()
			defer ag.mu.Unlock()
			if !reflect.DeepEqual(ag.answers, c.answers) || !reflect.DeepEqual(ag.decided, c.decided) {
				t.Fatalf("answers %q decided %q", ag.answers, ag.decided)
			}
		})
	}
}

// switcher is an agent with two modes.
type switcher struct {
	*scriptedAgent
	mode string
}

func (s *switcher) SwitchMode(_ context.Context, to string) (bool, error) {
	s.mode = to
	return true, nil
}

func TestSwitch(t *testing.T) {
	env := Env{}
	for _, c := range []struct {
		name   string
		ag     agent.Agent
		params string
		want   bool
	}{
		{"one-mode agent", newScriptedAgent(), `{"to":"remote"}`, false},
		{"two modes", &switcher{scriptedAgent: newScriptedAgent()}, `{"to":"local"}`, true},
		{"two modes, wrapped as RunSession does", callerCloses{&switcher{scriptedAgent: newScriptedAgent()}}, `{"to":"remote"}`, true},
		{"unknown mode", &switcher{scriptedAgent: newScriptedAgent()}, `{"to":"sideways"}`, false},
		{"not an object", &switcher{scriptedAgent: newScriptedAgent()}, `"remote"`, false},
	} {
		if got := switchMode(context.Background(), env, c.ag, json.RawMessage(c.params)); got != c.want {
			t.Errorf("%s: switch = %v, want %v", c.name, got, c.want)
		}
	}
	// Through the relay: the fake agent has one mode.
	o, b, _ := runIn(t, newScriptedAgent(), t.TempDir(), nil, "")
	if got := rawRPC(t, b, o, session.MethodSwitch, map[string]any{"to": "remote"}); got != false {
		t.Fatalf("switch through the relay = %v", got)
	}
}

var execLookPath = func(name string) (string, error) { return exec.LookPath(name) }

// Claude's dual agent is the one with two modes.
var _ ModeSwitcher = (*dual.Agent)(nil)
