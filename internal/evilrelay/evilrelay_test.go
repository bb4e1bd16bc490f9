package evilrelay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/happy-dev/happy/internal/evilrelay"
	"github.com/happy-dev/happy/server/servertest"
)

// call sends a JSON request with token through base and decodes the answer.
func call(t *testing.T, base, token, method, path string, in, out any) int {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

type session struct {
	ID                string  `json:"id"`
	Seq               int64   `json:"seq"`
	DataEncryptionKey *string `json:"dataEncryptionKey"`
}

func create(t *testing.T, base, token, tag string) session {
	t.Helper()
	var out struct{ Session session }
	dek := "a2V5"
	if st := call(t, base, token, http.MethodPost, "/v1/sessions", map[string]any{"tag": tag, "metadata": "bWQ=", "dataEncryptionKey": dek}, &out); st != 200 {
		t.Fatalf("create %s: status %d", tag, st)
	}
	return out.Session
}

// Every canned attack against a real relay: a stripped key, another
// session handed out, a pre-claimed localId answered with the attacker's
// row, a replay under a new localId, and a page with a row left out; the
// token the client sent is captured.
func TestAttacks(t *testing.T) {
	r := servertest.Start(t)
	acct := servertest.NewAccount(t, r.URL)
	ctx := context.Background()

	p := evilrelay.Start(t, r.URL, evilrelay.StripSessionKey())
	s := create(t, p.URL, acct.Token, "tag-1")
	if s.DataEncryptionKey != nil || p.Token() != acct.Token {
		t.Fatalf("stripped key %v, token %q", s.DataEncryptionKey, p.Token())
	}
	direct := create(t, r.URL, acct.Token, "tag-1")
	if direct.DataEncryptionKey == nil || *direct.DataEncryptionKey != "a2V5" || direct.ID != s.ID {
		t.Fatalf("the relay holds %+v", direct)
	}

	p.Reset()
	p.Use(evilrelay.SubstituteSession(s.ID))
	if got := create(t, p.URL, acct.Token, "tag-2"); got.ID != s.ID {
		t.Fatalf("substituted %s, want %s", got.ID, s.ID)
	}

	p.Reset()
	p.Use(evilrelay.PreClaim(func(sid, localID string) (string, bool) { return "ZXZpbA==", localID == "r.2" }))
	var rec struct{ Messages []evilrelay.Receipt }
	post := map[string]any{"messages": []evilrelay.Outgoing{{Content: "b25l", LocalID: "r.1"}, {Content: "dHdv", LocalID: "r.2"}}}
	if st := call(t, p.URL, acct.Token, http.MethodPost, "/v3/sessions/"+s.ID+"/messages", post, &rec); st != 200 || len(rec.Messages) != 2 {
		t.Fatalf("post: %d %+v", st, rec)
	}
	rows, err := p.Messages(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	seqOf := map[string]int64{}
	for _, m := range rows {
		got[*m.LocalID], seqOf[*m.LocalID] = m.Content.C, m.Seq
	}
	if len(rows) != 2 || got["r.1"] != "b25l" || got["r.2"] != "ZXZpbA==" {
		t.Fatalf("stored %+v", got)
	}

	p.Reset()
	if seqOf["r.2"] != 1 || seqOf["r.1"] != 2 {
		t.Fatalf("seqs %v: the attacker's row was not stored first", seqOf)
	}
	rc, err := p.Replay(ctx, s.ID, seqOf["r.1"], "r.9")
	if err != nil || rc.Seq != 3 || rc.LocalID != "r.9" {
		t.Fatalf("replay %+v %v", rc, err)
	}
	rows, _ = p.Messages(ctx, s.ID, 2)
	if len(rows) != 1 || rows[0].Content.C != "b25l" {
		t.Fatalf("replayed row %+v", rows)
	}

	p.Use(evilrelay.EditMessages(func(_ string, page []evilrelay.Message) []evilrelay.Message { return page[1:] }))
	var page struct{ Messages []evilrelay.Message }
	call(t, p.URL, acct.Token, http.MethodGet, "/v3/sessions/"+s.ID+"/messages", nil, &page)
	if len(page.Messages) != 2 || page.Messages[0].Seq != 2 {
		t.Fatalf("edited page %+v", page.Messages)
	}
	seen := p.Seen()
	if last := seen[len(seen)-1]; last.Method != http.MethodGet || last.Path != "/v3/sessions/"+s.ID+"/messages" || last.Status != 200 {
		t.Fatalf("last exchange %+v", last)
	}
}

// A dropped request closes the client's connection without an answer.
func TestDrop(t *testing.T) {
	r := servertest.Start(t)
	p := evilrelay.Start(t, r.URL, evilrelay.Drop(http.MethodGet, "/health"))
	if _, err := http.Get(p.URL + "/health"); err == nil {
		t.Fatal("a dropped request got an answer")
	}
	resp, err := http.Get(p.URL + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ready: %d", resp.StatusCode)
	}
}
