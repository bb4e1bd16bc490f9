package app

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session/compat"
)

// TestMetadataPassesTheAppSchema: the metadata happy writes, for every
// agent flavor and however the session was started, with the fields added
// while it runs (title, lifecycle, the agent's session id), passes the
// reference app's metadata schema (one bad field makes it discard all).
func TestMetadataPassesTheAppSchema(t *testing.T) {
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Home: h, Log: zerolog.Nop(), Now: func() time.Time { return time.UnixMilli(1_800_000_000_000) }}
	for _, flavor := range []string{"claude", "codex", "gemini", "opencode", "claude-acp", "codex-acp"} {
		for _, startedBy := range []string{"", "terminal", "daemon", "ci"} {
			md := buildMetadata(env, SessionOptions{Flavor: flavor, Dir: "/home/dev/project", StartedBy: startedBy, OneShot: true, Yolo: true})
			raw, err := json.Marshal(md)
			if err != nil {
				t.Fatal(err)
			}
			if err := compat.ValidateMetadata(raw); err != nil {
				t.Errorf("%s/%q at start: %v\n%s", flavor, startedBy, err, raw)
			}
			want := "terminal"
			if startedBy == "daemon" {
				want = "daemon"
			}
			if md.StartedBy != want || md.Flavor != flavor || md.Path != "/home/dev/project" || md.Host == "" || md.HomeDir == "" ||
				md.MachineID == "" || md.LifecycleState != LifecycleRunning || md.LifecycleStateSince != 1_800_000_000_000 || md.OS == "" || md.Version == "" {
				t.Errorf("%s/%q: %+v", flavor, startedBy, md)
			}
			summary, _ := json.Marshal(Summary{Text: "Fix the bug", UpdatedAt: 1})
			sid, _ := json.Marshal("prov-1")
			fields := lifecycleFields(LifecycleEnded, env.now())
			fields["summary"], fields[ProviderSessionField(flavor)] = summary, sid
			later, err := mergeFields(fields)(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := compat.ValidateMetadata(later); err != nil {
				t.Errorf("%s/%q later: %v\n%s", flavor, startedBy, err, later)
			}
		}
	}
}

