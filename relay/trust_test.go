package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/evilrelay"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/session"
)

// evilSetup is a real relay behind a malicious proxy, and a client of a
// fresh account (holding the account secret) that talks to the proxy.
func evilSetup(t *testing.T, rules ...evilrelay.Rule) (*evilrelay.Proxy, *Client) {
	t.Helper()
	r := servertest.Start(t)
	p := evilrelay.Start(t, r.URL, rules...)
	creds := newAccount(t, p.URL)
	return p, newTestClient(t, testConfig(t, p.URL, creds, t.TempDir()))
}

// oldSession opens a session on c, writes one version to it and closes it:
// the session a malicious relay hands out later.
func oldSession(t *testing.T, c *Client) (tag, id string) {
	t.Helper()
	tag = newTag(t)
	s := openTestSession(t, c, SessionOptions{Tag: tag, Metadata: json.RawMessage(`{"path":"/old"}`)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Enqueue(ctx, "msg_old", func(v int64) ([]byte, error) { return envelope("msg_old", v), nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	id = s.ID()
	_ = s.Close()
	return tag, id
}

func openCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A relay that answers the creation of a new session with an old one of
// the account is refused: the client never writes into a session it did
// not create.
func TestNewSessionRefusesAnOldSession(t *testing.T) {
	p, c := evilSetup(t)
	_, oldID := oldSession(t, c)
	p.Use(evilrelay.SubstituteSession(oldID))
	s, err := c.OpenSession(openCtx(t), SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{"path":"/new"}`)})
	if err == nil {
		_ = s.Close()
		t.Fatalf("opened session %s: the relay's old session was taken for a new one", s.ID())
	}
	if !errors.Is(err, ErrForeignSession) || !strings.Contains(err.Error(), "not the new session this client created") {
		t.Fatalf("err = %v", err)
	}
}

// A relay that strips the session key from the creation's answer is
// refused: the client never falls back to sealing with the account secret.
func TestStrippedSessionKeyIsRefused(t *testing.T) {
	_, c := evilSetup(t, evilrelay.StripSessionKey())
	s, err := c.OpenSession(openCtx(t), SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{}`)})
	if err == nil {
		_ = s.Close()
		t.Fatalf("opened with variant %s", s.Cipher().Variant())
	}
	if !errors.Is(err, ErrForeignSession) || !strings.Contains(err.Error(), "without the session key") {
		t.Fatalf("err = %v", err)
	}
}

// Reopening a session this client created (resume, orphan settling) still
// works, and a relay that then answers with another key for it is refused.
func TestReattachChecksTheKey(t *testing.T) {
	p, c := evilSetup(t)
	tag, id := oldSession(t, c)
	s := openTestSession(t, c, SessionOptions{Tag: tag})
	if s.ID() != id {
		t.Fatalf("reopened %s, want %s", s.ID(), id)
	}
	_ = s.Close()
	p.Use(evilrelay.StripSessionKey())
	s2, err := c.OpenSession(openCtx(t), SessionOptions{Tag: tag})
	if err == nil {
		_ = s2.Close()
		t.Fatal("reopened a session whose key the relay stripped")
	}
	if !errors.Is(err, ErrForeignSession) {
		t.Fatalf("err = %v", err)
	}
}

// A session created by the sender later (the relay did not answer at open)
// is checked the same way: the old session the relay hands out then is
// refused, the error is the sender's last, and nothing is written to it.
func TestDeferredCreationRefusesAnOldSession(t *testing.T) {
	p, c := evilSetup(t)
	_, oldID := oldSession(t, c)
	p.Use(evilrelay.On(http.MethodPost, "/v1/sessions", func(*evilrelay.Request, evilrelay.Next) (*evilrelay.Response, error) {
		return evilrelay.JSON(http.StatusServiceUnavailable, map[string]string{"error": "down"}), nil
	}))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{}`)})
	if s.ID() != "" {
		t.Fatalf("created %s while the relay was down", s.ID())
	}
	p.Reset()
	p.Use(evilrelay.SubstituteSession(oldID))
	ctx := openCtx(t)
	if _, err := s.Enqueue(ctx, "msg_new", func(v int64) ([]byte, error) { return envelope("msg_new", v), nil }); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(s.Stats().LastError, "not the new session this client created") {
		select {
		case <-s.snd.changed():
		case <-ctx.Done():
			t.Fatalf("no refusal; stats %+v", s.Stats())
		}
	}
	if s.ID() != "" {
		t.Fatalf("took the relay's session %s", s.ID())
	}
	rows, err := p.Messages(ctx, oldID, 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("the old session holds %d rows (%v), want its own 1", len(rows), err)
	}
}

// note is a message envelope carrying a text, so a reader can tell whose
// content a version holds.
func note(record string, version int64, text string) []byte {
	b, _ := json.Marshal(map[string]any{"kind": "message", "version": version, "info": map[string]any{"id": record}, "parts": []any{}, "text": text})
	return b
}

// readNotes reads every row of the session and returns, per localId, the
// record, version and text its plaintext claims ("" fields for a row that
// does not decrypt).
func readNotes(t *testing.T, p *evilrelay.Proxy, s *Session) map[string]string {
	t.Helper()
	rows, err := p.Messages(context.Background(), s.ID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range rows {
		var env struct {
			Version int64
			Info    struct{ ID string }
			Text    string
		}
		if plain, err := openPayload(s.Cipher(), "message", m.Seq, m.Content.C); err == nil {
			_ = json.Unmarshal(plain, &env)
		}
		out[*m.LocalID] = fmt.Sprintf("%s.%d %s", env.Info.ID, env.Version, env.Text)
	}
	return out
}

// A relay that stores rows of its own under the next localIds of a record
// (here: replays of the record's first version) before the client's posts
// reach it: each post is answered "already stored"; the client fetches the
// rows back, sees they are not its own, counts and records the conflicts,
// and writes the content again under the next version, until it lands.
// Nothing it wrote is lost, and the outbox never takes a foreign row for
// its own.
func TestPreClaimedLocalIDsAreWrittenAgain(t *testing.T) {
	p, c := evilSetup(t)
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{}`)})
	ctx := openCtx(t)
	if _, err := s.Enqueue(ctx, "msg_a", func(v int64) ([]byte, error) { return note("msg_a", v, "first"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A post the relay answers "new" is not read back: the only reads are
	// the receive path's pages (limit 500).
	for _, ex := range p.Seen() {
		if ex.Method == http.MethodGet && strings.HasSuffix(ex.Path, "/messages") && ex.Query.Get("limit") != "500" {
			t.Fatalf("read back a row the relay stored new: %+v", ex)
		}
	}
	first, err := p.Messages(ctx, s.ID(), 0)
	if err != nil || len(first) != 1 {
		t.Fatalf("rows %v %v", first, err)
	}
	p.Use(evilrelay.PreClaim(func(_, localID string) (string, bool) {
		return first[0].Content.C, localID == "msg_a.2" || localID == "msg_a.3"
	}))
	if _, err := s.Enqueue(ctx, "msg_a", func(v int64) ([]byte, error) { return note("msg_a", v, "second"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := readNotes(t, p, s)
	want := map[string]string{"msg_a.1": "msg_a.1 first", "msg_a.2": "msg_a.1 first", "msg_a.3": "msg_a.1 first", "msg_a.4": "msg_a.4 second"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("relay holds %v\nwant %v", got, want)
	}
	st := s.Stats()
	if st.Conflicts != 2 || st.Sent != 2 || st.Pending != 0 || s.LastVersion("msg_a") != 4 {
		t.Fatalf("stats %+v, last version %d", st, s.LastVersion("msg_a"))
	}
	cs, err := c.Outbox().Conflicts(ctx, s.Tag())
	if err != nil || len(cs) != 2 || cs[0].LocalID != "msg_a.2" || cs[1].LocalID != "msg_a.3" || cs[0].Seq != 2 || cs[1].Seq != 3 {
		t.Fatalf("conflicts %+v %v", cs, err)
	}
}

// A version whose localId was taken but that a later version of the same
// record supersedes is not written again: the conflict is counted, and the
// later version carries the record.
func TestPreClaimedSupersededVersion(t *testing.T) {
	p, c := evilSetup(t)
	// The session is created only once both versions wait, so they go in
	// one post.
	p.Use(evilrelay.On(http.MethodPost, "/v1/sessions", func(*evilrelay.Request, evilrelay.Next) (*evilrelay.Response, error) {
		return evilrelay.JSON(http.StatusServiceUnavailable, map[string]string{"error": "down"}), nil
	}))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{}`)})
	ctx := openCtx(t)
	for _, text := range []string{"one", "two"} {
		if _, err := s.Enqueue(ctx, "msg_b", func(v int64) ([]byte, error) { return note("msg_b", v, text), nil }); err != nil {
			t.Fatal(err)
		}
	}
	p.Reset()
	p.Use(evilrelay.PreClaim(func(_, localID string) (string, bool) { return "Z2FyYmFnZQ==", localID == "msg_b.1" }))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := readNotes(t, p, s)
	want := map[string]string{"msg_b.1": ".0 ", "msg_b.2": "msg_b.2 two"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("relay holds %v\nwant %v", got, want)
	}
	if st := s.Stats(); st.Conflicts != 1 || st.Sent != 1 || s.LastVersion("msg_b") != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// The receive path refuses, with SessionOptions.CheckRecord (what happy
// sets: session.CheckRecord), a row replayed under another localId: it is
// delivered in order with an error wrapping the check's, counted, and
// never handed over as a plaintext.
func TestReceiveRefusesAReplayedRow(t *testing.T) {
	p, c := evilSetup(t)
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t), Metadata: json.RawMessage(`{}`), CheckRecord: session.CheckRecord})
	ctx := openCtx(t)
	sealed, err := s.Cipher().Seal(note("msg_p", 1, "a prompt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Post(ctx, s.ID(), evilrelay.Outgoing{Content: b64(sealed), LocalID: "msg_p.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Replay(ctx, s.ID(), 1, "msg_q.1"); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, s, 2)
	if got[0].Err != nil || got[0].LocalID != "msg_p.1" || !strings.Contains(string(got[0].Plaintext), "a prompt") {
		t.Fatalf("first row %+v", got[0])
	}
	var re *RecordError
	if !errors.As(got[1].Err, &re) || !errors.Is(got[1].Err, session.ErrWrongLocalID) || got[1].Plaintext != nil || re.Seq != 2 || re.LocalID != "msg_q.1" {
		t.Fatalf("replayed row %+v", got[1])
	}
	if st := s.Stats(); st.Refused != 1 || st.Delivered != 2 || st.DecryptFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}
