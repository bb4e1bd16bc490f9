package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app/remotefs"
	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/evilrelay"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/session"
)

// postRow stores one sealed row in the session under localID, as a token
// holder (or the relay itself) can.
func postRow(t *testing.T, conn *Conn, o Opened, content, localID string) {
	t.Helper()
	if _, err := conn.API.SendMessages(context.Background(), o.Info.ID, []relay.OutgoingMessage{{Content: content, LocalID: localID}}); err != nil {
		t.Fatal(err)
	}
}

func sealRow(t *testing.T, o Opened, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := o.Cipher.Seal(b)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.EncodeBase64(sealed)
}

// storedRow returns the content of the row stored under localID.
func storedRow(t *testing.T, conn *Conn, o Opened, localID string) string {
	t.Helper()
	page, err := conn.API.FetchMessages(context.Background(), o.Info.ID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		if m.LocalIDOrEmpty() == localID {
			return m.Content.C
		}
	}
	t.Fatalf("no row %s", localID)
	return ""
}

// droppedReasons reads the session back and lists its control refusals as
// "kind:reason".
func droppedReasons(t *testing.T, conn *Conn, o Opened) []string {
	t.Helper()
	rb, _, err := ReadTranscript(context.Background(), conn, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range rb.Transcript().Dropped {
		if d.Source == agent.SourceControl {
			out = append(out, d.Kind+":"+string(d.Reason))
		}
	}
	return out
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, what, cond)
}

// TestPromptRowAttacks: a prompt row is a control input. A stored prompt
// re-posted under a new localId (the review's `rm -rf build && deploy` run
// twice), a prompt without a sealed envelope, one sealed for another
// session and the reference app's prompt replayed are refused: the agent
// never sees them, and each is a Dropped record every reader counts.
func TestPromptRowAttacks(t *testing.T) {
	envA, connA, connB := twoDevices(t)
	ag := newScriptedAgent()
	var mu sync.Mutex
	var sid string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "fake", Dir: "/work", Prompt: "first task", ProviderID: "test",
			OnCreated: func(id string) { mu.Lock(); sid = id; mu.Unlock() }})
		done <- err
	}()
	getSID := func() string { mu.Lock(); defer mu.Unlock(); return sid }
	o, call := blocked(t, connB, getSID)
	if err := Approve(ctx, connB, o, call, agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 1)
	id, err := Send(ctx, connB, o, "rm -rf build && deploy", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	waitCond(t, "turn 2 blocked", func() bool { _, c := blocked(t, connB, getSID); return c == "call-2" })
	if err := Approve(ctx, connB, o, "call-2", agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 2)

	// The stored prompt, re-posted under other localIds: not the record
	// version those name, so every reader refuses it before it could act.
	row := storedRow(t, connB, o, id+".1")
	postRow(t, connB, o, row, "replayed-1")
	postRow(t, connB, o, row, id+".7")
	// A canonical prompt with no envelope, and one sealed for another
	// session (under this session's key: what a copied row would carry).
	seq := 0
	prompt := func(text string, ctl any) map[string]any {
		seq++
		pid := fmt.Sprintf("msg_%013d%012d", time.Now().UnixMilli(), seq)
		m := map[string]any{"kind": "message", "version": 1,
			"info":  map[string]any{"id": pid, "sessionID": "ses_x", "role": "user", "time": map[string]any{"created": time.Now().UnixMilli()}},
			"parts": []any{map[string]any{"id": "prt_1", "sessionID": "ses_x", "messageID": pid, "type": "text", "text": text}}}
		if ctl != nil {
			m["control"] = ctl
		}
		return m
	}
	// (each under the localId its record names, so only the envelope
	// check stands between it and the agent).
	post := func(m map[string]any) {
		postRow(t, connB, o, sealRow(t, o, m), m["info"].(map[string]any)["id"].(string)+".1")
	}
	post(prompt("unsealed", nil))
	other, _ := control.New("another-session", control.MethodPrompt, nil, time.Now())
	post(prompt("wrong target", other))
	old, _ := control.New(o.Info.ID, control.MethodPrompt, nil, time.Now().Add(-control.Window-time.Minute))
	post(prompt("stale", old))
	// The reference app's prompt: accepted once, refused re-posted.
	ref := sealRow(t, o, map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "from the app"}})
	postRow(t, connB, o, ref, "ref-1")
	waitCond(t, "the app's prompt blocked", func() bool { _, c := blocked(t, connB, getSID); return c == "call-3" })
	postRow(t, connB, o, ref, "ref-2")

	want := "prompt:unsealed prompt:wrong_target prompt:stale prompt:replayed"
	var got []string
	waitCond(t, "four refusals on the transcript", func() bool {
		got = droppedReasons(t, connB, o)
		return len(got) >= 4
	})
	if strings.Join(got, " ") != want {
		t.Fatalf("refusals %q\nwant %q", strings.Join(got, " "), want)
	}
	// The two re-posted rows: every reader refuses them as not what their
	// localId names.
	rb, _, err := ReadTranscript(context.Background(), connB, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for _, d := range rb.Transcript().Dropped {
		if d.Reason == agent.DropWrongLocalID {
			wrong++
		}
	}
	if wrong != 2 {
		t.Fatalf("%d rows refused as wrong_localid, want 2: %+v", wrong, rb.Transcript().Dropped)
	}
	ag.mu.Lock()
	calls := strings.Join(ag.calls, ",")
	ag.mu.Unlock()
	if calls != "prompt:first task,decide:call-1:once,prompt:rm -rf build && deploy,decide:call-2:once,prompt:from the app" {
		t.Fatalf("agent calls %s", calls)
	}
	cancel()
	<-done
}

