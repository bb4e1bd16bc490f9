package server_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// streamEnds waits (10 s at most) until the stream read by items ends.
func streamEnds(t *testing.T, items <-chan streamItem) {
	t.Helper()
	for {
		it := nextItem(t, items)
		if it.err != nil {
			if it.err != io.EOF && it.err != io.ErrUnexpectedEOF {
				t.Logf("stream ended with %v", it.err)
			}
			return
		}
	}
}

// A message stream opened before POST /v1/auth/revoke ends promptly after
// it (its token no longer is one), and opening it again is refused.
func TestStreamEndsOnRevoke(t *testing.T) {
	r := servertest.Start(t)
	st := newStreamTest(t, r)
	sid := st.session("s")
	other := newStreamTest(t, r)
	otherSid := other.session("o")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := st.open(ctx, sid, "", "")
	eq(t, "stream", resp.StatusCode, 200)
	_, items := readStream(resp.Body)
	otherResp := other.open(ctx, otherSid, "", "")
	_, otherItems := readStream(otherResp.Body)
	st.post(sid, 0, 1)
	if it := nextData(t, items); it.err != nil || it.frame.ID != "1" {
		t.Fatalf("first row: %+v", it)
	}
	server.WaitUntil(t, 5*time.Second, "both streams open", func() bool { return r.Server.StreamStats().Open == 2 })

	code, b := st.json("POST", "/v1/auth/revoke", nil)
	eq(t, "revoke", []any{code, string(b)}, []any{200, `{"disconnected":0,"generation":1,"success":true}`})
	streamEnds(t, items)
	code, b = st.json("GET", "/v3/sessions/"+sid+"/messages/stream", nil)
	eq(t, "reopen", []any{code, string(b)}, []any{401, `{"error":"Invalid token"}`})
	// Another account's stream goes on.
	eq(t, "other streams", r.Server.StreamStats().Open, int64(1))
	other.post(otherSid, 0, 1)
	if it := nextData(t, otherItems); it.err != nil || it.frame.ID != "1" {
		t.Fatalf("the other account's stream: %+v", it)
	}
}
