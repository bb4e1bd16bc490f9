package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// TestMain lets the test binary act as a scripted fake Codex when
// CODEX_FAKE_SCRIPT names a traffic log: it writes the log's a2c frames
// (and stderr lines) in order, and at each c2a frame reads the client's
// next message and checks it equals the recorded one (method, id, params or
// result; the "jsonrpc" member too). A mismatch exits with code 3 and the
// difference on stderr; the end of the script exits with the recorded code.
func TestMain(m *testing.M) {
	if script := os.Getenv("CODEX_FAKE_SCRIPT"); script != "" {
		os.Exit(fakeCodex(script))
	}
	os.Exit(m.Run())
}

func fakeCodex(script string) int {
	if len(os.Args) > 1 && os.Args[len(os.Args)-1] == "--version" {
		fmt.Println(os.Getenv("CODEX_FAKE_VERSION"))
		return 0
	}
	f, err := os.Open(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	frames, _, err := readFrames(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for _, fr := range frames {
		switch fr.Dir {
		case trafficlog.A2C:
			out.Write(fr.Data)
			out.WriteByte('\n')
			out.Flush()
		case trafficlog.Stderr:
			s, _ := trafficlog.Text(fr.Data)
			fmt.Fprint(os.Stderr, s)
		case trafficlog.C2A:
			line, err := in.ReadBytes('\n')
			if err != nil {
				fmt.Fprintf(os.Stderr, "MISMATCH: stdin ended (%v), want %s\n", err, fr.Data)
				return 3
			}
			var want, got any
			_ = json.Unmarshal(fr.Data, &want)
			if err := json.Unmarshal(line, &got); err != nil || !reflect.DeepEqual(want, got) {
				fmt.Fprintf(os.Stderr, "MISMATCH:\nwant %s\ngot  %s", fr.Data, line)
				return 3
			}
		case trafficlog.Exit:
			st, _ := trafficlog.DecodeExit(fr.Data)
			// Let the client read what was written before exiting.
			time.Sleep(50 * time.Millisecond)
			if st.Code != nil {
				return *st.Code
			}
			return 0
		}
	}
	// Script over: wait for the client to close stdin.
	_, _ = in.ReadBytes(0)
	return 0
}

// stripTimes renders events without their times (live frames are stamped
// with the wall clock where Codex gives no emittedAtMs).
func stripTimes(t *testing.T, evs []agent.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		e.Base().Time = 0
		b, err := agent.EncodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// TestLiveAgainstCaptures drives the client against a fake Codex process
// replaying each real capture: the client must send exactly what the real
// driver sent (same requests, same answers), and its events must equal the
// replay of the same capture.
func TestLiveAgainstCaptures(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		proto    Protocol
		decision agent.Decision
	}{
		{"codex-app", ProtocolAppServer, agent.DecisionOnce},
		{"codex-app-decline", ProtocolAppServer, agent.DecisionReject},
		{"codex-app-multi-tool", ProtocolAppServer, agent.DecisionOnce},
		{"codex-app-tool-error", ProtocolAppServer, agent.DecisionOnce},
		{"codex0150-mcp-server", ProtocolMCP, agent.DecisionOnce},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script, _ := filepath.Abs(filepath.Join("testdata", "captures", tc.name, "rpc-traffic.jsonl"))
			raw, err := os.ReadFile(script)
			if err != nil {
				t.Fatal(err)
			}
			prompt, clientName := scriptPrompt(t, raw)
			var rec bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := Start(ctx, Options{
				Binary: exe, Env: []string{"CODEX_FAKE_SCRIPT=" + script}, Protocol: tc.proto,
				Cwd: "/home/dev/run/work", ProcessDir: t.TempDir(), Mode: ModeReadOnly, ClientName: clientName, ClientVersion: "0.0.1",
				Record: &rec, CallTimeout: 10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Prompt(ctx, Prompt{Text: prompt}); err != nil {
				t.Fatal(err)
			}
			var evs []agent.Event
			for e := range c.Events() {
				evs = append(evs, e)
				if b, ok := e.(*agent.ToolBlocked); ok && b.Permission != nil {
					if err := c.Answer(ctx, b.CallID, tc.decision); err != nil {
						t.Errorf("answer %s: %v", b.CallID, err)
					}
				}
			}
			if err := c.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			if strings.Contains(rec.String(), "MISMATCH") {
				t.Fatalf("the client's traffic differs from the capture:\n%s", rec.String())
			}
			replayed, err := Replay(bytes.NewReader(raw), tc.proto)
			if err != nil {
				t.Fatal(err)
			}
			got, want := stripTimes(t, evs), stripTimes(t, replayed)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("live events differ from the replay of the capture:\n%s", firstDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
			// The recorded traffic replays to the same events too.
			again, err := Replay(bytes.NewReader(rec.Bytes()), tc.proto)
			if err != nil {
				t.Fatal(err)
			}
			if g := stripTimes(t, again); strings.Join(g, "\n") != strings.Join(got, "\n") {
				t.Errorf("replay of the recorded traffic differs from the live events:\n%s", firstDiff(strings.Join(got, "\n"), strings.Join(g, "\n")))
			}
			checkSentMessagesValid(t, tc.proto, rec.Bytes())
		})
	}
}

// scriptPrompt finds the prompt and client name the capture's driver used.
func scriptPrompt(t *testing.T, raw []byte) (prompt, client string) {
	t.Helper()
	frames, _, err := readFrames(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if f.Dir != trafficlog.C2A {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				ClientInfo struct {
					Name string `json:"name"`
				} `json:"clientInfo"`
				Input []struct {
					Text string `json:"text"`
				} `json:"input"`
				Arguments struct {
					Prompt string `json:"prompt"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(f.Data, &m)
		switch m.Method {
		case "initialize":
			client = m.Params.ClientInfo.Name
		case "turn/start":
			prompt = m.Params.Input[0].Text
		case "tools/call":
			prompt = m.Params.Arguments.Prompt
		}
	}
	return prompt, client
}

func TestChooseProtocol(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		out  string
		want Protocol
	}{
		{"codex-cli 0.171.0", ProtocolAppServer},
		{"codex-cli 0.60.0", ProtocolAppServer},
		{"codex-cli 0.59.9", ProtocolMCP},
		{"codex-cli 0.50.0", ProtocolMCP},
	} {
		t.Setenv("CODEX_FAKE_SCRIPT", "unused")
		t.Setenv("CODEX_FAKE_VERSION", tc.out)
		p, v, err := ChooseProtocol(context.Background(), exe)
		if err != nil || p != tc.want || !strings.HasSuffix(tc.out, v) {
			t.Errorf("ChooseProtocol(%q) = %s %q %v, want %s", tc.out, p, v, err, tc.want)
		}
	}
	if _, _, err := protocolForVersion("codex-cli dev"); err == nil {
		t.Error("accepted a version string without a version")
	}
	if _, _, err := ChooseProtocol(context.Background(), "/nonexistent/codex"); err == nil {
		t.Error("accepted a missing binary")
	}
}

// TestLiveCodexCrash: Codex exits in the middle of a turn (after an
// approval was answered): the open turn ends agent-exited, the running tool
// is settled, Events closes without Close, and later calls fail ErrClosed.
func TestLiveCodexCrash(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "captures", "codex-app", "rpc-traffic.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var script bytes.Buffer
	for _, line := range strings.Split(string(raw), "\n") {
		script.WriteString(line + "\n")
		if strings.Contains(line, `"dir":"c2a","msg":{"id":0,"result"`) {
			break // the answer to the approval; then Codex dies
		}
	}
	script.WriteString(`{"t":1795964187720,"dir":"exit","msg":{"code":null,"sig":"SIGSEGV"}}` + "\n")
	path := filepath.Join(t.TempDir(), "crash.jsonl")
	if err := os.WriteFile(path, script.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Binary: exe, Env: []string{"CODEX_FAKE_SCRIPT=" + path}, Protocol: ProtocolAppServer,
		Cwd: "/home/dev/run/work", ProcessDir: t.TempDir(), Mode: ModeReadOnly, ClientName: "happy-e2e", ClientVersion: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prompt(ctx, Prompt{Text: "Run `echo hi > hi.txt` in the shell and tell me what happened"}); err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for e := range c.Events() {
		evs = append(evs, e)
		if b, ok := e.(*agent.ToolBlocked); ok {
			if err := c.Answer(ctx, b.CallID, agent.DecisionOnce); err != nil {
				t.Errorf("answer: %v", err)
			}
		}
	}
	if got := fmt.Sprint(turnEnds(evs)); !strings.HasSuffix(got, ":agent-exited]") {
		t.Errorf("turn ends %s, want agent-exited", got)
	}
	tr, _ := reduce(t, "crash", evs)
	if s := state(tools(tr)["call_fake_1"]); !strings.HasPrefix(s, "error:") {
		t.Errorf("tool after crash = %q, want settled to error", s)
	}
	if err := c.Prompt(ctx, Prompt{Text: "again"}); !errors.Is(err, ErrClosed) {
		t.Errorf("prompt after exit: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after exit: %v", err)
	}
}
