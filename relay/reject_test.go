package relay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/server/servertest"
)

// TestRejectedMessageIsKept: a version the relay refuses (larger than its
// request limit) is isolated from its batch, moved to the outbox's rejected
// rows with the relay's reason and counted; the versions around it are
// delivered.
func TestRejectedMessageIsKept(t *testing.T) {
	url := servertest.Start(t).URL
	creds := newAccount(t, url)
	cfg := testConfig(t, url, creds, t.TempDir())
	// The refused version is 9 MiB (12 MiB once sealed and encoded): under
	// -race on a loaded machine one attempt at it can take longer than the
	// other tests' 5 s.
	cfg.RequestTimeout = 30 * time.Second
	c := newTestClient(t, cfg)
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	ctx := context.Background()
	huge := `{"kind":"message","version":1,"info":{"id":"msg_big"},"parts":[{"text":"` + strings.Repeat("x", 9<<20) + `"}]}`
	for _, rec := range []string{"msg_a", "msg_big", "msg_b"} {
		if _, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) {
			if rec == "msg_big" {
				return []byte(huge), nil
			}
			return envelope(rec, v), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := s.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readAll(t, c.API(), s.ID(), s.Cipher()), map[string]int64{"msg_a": 1, "msg_b": 1})
	rej, err := c.Outbox().RejectedItems(ctx, s.Tag())
	if err != nil || len(rej) != 1 || rej[0].LocalID != "msg_big.1" || !strings.Contains(rej[0].Reason, "HTTP 413") {
		t.Fatalf("rejected %v %v", rej, err)
	}
	if st := s.Stats(); st.Rejected != 1 || st.Sent != 2 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func testRefusedTokenFailsOpen(t *testing.T, url string) {
	creds := newAccount(t, url)
	bad := *creds
	bad.Token = creds.Token + "x"
	c := newTestClient(t, testConfig(t, url, &bad, t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.OpenSession(ctx, SessionOptions{Tag: newTag(t)})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v", err)
	}
	// The socket refuses it too, with the relay's reason.
	_, err = SIODialer(2*time.Second)(ctx, url, map[string]any{"token": bad.Token, "clientType": "user-scoped"})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("socket err = %v", err)
	}
}
