package relay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay/outbox"
)

func FuzzDecodeUpdate(f *testing.F) {
	f.Add([]byte(`{"id":"u","seq":3,"body":{"t":"new-message","sid":"s","message":{"id":"m","seq":1,"content":{"t":"encrypted","c":"YQ=="},"localId":"r.1","createdAt":1,"updatedAt":1}},"createdAt":1}`))
	f.Add([]byte(`{"body":{"t":"update-session","id":"s","metadata":{"value":"eA==","version":2},"agentState":{"value":null,"version":1}}}`))
	f.Add([]byte(`{"body":{"t":"new-message","sid":"s","message":null}}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		u, err := decodeUpdate([]any{v})
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if u.Body.T == "" || (u.Body.T == "new-message" && (u.Body.Message == nil || u.Body.Message.Seq <= 0)) {
			t.Fatalf("accepted %+v", u)
		}
	})
}

func FuzzDecodeCASReply(f *testing.F) {
	f.Add([]byte(`{"result":"success","version":3,"metadata":"eA=="}`))
	f.Add([]byte(`{"result":"version-mismatch","version":2,"metadata":null}`))
	f.Add([]byte(`{"result":"error","message":"nope"}`))
	f.Add([]byte(`{"result":"success","version":1.5}`))
	f.Add([]byte(`{"result":"success","version":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		res, ver, _, _, err := decodeCASReply([]any{v}, "metadata")
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		switch res {
		case "success", "version-mismatch":
			if ver < 0 {
				t.Fatalf("negative version %d", ver)
			}
		case "error":
		default:
			t.Fatalf("accepted result %q", res)
		}
	})
}

func FuzzSplitLocalID(f *testing.F) {
	for _, s := range []string{"msg_1.1", "a.b.12", ".1", "r.", "r.0", "r.01", "r.+1", "r.-1", "550e8400-e29b-41d4-a716-446655440000", "r.9223372036854775807", "r.9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		rec, v, ok := splitLocalID(id)
		if !ok {
			return
		}
		if v < 1 || rec == "" || outbox.LocalID(rec, v) != id {
			t.Fatalf("%q split into %q %d", id, rec, v)
		}
	})
}

func FuzzOpenPayload(f *testing.F) {
	var key [32]byte
	ci := crypto.NewDataKeyCipher(key)
	good, _ := ci.Seal([]byte(`{"a":1}`))
	notJSON, _ := ci.Seal([]byte(`{"a"`))
	f.Add(b64(good))
	f.Add(b64(notJSON))
	f.Add("")
	f.Add("!!!")
	f.Add("AA==")
	f.Fuzz(func(t *testing.T, s string) {
		plain, err := openPayload(ci, "message", 7, s)
		if err != nil {
			var de *DecryptError
			if !errors.As(err, &de) || !errors.Is(err, ErrDecrypt) || de.Seq != 7 {
				t.Fatalf("error %v is not a DecryptError", err)
			}
			return
		}
		if !json.Valid(plain) {
			t.Fatalf("invalid JSON accepted: %q", plain)
		}
	})
}

