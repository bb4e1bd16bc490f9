//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/fakemodel"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/session/compat"
)

// appView reads a session from the relay the way the reference app does:
// its agentState and the legacy records (those without a kind), from a
// third home on the same account.
type appView struct {
	conn *app.Conn
	sid  string
}

func newAppView(t *testing.T, homeB, relayURL, sid string) *appView {
	t.Helper()
	dir := t.TempDir()
	key, err := os.ReadFile(filepath.Join(homeB, crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, crypto.CredentialsFileName), key, 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := home.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := app.Env{Home: h, Log: zerolog.Nop(), Getenv: func(k string) string {
		if k == "HAPPY_SERVER_URL" {
			return relayURL
		}
		return ""
	}}
	conn, err := app.Connect(context.Background(), env, app.ConnectOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &appView{conn: conn, sid: sid}
}

func (v *appView) opened(t *testing.T) app.Opened {
	t.Helper()
	o, err := app.FindSession(context.Background(), v.conn, v.sid)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (v *appView) agentState(t *testing.T) map[string]map[string]map[string]any {
	t.Helper()
	o := v.opened(t)
	if o.Info.AgentState == nil {
		return nil
	}
	raw, err := crypto.DecodeBase64(*o.Info.AgentState)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := o.Cipher.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]map[string]map[string]any
	if err := json.Unmarshal(plain, &st); err != nil {
		t.Fatalf("agentState %s: %v", plain, err)
	}
	return st
}

// legacy returns one line per legacy record, e.g. "start <call> Bash".
func (v *appView) legacy(t *testing.T) []string {
	t.Helper()
	o := v.opened(t)
	page, err := v.conn.API.FetchMessages(context.Background(), o.Info.ID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Messages {
		raw, err := crypto.DecodeBase64(m.Content.C)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := o.Cipher.Open(raw)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Kind    *string `json:"kind"`
			Role    string  `json:"role"`
			Content struct {
				Role string `json:"role"`
				Turn string `json:"turn"`
				Ev   struct{ T, Text, Call, Name, Status string }
				Data struct {
					CallID  string `json:"callId"`
					IsError bool   `json:"isError"`
				} `json:"data"`
			} `json:"content"`
		}
		if err := json.Unmarshal(plain, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != nil {
			continue
		}
		c := r.Content
		if r.Role == "session" && c.Role == "agent" && c.Turn == "" {
			t.Errorf("agent envelope without turn (the app drops it): %s", plain)
		}
		switch {
		case r.Role == "agent":
			out = append(out, "result "+c.Data.CallID+map[bool]string{true: " error", false: " ok"}[c.Data.IsError])
		case c.Ev.T == "text":
			out = append(out, c.Role+" text "+strings.TrimSpace(c.Ev.Text))
		case c.Ev.T == "tool-call-start":
			out = append(out, "start "+c.Ev.Call+" "+c.Ev.Name)
		case c.Ev.T == "turn-end":
			out = append(out, "turn-end "+c.Ev.Status)
		default:
			out = append(out, c.Ev.T)
		}
	}
	return out
}

// checkAppView checks what the app reads once a one-turn session that
// approved callID (a shell command writing hi.txt) ended.
func (v *appView) check(t *testing.T, callID, flavor, final string) {
	t.Helper()
	st := v.agentState(t)
	cr := st["completedRequests"][callID]
	if len(st["requests"]) != 0 || cr["status"] != "approved" || cr["decision"] != "approved" || cr["tool"] != "Bash" {
		t.Fatalf("agentState after approval %v", st)
	}
	got := v.legacy(t)
	want := []string{"user text Create hi.txt", "turn-start", "start " + callID + " Bash", "result " + callID + " ok",
		"agent text " + final, "turn-end completed"}
	// The agent may say or think something before its tool call; the rest
	// is exact.
	var filtered []string
	for _, g := range got {
		if strings.HasPrefix(g, "agent text ") && g != "agent text "+final {
			continue
		}
		filtered = append(filtered, g)
	}
	if strings.Join(filtered, "\n") != strings.Join(want, "\n") {
		t.Fatalf("legacy records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if o := v.opened(t); compat.ValidateMetadata(o.RawMetadata) != nil || o.Metadata.Flavor != flavor || o.Metadata.LifecycleState != app.LifecycleEnded {
		t.Fatalf("metadata %s: %v", o.RawMetadata, compat.ValidateMetadata(o.RawMetadata))
	}
}

// waitRequest waits until agentState.requests holds callID and returns it.
func (v *appView) waitRequest(t *testing.T, callID string) map[string]any {
	t.Helper()
	var req map[string]any
	waitFor(t, 30*time.Second, "the request in agentState", func() bool {
		req = v.agentState(t)["requests"][callID]
		return req != nil
	})
	return req
}

// TestE2EClaudeReferenceAppView: real Claude against the fake model; the
// relay holds what the reference app reads: the blocked Bash call in
// agentState.requests, answered (happy approve from another machine) in
// completedRequests, the legacy envelopes of the turn, and metadata the
// app's schema accepts.
func TestE2EClaudeReferenceAppView(t *testing.T) {
	r := startClaudeRun(t)
	r.waitBlocked(t)
	v := newAppView(t, r.homeB, r.relay.URL, r.sid)
	req := v.waitRequest(t, r.callID)
	if req["tool"] != "Bash" || req["toolUseId"] != r.callID || req["arguments"].(map[string]any)["command"] != "echo hi > hi.txt" {
		t.Fatalf("request %v", req)
	}
	if code, _, errOut := happyRun(t, r.envB, r.work, "approve", r.sid, r.callID); code != 0 {
		t.Fatalf("happy approve: exit %d: %s", code, errOut)
	}
	if code := r.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("happy claude -p exit %d\nstderr: %s", code, r.proc.errb.String())
	}
	v.check(t, r.callID, "claude", "Created hi.txt.")
}

// TestE2EACPGeminiReferenceAppView: the same through Gemini CLI (ACP): its
// shell tool reaches the app as Bash.
func TestE2EACPGeminiReferenceAppView(t *testing.T) {
	gemini := agentBinary(t, "GEMINI")
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "run_shell_command",
		ToolInput: map[string]any{"command": "echo hi > hi.txt", "description": "Write hi.txt"},
		FinalText: "Created hi.txt.",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := newACPRun(t, []string{"HOME=" + geminiHome(t), "HAPPY_GEMINI_PATH=" + gemini,
		"GEMINI_API_KEY=e2e-dummy-key", "GOOGLE_GEMINI_BASE_URL=" + model.URL})
	r.start(t, "gemini")
	r.waitBlocked(t)
	homeB := ""
	for _, kv := range r.envB {
		if h, ok := strings.CutPrefix(kv, "HAPPY_HOME_DIR="); ok {
			homeB = h
		}
	}
	v := newAppView(t, homeB, r.relay.URL, r.sid)
	if req := v.waitRequest(t, r.callID); req["tool"] != "Bash" || req["arguments"].(map[string]any)["command"] != "echo hi > hi.txt" {
		t.Fatalf("request %v", req)
	}
	r.approveAndFinish(t, "Created hi.txt.")
	v.check(t, r.callID, "gemini", "Created hi.txt.")
}

// TestE2ECodexReferenceAppView: the same through Codex's app-server: its
// command execution reaches the app as Bash with the command unwrapped.
func TestE2ECodexReferenceAppView(t *testing.T) {
	r := startCodexRun(t, "CODEX", "app-server")
	r.waitBlocked(t)
	v := newAppView(t, r.homeB, r.relay.URL, r.sid)
	if req := v.waitRequest(t, r.callID); req["tool"] != "Bash" || req["arguments"].(map[string]any)["command"] != "echo hi > hi.txt" {
		t.Fatalf("request %v", req)
	}
	if code, _, errOut := happyRun(t, r.envB, r.work, "approve", r.sid, r.callID); code != 0 {
		t.Fatalf("happy approve: exit %d: %s", code, errOut)
	}
	if code := r.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("happy codex -p exit %d\nstderr: %s", code, r.proc.errb.String())
	}
	v.check(t, r.callID, "codex", strings.TrimSpace(r.proc.out.String()))
}
