package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/happy-dev/happy/server/store"
)

// Fill writes a bit of everything a store holds into s (two accounts,
// sessions with messages, states and a deleted one, machines, a pairing
// request, push tokens, Web Push subscriptions, usage reports, attachments, opaque strings with NUL
// characters) and returns the first account's id and its first session's.
func Fill(t testing.TB, s store.Store) (accountID, sessionID string) {
	t.Helper()
	a, err := s.UpsertAccount(ctx, "pk-a"+weird, 1)
	noErr(t, "account", err)
	b, err := s.UpsertAccount(ctx, "pk-b", 2)
	noErr(t, "account", err)
	x, _, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "tag" + weird, Metadata: "meta" + weird, DataEncryptionKey: ptr("dek")}, 3)
	noErr(t, "session", err)
	for i := range 7 {
		batch := make([]store.NewMessage, 3)
		for j := range batch {
			batch[j] = store.NewMessage{LocalID: fmt.Sprintf("l%d-%d", i, j), Content: fmt.Sprintf("c%d-%d%s", i, j, weird)}
		}
		_, err := s.AppendMessages(ctx, a.ID, x.ID, batch, int64(10+i))
		noErr(t, "append", err)
	}
	_, err = s.UpdateSessionMetadata(ctx, a.ID, x.ID, "meta2", 0, 20)
	noErr(t, "metadata", err)
	_, err = s.UpdateSessionAgentState(ctx, a.ID, x.ID, ptr("state"+weird), 0, 21)
	noErr(t, "state", err)
	y, _, err := s.GetOrCreateSession(ctx, b.ID, store.NewSession{Tag: "", Metadata: ""}, 4)
	noErr(t, "session", err)
	_, err = s.AppendMessages(ctx, b.ID, y.ID, []store.NewMessage{{LocalID: "only", Content: ""}}, 22)
	noErr(t, "append", err)
	noErr(t, "archive", s.SetSessionActive(ctx, b.ID, y.ID, false, 23))
	gone, _, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "gone", Metadata: "m"}, 5)
	noErr(t, "session", err)
	noErr(t, "attachment", s.PutAttachment(ctx, a.ID, gone.ID, "g.enc", []byte("g"), 6))
	noErr(t, "delete", s.DeleteSession(ctx, a.ID, gone.ID))
	_, err = s.NextUpdateSeqs(ctx, a.ID, 5)
	noErr(t, "update seqs", err)
	_, _, err = s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "m1" + weird, Metadata: "mm", DaemonState: ptr("ds"), DataEncryptionKey: ptr("mk")}, 30)
	noErr(t, "machine", err)
	_, _, err = s.GetOrCreateMachine(ctx, b.ID, store.NewMachine{ID: "m1", Metadata: "mb"}, 31)
	noErr(t, "machine", err)
	_, err = s.UpdateMachineDaemonState(ctx, a.ID, "m1"+weird, "ds2", 1, 32)
	noErr(t, "daemon state", err)
	_, err = s.UpsertAuthRequest(ctx, "box1", true, 40)
	noErr(t, "auth request", err)
	noErr(t, "answer", s.AnswerAuthRequest(ctx, "box1", "resp", a.ID))
	_, err = s.UpsertAuthRequest(ctx, "box2", false, 41)
	noErr(t, "auth request", err)
	_, err = s.RevokeTokens(ctx, a.ID, 45)
	noErr(t, "revoke tokens", err)
	noErr(t, "used challenge", s.UseChallenge(ctx, "digest-b", 46, store.KeepForever))
	noErr(t, "used challenge", s.UseChallenge(ctx, "digest-a", 47, 1000))
	noErr(t, "token", s.AddPushToken(ctx, a.ID, "tok"+weird, 50))
	noErr(t, "token", s.AddPushToken(ctx, b.ID, "tok", 51))
	noErr(t, "web push", s.AddWebPushSubscription(ctx, a.ID, store.WebPushSubscription{Endpoint: "https://push.example/a" + weird, P256dh: "ka", Auth: "aa"}, 52))
	noErr(t, "web push", s.AddWebPushSubscription(ctx, b.ID, store.WebPushSubscription{Endpoint: "https://push.example/b", P256dh: "kb", Auth: "ab"}, 53))
	_, err = s.UpsertUsageReport(ctx, a.ID, x.ID, "k", `{"tokens":{"total":3}}`, 60)
	noErr(t, "usage", err)
	_, err = s.UpsertUsageReport(ctx, a.ID, "", "k", "d", 61)
	noErr(t, "usage", err)
	noErr(t, "attachment", s.PutAttachment(ctx, a.ID, x.ID, "a.enc", []byte{0, 1, 2, 0xff}, 70))
	noErr(t, "attachment", s.PutAttachment(ctx, a.ID, x.ID, "b.enc", []byte{}, 71))
	noErr(t, "attachment", s.PutAttachment(ctx, b.ID, y.ID, "c.enc", []byte("c"), 72))
	return a.ID, x.ID
}