func FuzzDecodeSessionState(f *testing.F) {
	f.Add([]byte(`{"v":1,"account":"a","relay":"http://h","variant":"dataKey","metadata":"eA==","dataEncryptionKey":"AA==","sealedKey":"AA=="}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeSessionState(b)
		if err != nil {
			return
		}
		if st.V != 1 || st.Account == "" || st.Relay == "" || st.Metadata == "" {
			t.Fatalf("accepted %+v", st)
		}
	})
}

// fakeSocket answers Call with scripted replies; a nil reply never answers.
// It records each call's arguments and when it came.
type fakeSocket struct {
	mu      sync.Mutex
	replies [][]any
	calls   []map[string]any
	at      []time.Time
}

func (f *fakeSocket) On(string, func([]any, func(...any))) {}
func (f *fakeSocket) OnDisconnect(func(string))            {}
func (f *fakeSocket) Emit(string, ...any) error            { return nil }
func (f *fakeSocket) Connected() bool                      { return true }
func (f *fakeSocket) Close() error                         { return nil }
func (f *fakeSocket) Call(ctx context.Context, _ string, args ...any) ([]any, error) {
	f.mu.Lock()
	f.calls = append(f.calls, args[0].(map[string]any))
	f.at = append(f.at, time.Now())
	var r []any
	if len(f.replies) > 0 {
		r, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()
	if r == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return r, nil
}

func connectedConn(s Socket) *conn {
	c := &conn{}
	c.init()
	c.sock = s
	close(c.ready)
	return c
}

// A version mismatch adopts the relay's value and retries after a back-off
// (on the bubble's fake clock: 10-20 ms for the first retry).
func TestCompareAndSetRetriesOnMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var key [32]byte
		ci := crypto.NewDataKeyCipher(key)
		theirs, _ := ci.Seal([]byte(`{"n":41}`))
		fs := &fakeSocket{replies: [][]any{
			{map[string]any{"result": "version-mismatch", "version": float64(7), "metadata": b64(theirs)}},
			{map[string]any{"result": "success", "version": float64(8)}},
		}}
		var val json.RawMessage = json.RawMessage(`{"n":1}`)
		ver := int64(3)
		spec := casSpec{event: "update-metadata", idKey: "sid", id: "s1", valueKey: "metadata", cipher: ci,
			get: func() (json.RawMessage, int64) { return val, ver },
			set: func(v json.RawMessage, n int64) { val, ver = v, n }}
		var seen []string
		err := compareAndSet(context.Background(), connectedConn(fs), time.Second, spec, func(cur json.RawMessage) (json.RawMessage, error) {
			seen = append(seen, string(cur))
			var m struct{ N int }
			_ = json.Unmarshal(cur, &m)
			return json.Marshal(map[string]int{"n": m.N + 1})
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(val) != `{"n":42}` || ver != 8 {
			t.Fatalf("value %s v%d", val, ver)
		}
		if len(seen) != 2 || seen[0] != `{"n":1}` || seen[1] != `{"n":41}` {
			t.Fatalf("updater saw %v", seen)
		}
		if fs.calls[0]["expectedVersion"] != int64(3) || fs.calls[1]["expectedVersion"] != int64(7) || fs.calls[1]["sid"] != "s1" {
			t.Fatalf("calls %v", fs.calls)
		}
		if gap := fs.at[1].Sub(fs.at[0]); gap < 10*time.Millisecond || gap > 20*time.Millisecond {
			t.Fatalf("retried after %s, want the first back-off (10-20 ms)", gap)
		}
	})
}

// MaxCASAttempts mismatches give up with ErrVersionMismatch, each retry
// after a growing back-off; an error reply is final; a missing ack or
// connection ends at the ack timeout. All on the bubble's fake clock.
func TestCompareAndSetGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var key [32]byte
		ci := crypto.NewDataKeyCipher(key)
		mismatch := []any{map[string]any{"result": "version-mismatch", "version": float64(1), "metadata": nil}}
		var replies [][]any
		for range MaxCASAttempts {
			replies = append(replies, mismatch)
		}
		spec := func() casSpec {
			var v json.RawMessage
			var n int64
			return casSpec{event: "update-state", idKey: "sid", id: "s", valueKey: "agentState", nullable: true, cipher: ci,
				get: func() (json.RawMessage, int64) { return v, n }, set: func(x json.RawMessage, m int64) { v, n = x, m }}
		}
		set := func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
		fs := &fakeSocket{replies: replies}
		if err := compareAndSet(context.Background(), connectedConn(fs), time.Second, spec(), set); !errors.Is(err, ErrVersionMismatch) || len(fs.calls) != MaxCASAttempts {
			t.Fatalf("err %v after %d calls", err, len(fs.calls))
		}
		// Back-off between attempts: [d/2, d] with d doubling from 20 ms, capped at 1 s.
		for i, d := 1, 20*time.Millisecond; i < len(fs.at); i, d = i+1, min(2*d, time.Second) {
			if gap := fs.at[i].Sub(fs.at[i-1]); gap < d/2 || gap > d {
				t.Fatalf("attempt %d came %s after the previous one, want %s-%s", i+1, gap, d/2, d)
			}
		}
		fs = &fakeSocket{replies: [][]any{{map[string]any{"result": "error", "message": "Session not found"}}}}
		if err := compareAndSet(context.Background(), connectedConn(fs), time.Second, spec(), set); !errors.Is(err, ErrRejected) || len(fs.calls) != 1 {
			t.Fatalf("error reply: %v after %d calls", err, len(fs.calls))
		}
		// A relay that never acknowledges: an error at the ack timeout, not a hang.
		fs = &fakeSocket{replies: [][]any{nil}}
		start := time.Now()
		err := compareAndSet(context.Background(), connectedConn(fs), 200*time.Millisecond, spec(), set)
		if !errors.Is(err, ErrUnavailable) || time.Since(start) != 200*time.Millisecond {
			t.Fatalf("missing ack: %v after %s, want ErrUnavailable after 200ms", err, time.Since(start))
		}
		// No connection at all: the same.
		c := &conn{}
		c.init()
		start = time.Now()
		if err := compareAndSet(context.Background(), c, 100*time.Millisecond, spec(), set); !errors.Is(err, ErrUnavailable) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("not connected: %v after %s", err, time.Since(start))
		}
	})
}

func TestBackoffBounds(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for i, ms := range []int{100, 200, 400, 800, 1000, 1000} {
		hi := time.Duration(ms) * time.Millisecond
		d := b.Next()
		if d < hi/2 || d > hi {
			t.Fatalf("attempt %d: %s not in [%s, %s]", i, d, hi/2, hi)
		}
	}
	if b.Failures() != 6 {
		t.Fatalf("failures %d", b.Failures())
	}
	b.Reset()
	if d := b.Next(); d < 50*time.Millisecond || d > 100*time.Millisecond {
		t.Fatalf("after reset %s", d)
	}
}