// TestEveryMethodRefusesUnsealedParams is the table over every session
// method a run registers: without params, with null, with params in clear
// and (for the methods only happy's own clients call) with sealed params
// that are not an envelope, the call is refused as unsealed and nothing
// acts.
func TestEveryMethodRefusesUnsealedParams(t *testing.T) {
	o, connB, _ := runIn(t, newScriptedAgent(), remoteDir(t), nil, "task")
	methods := append([]string{session.MethodPermission, session.MethodAnswer, session.MethodAbort, session.MethodCommunication,
		session.MethodSwitch, MethodKillSession}, remotefs.Methods...)
	sort.Strings(methods)
	sealedPlain := func(plain string) string {
		b, _ := o.Cipher.Seal([]byte(plain))
		return crypto.EncodeBase64(b)
	}
	for _, m := range methods {
		// Sealed but with no envelope: not the reference app's shape for
		// any method (the session's metadata has a path and more), and {}
		// is no method's dialect.
		cases := map[string]any{"absent": nil, "null": json.RawMessage("null"), "clear": map[string]any{"callID": "call-1", "decision": "once", "path": "."},
			"sealed, not an envelope": sealedPlain(`{"path":".","host":"h","callID":"call-1","decision":"once"}`), "sealed {}": sealedPlain(`{}`)}
		for name, params := range cases {
			got := rpcWith(t, connB, o, m, params)
			if !strings.Contains(got, "(unsealed)") {
				t.Errorf("%s with %s params: answer %s, want an unsealed refusal", m, name, got)
			}
		}
	}
	// Every refusal is on the transcript, and the session still waits
	// for its permission: nothing was decided.
	want := len(methods) * 5
	waitCond(t, fmt.Sprintf("%d refusals on the transcript", want), func() bool { return len(droppedReasons(t, connB, o)) >= want })
	for _, r := range droppedReasons(t, connB, o) {
		if !strings.HasSuffix(r, ":unsealed") {
			t.Errorf("refusal %s, want unsealed", r)
		}
	}
	if err := Approve(context.Background(), connB, o, "call-1", agent.DecisionOnce, ""); err != nil {
		t.Fatalf("the real approval after the attacks: %v", err)
	}
}