// Dump reads the whole content of c, table by table.
func Dump(t testing.TB, c store.Copier) map[string][][]any {
	t.Helper()
	sn, err := c.Snapshot(ctx)
	noErr(t, "snapshot", err)
	defer func() { _ = sn.Close() }()
	out := map[string][][]any{}
	for _, tb := range store.Tables {
		rows := [][]any{}
		for row, err := range sn.Rows(ctx, tb) {
			noErr(t, "read "+tb.Name, err)
			rows = append(rows, row)
		}
		n, err := sn.Count(ctx, tb)
		noErr(t, "count "+tb.Name, err)
		eq(t, tb.Name+": count and rows", n, int64(len(rows)))
		out[tb.Name] = rows
	}
	return out
}

func copier(t testing.TB, s store.Store) store.Copier {
	t.Helper()
	c, ok := s.(store.Copier)
	if !ok {
		t.Fatalf("%T is not a store.Copier", s)
	}
	return c
}

// RunCopy copies a filled store of backend src into an empty one of dst and
// checks that the target holds the same rows and carries on where the
// source stopped (seqs, tags, localIds, attachments); that a non-empty
// target is refused; and that replace overwrites it.
func RunCopy(t *testing.T, src, dst Backend) {
	from := src.open(t)
	acct, sid := Fill(t, from)
	to := dst.open(t)
	counts, err := store.Copy(ctx, copier(t, to), copier(t, from), false)
	noErr(t, "copy", err)
	want := Dump(t, copier(t, from))
	if len(want["session_messages"]) != 22 || len(want["attachments"]) != 3 || len(want["accounts"]) != 2 {
		t.Fatalf("the fixture holds %d messages, %d attachments, %d accounts", len(want["session_messages"]), len(want["attachments"]), len(want["accounts"]))
	}
	var wantCounts []store.TableCopy
	for _, tb := range store.Tables {
		wantCounts = append(wantCounts, store.TableCopy{Table: tb.Name, Rows: int64(len(want[tb.Name]))})
	}
	eq(t, "copy counts", counts, wantCounts)
	got := Dump(t, copier(t, to))
	for _, tb := range store.Tables {
		eq(t, "copied "+tb.Name, got[tb.Name], want[tb.Name])
	}

	// The copy goes on where the source stopped.
	a, err := to.UpsertAccount(ctx, "pk-a"+weird, 100)
	noErr(t, "account", err)
	eq(t, "same account", a.ID, acct)
	next, err := to.NextUpdateSeqs(ctx, acct, 1)
	noErr(t, "update seq", err)
	eq(t, "update seqs continue", next, int64(7*3+5+1))
	x, created, err := to.GetOrCreateSession(ctx, acct, store.NewSession{Tag: "tag" + weird, Metadata: "x"}, 100)
	noErr(t, "session", err)
	eq(t, "same session by tag", []any{x.ID, created, x.Seq, x.MetadataVersion, *x.AgentState}, []any{sid, false, int64(21), int64(1), "state" + weird})
	res, err := to.AppendMessages(ctx, acct, sid, []store.NewMessage{{LocalID: "l0-0", Content: "again"}, {LocalID: "new", Content: "n"}}, 101)
	noErr(t, "append", err)
	eq(t, "known localId, next seq", []any{res.Rows[0].Seq, len(res.Created), res.Created[0].Seq}, []any{int64(1), 1, int64(22)})
	blob, err := to.Attachment(ctx, acct, sid, "a.enc")
	noErr(t, "attachment", err)
	eq(t, "attachment", blob, []byte{0, 1, 2, 0xff})

	_, err = store.Copy(ctx, copier(t, to), copier(t, from), false)
	if !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("copy into a non-empty target: %v, want ErrNotEmpty", err)
	}
	_, err = store.Copy(ctx, copier(t, to), copier(t, from), true)
	noErr(t, "copy with replace", err)
	got = Dump(t, copier(t, to))
	for _, tb := range store.Tables {
		eq(t, "replaced "+tb.Name, got[tb.Name], want[tb.Name])
	}
	_, err = to.Attachment(ctx, acct, sid, "a.enc")
	noErr(t, "attachment after replace", err)
}
