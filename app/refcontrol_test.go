package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// refRequestID and refCallID are the pending permission of the recorded
// reference session (refimport's recorded-acp-pending case): the
// agentState's request id and the call id happy log shows for its tool.
const (
	refRequestID = "2fe3f57b-a27b-45a8-a857-a77dc52dfe1b"
	refCallID    = "j6zfp4muchgkiwkw9d6uhl1l"
)

// fakeRefCLI is a session the reference CLI runs, as it runs one: its
// legacy rows and agentState on the relay, and a session-scoped socket
// that registers "<sid>:permission" and answers it as the reference CLI
// does (settling the request in the agentState when act is set).
type fakeRefCLI struct {
	sid    string
	cipher crypto.Cipher
	sock   relay.Socket
	act    bool

	mu      sync.Mutex
	params  []map[string]any
	methods []string
	version int64
	state   map[string]any
}

func startFakeRefCLI(t *testing.T, connA *Conn, act bool) *fakeRefCLI {
	return startFakeRefCLIRows(t, connA, act, true)
}

// startFakeRefCLIRows is startFakeRefCLI; without rows the session is one
// the reference CLI has just started (no row written yet).
func startFakeRefCLIRows(t *testing.T, connA *Conn, act, withRows bool) *fakeRefCLI {
	t.Helper()
	ctx := context.Background()
	c, err := connA.Creds.OpenSession("")
	if err != nil {
		t.Fatal(err)
	}
	seal := func(v any) string {
		plain, _ := json.Marshal(v)
		b, err := c.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		return crypto.EncodeBase64(b)
	}
	meta := map[string]any{"path": "/home/dev/proj", "host": "dev", "version": "1.2.5", "flavor": "acp", "startedBy": "terminal",
		"happyLibDir": "/usr/lib/node_modules/happy"}
	info, err := connA.API.CreateSession(ctx, relay.SessionCreate{Tag: uuid.NewString(), Metadata: seal(meta)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRefCLI{sid: info.ID, cipher: c, act: act}
	rows, err := os.Open(filepath.Join("..", "session", "refimport", "testdata", "cases", "recorded-acp-pending", "rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sc := bufio.NewScanner(rows)
	sc.Buffer(nil, 1<<20)
	for withRows && sc.Scan() {
		var r struct {
			Plain json.RawMessage `json:"plain"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if _, err := connA.API.SendMessages(ctx, f.sid, []relay.OutgoingMessage{{Content: seal(r.Plain), LocalID: uuid.NewString()}}); err != nil {
			t.Fatal(err)
		}
	}
	sock, err := relay.SIODialer(10*time.Second)(ctx, connA.URL, map[string]any{"token": connA.Creds.Token, "clientType": "session-scoped", "sessionId": f.sid})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	f.sock = sock
	f.state = map[string]any{"requests": map[string]any{refRequestID: map[string]any{"tool": "execute", "arguments": map[string]any{}, "createdAt": 1796695265420}},
		"completedRequests": map[string]any{}}
	f.writeState(t, seal)
	registered := make(chan struct{}, 2)
	sock.On("rpc-registered", func(_ []any, _ func(...any)) { registered <- struct{}{} })
	sock.On("rpc-request", func(args []any, ack func(...any)) {
		req, _ := args[0].(map[string]any)
		raw, _ := crypto.DecodeBase64(req["params"].(string))
		plain, err := c.Open(raw)
		var p map[string]any
		if err == nil {
			_ = json.Unmarshal(plain, &p)
		}
		method, _ := req["method"].(string)
		f.mu.Lock()
		f.params = append(f.params, p)
		f.methods = append(f.methods, method)
		f.mu.Unlock()
		// The reference CLI answers nothing and settles the request.
		if ack != nil {
			ack(seal(nil))
		}
		if !f.act || p == nil {
			return
		}
		if method == f.sid+":abort" {
			// It cancels the waiting permissions (and writes no end of the turn).
			go func() {
				f.mu.Lock()
				for id, r := range f.state["requests"].(map[string]any) {
					r := r.(map[string]any)
					r["status"], r["reason"], r["completedAt"] = "canceled", "Session reset", time.Now().UnixMilli()
					f.state["completedRequests"].(map[string]any)[id] = r
				}
				f.state["requests"] = map[string]any{}
				f.mu.Unlock()
				f.writeState(t, seal)
			}()
			return
		}
		go func() {
			f.mu.Lock()
			reqs := f.state["requests"].(map[string]any)
			r, ok := reqs[p["id"].(string)].(map[string]any)
			if ok {
				delete(reqs, p["id"].(string))
				status, decision := "denied", "denied"
				if p["approved"] == true {
					status, decision = "approved", p["decision"].(string)
				}
				r["status"], r["decision"], r["completedAt"] = status, decision, time.Now().UnixMilli()
				f.state["completedRequests"].(map[string]any)[p["id"].(string)] = r
			}
			f.mu.Unlock()
			f.writeState(t, seal)
		}()
	})
	for _, m := range []string{"permission", "abort"} {
		if err := sock.Emit("rpc-register", map[string]any{"method": f.sid + ":" + m}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-registered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not registered", m)
		}
	}
	return f
}

// writeState writes the agentState as the reference CLI does (update-state,
// compare-and-set on its version).
func (f *fakeRefCLI) writeState(t *testing.T, seal func(any) string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := f.sock.Call(ctx, "update-state", map[string]any{"sid": f.sid, "agentState": seal(f.state), "expectedVersion": f.version})
	if err != nil || len(reply) == 0 {
		t.Errorf("update-state: %v %v", reply, err)
		return
	}
	ack, _ := reply[0].(map[string]any)
	if ack["result"] != "success" {
		t.Errorf("update-state: %v", ack)
		return
	}
	f.version = int64(ack["version"].(float64))
}

func (f *fakeRefCLI) received() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.params...)
}

// TestApproveReferenceSession: happy approve of a session the reference CLI
// runs names the call as happy log shows it, sends the reference CLI its
// {id, approved, decision} for the agentState request that blocks it, and
// succeeds only once the request is among the completed ones; deny says
// denied. A session that takes the call and does not settle the request
// is ErrNotActedOn, and a call id nothing waits on is refused before any
// call.
func TestApproveReferenceSession(t *testing.T) {
	RefActWait = 2 * time.Second
	t.Cleanup(func() { RefActWait = 10 * time.Second })
	cases := []struct {
		name    string
		act     bool
		d       agent.Decision
		reason  string
		want    map[string]any
		wantErr error
	}{
		{name: "approve once", act: true, d: agent.DecisionOnce, want: map[string]any{"id": refRequestID, "approved": true, "decision": "approved"}},
		{name: "approve always", act: true, d: agent.DecisionAlways, want: map[string]any{"id": refRequestID, "approved": true, "decision": "approved_for_session"}},
		{name: "deny", act: true, d: agent.DecisionReject, reason: "not now", want: map[string]any{"id": refRequestID, "approved": false, "decision": "denied", "reason": "not now"}},
		{name: "not acted on", act: false, d: agent.DecisionOnce, want: map[string]any{"id": refRequestID, "approved": true, "decision": "approved"}, wantErr: ErrNotActedOn},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, connA, connB := twoDevices(t)
			f := startFakeRefCLI(t, connA, tc.act)
			o, err := FindSession(context.Background(), connB, f.sid)
			if err != nil {
				t.Fatal(err)
			}
			err = Approve(context.Background(), connB, o, refCallID, tc.d, tc.reason)
			if !errors.Is(err, tc.wantErr) || (err != nil && !errors.Is(err, ErrRPC)) {
				t.Fatalf("Approve: %v, want %v", err, tc.wantErr)
			}
			tc.want["target"] = f.sid
			if got := f.received(); len(got) != 1 || !reflect.DeepEqual(got[0], tc.want) {
				t.Fatalf("the reference CLI received %v, want one %v", got, tc.want)
			}
		})
	}
	t.Run("no such call", func(t *testing.T) {
		_, connA, connB := twoDevices(t)
		f := startFakeRefCLI(t, connA, true)
		o, err := FindSession(context.Background(), connB, f.sid)
		if err != nil {
			t.Fatal(err)
		}
		if err := Approve(context.Background(), connB, o, "call-unknown", agent.DecisionOnce, ""); !errors.Is(err, ErrRPC) || !strings.Contains(err.Error(), "no permission") {
			t.Fatalf("Approve of an unknown call: %v", err)
		}
		if got := f.received(); len(got) != 0 {
			t.Fatalf("the reference CLI received %v", got)
		}
	})
}

// TestSendReferenceSession: happy send to a session the reference CLI runs
// (with rows, or just started: none yet, its metadata says whose it is)
// writes the reference app's prompt shape, encrypted with the session key.
func TestSendReferenceSession(t *testing.T) {
	for _, withRows := range []bool{true, false} {
		t.Run(fmt.Sprint("rows=", withRows), func(t *testing.T) {
			_, connA, connB := twoDevices(t)
			f := startFakeRefCLIRows(t, connA, true, withRows)
			o, err := FindSession(context.Background(), connB, f.sid)
			if err != nil {
				t.Fatal(err)
			}
			sent, err := SendPrompt(context.Background(), connB, o, "run the tests", nil, time.Now())
			if err != nil || !sent.Reference {
				t.Fatalf("SendPrompt: %+v %v", sent, err)
			}
			page, err := connA.API.FetchMessages(context.Background(), f.sid, sent.Seq-1, 1)
			if err != nil || len(page.Messages) != 1 {
				t.Fatalf("%v %v", page, err)
			}
			if page.Messages[0].LocalIDOrEmpty() != sent.ID {
				t.Fatalf("localId %s, want %s", page.Messages[0].LocalIDOrEmpty(), sent.ID)
			}
			raw, _ := crypto.DecodeBase64(page.Messages[0].Content.C)
			plain, err := f.cipher.Open(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"content":{"text":"run the tests","type":"text"},"meta":{"sentFrom":"cli"},"role":"user"}`
			if string(plain) != want {
				t.Fatalf("row %s\nwant %s", plain, want)
			}
			if _, err := SendPrompt(context.Background(), connB, o, "with a file", []Blob{{Mime: "text/plain"}}, time.Now()); !errors.Is(err, ErrRPC) {
				t.Fatalf("a file to the reference CLI: %v", err)
			}
		})
	}
}

// strippingRelay is a relay in the middle that, while strip is set, serves
// the message pages of every session without its canonical rows (it keeps
// the rows stored under the legacy companions' localIds): one of happy's
// sessions then reads back as legacy records only, as the reference CLI's
// do.
func strippingRelay(t *testing.T, upstream string) (url string, strip *atomic.Bool) {
	t.Helper()
	target, err := neturl.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	strip = new(atomic.Bool)
	p := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		r.Out.Header.Del("Accept-Encoding")
	}}
	p.ModifyResponse = func(resp *http.Response) error {
		if !strip.Load() || resp.Request.Method != http.MethodGet || !strings.HasSuffix(resp.Request.URL.Path, "/messages") || resp.StatusCode != http.StatusOK {
			return nil
		}
		var page map[string]json.RawMessage
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || json.Unmarshal(body, &page) != nil {
			return fmt.Errorf("not a page: %s", body)
		}
		var msgs []map[string]any
		if err := json.Unmarshal(page["messages"], &msgs); err != nil {
			return err
		}
		kept := []map[string]any{}
		for _, m := range msgs {
			if id, _ := m["localId"].(string); strings.HasPrefix(id, session.LegacyRecordPrefix) {
				kept = append(kept, m)
			}
		}
		page["messages"], _ = json.Marshal(kept)
		body, _ = json.Marshal(page)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL, strip
}

// TestReferenceDialectCannotDowngradeOurSession is the downgrade attack: a
// relay that hides one of happy's sessions' canonical rows makes happy
// approve take it for the reference CLI's and send the plain decision. The
// session (the reference app's dialect on, as by default) refuses it, and
// the plain abort after it, as unsealed (the plain decision names its target, a member the reference
// app's dialect does not have), nothing is decided, the command fails, and
// the sealed approval still works once the relay stops stripping.
func TestReferenceDialectCannotDowngradeOurSession(t *testing.T) {
	RefActWait = time.Second
	t.Cleanup(func() { RefActWait = 10 * time.Second })
	o, connB, _ := runIn(t, newScriptedAgent(), remoteDir(t), nil, "task")
	url, strip := strippingRelay(t, connB.URL)
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: url, Token: connB.Creds.Token})
	if err != nil {
		t.Fatal(err)
	}
	mitm := &Conn{URL: url, API: api, Creds: connB.Creds}
	// What happy approve sees through it: the session as the reference
	// CLI's, with its permission waiting.
	var seen Opened
	waitCond(t, "the permission waiting in the stripped read-back", func() bool {
		strip.Store(true)
		defer strip.Store(false)
		if seen, err = FindSession(context.Background(), mitm, o.Info.ID); err != nil {
			return false
		}
		rb, _, err := ReadTranscript(context.Background(), mitm, seen, ReadOptions{})
		if err != nil || !rb.Imported() {
			return false
		}
		_, waiting := referenceRequest(rb.Transcript(), "call-1")
		return waiting
	})
	strip.Store(true)
	err = Approve(context.Background(), mitm, seen, "call-1", agent.DecisionOnce, "")
	strip.Store(false)
	if !errors.Is(err, ErrRPC) || !strings.Contains(err.Error(), "(unsealed)") || !strings.Contains(err.Error(), `member "target"`) {
		t.Fatalf("the downgraded approval: %v, want the session's unsealed refusal", err)
	}
	strip.Store(true)
	err = Abort(context.Background(), mitm, seen)
	strip.Store(false)
	if !errors.Is(err, ErrRPC) || !strings.Contains(err.Error(), "(unsealed)") || !strings.Contains(err.Error(), `member "target"`) {
		t.Fatalf("the downgraded abort: %v, want the session's unsealed refusal", err)
	}
	waitCond(t, "the refusals on the transcript", func() bool {
		r := droppedReasons(t, connB, o)
		return slices.Contains(r, "permission:unsealed") && slices.Contains(r, "abort:unsealed")
	})
	if err := Approve(context.Background(), connB, o, "call-1", agent.DecisionOnce, ""); err != nil {
		t.Fatalf("the sealed approval after the attack (the call must still wait): %v", err)
	}
}

// TestAbortReferenceSession: happy abort of a session the reference CLI runs
// calls its abort ({reason}, ignored by it) and succeeds once the waiting
// permission is cancelled; a session that takes the call and does not is
// ErrNotActedOn.
func TestAbortReferenceSession(t *testing.T) {
	RefActWait = 2 * time.Second
	t.Cleanup(func() { RefActWait = 10 * time.Second })
	for _, act := range []bool{true, false} {
		t.Run(fmt.Sprint("acts=", act), func(t *testing.T) {
			_, connA, connB := twoDevices(t)
			f := startFakeRefCLI(t, connA, act)
			o, err := FindSession(context.Background(), connB, f.sid)
			if err != nil {
				t.Fatal(err)
			}
			err = Abort(context.Background(), connB, o)
			if act && err != nil || !act && !errors.Is(err, ErrNotActedOn) {
				t.Fatalf("Abort: %v", err)
			}
			want := map[string]any{"reason": refAbortReason, "target": f.sid}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.params) != 1 || f.methods[0] != f.sid+":abort" || !reflect.DeepEqual(f.params[0], want) {
				t.Fatalf("the reference CLI received %v %v, want %s:abort %v", f.methods, f.params, f.sid, want)
			}
		})
	}
}