// rpcWith calls a session method with params as given (nil: none) and
// returns the opened answer's text.
func rpcWith(t *testing.T, conn *Conn, o Opened, method string, params any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sock, err := relay.SIODialer(10*time.Second)(ctx, conn.URL, map[string]any{"token": conn.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	args := map[string]any{"method": o.Info.ID + ":" + method}
	if params != nil {
		args["params"] = params
	}
	reply, err := sock.Call(ctx, "rpc-call", args)
	if err != nil || len(reply) == 0 {
		t.Fatalf("%s: %v %v", method, reply, err)
	}
	ack, _ := reply[0].(map[string]any)
	if ok, _ := ack["ok"].(bool); !ok {
		return fmt.Sprint(ack)
	}
	raw, err := crypto.DecodeBase64(ack["result"].(string))
	if err != nil {
		t.Fatal(err)
	}
	out, err := o.Cipher.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestCallerRefusesUnboundAnswers: a relay that answers a call with a
// sealed answer of an earlier call (it kept the ciphertext) makes
// CallScopedRPC fail with ErrUnboundAnswer instead of reporting success.
func TestCallerRefusesUnboundAnswers(t *testing.T) {
	id := strings.Repeat("ab", 16)
	old, _ := json.Marshal(control.Answer{Re: strings.Repeat("cd", 16), Result: json.RawMessage(`{"ok":true}`)})
	if _, err := control.OpenAnswer(old, id); err == nil {
		t.Fatal("an answer to another call was taken")
	}
	_, err := openAnswer("permission", old, id)
	if !errors.Is(err, ErrUnboundAnswer) || !errors.Is(err, ErrRPC) {
		t.Fatalf("err = %v", err)
	}
	// An old happy's plain {"ok":true}: not a success either.
	if _, err := openAnswer("permission", []byte(`{"ok":true}`), id); !errors.Is(err, ErrUnboundAnswer) {
		t.Fatalf("plain ok: %v", err)
	}
	// An error answer the session sealed for an earlier call, replayed by
	// the relay: the call may have been acted on, so it is not shown as
	// this call's failure either.
	oldErr, _ := json.Marshal(control.Answer{Re: strings.Repeat("cd", 16), Error: "no tool call \"x\" waits for permission"})
	if _, err := openAnswer("permission", oldErr, id); !errors.Is(err, ErrUnboundAnswer) {
		t.Fatalf("an error answer of another call: %v", err)
	}
	// The callee's refusal keeps its reason and text.
	ref, _ := json.Marshal(control.Answer{Re: id, Error: "id x was used before", Reason: control.ReasonReplayed})
	_, err = openAnswer("permission", ref, id)
	if r, ok := control.ReasonOf(err); !ok || r != control.ReasonReplayed || err.Error() != "control call failed: permission: refused control input (replayed): id x was used before" {
		t.Fatalf("callee refusal: %v", err)
	}
}

// A relay that stores a prompt and then answers 502 (or times out) does not
// get it sent twice: happy posts the very same row again, takes the
// relay's answer for the row it holds, and the session runs the prompt
// once. A relay that never confirms gets an error saying the prompt may
// have been stored; a row someone else stored under the prompt's localId
// is refused as not this prompt.
func TestPromptSentOnceWhenTheRelayLies(t *testing.T) {
	r := servertest.Start(t)
	envA, connA, connB := twoDevicesOn(t, r)
	ag := newScriptedAgent()
	var mu sync.Mutex
	var sid string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "fake", Dir: "/work", Prompt: "first task", ProviderID: "test",
			OnCreated: func(id string) { mu.Lock(); sid = id; mu.Unlock() }})
		done <- err
	}()
	getSID := func() string { mu.Lock(); defer mu.Unlock(); return sid }
	o, call := blocked(t, connB, getSID)
	if err := Approve(ctx, connB, o, call, agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 1)

	var lies int
	claim := false
	p := evilrelay.Start(t, r.URL, evilrelay.On("POST", "/v3/sessions/{id}/messages", func(req *evilrelay.Request, next evilrelay.Next) (*evilrelay.Response, error) {
		mu.Lock()
		if claim {
			// The localId is said to be taken already: by the session's
			// first row, which is not this prompt.
			mu.Unlock()
			var body struct {
				Messages []struct {
					LocalID string `json:"localId"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(req.Body, &body); err != nil || len(body.Messages) != 1 {
				return nil, fmt.Errorf("prompt post %s: %v", req.Body, err)
			}
			return evilrelay.JSON(200, map[string]any{"messages": []map[string]any{{"id": "taken", "seq": 1, "localId": body.Messages[0].LocalID, "new": false}}}), nil
		}
		mu.Unlock()
		resp, err := next(req) // stored on the real relay
		mu.Lock()
		defer mu.Unlock()
		if lies > 0 {
			lies--
			return evilrelay.JSON(502, map[string]string{"error": "Bad gateway"}), nil
		}
		return resp, err
	}))
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: p.URL, Token: connB.Creds.Token})
	if err != nil {
		t.Fatal(err)
	}
	liar := &Conn{API: api}
	mu.Lock()
	lies = 1
	mu.Unlock()
	sent, err := SendPrompt(ctx, liar, o, "rm -rf build && deploy", nil, time.Now())
	if err != nil {
		t.Fatalf("a prompt the relay stored and then answered 502 for: %v", err)
	}
	if row := storedRow(t, connB, o, sent.ID+".1"); row == "" || sent.Seq <= 0 {
		t.Fatalf("sent %+v, row %q", sent, row)
	}

	mu.Lock()
	lies = 100
	mu.Unlock()
	_, err = SendPrompt(ctx, liar, o, "second", nil, time.Now())
	if err == nil || !strings.Contains(err.Error(), "the relay did not confirm it (") || !strings.Contains(err.Error(), "it may have been stored: see happy log "+o.Info.ID+" before sending it again") {
		t.Fatalf("a relay that never confirms: %v", err)
	}

	mu.Lock()
	lies, claim = 0, true
	mu.Unlock()
	_, err = SendPrompt(ctx, liar, o, "third", nil, time.Now())
	if !errors.Is(err, ErrRPC) || !strings.HasPrefix(err.Error(), "send prompt: the relay holds another row under ") || !strings.HasSuffix(err.Error(), ": the prompt was not stored") {
		t.Fatalf("a localId claimed by another row: %v", err)
	}
}