// TestMetadataPermissionMode: the metadata carries the permission mode the
// session was started with, in the reference app's names (without it the
// app shows every session as yolo): an agent's own mode as given, --yolo as
// Claude's bypassPermissions or the yolo of the others, and default when
// nothing was asked.
func TestMetadataPermissionMode(t *testing.T) {
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Home: h, Log: zerolog.Nop(), Now: time.Now}
	for _, c := range []struct {
		flavor, mode string
		yolo         bool
		want         string
	}{
		{"claude", "", false, "default"},
		{"claude", "acceptEdits", false, "acceptEdits"},
		{"claude", "plan", false, "plan"},
		{"claude", "bypassPermissions", false, "bypassPermissions"},
		{"claude", "", true, "bypassPermissions"},
		{"codex", "", false, "default"},
		{"codex", "read-only", false, "read-only"},
		{"codex", "safe-yolo", false, "safe-yolo"},
		{"codex", "yolo", false, "yolo"},
		{"codex", "", true, "yolo"},
		{"gemini", "", false, "default"},
		{"gemini", "", true, "yolo"},
	} {
		md := buildMetadata(env, SessionOptions{Flavor: c.flavor, Dir: "/w", PermissionMode: c.mode, Yolo: c.yolo})
		raw, _ := json.Marshal(md)
		var got struct {
			PermissionMode *string `json:"permissionMode"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.PermissionMode == nil || *got.PermissionMode != c.want {
			t.Errorf("%s mode %q yolo %v: metadata %s, want permissionMode %q", c.flavor, c.mode, c.yolo, raw, c.want)
		}
		if err := compat.ValidateMetadata(raw); err != nil {
			t.Errorf("%s: %v", c.flavor, err)
		}
	}
}

func TestAppCompatSetting(t *testing.T) {
	for _, c := range []struct {
		env, file string
		want      bool
	}{
		{"", "", true},
		{"", `{"appCompat":false}`, false},
		{"", `{"appCompat":true}`, true},
		{"on", `{"appCompat":false}`, true},
		{"0", `{"appCompat":true}`, false},
		{"", `{"appCompat":"maybe"}`, true},
	} {
		h, err := home.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if c.file != "" {
			if err := os.WriteFile(h.Settings(), []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		env := Env{Home: h, Getenv: func(k string) string {
			if k == EnvAppCompat {
				return c.env
			}
			return ""
		}}
		if got := AppCompatEnabled(env); got != c.want {
			t.Errorf("env %q file %s: %v, want %v", c.env, c.file, got, c.want)
		}
	}
}

// relayRecords returns the decrypted plaintexts of a session's messages.
func relayRecords(t *testing.T, conn *Conn, o Opened) [][]byte {
	t.Helper()
	page, err := conn.API.FetchMessages(context.Background(), o.Info.ID, 0, relay.MaxFetchLimit)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, m := range page.Messages {
		raw, err := crypto.DecodeBase64(m.Content.C)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := o.Cipher.Open(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, plain)
	}
	return out
}

// agentStateOf reads the session's agentState from the relay (nil when
// none).
func agentStateOf(t *testing.T, conn *Conn, id string) map[string]map[string]map[string]any {
	t.Helper()
	o, err := FindSession(context.Background(), conn, id)
	if err != nil || o.Info.AgentState == nil {
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

func waitAgentState(t *testing.T, conn *Conn, id string, ok func(map[string]map[string]map[string]any) bool) map[string]map[string]map[string]any {
	t.Helper()
	var st map[string]map[string]map[string]any
	if !(waitfor.Poll{}).True(func() bool { st = agentStateOf(t, conn, id); return st != nil && ok(st) }) {
		t.Fatalf("agentState never as expected: %v", st)
	}
	return st
}

// TestRunSessionWritesWhatTheReferenceAppReads runs a session on a real
// relay and plays the reference app on device B: it sees the request in
// agentState, approves with the app's permission RPC, sends a prompt as the
// app does (a legacy record), denies the next request; then the relay holds
// the legacy envelopes of both turns (the app's own prompt not echoed),
// the completed requests, valid metadata, and an unchanged transcript.
func TestRunSessionWritesWhatTheReferenceAppReads(t *testing.T) {
	envA, connA, connB := twoDevices(t)
	ag := newScriptedAgent()
	sidc := make(chan string, 1)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "claude", Dir: "/work", Prompt: "first task", ProviderID: "test",
			OnCreated: func(id string) { sidc <- id }})
		done <- err
	}()
	sid := <-sidc
	o, call := blocked(t, connB, func() string { return sid })
	if call != "call-1" {
		t.Fatalf("blocked %q", call)
	}
	st := waitAgentState(t, connB, sid, func(s map[string]map[string]map[string]any) bool { return s["requests"]["call-1"] != nil })
	req := st["requests"]["call-1"]
	if req["tool"] != "Bash" || req["toolUseId"] != "call-1" || req["arguments"].(map[string]any)["command"] != "touch f1" {
		t.Fatalf("request %v", req)
	}
	if got := rawRPC(t, connB, o, "permission", map[string]any{"id": "call-1", "approved": true}); got == nil {
		t.Fatal("no reply")
	}
	waitTurns(t, connB, o, 1)
	st = waitAgentState(t, connB, sid, func(s map[string]map[string]map[string]any) bool { return s["completedRequests"]["call-1"] != nil })
	if cr := st["completedRequests"]["call-1"]; cr["status"] != "approved" || cr["decision"] != "approved" || len(st["requests"]) != 0 {
		t.Fatalf("after approval %v", st)
	}

	// A prompt the way the app sends one.
	plain := []byte(`{"role":"user","content":{"type":"text","text":"second task"},"meta":{"sentFrom":"ios"}}`)
	sealed, err := o.Cipher.Seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connB.API.SendMessages(ctx, o.Info.ID, []relay.OutgoingMessage{{Content: crypto.EncodeBase64(sealed), LocalID: "app-prompt-1"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, c2 := blocked(t, connB, func() string { return sid }); c2 == "call-2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("turn 2 never blocked")
		}
	}
	rawRPC(t, connB, o, "permission", map[string]any{"id": "call-2", "approved": false, "decision": "denied"})
	waitTurns(t, connB, o, 2)
	st = waitAgentState(t, connB, sid, func(s map[string]map[string]map[string]any) bool { return s["completedRequests"]["call-2"] != nil })
	if cr := st["completedRequests"]["call-2"]; cr["status"] != "denied" || cr["decision"] != "denied" {
		t.Fatalf("after denial %v", st)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	var got []string
	for _, p := range relayRecords(t, connB, o) {
		var r struct {
			Kind    *string `json:"kind"`
			Role    string  `json:"role"`
			Content struct {
				Role string `json:"role"`
				Turn string `json:"turn"`
				Ev   struct {
					T, Text, Call, Name, Status string
				} `json:"ev"`
				Data struct {
					CallID  string `json:"callId"`
					IsError bool   `json:"isError"`
				} `json:"data"`
			} `json:"content"`
		}
		if err := json.Unmarshal(p, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != nil || string(p) == string(plain) {
			continue
		}
		c := r.Content
		switch {
		case r.Role == "agent":
			got = append(got, "result "+c.Data.CallID+" "+map[bool]string{true: "error", false: "ok"}[c.Data.IsError])
		case c.Ev.T == "text":
			got = append(got, c.Role+" text "+c.Ev.Text)
		case c.Ev.T == "tool-call-start":
			got = append(got, "start "+c.Ev.Call+" "+c.Ev.Name)
		case c.Ev.T == "turn-end":
			got = append(got, "turn-end "+c.Ev.Status)
		default:
			got = append(got, c.Ev.T)
		}
		if c.Role == "agent" && c.Turn == "" {
			t.Errorf("agent envelope without turn: %s", p)
		}
	}
	want := []string{"user text first task", "turn-start", "start call-1 Bash", "result call-1 ok", "agent text Turn 1: once", "turn-end completed",
		"turn-start", "start call-2 Bash", "result call-2 error", "agent text Turn 2: reject", "turn-end completed"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("legacy records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	o, err = FindSession(context.Background(), connB, sid)
	if err != nil {
		t.Fatal(err)
	}
	if err := compat.ValidateMetadata(o.RawMetadata); err != nil || o.Metadata.Summary == nil || o.Metadata.Summary.Text != "first task" ||
		o.Metadata.LifecycleState != LifecycleEnded || o.Metadata.StartedBy != "terminal" || o.Metadata.Flavor != "claude" {
		t.Fatalf("metadata %s: %v", o.RawMetadata, err)
	}
	rb, _, err := ReadTranscript(context.Background(), connB, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := rb.Transcript()
	if len(tr.Dropped) != 0 || rb.Legacy != len(want)+1 {
		t.Fatalf("dropped %+v, legacy %d", tr.Dropped, rb.Legacy)
	}
	var users []string
	for _, m := range tr.Messages {
		if _, ok := m.Info.(*mapper.UserMessage); ok {
			users = append(users, m.Parts[0].(*mapper.TextPart).Text)
		}
	}
	if strings.Join(users, "|") != "first task|second task" {
		t.Fatalf("users %q", users)
	}
}

func TestLegacyPrompt(t *testing.T) {
	for in, want := range map[string]bool{
		`{"role":"user","content":{"type":"text","text":"hi"}}`:                            true,
		`{"kind":"message","version":1,"info":{"role":"user"},"parts":[]}`:                 false,
		`{"role":"session","content":{"id":"p","time":1,"role":"user","ev":{"t":"text"}}}`: false,
		`[]`: false, `null`: false, `{`: false,
	} {
		if got := legacyPrompt(json.RawMessage(in)); got != want {
			t.Errorf("legacyPrompt(%s) = %v", in, got)
		}
	}
}

func FuzzLegacyPrompt(f *testing.F) {
	for _, s := range []string{`{"role":"user","content":{"type":"text","text":"hi"}}`, `{"kind":null,"role":"user"}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if legacyPrompt(data) {
			var head map[string]any
			if json.Unmarshal(data, &head) != nil || head["role"] != "user" {
				t.Fatalf("legacy prompt %s", data)
			}
			if _, hasKind := head["kind"]; hasKind && head["kind"] != nil {
				t.Fatalf("legacy prompt with a kind: %s", data)
			}
		}
	})
}
