package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/server/servertest"
)

// rpcPeer is another device of the account: a user-scoped socket that
// calls RPCs, as happy's control commands and the web app do, and as a
// token thief or a relay operator could.
type rpcPeer struct {
	t    testing.TB
	sock *sio.Client
}

func newRPCPeer(t testing.TB, url string, creds *crypto.Credentials) *rpcPeer {
	t.Helper()
	sock, err := sio.Dial(context.Background(), url, sio.Options{Auth: map[string]any{"token": creds.Token, "clientType": "user-scoped"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return &rpcPeer{t: t, sock: sock}
}

// raw sends rpc-call with params as given (nil: none) and returns the
// plaintext of the sealed answer.
func (p *rpcPeer) raw(ci crypto.Cipher, method string, params any) []byte {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := map[string]any{"method": method}
	if params != nil {
		args["params"] = params
	}
	res, err := p.sock.Call(ctx, "rpc-call", args)
	if err != nil {
		p.t.Fatal(err)
	}
	m, _ := res[0].(map[string]any)
	if m["ok"] != true {
		p.t.Fatalf("rpc-call %s: %v", method, m)
	}
	plain, err := openPayload(ci, "result", 0, fmt.Sprint(m["result"]))
	if err != nil {
		p.t.Fatal(err)
	}
	return plain
}

// seal returns the base64 ciphertext of an envelope.
func seal(t testing.TB, ci crypto.Cipher, e control.Envelope) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := ci.Seal(b)
	if err != nil {
		t.Fatal(err)
	}
	return b64(sealed)
}

func envelopeFor(t testing.TB, target, method string, params any, at time.Time) control.Envelope {
	t.Helper()
	e, err := control.New(target, method, params, at)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// reasonOf opens an answer for id and returns its result and the refusal's
// reason ("" when it was accepted).
func reasonOf(t testing.TB, plain []byte, id string) (json.RawMessage, control.Reason) {
	t.Helper()
	res, err := control.OpenAnswer(plain, id)
	if err == nil {
		return res, ""
	}
	r, ok := control.ReasonOf(err)
	if !ok {
		t.Fatalf("answer is an error without a reason: %v", err)
	}
	return nil, r
}

// TestSessionRPCAttacks is the control plane under attack by whoever holds
// the account's token (or runs the relay): every way to make the session
// act without a fresh, bound, sealed input is refused, the handler never
// runs for it, the refusal is reported to the owner, and the caller gets a
// reason.
func TestSessionRPCAttacks(t *testing.T) {
	url := servertest.Start(t).URL
	creds := newAccount(t, url)
	home := t.TempDir()
	c := newTestClient(t, testConfig(t, url, creds, home+"/outbox"))
	tag := newTag(t)
	s := openTestSession(t, c, SessionOptions{Tag: tag})
	other := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	var calls atomic.Int64
	handler := func(_ context.Context, p json.RawMessage) (any, error) {
		calls.Add(1)
		return map[string]any{"got": p}, nil
	}
	s.RegisterRPC("permission", handler)
	s.RegisterRPC("abort", handler)
	s.RegisterDialectRPC("switch", control.Shape{Required: []string{"to"}}, handler)
	s.RegisterDialectRPC("killSession", control.Shape{}, handler) // {}: envelopes only
	var mu sync.Mutex
	var refused []Refused
	s.OnRefused(func(r Refused) { mu.Lock(); refused = append(refused, r); mu.Unlock() })
	waitFor(t, func() bool { return s.Stats().Connects >= 1 }, "connected")
	peer := newRPCPeer(t, url, creds)
	now := time.Now()

	// A good call runs once and its answer is bound to it.
	good := envelopeFor(t, s.ID(), "permission", map[string]any{"callID": "c1", "decision": "once"}, now)
	captured := seal(t, s.Cipher(), good)
	res, reason := reasonOf(t, peer.raw(s.Cipher(), s.ID()+":permission", captured), good.ID)
	if reason != "" || string(res) != `{"got":{"callID":"c1","decision":"once"}}` {
		t.Fatalf("good call: %s %q", res, reason)
	}

	sealedPlain := func(plain string) string {
		b, _ := s.Cipher().Seal([]byte(plain))
		return b64(b)
	}
	oldEnv := envelopeFor(t, s.ID(), "permission", map[string]any{}, now.Add(-control.Window-time.Minute))
	otherEnv := envelopeFor(t, other.ID(), "permission", map[string]any{}, now)
	otherSealed := seal(t, other.Cipher(), otherEnv) // other's key: does not open here
	wrongMethod := envelopeFor(t, s.ID(), "abort", map[string]any{}, now)
	wrongTarget := envelopeFor(t, other.ID(), "permission", map[string]any{}, now)
	dialect := sealedPlain(`{"to":"remote"}`)
	cases := []struct {
		name   string
		method string
		params any
		id     string // the envelope's id, for a bound refusal
		want   string // the reason, or the error text for unbound refusals
	}{
		{"the captured call replayed", "permission", captured, good.ID, "replayed"},
		{"no params at all", "permission", nil, "", "(unsealed)"},
		{"null params", "abort", json.RawMessage("null"), "", "(unsealed)"},
		{"params in clear", "abort", map[string]any{"callID": "c1"}, "", "(unsealed)"},
		{"an empty string", "abort", "", "", "(unsealed)"},
		{"sealed, but not an envelope, for an envelope-only method", "permission", sealedPlain(`{"callID":"c1","decision":"once"}`), "", "(unsealed)"},
		{"an envelope sealed for another method", "permission", seal(t, s.Cipher(), wrongMethod), wrongMethod.ID, "wrong_target"},
		{"another session's target under this key", "permission", seal(t, s.Cipher(), wrongTarget), wrongTarget.ID, "wrong_target"},
		{"older than the window", "permission", seal(t, s.Cipher(), oldEnv), oldEnv.ID, "stale"},
		{"a malformed envelope", "abort", sealedPlain(`{"happyControl":1,"id":"zz"}`), "", "(malformed)"},
		{"another session's ciphertext", "permission", otherSealed, "", "authentication failed"},
		{"the reference dialect, first time", "switch", dialect, "", ""},
		{"the reference dialect replayed", "switch", dialect, "", "(replayed)"},
		{"another ciphertext of the session (its metadata) as dialect", "switch", sealedPlain(`{"path":"/w","host":"h","to":"local"}`), "", "(unsealed)"},
		{"an object without the method's members as dialect", "switch", sealedPlain(`{}`), "", "(unsealed)"},
		{"{} for a method whose dialect is {}", "killSession", sealedPlain(`{}`), "", "(unsealed)"},
	}
	for _, tc := range cases {
		before := calls.Load()
		plain := peer.raw(s.Cipher(), s.ID()+":"+tc.method, tc.params)
		ran := calls.Load() - before
		if tc.id != "" {
			_, reason := reasonOf(t, plain, tc.id)
			if string(reason) != tc.want || ran != 0 {
				t.Errorf("%s: reason %q (handler ran %d times), want %q", tc.name, reason, ran, tc.want)
			}
			continue
		}
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(plain, &e)
		switch {
		case tc.want == "" && (e.Error != "" || ran != 1):
			t.Errorf("%s: answer %s, handler ran %d times; want it accepted once", tc.name, plain, ran)
		case tc.want != "" && (!strings.Contains(e.Error, tc.want) || ran != 0):
			t.Errorf("%s: answer %s (handler ran %d times), want an error containing %q", tc.name, plain, ran, tc.want)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the handlers ran %d times, want 2 (the good call and the first reference call)", n)
	}
	// Every refusal but the undecryptable one was reported to the owner.
	mu.Lock()
	var reasons []string
	for _, r := range refused {
		reasons = append(reasons, r.Method+":"+string(r.Reason))
	}
	mu.Unlock()
	want := "permission:replayed permission:unsealed abort:unsealed abort:unsealed abort:unsealed permission:unsealed permission:wrong_target permission:wrong_target permission:stale abort:malformed switch:replayed switch:unsealed switch:unsealed killSession:unsealed"
	if got := strings.Join(reasons, " "); got != want {
		t.Fatalf("refusals reported\n got %s\nwant %s", got, want)
	}

	// The record of consumed ids survives a restart: a new process on the
	// same home refuses the captured call too.
	s.Close()
	c.Close()
	c2 := newTestClient(t, testConfig(t, url, creds, home+"/outbox"))
	s2 := openTestSession(t, c2, SessionOptions{Tag: tag})
	var calls2 atomic.Int64
	s2.RegisterRPC("permission", func(context.Context, json.RawMessage) (any, error) { calls2.Add(1); return nil, nil })
	waitFor(t, func() bool { return s2.Stats().Connects >= 1 }, "reconnected")
	if s2.ID() != s.ID() {
		t.Fatalf("reopened as %s, want %s", s2.ID(), s.ID())
	}
	// The relay may route to the old socket a moment longer; wait for the
	// new one to be the registered one.
	waitFor(t, func() bool {
		fresh := envelopeFor(t, s.ID(), "permission", map[string]any{}, time.Now())
		_, r := reasonOf(t, peer.raw(s.Cipher(), s.ID()+":permission", seal(t, s.Cipher(), fresh)), fresh.ID)
		return r == "" && calls2.Load() > 0
	}, "a fresh call answered by the new process")
	_, reason = reasonOf(t, peer.raw(s.Cipher(), s.ID()+":permission", captured), good.ID)
	if reason != control.ReasonReplayed {
		t.Fatalf("after a restart the captured call gives %q, want replayed", reason)
	}
}

// TestMachineRPCAttacks: a captured spawn replayed, and a spawn without
// params, never reach the daemon's handler.
func TestMachineRPCAttacks(t *testing.T) {
	url := servertest.Start(t).URL
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	ctx := context.Background()
	id := "machine-" + newTag(t)
	m, err := c.OpenMachine(ctx, MachineOptions{ID: id, Metadata: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var spawns atomic.Int64
	m.RegisterDialectRPC("spawn-happy-session", control.Shape{Required: []string{"directory"}}, func(_ context.Context, p json.RawMessage) (any, error) {
		spawns.Add(1)
		return map[string]any{"type": "success"}, nil
	})
	m.RegisterRPC("stop-daemon", func(context.Context, json.RawMessage) (any, error) { spawns.Add(100); return nil, nil })
	waitFor(t, m.Connected, "machine socket")
	peer := newRPCPeer(t, url, creds)
	enc, _ := creds.MachineEncryption()

	spawn := envelopeFor(t, id, "spawn-happy-session", map[string]any{"directory": "/w", "permissionMode": "yolo"}, time.Now())
	captured := seal(t, enc.Cipher, spawn)
	if _, r := reasonOf(t, peer.raw(enc.Cipher, id+":spawn-happy-session", captured), spawn.ID); r != "" {
		t.Fatalf("spawn refused: %s", r)
	}
	if _, r := reasonOf(t, peer.raw(enc.Cipher, id+":spawn-happy-session", captured), spawn.ID); r != control.ReasonReplayed {
		t.Fatalf("replayed spawn: %q", r)
	}
	// The reference app's dialect: once per ciphertext.
	b, _ := enc.Cipher.Seal([]byte(`{"directory":"/w"}`))
	ref := b64(b)
	_ = peer.raw(enc.Cipher, id+":spawn-happy-session", ref)
	var e struct{ Error string }
	_ = json.Unmarshal(peer.raw(enc.Cipher, id+":spawn-happy-session", ref), &e)
	if !strings.Contains(e.Error, "(replayed)") {
		t.Fatalf("replayed reference spawn: %q", e.Error)
	}
	// stop-daemon without params.
	_ = json.Unmarshal(peer.raw(enc.Cipher, id+":stop-daemon", nil), &e)
	if !strings.Contains(e.Error, "(unsealed)") {
		t.Fatalf("stop-daemon without params: %q", e.Error)
	}
	if n := spawns.Load(); n != 2 {
		t.Fatalf("handlers ran %d (spawns) / stop-daemon, want 2 spawns", n)
	}
}

// TestAcceptPrompt: the check of a prompt row (a relay that serves the
// same stored row twice, under the same localId, gets the second refused)
// and of the reference app's dialect (once per ciphertext), reported to
// the owner, and durable across a reopen.
func TestAcceptPrompt(t *testing.T) {
	url := servertest.Start(t).URL
	creds := newAccount(t, url)
	home := t.TempDir()
	c := newTestClient(t, testConfig(t, url, creds, home+"/outbox"))
	tag := newTag(t)
	s := openTestSession(t, c, SessionOptions{Tag: tag})
	var mu sync.Mutex
	var refused []string
	s.OnRefused(func(r Refused) { mu.Lock(); refused = append(refused, r.Method+":"+string(r.Reason)); mu.Unlock() })
	env := envelopeFor(t, s.ID(), control.MethodPrompt, nil, time.Now())
	ctl, _ := json.Marshal(env)
	in := Incoming{Seq: 3, LocalID: "msg_1.1", Sealed: seal(t, s.Cipher(), env)}
	if err := s.AcceptPrompt(in, ctl, false); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	in.Seq = 9 // the relay serves it again
	if r, _ := control.ReasonOf(s.AcceptPrompt(in, ctl, false)); r != control.ReasonReplayed {
		t.Fatalf("second delivery: %q", r)
	}
	if r, _ := control.ReasonOf(s.AcceptPrompt(in, nil, false)); r != control.ReasonUnsealed {
		t.Fatalf("no envelope: %q", r)
	}
	other, _ := json.Marshal(envelopeFor(t, "another", control.MethodPrompt, nil, time.Now()))
	if r, _ := control.ReasonOf(s.AcceptPrompt(in, other, false)); r != control.ReasonWrongTarget {
		t.Fatalf("another target: %q", r)
	}
	refPlain := `{"role":"user","content":{"type":"text","text":"hi"}}`
	ref, _ := s.Cipher().Seal([]byte(refPlain))
	dialect := Incoming{Seq: 4, LocalID: "x", Sealed: b64(ref), Plaintext: json.RawMessage(refPlain)}
	if err := s.AcceptPrompt(dialect, nil, true); err != nil {
		t.Fatalf("the app's prompt: %v", err)
	}
	odd := `{"role":"user","content":{"type":"text","text":"hi"},"path":"/w"}`
	oddSealed, _ := s.Cipher().Seal([]byte(odd))
	if r, _ := control.ReasonOf(s.AcceptPrompt(Incoming{Seq: 5, Sealed: b64(oddSealed), Plaintext: json.RawMessage(odd)}, nil, true)); r != control.ReasonUnsealed {
		t.Fatalf("a row not of the app's shape: %q", r)
	}
	mu.Lock()
	got := strings.Join(refused, " ")
	mu.Unlock()
	if got != "prompt:replayed prompt:unsealed prompt:wrong_target prompt:unsealed" {
		t.Fatalf("reported %q", got)
	}
	s.Close()
	c.Close()
	c2 := newTestClient(t, testConfig(t, url, creds, home+"/outbox"))
	s2 := openTestSession(t, c2, SessionOptions{Tag: tag})
	if r, _ := control.ReasonOf(s2.AcceptPrompt(in, ctl, false)); r != control.ReasonReplayed {
		t.Fatalf("after a restart: %q", r)
	}
	if r, _ := control.ReasonOf(s2.AcceptPrompt(dialect, nil, true)); r != control.ReasonReplayed {
		t.Fatalf("the app's prompt after a restart: %q", r)
	}
}

// TestStoredCiphertextIsNoControlInput: the relay holds many ciphertexts
// under a session's and a machine's keys that nobody sent as a control
// input (the session's metadata, the machine's metadata and daemon state).
// A token holder who replays them as the params of the reference app's
// dialect gets them refused: they are not of the method's shape, and a
// method whose dialect params are {} takes envelopes only. (Found by an
// attack review: killSession and stop-daemon ran on such ciphertexts.)
func TestStoredCiphertextIsNoControlInput(t *testing.T) {
	url := servertest.Start(t).URL
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()+"/outbox"))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{"path":"/w","host":"h"}`)})
	var ran atomic.Int64
	h := func(context.Context, json.RawMessage) (any, error) {
		ran.Add(1)
		return map[string]any{"success": true}, nil
	}
	s.RegisterDialectRPC("killSession", control.Shape{}, h)
	s.RegisterDialectRPC("switch", control.Shape{Required: []string{"to"}}, h)
	s.RegisterDialectRPC("readFile", control.Shape{Required: []string{"path"}}, h)
	waitFor(t, func() bool { return s.Stats().Connects >= 1 }, "connected")
	mid := "machine-" + newTag(t)
	m, err := c.OpenMachine(context.Background(), MachineOptions{ID: mid, Metadata: json.RawMessage(`{"host":"h"}`), DaemonState: json.RawMessage(`{"status":"running"}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.RegisterDialectRPC("stop-daemon", control.Shape{}, h)
	m.RegisterDialectRPC("stop-session", control.Shape{Required: []string{"sessionId"}}, h)
	waitFor(t, m.Connected, "machine socket")

	// What the attacker reads with the token alone.
	sessions, err := c.API().ListSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sessMeta string
	for _, x := range sessions {
		if x.ID == s.ID() {
			sessMeta = x.Metadata
		}
	}
	machines, err := c.API().ListMachines(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var machMeta, machState string
	for _, x := range machines {
		if x.ID == mid && x.DaemonState != nil {
			machMeta, machState = x.Metadata, *x.DaemonState
		}
	}
	if sessMeta == "" || machMeta == "" || machState == "" {
		t.Fatal("the stored ciphertexts were not listed")
	}
	enc, _ := creds.MachineEncryption()
	peer := newRPCPeer(t, url, creds)
	for _, tc := range []struct {
		ci             crypto.Cipher
		method, params string
	}{
		{s.Cipher(), s.ID() + ":killSession", sessMeta},
		{s.Cipher(), s.ID() + ":switch", sessMeta},
		{s.Cipher(), s.ID() + ":readFile", sessMeta}, // the metadata has a path, and more
		{enc.Cipher, mid + ":stop-daemon", machMeta},
		{enc.Cipher, mid + ":stop-daemon", machState},
		{enc.Cipher, mid + ":stop-session", machState},
	} {
		var e struct{ Error string }
		_ = json.Unmarshal(peer.raw(tc.ci, tc.method, tc.params), &e)
		if !strings.Contains(e.Error, "(unsealed)") {
			t.Errorf("%s with a stored ciphertext: %q, want an unsealed refusal", tc.method, e.Error)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("handlers ran %d times on stored ciphertexts", n)
	}
}
