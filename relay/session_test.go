package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/happy-dev/happy/control"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/sio"
)

func testSessionSendsEveryVersionInOrder(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	var mu sync.Mutex
	var acks []Ack
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{"path":"/w","flavor":"claude"}`),
		OnSent: func(a []Ack) { mu.Lock(); acks = append(acks, a...); mu.Unlock() }})
	if s.ID() == "" {
		t.Fatal("session not created on open")
	}
	ctx := context.Background()
	plan := []string{"msg_a", "msg_b", "msg_a", "msg_a", "todos_1", "msg_b"}
	for i, rec := range plan {
		v, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) { return envelope(rec, v), nil })
		if err != nil {
			t.Fatal(err)
		}
		if want := s.LastVersion(rec); v != want {
			t.Fatalf("step %d: version %d, LastVersion %d", i, v, want)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	msgs := readAll(t, c.API(), s.ID(), s.Cipher())
	var got []string
	for _, m := range msgs {
		got = append(got, fmt.Sprintf("%d:%s", m.Seq, m.LocalID))
	}
	want := "[1:msg_a.1 2:msg_b.1 3:msg_a.2 4:msg_a.3 5:todos_1.1 6:msg_b.2]"
	if fmt.Sprint(got) != want {
		t.Fatalf("relay holds %v\nwant %s", got, want)
	}
	mu.Lock()
	n := len(acks)
	mu.Unlock()
	if n != 6 {
		t.Fatalf("OnSent reported %d acks", n)
	}
	md, ver := s.Metadata()
	if string(md) != `{"path":"/w","flavor":"claude"}` || ver != 0 {
		t.Fatalf("metadata %s v%d", md, ver)
	}
	st := s.Stats()
	if st.Enqueued != 6 || st.Sent != 6 || st.Pending != 0 || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A build error uses no version.
	boom := errors.New("boom")
	if _, err := s.Enqueue(ctx, "msg_a", func(int64) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if s.LastVersion("msg_a") != 3 {
		t.Fatalf("last version %d", s.LastVersion("msg_a"))
	}
	// A version read back from the relay above the outbox's is written
	// above; a lower one changes nothing.
	s.RaiseVersion("msg_a", 7)
	s.RaiseVersion("msg_b", 1)
	for rec, want := range map[string]int64{"msg_a": 8, "msg_b": 3} {
		if v, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) { return envelope(rec, v), nil }); err != nil || v != want {
			t.Fatalf("%s after RaiseVersion: version %d (%v), want %d", rec, v, err, want)
		}
	}
}

func testVersionsSurviveReopen(t *testing.T, url string) {
	creds := newAccount(t, url)
	dir := t.TempDir()
	tag := newTag(t)
	ctx := context.Background()
	c := newTestClient(t, testConfig(t, url, creds, dir))
	s := openTestSession(t, c, SessionOptions{Tag: tag})
	for range 3 {
		if _, err := s.Enqueue(ctx, "msg_x", func(v int64) ([]byte, error) { return envelope("msg_x", v), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sid := s.ID()
	_ = s.Close()
	_ = c.Close()

	c2 := newTestClient(t, testConfig(t, url, creds, dir))
	s2 := openTestSession(t, c2, SessionOptions{Tag: tag})
	if s2.ID() != sid {
		t.Fatalf("reopened %s, was %s", s2.ID(), sid)
	}
	v, err := s2.Enqueue(ctx, "msg_x", func(v int64) ([]byte, error) { return envelope("msg_x", v), nil })
	if err != nil || v != 4 {
		t.Fatalf("version after reopen %d %v", v, err)
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readAll(t, c2.API(), sid, s2.Cipher()), map[string]int64{"msg_x": 4})
}

// writeForeign stores messages in the session as another device would:
// UUID-like localIds, content sealed with the session key.
func writeForeign(t testing.TB, api *API, sid string, ci crypto.Cipher, texts ...string) []SentMessage {
	t.Helper()
	var msgs []OutgoingMessage
	for i, text := range texts {
		plain, _ := json.Marshal(map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": text}})
		sealed, err := ci.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, OutgoingMessage{Content: b64(sealed), LocalID: fmt.Sprintf("%s-%d", newTag(t), i)})
	}
	r, err := api.SendMessages(context.Background(), sid, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func userText(t testing.TB, in Incoming) string {
	t.Helper()
	if in.Err != nil {
		t.Fatalf("seq %d: %v", in.Seq, in.Err)
	}
	var m struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(in.Plaintext, &m); err != nil {
		t.Fatal(err)
	}
	return m.Content.Text
}

func receiveN(t testing.TB, s *Session, n int) []Incoming {
	t.Helper()
	var out []Incoming
	timeout := time.After(15 * time.Second)
	for len(out) < n {
		select {
		case in, ok := <-s.Receive():
			if !ok {
				t.Fatalf("receive closed after %d", len(out))
			}
			out = append(out, in)
		case <-timeout:
			t.Fatalf("received %d of %d", len(out), n)
		}
	}
	return out
}

// expectNoMore asserts that Receive holds nothing before a message written
// now: it stores one more foreign message ("no-more") and checks that it is
// the next one delivered, so a duplicate or an own message still on its way
// fails the test. The marker counts as delivered (Stats.Delivered, LastSeq).
func expectNoMore(t testing.TB, s *Session, api *API) {
	t.Helper()
	writeForeign(t, api, s.ID(), s.Cipher(), "no-more")
	if in := receiveN(t, s, 1)[0]; in.Err != nil || userText(t, in) != "no-more" {
		t.Fatalf("unexpected message seq %d %q before the marker (err %v)", in.Seq, in.LocalID, in.Err)
	}
}

func testReceiveSkipsOwnAndDeliversOthersInOrder(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	ctx := context.Background()
	for i := range 3 {
		rec := fmt.Sprintf("msg_%d", i)
		if _, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) { return envelope(rec, v), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeForeign(t, c.API(), s.ID(), s.Cipher(), "hello", "second")
	if _, err := s.Enqueue(ctx, "msg_0", func(v int64) ([]byte, error) { return envelope("msg_0", v), nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeForeign(t, c.API(), s.ID(), s.Cipher(), "third")
	got := receiveN(t, s, 3)
	var seqs []string
	for _, in := range got {
		seqs = append(seqs, fmt.Sprintf("%d:%s", in.Seq, userText(t, in)))
	}
	if fmt.Sprint(seqs) != "[4:hello 5:second 7:third]" {
		t.Fatalf("received %v", seqs)
	}
	expectNoMore(t, s, c.API())
	waitFor(t, func() bool { return s.Stats().Echoes == 4 }, "4 echoes skipped")
	st := s.Stats()
	if st.Delivered != 4 || st.LastSeq != 8 || st.DecryptFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// waitFor checks cond every millisecond until it holds and fails the test
// when it still does not after 15 s. It is for state the client does not
// signal (its counters); with RELAY_TEST_DUMP set, a timeout writes every
// goroutine's stack to that file.
func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			if p := os.Getenv("RELAY_TEST_DUMP"); p != "" {
				buf := make([]byte, 8<<20)
				_ = os.WriteFile(p, buf[:runtime.Stack(buf, true)], 0o600)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func testReceiveFromNow(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	tag := newTag(t)
	s := openTestSession(t, c, SessionOptions{Tag: tag})
	writeForeign(t, c.API(), s.ID(), s.Cipher(), "old-1", "old-2")
	_ = receiveN(t, s, 2)
	_ = s.Close()
	s2 := openTestSession(t, c, SessionOptions{Tag: tag, ReceiveAfter: FromNow})
	writeForeign(t, c.API(), s2.ID(), s2.Cipher(), "new")
	got := receiveN(t, s2, 1)
	if got[0].Seq != 3 || userText(t, got[0]) != "new" {
		t.Fatalf("got seq %d", got[0].Seq)
	}
}

func testDecryptFailuresAreDeliveredAndCounted(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	var otherKey [32]byte
	otherKey[0] = 7
	wrongKey := crypto.NewDataKeyCipher(otherKey)
	// A legacy bundle whose nonce starts with 0x42: opened as dataKey, its
	// first byte is an unknown version.
	var secret [32]byte
	wrongVariant := crypto.NewLegacyCipher(secret, crypto.WithRandom(bytes.NewReader(bytes.Repeat([]byte{0x42}, 64))))
	writeForeign(t, c.API(), s.ID(), wrongKey, "x")
	writeForeign(t, c.API(), s.ID(), wrongVariant, "y")
	if _, err := c.API().SendMessages(context.Background(), s.ID(), []OutgoingMessage{{Content: "%%%not base64", LocalID: newTag(t)}}); err != nil {
		t.Fatal(err)
	}
	writeForeign(t, c.API(), s.ID(), s.Cipher(), "fine")
	got := receiveN(t, s, 4)
	for i, want := range []error{crypto.ErrAuthFailed, crypto.ErrUnsupportedVersion, crypto.ErrBadEncoding} {
		var de *DecryptError
		if !errors.As(got[i].Err, &de) || !errors.Is(got[i].Err, ErrDecrypt) || !errors.Is(got[i].Err, want) || de.Seq != int64(i+1) || got[i].Plaintext != nil {
			t.Fatalf("message %d: err %v", i, got[i].Err)
		}
	}
	if userText(t, got[3]) != "fine" {
		t.Fatal("the good message after bad ones was not delivered")
	}
	if st := s.Stats(); st.DecryptFailures != 3 || st.Delivered != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLiveGapsDuplicatesAndDisorder feeds the receive path live events out
// of order, duplicated and with gaps, on top of the relay's own events; the
// stream must still be every message once, in seq order.
func testLiveGapsDuplicatesAndDisorder(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	// Wait until the initial fetch ran, so injected events meet a known lastSeq.
	waitFor(t, func() bool { return s.Stats().Fetches >= 1 }, "initial fetch")
	texts := make([]string, 30)
	for i := range texts {
		texts[i] = fmt.Sprintf("m%02d", i+1)
	}
	receipts := writeForeign(t, c.API(), s.ID(), s.Cipher(), texts...)
	page, err := c.API().FetchMessages(context.Background(), s.ID(), 0, 100)
	if err != nil || len(page.Messages) != 30 || len(receipts) != 30 {
		t.Fatalf("%d messages %v", len(page.Messages), err)
	}
	byseq := map[int64]StoredMessage{}
	for _, m := range page.Messages {
		byseq[m.Seq] = m
	}
	for _, seq := range []int64{5, 3, 3, 1, 2, 2, 30, 29, 4, 1, 17, 6} {
		s.rcv.pushLive(byseq[seq])
	}
	got := receiveN(t, s, 30)
	for i, in := range got {
		if in.Seq != int64(i+1) || userText(t, in) != texts[i] {
			t.Fatalf("position %d: seq %d", i, in.Seq)
		}
	}
	expectNoMore(t, s, c.API())
	if st := s.Stats(); st.Delivered != 31 || st.LastSeq != 31 {
		t.Fatalf("stats %+v", st)
	}
}

func testMetadataCompareAndSetAcrossDevices(t *testing.T, url string) {
	creds := newAccount(t, url)
	tag := newTag(t)
	a := openTestSession(t, newTestClient(t, testConfig(t, url, creds, t.TempDir())), SessionOptions{Tag: tag, Metadata: json.RawMessage(`{"n":0}`)})
	// Device B: another client of the same account (own outbox) on the
	// same session, its outbox given the session as A's holds it.
	b := openTestSession(t, sharedClient(t, url, creds, a), SessionOptions{Tag: tag})
	if a.ID() != b.ID() {
		t.Fatalf("ids %s %s", a.ID(), b.ID())
	}
	if md, _ := b.Metadata(); string(md) != `{"n":0}` {
		t.Fatalf("device B reads metadata %s", md)
	}
	inc := func(cur json.RawMessage) (json.RawMessage, error) {
		var m struct{ N int }
		if err := json.Unmarshal(cur, &m); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"n": m.N + 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for _, s := range []*Session{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := s.UpdateMetadata(ctx, inc); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	infos, err := a.c.API().ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.ID != a.ID() {
			continue
		}
		md, err := openPayload(a.Cipher(), "metadata", 0, info.Metadata)
		if err != nil || string(md) != `{"n":10}` || info.MetadataVersion != 10 {
			t.Fatalf("relay metadata %s v%d %v", md, info.MetadataVersion, err)
		}
		return
	}
	t.Fatal("session not listed")
}

func testAgentStateNullAndUpdateEvents(t *testing.T, url string) {
	creds := newAccount(t, url)
	tag := newTag(t)
	var mu sync.Mutex
	var updates []StateUpdate
	a := openTestSession(t, newTestClient(t, testConfig(t, url, creds, t.TempDir())), SessionOptions{Tag: tag,
		OnStateUpdate: func(u StateUpdate) { mu.Lock(); updates = append(updates, u); mu.Unlock() }})
	b := openTestSession(t, sharedClient(t, url, creds, a), SessionOptions{Tag: tag})
	ctx := context.Background()
	if as, v := a.AgentState(); as != nil || v != 0 {
		t.Fatalf("initial agent state %s v%d", as, v)
	}
	waitFor(t, func() bool { return a.Stats().Connects >= 1 }, "a connected")
	if err := b.UpdateAgentState(ctx, func(cur json.RawMessage) (json.RawMessage, error) {
		if cur != nil {
			return nil, fmt.Errorf("current %s", cur)
		}
		return json.RawMessage(`{"requests":{}}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { as, v := a.AgentState(); return v == 1 && string(as) == `{"requests":{}}` }, "update event on a")
	if err := a.UpdateAgentState(ctx, func(json.RawMessage) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if as, v := a.AgentState(); as != nil || v != 2 {
		t.Fatalf("after null: %s v%d", as, v)
	}
	if err := a.UpdateMetadata(ctx, func(json.RawMessage) (json.RawMessage, error) { return nil, nil }); !errors.Is(err, ErrRejected) {
		t.Fatalf("null metadata: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(updates) < 1 || !updates[0].AgentState || updates[0].Metadata {
		t.Fatalf("updates %+v", updates)
	}
}

func testRPCRoundTrip(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	s.RegisterRPC("permission", func(ctx context.Context, params json.RawMessage) (any, error) {
		var p struct {
			CallID   string `json:"callID"`
			Decision string `json:"decision"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		if p.Decision == "bogus" {
			return nil, errors.New("unknown decision")
		}
		return map[string]any{"ok": true, "callID": p.CallID}, nil
	})
	waitFor(t, func() bool { return s.Stats().Connects >= 1 }, "connected")
	app, err := sio.Dial(context.Background(), url, sio.Options{Auth: map[string]any{"token": creds.Token, "clientType": "user-scoped"}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	call := func(params map[string]any) (string, error) {
		e := envelopeFor(t, s.ID(), "permission", params, time.Now())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := app.Call(ctx, "rpc-call", map[string]any{"method": s.ID() + ":permission", "params": seal(t, s.Cipher(), e)})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := res[0].(map[string]any)
		if m["ok"] != true {
			t.Fatalf("rpc-call: %v", m)
		}
		plain, err := openPayload(s.Cipher(), "result", 0, m["result"].(string))
		if err != nil {
			t.Fatal(err)
		}
		out, err := control.OpenAnswer(plain, e.ID)
		return string(out), err
	}
	if got, err := call(map[string]any{"callID": "toolu_1", "decision": "once"}); err != nil || got != `{"callID":"toolu_1","ok":true}` {
		t.Fatalf("result %s %v", got, err)
	}
	if _, err := call(map[string]any{"callID": "toolu_2", "decision": "bogus"}); err == nil || err.Error() != "unknown decision" {
		t.Fatalf("error result %v", err)
	}
}

func TestRelayDownAtStart(t *testing.T) {
	r := newRestartableRelay(t)
	creds := newAccount(t, r.URL)
	r.Stop()
	ctx := context.Background()
	c := newTestClient(t, testConfig(t, r.URL, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{"path":"/offline"}`)})
	if s.ID() != "" {
		t.Fatal("created without a relay")
	}
	for i := range 5 {
		rec := fmt.Sprintf("msg_%d", i)
		if _, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) { return envelope(rec, v), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Pending != 5 || st.Sent != 0 {
		t.Fatalf("stats %+v", st)
	}
	waitFor(t, func() bool { return s.Stats().SendFailures >= 2 }, "two failed attempts")
	r.Start()
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for i := range 5 {
		want[fmt.Sprintf("msg_%d", i)] = 1
	}
	checkExactlyOnce(t, readAll(t, c.API(), s.ID(), s.Cipher()), want)
	if md, v := s.Metadata(); string(md) != `{"path":"/offline"}` || v != 0 {
		t.Fatalf("metadata after late create: %s v%d", md, v)
	}
}
