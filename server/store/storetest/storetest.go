// Package storetest is the conformance suite of store.Store: every backend
// runs the same cases (Run) and must give the same answers, value for
// value, including nil against empty slices, NUL characters in opaque
// strings and bytewise ordering of client-chosen ids. RunConcurrency checks
// seq allocation and compare-and-set under concurrent writers spread over
// several stores on one database (several relay instances); RunCopy checks
// store.Copy between two backends; BenchmarkIngest measures message ingest.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/happy-dev/happy/server/store"
)

// Backend describes a store implementation to the suite.
type Backend struct {
	// NewDB creates an empty database for one test and returns a function
	// that opens a store on it; each call opens one more store (another
	// relay instance) on that same database. Stores are closed when the
	// test ends.
	NewDB func(t testing.TB) func(t testing.TB) store.Store
	// Instances is how many stores share one database in RunConcurrency:
	// 1 for a backend that one relay process owns (SQLite), more for a
	// shared server (PostgreSQL).
	Instances int
}

// open returns one store on a fresh database.
func (b Backend) open(t testing.TB) store.Store {
	return b.NewDB(t)(t)
}

// Run runs the single-store cases.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Accounts", testAccounts},
		{"UpdateSeqs", testUpdateSeqs},
		{"AuthRequests", testAuthRequests},
		{"AuthRequestLifetime", testAuthRequestLifetime},
		{"TokenRevocation", testTokenRevocation},
		{"AuthChallenges", testAuthChallenges},
		{"GetOrCreateSession", testGetOrCreateSession},
		{"SessionLists", testSessionLists},
		{"SessionCompareAndSet", testSessionCAS},
		{"DeleteSession", testDeleteSession},
		{"AppendMessages", testAppendMessages},
		{"MessagePages", testMessagePages},
		{"RecentMessages", testRecentMessages},
		{"Machines", testMachines},
		{"Expire", testExpire},
		{"PushTokens", testPushTokens},
		{"WebPushSubscriptions", testWebPushSubscriptions},
		{"UsageReports", testUsageReports},
		{"Attachments", testAttachments},
		{"OpaqueStringsByteForByte", testOpaqueStrings},
		{"BytewiseOrder", testBytewiseOrder},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, b.open(t)) })
	}
}

var ctx = context.Background()

// show renders v for a failure message (pointers followed).
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func eq(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

func noErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func isNotFound(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: error %v, want store.ErrNotFound", what, err)
	}
}

// isOtherErr wants an error that is not ErrNotFound.
func isOtherErr(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: error %v, want a non-nil error other than ErrNotFound", what, err)
	}
}

func ptr(s string) *string { return &s }

func account(t testing.TB, s store.Store, pk string) store.Account {
	t.Helper()
	a, err := s.UpsertAccount(ctx, pk, 1)
	noErr(t, "upsert account", err)
	return a
}

func session(t testing.TB, s store.Store, acct, tag string, now int64) store.Session {
	t.Helper()
	x, _, err := s.GetOrCreateSession(ctx, acct, store.NewSession{Tag: tag, Metadata: "meta-" + tag}, now)
	noErr(t, "create session", err)
	return x
}

func isID(id string) bool {
	if len(id) != 25 || id[0] != 'c' {
		return false
	}
	for _, c := range id[1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

func testAccounts(t *testing.T, s store.Store) {
	a, err := s.UpsertAccount(ctx, "pk1", 10)
	noErr(t, "create", err)
	if !isID(a.ID) {
		t.Fatalf("account id %q is not a 25-character cuid", a.ID)
	}
	eq(t, "created", a, store.Account{ID: a.ID, PublicKey: "pk1", CreatedAt: 10, UpdatedAt: 10})
	again, err := s.UpsertAccount(ctx, "pk1", 20)
	noErr(t, "again", err)
	eq(t, "same key again", again, store.Account{ID: a.ID, PublicKey: "pk1", CreatedAt: 10, UpdatedAt: 20})
	b, err := s.UpsertAccount(ctx, "pk2", 30)
	noErr(t, "other", err)
	if b.ID == a.ID {
		t.Fatal("two keys share an account id")
	}
}

func testUpdateSeqs(t *testing.T, s store.Store) {
	a := account(t, s, "pk")
	_, err := s.NextUpdateSeqs(ctx, a.ID, 0)
	isOtherErr(t, "n = 0", err)
	_, err = s.NextUpdateSeqs(ctx, a.ID, -1)
	isOtherErr(t, "n = -1", err)
	_, err = s.NextUpdateSeqs(ctx, "nope", 1)
	isNotFound(t, "unknown account", err)
	first, err := s.NextUpdateSeqs(ctx, a.ID, 3)
	noErr(t, "first", err)
	eq(t, "first of 3", first, int64(1))
	first, err = s.NextUpdateSeqs(ctx, a.ID, 1)
	noErr(t, "next", err)
	eq(t, "next", first, int64(4))
	b := account(t, s, "pk-b")
	first, err = s.NextUpdateSeqs(ctx, b.ID, 2)
	noErr(t, "other account", err)
	eq(t, "another account counts on its own", first, int64(1))
}

func testAuthRequests(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	_, err := s.AuthRequest(ctx, "box")
	isNotFound(t, "missing request", err)
	isNotFound(t, "answer missing", s.AnswerAuthRequest(ctx, "box", "r", a.ID))
	r, err := s.UpsertAuthRequest(ctx, "box", true, 5)
	noErr(t, "create", err)
	if !isID(r.ID) {
		t.Fatalf("request id %q", r.ID)
	}
	want := store.AuthRequest{ID: r.ID, PublicKey: "box", SupportsV2: true, CreatedAt: 5}
	eq(t, "created", r, want)
	again, err := s.UpsertAuthRequest(ctx, "box", false, 6)
	noErr(t, "again", err)
	eq(t, "upsert keeps the first request", again, want)
	got, err := s.AuthRequest(ctx, "box")
	noErr(t, "read", err)
	eq(t, "read pending", got, want)
	noErr(t, "answer", s.AnswerAuthRequest(ctx, "box", "resp1", a.ID))
	want.Response, want.ResponseAccountID = ptr("resp1"), ptr(a.ID)
	got, err = s.AuthRequest(ctx, "box")
	noErr(t, "read", err)
	eq(t, "answered", got, want)
	if err := s.AnswerAuthRequest(ctx, "box", "resp2", b.ID); !errors.Is(err, store.ErrAnswered) {
		t.Fatalf("answer twice: %v, want ErrAnswered", err)
	}
	got, err = s.AuthRequest(ctx, "box")
	noErr(t, "read", err)
	eq(t, "the first answer stays", got, want)
	v1, err := s.UpsertAuthRequest(ctx, "box-v1", false, 7)
	noErr(t, "create v1", err)
	eq(t, "v1 request", v1, store.AuthRequest{ID: v1.ID, PublicKey: "box-v1", CreatedAt: 7})
	isOtherErr(t, "answer naming no account", s.AnswerAuthRequest(ctx, "box-v1", "r", "no-such-account"))
}

func testAuthRequestLifetime(t *testing.T, s store.Store) {
	a := account(t, s, "pk-a")
	_, err := s.UpsertAuthRequest(ctx, "box-old", false, 10)
	noErr(t, "create old", err)
	mid, err := s.UpsertAuthRequest(ctx, "box-mid", true, 20)
	noErr(t, "create mid", err)
	late, err := s.UpsertAuthRequest(ctx, "box-late", false, 30)
	noErr(t, "create late", err)
	noErr(t, "answer mid", s.AnswerAuthRequest(ctx, "box-mid", "resp", a.ID))
	mid.Response, mid.ResponseAccountID = ptr("resp"), ptr(a.ID)

	list, err := s.AuthRequestsSince(ctx, 20, 10)
	noErr(t, "since 20", err)
	eq(t, "requests since 20, newest first", list, []store.AuthRequest{late, mid})
	list, err = s.AuthRequestsSince(ctx, 0, 1)
	noErr(t, "limit 1", err)
	eq(t, "limit 1: the newest", list, []store.AuthRequest{late})
	list, err = s.AuthRequestsSince(ctx, 31, 10)
	noErr(t, "since 31", err)
	eq(t, "none since 31", len(list), 0)

	got, err := s.DeleteAuthRequest(ctx, mid.ID)
	noErr(t, "take mid", err)
	eq(t, "the taken request", got, mid)
	_, err = s.DeleteAuthRequest(ctx, mid.ID)
	isNotFound(t, "take mid twice", err)
	_, err = s.AuthRequest(ctx, "box-mid")
	isNotFound(t, "mid is gone", err)
	again, err := s.UpsertAuthRequest(ctx, "box-mid", false, 40)
	noErr(t, "new request of the same key", err)
	if again.ID == mid.ID || again.Response != nil || again.CreatedAt != 40 {
		t.Fatalf("new request after delete = %s", show(again))
	}
	_, err = s.DeleteAuthRequest(ctx, mid.ID)
	isNotFound(t, "the old id does not remove the new request", err)

	n, err := s.DeleteAuthRequestsBefore(ctx, 30)
	noErr(t, "delete before 30", err)
	eq(t, "deleted before 30", n, int64(1))
	_, err = s.AuthRequest(ctx, "box-old")
	isNotFound(t, "old is gone", err)
	_, err = s.AuthRequest(ctx, "box-late")
	noErr(t, "late stays", err)
}

func testTokenRevocation(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	gen, err := s.TokenGeneration(ctx, a.ID)
	noErr(t, "generation", err)
	eq(t, "a new account's generation", gen, int64(0))
	gen, err = s.RevokeTokens(ctx, a.ID, 100)
	noErr(t, "revoke", err)
	eq(t, "first revocation", gen, int64(1))
	gen, err = s.RevokeTokens(ctx, a.ID, 200)
	noErr(t, "revoke again", err)
	eq(t, "second revocation", gen, int64(2))
	gen, err = s.TokenGeneration(ctx, a.ID)
	noErr(t, "generation", err)
	eq(t, "generation after two revocations", gen, int64(2))
	gen, err = s.TokenGeneration(ctx, b.ID)
	noErr(t, "other generation", err)
	eq(t, "another account is untouched", gen, int64(0))
	_, err = s.RevokeTokens(ctx, "no-such-account", 300)
	isNotFound(t, "revoke unknown account", err)
}

// testAuthChallenges: a challenge is used once, whenever it comes back;
// pruning removes only the rows kept until before the cutoff; accounts are
// found by key.
func testAuthChallenges(t *testing.T, s store.Store) {
	noErr(t, "first use", s.UseChallenge(ctx, "d-plain", 100, store.KeepForever))
	if err := s.UseChallenge(ctx, "d-plain", 200, store.KeepForever); !errors.Is(err, store.ErrChallengeUsed) {
		t.Fatalf("second use: %v, want store.ErrChallengeUsed", err)
	}
	noErr(t, "timed use", s.UseChallenge(ctx, "d-timed", 100, 1000))
	noErr(t, "later timed use", s.UseChallenge(ctx, "d-later", 100, 5000))
	if err := s.UseChallenge(ctx, "d-timed", 900, 1000); !errors.Is(err, store.ErrChallengeUsed) {
		t.Fatalf("timed reuse: %v, want store.ErrChallengeUsed", err)
	}
	n, err := s.DeleteChallengesBefore(ctx, 1001)
	noErr(t, "prune", err)
	eq(t, "pruned", n, int64(1))
	noErr(t, "a pruned digest is new again", s.UseChallenge(ctx, "d-timed", 2000, 3000))
	for _, d := range []string{"d-plain", "d-later"} {
		if err := s.UseChallenge(ctx, d, 2000, store.KeepForever); !errors.Is(err, store.ErrChallengeUsed) {
			t.Fatalf("%s after the prune: %v, want store.ErrChallengeUsed", d, err)
		}
	}
	n, err = s.DeleteChallengesBefore(ctx, store.KeepForever)
	noErr(t, "prune all timed", err)
	eq(t, "pruned the timed ones", n, int64(2))

	a := account(t, s, "pk-a")
	got, err := s.AccountByKey(ctx, "pk-a")
	noErr(t, "account by key", err)
	eq(t, "account by key", got, a)
	_, err = s.AccountByKey(ctx, "pk-none")
	isNotFound(t, "unknown key", err)
}

func testGetOrCreateSession(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x, created, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t1", Metadata: "m1", DataEncryptionKey: ptr("key")}, 100)
	noErr(t, "create", err)
	if !created || !isID(x.ID) {
		t.Fatalf("created %v, id %q", created, x.ID)
	}
	want := store.Session{ID: x.ID, AccountID: a.ID, Tag: "t1", Metadata: "m1", DataEncryptionKey: ptr("key"), Active: true, ActiveAt: 100, CreatedAt: 100, UpdatedAt: 100}
	eq(t, "created", x, want)
	again, created, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t1", Metadata: "other", DataEncryptionKey: nil}, 200)
	noErr(t, "again", err)
	eq(t, "created again", created, false)
	eq(t, "existing tag unchanged", again, want)
	got, err := s.Session(ctx, a.ID, x.ID)
	noErr(t, "read", err)
	eq(t, "read", got, want)
	_, err = s.Session(ctx, b.ID, x.ID)
	isNotFound(t, "other account's session", err)
	_, err = s.Session(ctx, a.ID, "nope")
	isNotFound(t, "missing session", err)
	y, created, err := s.GetOrCreateSession(ctx, b.ID, store.NewSession{Tag: "t1", Metadata: "mb"}, 300)
	noErr(t, "same tag, other account", err)
	eq(t, "other account's tag is its own", created, true)
	eq(t, "no key is null", y, store.Session{ID: y.ID, AccountID: b.ID, Tag: "t1", Metadata: "mb", Active: true, ActiveAt: 300, CreatedAt: 300, UpdatedAt: 300})
	z, _, err := s.GetOrCreateSession(ctx, b.ID, store.NewSession{Tag: "", Metadata: "", DataEncryptionKey: ptr("")}, 400)
	noErr(t, "empty strings", err)
	eq(t, "empty strings are not null", z, store.Session{ID: z.ID, AccountID: b.ID, Tag: "", Metadata: "", DataEncryptionKey: ptr(""), Active: true, ActiveAt: 400, CreatedAt: 400, UpdatedAt: 400})
	_, _, err = s.GetOrCreateSession(ctx, "no-such-account", store.NewSession{Tag: "t"}, 1)
	isOtherErr(t, "unknown account", err)
}

func ids(list []store.Session) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = x.ID
	}
	return out
}

func testSessionLists(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	eq(t, "no sessions", mustSessions(t, s, a.ID, 10), []store.Session{})
	s1 := session(t, s, a.ID, "t1", 100)
	s2 := session(t, s, a.ID, "t2", 150)
	s3 := session(t, s, a.ID, "t3", 120)
	session(t, s, b.ID, "tb", 500)
	eq(t, "most recently updated first", ids(mustSessions(t, s, a.ID, 10)), []string{s2.ID, s3.ID, s1.ID})
	eq(t, "limit", ids(mustSessions(t, s, a.ID, 2)), []string{s2.ID, s3.ID})
	eq(t, "limit 0", mustSessions(t, s, a.ID, 0), []store.Session{})
	eq(t, "negative limit is none", ids(mustSessions(t, s, a.ID, -1)), []string{s2.ID, s3.ID, s1.ID})
	full := mustSessions(t, s, a.ID, 1)
	eq(t, "full rows", full, []store.Session{s2})
	// A message batch makes its session the most recently updated.
	_, err := s.AppendMessages(ctx, a.ID, s1.ID, []store.NewMessage{{LocalID: "l", Content: "c"}}, 160)
	noErr(t, "append", err)
	eq(t, "after a message", ids(mustSessions(t, s, a.ID, 10)), []string{s1.ID, s2.ID, s3.ID})

	noErr(t, "archive s3", s.SetSessionActive(ctx, a.ID, s3.ID, false, 130))
	act, err := s.ActiveSessions(ctx, a.ID, 0, 10)
	noErr(t, "active", err)
	eq(t, "active, most recent activity first", ids(act), []string{s2.ID, s1.ID})
	act, err = s.ActiveSessions(ctx, a.ID, 100, 10)
	noErr(t, "active since", err)
	eq(t, "active after 100", ids(act), []string{s2.ID})
	act, err = s.ActiveSessions(ctx, a.ID, 0, 1)
	noErr(t, "active limit", err)
	eq(t, "active limit", ids(act), []string{s2.ID})
	act, err = s.ActiveSessions(ctx, a.ID, 1000, 10)
	noErr(t, "none active", err)
	eq(t, "none active", act, []store.Session{})
	got, err := s.Session(ctx, a.ID, s3.ID)
	noErr(t, "read", err)
	eq(t, "archived", []any{got.Active, got.ActiveAt, got.UpdatedAt}, []any{false, int64(130), int64(120)})
	noErr(t, "keep-alive", s.SetSessionActive(ctx, a.ID, s3.ID, true, 900))
	act, err = s.ActiveSessions(ctx, a.ID, 0, 10)
	noErr(t, "active", err)
	eq(t, "after keep-alive", ids(act), []string{s3.ID, s2.ID, s1.ID})
	isNotFound(t, "activity of another account's session", s.SetSessionActive(ctx, b.ID, s1.ID, true, 1))
	isNotFound(t, "activity of a missing session", s.SetSessionActive(ctx, a.ID, "nope", true, 1))
}

func mustSessions(t testing.TB, s store.Store, acct string, n int) []store.Session {
	t.Helper()
	list, err := s.Sessions(ctx, acct, n)
	noErr(t, "list sessions", err)
	return list
}

func testSessionCAS(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x := session(t, s, a.ID, "t", 1)
	r, err := s.UpdateSessionMetadata(ctx, a.ID, x.ID, "m1", 0, 2)
	noErr(t, "cas", err)
	eq(t, "metadata set", r, store.CAS{OK: true, Version: 1, Value: ptr("m1")})
	r, err = s.UpdateSessionMetadata(ctx, a.ID, x.ID, "m2", 0, 3)
	noErr(t, "cas", err)
	eq(t, "metadata mismatch", r, store.CAS{OK: false, Version: 1, Value: ptr("m1")})
	r, err = s.UpdateSessionAgentState(ctx, a.ID, x.ID, ptr("st"), 0, 4)
	noErr(t, "cas", err)
	eq(t, "state set", r, store.CAS{OK: true, Version: 1, Value: ptr("st")})
	r, err = s.UpdateSessionAgentState(ctx, a.ID, x.ID, nil, 1, 5)
	noErr(t, "cas", err)
	eq(t, "state set to null", r, store.CAS{OK: true, Version: 2, Value: nil})
	r, err = s.UpdateSessionAgentState(ctx, a.ID, x.ID, ptr("late"), 1, 6)
	noErr(t, "cas", err)
	eq(t, "state mismatch shows null", r, store.CAS{OK: false, Version: 2, Value: nil})
	r, err = s.UpdateSessionAgentState(ctx, a.ID, x.ID, ptr(""), 2, 7)
	noErr(t, "cas", err)
	eq(t, "empty state is not null", r, store.CAS{OK: true, Version: 3, Value: ptr("")})
	got, err := s.Session(ctx, a.ID, x.ID)
	noErr(t, "read", err)
	eq(t, "after the writes", got, store.Session{ID: x.ID, AccountID: a.ID, Tag: "t", Metadata: "m1", MetadataVersion: 1, AgentState: ptr(""), AgentStateVersion: 3, Active: true, ActiveAt: 1, CreatedAt: 1, UpdatedAt: 7})
	_, err = s.UpdateSessionMetadata(ctx, b.ID, x.ID, "m", 1, 8)
	isNotFound(t, "other account's metadata", err)
	_, err = s.UpdateSessionAgentState(ctx, b.ID, x.ID, nil, 3, 8)
	isNotFound(t, "other account's state", err)
	_, err = s.UpdateSessionMetadata(ctx, a.ID, "nope", "m", 0, 8)
	isNotFound(t, "missing session", err)
}

func testDeleteSession(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x := session(t, s, a.ID, "t", 1)
	keep := session(t, s, a.ID, "keep", 1)
	_, err := s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "l1", Content: "c1"}}, 2)
	noErr(t, "append", err)
	_, err = s.AppendMessages(ctx, a.ID, keep.ID, []store.NewMessage{{LocalID: "l1", Content: "k1"}}, 2)
	noErr(t, "append", err)
	u, err := s.UpsertUsageReport(ctx, a.ID, x.ID, "k", "d", 3)
	noErr(t, "usage", err)
	uk, err := s.UpsertUsageReport(ctx, a.ID, keep.ID, "k", "d", 3)
	noErr(t, "usage", err)
	noErr(t, "attachment", s.PutAttachment(ctx, a.ID, x.ID, "f.enc", []byte("blob"), 3))
	noErr(t, "attachment", s.PutAttachment(ctx, a.ID, keep.ID, "f.enc", []byte("kept"), 3))

	isNotFound(t, "delete by another account", s.DeleteSession(ctx, b.ID, x.ID))
	noErr(t, "delete", s.DeleteSession(ctx, a.ID, x.ID))
	_, err = s.Session(ctx, a.ID, x.ID)
	isNotFound(t, "read deleted", err)
	_, _, err = s.Messages(ctx, a.ID, x.ID, store.Page{Limit: 10})
	isNotFound(t, "messages of deleted", err)
	_, err = s.Attachment(ctx, a.ID, x.ID, "f.enc")
	isNotFound(t, "attachment of deleted", err)
	isNotFound(t, "delete twice", s.DeleteSession(ctx, a.ID, x.ID))
	u2, err := s.UpsertUsageReport(ctx, a.ID, x.ID, "k", "d2", 9)
	noErr(t, "usage again", err)
	if u2.ID == u.ID || u2.CreatedAt != 9 {
		t.Fatalf("the usage report of the deleted session survived: %+v (was %+v)", u2, u)
	}
	uk2, err := s.UpsertUsageReport(ctx, a.ID, keep.ID, "k", "d2", 9)
	noErr(t, "usage kept", err)
	eq(t, "other session's usage report kept", []any{uk2.ID, uk2.CreatedAt}, []any{uk.ID, int64(3)})
	msgs, _, err := s.Messages(ctx, a.ID, keep.ID, store.Page{Limit: 10})
	noErr(t, "kept messages", err)
	eq(t, "other session's messages kept", len(msgs), 1)
	blob, err := s.Attachment(ctx, a.ID, keep.ID, "f.enc")
	noErr(t, "kept attachment", err)
	eq(t, "other session's attachment kept", blob, []byte("kept"))
	y, created, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t", Metadata: "new"}, 10)
	noErr(t, "tag again", err)
	if !created || y.ID == x.ID {
		t.Fatalf("the tag of a deleted session gave %+v created %v", y, created)
	}
	_, err = s.Attachment(ctx, a.ID, y.ID, "f.enc")
	isNotFound(t, "new session of the tag has no attachment", err)
}

// blank is m as AppendResult.Rows holds it: without content.
func blank(m store.Message) store.Message {
	m.Content = ""
	return m
}

func testAppendMessages(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x := session(t, s, a.ID, "t", 1)
	res, err := s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "x", Content: "1"}, {LocalID: "y", Content: "2"}, {LocalID: "x", Content: "dup"}}, 5)
	noErr(t, "first batch", err)
	if len(res.Created) != 2 || !isID(res.Created[0].ID) || !isID(res.Created[1].ID) {
		t.Fatalf("first batch: %s", show(res))
	}
	m1 := store.Message{ID: res.Created[0].ID, SessionID: x.ID, Seq: 1, LocalID: ptr("x"), Content: "1", CreatedAt: 5, UpdatedAt: 5}
	m2 := store.Message{ID: res.Created[1].ID, SessionID: x.ID, Seq: 2, LocalID: ptr("y"), Content: "2", CreatedAt: 5, UpdatedAt: 5}
	eq(t, "first batch", res, store.AppendResult{Rows: []store.Message{blank(m1), blank(m2)}, Created: []store.Message{m1, m2}, FirstUpdateSeq: 1})

	res, err = s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "z", Content: "3"}, {LocalID: "x", Content: "changed"}}, 6)
	noErr(t, "second batch", err)
	if len(res.Created) != 1 {
		t.Fatalf("second batch: %s", show(res))
	}
	m3 := store.Message{ID: res.Created[0].ID, SessionID: x.ID, Seq: 3, LocalID: ptr("z"), Content: "3", CreatedAt: 6, UpdatedAt: 6}
	eq(t, "second batch: an existing localId keeps its row", res, store.AppendResult{Rows: []store.Message{blank(m1), blank(m3)}, Created: []store.Message{m3}, FirstUpdateSeq: 3})

	res, err = s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "y", Content: "again"}, {LocalID: "x", Content: "again"}}, 7)
	noErr(t, "all known", err)
	eq(t, "a batch of known localIds creates nothing", res, store.AppendResult{Rows: []store.Message{blank(m1), blank(m2)}})
	got, err := s.Session(ctx, a.ID, x.ID)
	noErr(t, "read session", err)
	eq(t, "session seq and update time (an all-known batch changes neither)", []int64{got.Seq, got.UpdatedAt}, []int64{3, 6})

	res, err = s.AppendMessages(ctx, a.ID, x.ID, nil, 8)
	noErr(t, "empty batch", err)
	eq(t, "empty batch", res, store.AppendResult{})
	_, err = s.AppendMessages(ctx, a.ID, "nope", nil, 8)
	isNotFound(t, "empty batch, missing session", err)
	_, err = s.AppendMessages(ctx, b.ID, x.ID, []store.NewMessage{{LocalID: "q", Content: "q"}}, 8)
	isNotFound(t, "other account", err)
	_, err = s.AppendMessages(ctx, a.ID, "nope", []store.NewMessage{{LocalID: "q", Content: "q"}}, 8)
	isNotFound(t, "missing session", err)

	msgs, more, err := s.Messages(ctx, a.ID, x.ID, store.Page{Limit: 10})
	noErr(t, "list", err)
	eq(t, "stored", msgs, []store.Message{m1, m2, m3})
	eq(t, "more", more, false)
	first, err := s.NextUpdateSeqs(ctx, a.ID, 2)
	noErr(t, "update seqs", err)
	eq(t, "update seqs continue after the messages'", first, int64(4))

	// A second session of the account: its own message seqs, the
	// account's update seqs.
	y := session(t, s, a.ID, "u", 1)
	res, err = s.AppendMessages(ctx, a.ID, y.ID, []store.NewMessage{{LocalID: "x", Content: "other"}}, 9)
	noErr(t, "second session", err)
	eq(t, "second session seq, account update seq", []int64{res.Created[0].Seq, res.FirstUpdateSeq}, []int64{1, 6})

	// A batch of 100 distinct localIds (the HTTP limit), and one larger.
	for _, n := range []int{100, 150} {
		batch := make([]store.NewMessage, n)
		for i := range batch {
			batch[i] = store.NewMessage{LocalID: fmt.Sprintf("b%d-%03d", n, i), Content: strings.Repeat("c", i)}
		}
		res, err := s.AppendMessages(ctx, a.ID, y.ID, batch, 10)
		noErr(t, "big batch", err)
		if len(res.Created) != n || len(res.Rows) != n {
			t.Fatalf("batch of %d: %d created, %d rows", n, len(res.Created), len(res.Rows))
		}
		for i, c := range res.Created {
			if *c.LocalID != batch[i].LocalID || c.Content != batch[i].Content || c.Seq != res.Created[0].Seq+int64(i) || res.Rows[i].Seq != c.Seq || res.Rows[i].Content != "" {
				t.Fatalf("batch of %d, row %d: %s / %s", n, i, show(c), show(res.Rows[i]))
			}
		}
	}
}

func testMessagePages(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x := session(t, s, a.ID, "t", 1)
	var all []store.Message
	for i := 1; i <= 5; i++ {
		res, err := s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: fmt.Sprint("l", i), Content: fmt.Sprint("c", i)}}, int64(10*i))
		noErr(t, "append", err)
		all = append(all, res.Created...)
	}
	page := func(p store.Page) ([]int64, bool) {
		t.Helper()
		msgs, more, err := s.Messages(ctx, a.ID, x.ID, p)
		noErr(t, "page", err)
		var seqs []int64
		for _, m := range msgs {
			seqs = append(seqs, m.Seq)
			if !reflect.DeepEqual(m, all[m.Seq-1]) {
				t.Fatalf("message %d: %s, want %s", m.Seq, show(m), show(all[m.Seq-1]))
			}
		}
		return seqs, more
	}
	check := func(what string, p store.Page, want []int64, wantMore bool) {
		t.Helper()
		got, more := page(p)
		eq(t, what, got, want)
		eq(t, what+": more", more, wantMore)
	}
	check("first two", store.Page{Limit: 2}, []int64{1, 2}, true)
	check("after 2", store.Page{After: 2, Limit: 10}, []int64{3, 4, 5}, false)
	check("after 2, exactly the rest", store.Page{After: 2, Limit: 3}, []int64{3, 4, 5}, false)
	check("before 4", store.Page{Before: 4, Limit: 2}, []int64{3, 2}, true)
	check("before 2", store.Page{Before: 2, Limit: 5}, []int64{1}, false)
	check("before wins over after", store.Page{After: 3, Before: 3, Limit: 5}, []int64{2, 1}, false)
	msgs, more, err := s.Messages(ctx, a.ID, x.ID, store.Page{After: 5, Limit: 5})
	noErr(t, "empty page", err)
	eq(t, "empty page", msgs, []store.Message{})
	eq(t, "empty page: more", more, false)
	_, _, err = s.Messages(ctx, a.ID, x.ID, store.Page{Limit: 0})
	isOtherErr(t, "limit 0", err)
	_, _, err = s.Messages(ctx, b.ID, x.ID, store.Page{Limit: 5})
	isNotFound(t, "other account", err)
}

func testRecentMessages(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x := session(t, s, a.ID, "t", 1)
	eq(t, "none", mustRecent(t, s, a.ID, x.ID, 10), []int64(nil))
	_, err := s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "1", Content: "1"}, {LocalID: "2", Content: "2"}}, 20)
	noErr(t, "append", err)
	_, err = s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "3", Content: "3"}}, 30)
	noErr(t, "append", err)
	// A client clock that went back: created_at orders first, seq second.
	_, err = s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: "4", Content: "4"}}, 10)
	noErr(t, "append", err)
	eq(t, "newest first", mustRecent(t, s, a.ID, x.ID, 10), []int64{3, 2, 1, 4})
	eq(t, "limit", mustRecent(t, s, a.ID, x.ID, 2), []int64{3, 2})
	eq(t, "negative limit is none", mustRecent(t, s, a.ID, x.ID, -1), []int64{3, 2, 1, 4})
	list, err := s.RecentMessages(ctx, a.ID, x.ID, 0)
	noErr(t, "limit 0", err)
	eq(t, "limit 0", list, []store.Message{})
	_, err = s.RecentMessages(ctx, b.ID, x.ID, 10)
	isNotFound(t, "other account", err)
}

func mustRecent(t testing.TB, s store.Store, acct, sid string, n int) []int64 {
	t.Helper()
	list, err := s.RecentMessages(ctx, acct, sid, n)
	noErr(t, "recent", err)
	if list == nil {
		t.Fatal("recent messages: nil list")
	}
	var seqs []int64
	for _, m := range list {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

func testMachines(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	eq(t, "no machines", mustMachines(t, s, a.ID), []store.Machine{})
	m1, created, err := s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "m1", Metadata: "mm", DaemonState: ptr("ds")}, 50)
	noErr(t, "create", err)
	eq(t, "created", created, true)
	w1 := store.Machine{ID: "m1", AccountID: a.ID, Metadata: "mm", MetadataVersion: 1, DaemonState: ptr("ds"), DaemonStateVersion: 1, ActiveAt: 50, CreatedAt: 50, UpdatedAt: 50}
	eq(t, "with daemon state", m1, w1)
	again, created, err := s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "m1", Metadata: "other"}, 60)
	noErr(t, "again", err)
	eq(t, "again: created", created, false)
	eq(t, "existing machine unchanged", again, w1)
	m2, _, err := s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "m2", Metadata: "mm2", DataEncryptionKey: ptr("k")}, 40)
	noErr(t, "create", err)
	w2 := store.Machine{ID: "m2", AccountID: a.ID, Metadata: "mm2", MetadataVersion: 1, DataEncryptionKey: ptr("k"), ActiveAt: 40, CreatedAt: 40, UpdatedAt: 40}
	eq(t, "without daemon state", m2, w2)
	mb, created, err := s.GetOrCreateMachine(ctx, b.ID, store.NewMachine{ID: "m1", Metadata: "b"}, 70)
	noErr(t, "other account", err)
	eq(t, "same id, other account", []any{created, mb.AccountID, mb.Metadata}, []any{true, b.ID, "b"})
	got, err := s.Machine(ctx, a.ID, "m1")
	noErr(t, "read", err)
	eq(t, "read", got, w1)
	_, err = s.Machine(ctx, a.ID, "nope")
	isNotFound(t, "missing", err)
	eq(t, "most recent activity first", mustMachines(t, s, a.ID), []store.Machine{w1, w2})

	noErr(t, "activity", s.SetMachineActive(ctx, a.ID, "m2", true, 80))
	w2.Active, w2.ActiveAt = true, 80
	eq(t, "after activity", mustMachines(t, s, a.ID), []store.Machine{w2, w1})
	isNotFound(t, "activity, other account", s.SetMachineActive(ctx, b.ID, "m2", true, 80))

	r, err := s.UpdateMachineMetadata(ctx, a.ID, "m1", "mm-2", 1, 90)
	noErr(t, "cas", err)
	eq(t, "metadata set", r, store.CAS{OK: true, Version: 2, Value: ptr("mm-2")})
	r, err = s.UpdateMachineMetadata(ctx, a.ID, "m1", "mm-3", 1, 91)
	noErr(t, "cas", err)
	eq(t, "metadata mismatch", r, store.CAS{OK: false, Version: 2, Value: ptr("mm-2")})
	r, err = s.UpdateMachineDaemonState(ctx, a.ID, "m1", "ds-2", 0, 92)
	noErr(t, "cas", err)
	eq(t, "daemon state mismatch", r, store.CAS{OK: false, Version: 1, Value: ptr("ds")})
	got, err = s.Machine(ctx, a.ID, "m1")
	noErr(t, "read", err)
	eq(t, "a failed daemon state write changes nothing", []any{got.Active, got.ActiveAt, got.UpdatedAt}, []any{false, int64(50), int64(90)})
	r, err = s.UpdateMachineDaemonState(ctx, a.ID, "m1", "ds-2", 1, 93)
	noErr(t, "cas", err)
	eq(t, "daemon state set", r, store.CAS{OK: true, Version: 2, Value: ptr("ds-2")})
	got, err = s.Machine(ctx, a.ID, "m1")
	noErr(t, "read", err)
	eq(t, "a daemon state write marks the machine active", got, store.Machine{ID: "m1", AccountID: a.ID, Metadata: "mm-2", MetadataVersion: 2, DaemonState: ptr("ds-2"), DaemonStateVersion: 2, Active: true, ActiveAt: 93, CreatedAt: 50, UpdatedAt: 93})
	r, err = s.UpdateMachineDaemonState(ctx, a.ID, "m2", "first", 0, 94)
	noErr(t, "cas", err)
	eq(t, "first daemon state", r, store.CAS{OK: true, Version: 1, Value: ptr("first")})
	_, err = s.UpdateMachineMetadata(ctx, b.ID, "m2", "x", 1, 95)
	isNotFound(t, "metadata of another account's machine", err)
	_, err = s.UpdateMachineDaemonState(ctx, a.ID, "nope", "x", 0, 95)
	isNotFound(t, "daemon state of a missing machine", err)
	_, _, err = s.GetOrCreateMachine(ctx, "no-such-account", store.NewMachine{ID: "m"}, 1)
	isOtherErr(t, "unknown account", err)
}

func mustMachines(t testing.TB, s store.Store, acct string) []store.Machine {
	t.Helper()
	list, err := s.Machines(ctx, acct)
	noErr(t, "list machines", err)
	return list
}

func sortPresence(p []store.Presence) []store.Presence {
	sort.Slice(p, func(i, j int) bool { return p[i].ID < p[j].ID })
	return p
}

func testExpire(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	s1 := session(t, s, a.ID, "t1", 5)
	s2 := session(t, s, b.ID, "t2", 10)
	session(t, s, a.ID, "t3", 11)
	s4 := session(t, s, a.ID, "t4", 1)
	noErr(t, "archive", s.SetSessionActive(ctx, a.ID, s4.ID, false, 1))
	exp, err := s.ExpireSessions(ctx, 10)
	noErr(t, "expire", err)
	want := sortPresence([]store.Presence{{AccountID: a.ID, ID: s1.ID, ActiveAt: 5}, {AccountID: b.ID, ID: s2.ID, ActiveAt: 10}})
	eq(t, "expired at or before the cutoff", sortPresence(exp), want)
	exp, err = s.ExpireSessions(ctx, 10)
	noErr(t, "expire again", err)
	eq(t, "nothing twice", exp, []store.Presence(nil))
	got, err := s.Session(ctx, a.ID, s1.ID)
	noErr(t, "read", err)
	eq(t, "expired session", []any{got.Active, got.ActiveAt}, []any{false, int64(5)})

	_, _, err = s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "idle", Metadata: "m"}, 1)
	noErr(t, "machine", err)
	_, _, err = s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "busy", Metadata: "m"}, 1)
	noErr(t, "machine", err)
	_, _, err = s.GetOrCreateMachine(ctx, b.ID, store.NewMachine{ID: "old", Metadata: "m"}, 1)
	noErr(t, "machine", err)
	noErr(t, "activity", s.SetMachineActive(ctx, a.ID, "idle", true, 20))
	noErr(t, "activity", s.SetMachineActive(ctx, b.ID, "old", true, 30))
	_, err = s.UpdateMachineDaemonState(ctx, a.ID, "busy", "running", 0, 50)
	noErr(t, "daemon state", err)
	exp, err = s.ExpireMachines(ctx, 10)
	noErr(t, "expire machines", err)
	eq(t, "no machine idle since 10", exp, []store.Presence(nil))
	exp, err = s.ExpireMachines(ctx, 30)
	noErr(t, "expire machines", err)
	eq(t, "machines idle since 30", sortPresence(exp), sortPresence([]store.Presence{{AccountID: a.ID, ID: "idle", ActiveAt: 20}, {AccountID: b.ID, ID: "old", ActiveAt: 30}}))
	exp, err = s.ExpireMachines(ctx, 50)
	noErr(t, "expire machines", err)
	eq(t, "machines idle since 50", exp, []store.Presence{{AccountID: a.ID, ID: "busy", ActiveAt: 50}})
}

func testPushTokens(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	eq(t, "none", mustTokens(t, s, a.ID), []store.PushToken{})
	noErr(t, "add", s.AddPushToken(ctx, a.ID, "tok1", 10))
	noErr(t, "add", s.AddPushToken(ctx, a.ID, "tok2", 20))
	noErr(t, "add", s.AddPushToken(ctx, b.ID, "tok1", 25))
	list := mustTokens(t, s, a.ID)
	if len(list) != 2 || !isID(list[0].ID) || !isID(list[1].ID) {
		t.Fatalf("tokens %s", show(list))
	}
	t1, t2 := list[1], list[0]
	eq(t, "newest first", list, []store.PushToken{{ID: t2.ID, Token: "tok2", CreatedAt: 20, UpdatedAt: 20}, {ID: t1.ID, Token: "tok1", CreatedAt: 10, UpdatedAt: 10}})
	noErr(t, "add again", s.AddPushToken(ctx, a.ID, "tok1", 30))
	eq(t, "adding again updates", mustTokens(t, s, a.ID), []store.PushToken{{ID: t2.ID, Token: "tok2", CreatedAt: 20, UpdatedAt: 20}, {ID: t1.ID, Token: "tok1", CreatedAt: 10, UpdatedAt: 30}})
	noErr(t, "remove", s.RemovePushToken(ctx, a.ID, "tok1"))
	noErr(t, "remove absent", s.RemovePushToken(ctx, a.ID, "tok1"))
	eq(t, "after remove", mustTokens(t, s, a.ID), []store.PushToken{{ID: t2.ID, Token: "tok2", CreatedAt: 20, UpdatedAt: 20}})
	if l := mustTokens(t, s, b.ID); len(l) != 1 || l[0].Token != "tok1" {
		t.Fatalf("other account's token: %s", show(l))
	}
}

func mustTokens(t testing.TB, s store.Store, acct string) []store.PushToken {
	t.Helper()
	list, err := s.PushTokens(ctx, acct)
	noErr(t, "list tokens", err)
	return list
}

func testWebPushSubscriptions(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	eq(t, "none", mustSubs(t, s, a.ID), []store.WebPushSubscription{})
	sub := func(endpoint, p256dh, auth string) store.WebPushSubscription {
		return store.WebPushSubscription{Endpoint: endpoint, P256dh: p256dh, Auth: auth}
	}
	noErr(t, "add", s.AddWebPushSubscription(ctx, a.ID, sub("https://push.example/1", "k1", "a1"), 10))
	noErr(t, "add", s.AddWebPushSubscription(ctx, a.ID, sub("https://push.example/2", "k2", "a2"), 20))
	noErr(t, "add to another account", s.AddWebPushSubscription(ctx, b.ID, sub("https://push.example/1", "kb", "ab"), 25))
	list := mustSubs(t, s, a.ID)
	if len(list) != 2 || !isID(list[0].ID) || !isID(list[1].ID) || list[0].ID == list[1].ID {
		t.Fatalf("subscriptions %s", show(list))
	}
	s1, s2 := list[1], list[0]
	eq(t, "newest first", list, []store.WebPushSubscription{
		{ID: s2.ID, Endpoint: "https://push.example/2", P256dh: "k2", Auth: "a2", CreatedAt: 20, UpdatedAt: 20},
		{ID: s1.ID, Endpoint: "https://push.example/1", P256dh: "k1", Auth: "a1", CreatedAt: 10, UpdatedAt: 10}})
	noErr(t, "subscribe again", s.AddWebPushSubscription(ctx, a.ID, sub("https://push.example/1", "k1b", "a1b"), 30))
	eq(t, "the same endpoint gets the new keys", mustSubs(t, s, a.ID), []store.WebPushSubscription{
		{ID: s2.ID, Endpoint: "https://push.example/2", P256dh: "k2", Auth: "a2", CreatedAt: 20, UpdatedAt: 20},
		{ID: s1.ID, Endpoint: "https://push.example/1", P256dh: "k1b", Auth: "a1b", CreatedAt: 10, UpdatedAt: 30}})
	noErr(t, "remove", s.RemoveWebPushSubscription(ctx, a.ID, "https://push.example/2"))
	noErr(t, "remove absent", s.RemoveWebPushSubscription(ctx, a.ID, "https://push.example/2"))
	eq(t, "after remove", mustSubs(t, s, a.ID), []store.WebPushSubscription{
		{ID: s1.ID, Endpoint: "https://push.example/1", P256dh: "k1b", Auth: "a1b", CreatedAt: 10, UpdatedAt: 30}})
	if l := mustSubs(t, s, b.ID); len(l) != 1 || l[0].P256dh != "kb" {
		t.Fatalf("the other account's subscription: %s", show(l))
	}
	noErr(t, "add", s.AddWebPushSubscription(ctx, a.ID, sub("https://push.example/3", "k3", "a3"), 40))
	n, err := s.RemoveWebPushSubscriptions(ctx, a.ID)
	noErr(t, "remove all", err)
	eq(t, "removed", n, int64(2))
	eq(t, "none left", mustSubs(t, s, a.ID), []store.WebPushSubscription{})
	n, err = s.RemoveWebPushSubscriptions(ctx, a.ID)
	noErr(t, "remove all again", err)
	eq(t, "removed again", n, int64(0))
	if l := mustSubs(t, s, b.ID); len(l) != 1 {
		t.Fatalf("removing one account's subscriptions touched another's: %s", show(l))
	}
}

func mustSubs(t testing.TB, s store.Store, acct string) []store.WebPushSubscription {
	t.Helper()
	list, err := s.WebPushSubscriptions(ctx, acct)
	noErr(t, "list web push subscriptions", err)
	return list
}

func testUsageReports(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	u, err := s.UpsertUsageReport(ctx, a.ID, "sess", "k", `{"tokens":1}`, 10)
	noErr(t, "create", err)
	if !isID(u.ID) {
		t.Fatalf("usage id %q", u.ID)
	}
	eq(t, "created", u, store.UsageReport{ID: u.ID, SessionID: "sess", Key: "k", Data: `{"tokens":1}`, CreatedAt: 10, UpdatedAt: 10})
	u2, err := s.UpsertUsageReport(ctx, a.ID, "sess", "k", `{"tokens":2}`, 20)
	noErr(t, "update", err)
	eq(t, "updated", u2, store.UsageReport{ID: u.ID, SessionID: "sess", Key: "k", Data: `{"tokens":2}`, CreatedAt: 10, UpdatedAt: 20})
	n, err := s.UpsertUsageReport(ctx, a.ID, "", "k", "d", 30)
	noErr(t, "no session", err)
	eq(t, "no session is its own row", []any{n.ID != u.ID, n.SessionID, n.CreatedAt}, []any{true, "", int64(30)})
	o, err := s.UpsertUsageReport(ctx, b.ID, "sess", "k", "d", 40)
	noErr(t, "other account", err)
	eq(t, "other account's row", []any{o.ID != u.ID, o.CreatedAt}, []any{true, int64(40)})
	k2, err := s.UpsertUsageReport(ctx, a.ID, "sess", "k2", "d", 50)
	noErr(t, "other key", err)
	eq(t, "other key's row", []any{k2.ID != u.ID, k2.CreatedAt}, []any{true, int64(50)})
}

func testAttachments(t *testing.T, s store.Store) {
	a, b := account(t, s, "pk-a"), account(t, s, "pk-b")
	x := session(t, s, a.ID, "t", 1)
	blob := []byte{0, 1, 2, 0xff, 'x', 0}
	isNotFound(t, "put to another account's session", s.PutAttachment(ctx, b.ID, x.ID, "a.enc", blob, 2))
	isNotFound(t, "put to a missing session", s.PutAttachment(ctx, a.ID, "nope", "a.enc", blob, 2))
	for _, bad := range []string{"", ".hidden", "../x", "a/b", `a\b`, "a\x00b", strings.Repeat("n", 201)} {
		isOtherErr(t, fmt.Sprintf("put invalid name %q", bad), s.PutAttachment(ctx, a.ID, x.ID, bad, blob, 2))
		_, err := s.Attachment(ctx, a.ID, x.ID, bad)
		isNotFound(t, fmt.Sprintf("get invalid name %q", bad), err)
	}
	noErr(t, "put", s.PutAttachment(ctx, a.ID, x.ID, "a.enc", blob, 2))
	got, err := s.Attachment(ctx, a.ID, x.ID, "a.enc")
	noErr(t, "get", err)
	eq(t, "bytes", got, blob)
	_, err = s.Attachment(ctx, b.ID, x.ID, "a.enc")
	isNotFound(t, "get from another account", err)
	_, err = s.Attachment(ctx, a.ID, x.ID, "b.enc")
	isNotFound(t, "missing name", err)
	noErr(t, "replace", s.PutAttachment(ctx, a.ID, x.ID, "a.enc", []byte("xyz"), 3))
	got, err = s.Attachment(ctx, a.ID, x.ID, "a.enc")
	noErr(t, "get", err)
	eq(t, "replaced", got, []byte("xyz"))
	noErr(t, "empty", s.PutAttachment(ctx, a.ID, x.ID, "empty.enc", nil, 4))
	got, err = s.Attachment(ctx, a.ID, x.ID, "empty.enc")
	noErr(t, "get empty", err)
	eq(t, "empty attachment", got, []byte{})
	big := bytes.Repeat([]byte{0xab, 0}, 1<<20)
	noErr(t, "2 MiB", s.PutAttachment(ctx, a.ID, x.ID, "big_-.ENC", big, 5))
	got, err = s.Attachment(ctx, a.ID, x.ID, "big_-.ENC")
	noErr(t, "get 2 MiB", err)
	if !bytes.Equal(got, big) {
		t.Fatalf("2 MiB attachment: %d bytes back", len(got))
	}
}

// weird is an opaque string with what a JSON string can carry.
const weird = "a\x00b\u00e9\U0001F600\\\"'%_\n\t"

func testOpaqueStrings(t *testing.T, s store.Store) {
	w := func(p string) string { return p + weird }
	a, err := s.UpsertAccount(ctx, w("pk"), 1)
	noErr(t, "account", err)
	eq(t, "public key", a.PublicKey, w("pk"))
	again, err := s.UpsertAccount(ctx, w("pk"), 2)
	noErr(t, "account again", err)
	eq(t, "same account by a NUL-carrying key", again.ID, a.ID)
	other, err := s.UpsertAccount(ctx, "pk", 2)
	noErr(t, "prefix account", err)
	if other.ID == a.ID {
		t.Fatal("a key and its prefix before NUL share an account")
	}
	x, _, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: w("tag"), Metadata: w("meta"), DataEncryptionKey: ptr(w("dek"))}, 1)
	noErr(t, "session", err)
	y, created, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "tag", Metadata: "m"}, 1)
	noErr(t, "prefix tag", err)
	if !created || y.ID == x.ID {
		t.Fatal("a tag and its prefix before NUL are one session")
	}
	r, err := s.UpdateSessionAgentState(ctx, a.ID, x.ID, ptr(w("state")), 0, 2)
	noErr(t, "state", err)
	eq(t, "state cas", r, store.CAS{OK: true, Version: 1, Value: ptr(w("state"))})
	got, err := s.Session(ctx, a.ID, x.ID)
	noErr(t, "read", err)
	eq(t, "session strings", []any{got.Tag, got.Metadata, *got.DataEncryptionKey, *got.AgentState}, []any{w("tag"), w("meta"), w("dek"), w("state")})
	res, err := s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: w("l"), Content: w("c")}, {LocalID: "l", Content: "plain"}}, 3)
	noErr(t, "append", err)
	eq(t, "two localIds", len(res.Created), 2)
	res, err = s.AppendMessages(ctx, a.ID, x.ID, []store.NewMessage{{LocalID: w("l"), Content: "again"}}, 4)
	noErr(t, "append again", err)
	eq(t, "NUL-carrying localId known", []any{len(res.Created), *res.Rows[0].LocalID, res.Rows[0].Seq}, []any{0, w("l"), int64(1)})
	msgs, _, err := s.Messages(ctx, a.ID, x.ID, store.Page{Limit: 10})
	noErr(t, "messages", err)
	eq(t, "message strings", []any{*msgs[0].LocalID, msgs[0].Content, *msgs[1].LocalID, msgs[1].Content}, []any{w("l"), w("c"), "l", "plain"})
	m, _, err := s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: w("m"), Metadata: w("mm"), DaemonState: ptr(w("ds")), DataEncryptionKey: ptr(w("mk"))}, 1)
	noErr(t, "machine", err)
	eq(t, "machine strings", []any{m.ID, m.Metadata, *m.DaemonState, *m.DataEncryptionKey}, []any{w("m"), w("mm"), w("ds"), w("mk")})
	cas, err := s.UpdateMachineDaemonState(ctx, a.ID, w("m"), w("ds2"), 1, 2)
	noErr(t, "machine cas", err)
	eq(t, "machine cas", cas, store.CAS{OK: true, Version: 2, Value: ptr(w("ds2"))})
	exp, err := s.ExpireMachines(ctx, 2)
	noErr(t, "expire", err)
	eq(t, "expired machine id", exp, []store.Presence{{AccountID: a.ID, ID: w("m"), ActiveAt: 2}})
	noErr(t, "token", s.AddPushToken(ctx, a.ID, w("tok"), 1))
	toks := mustTokens(t, s, a.ID)
	eq(t, "token", toks[0].Token, w("tok"))
	noErr(t, "remove token", s.RemovePushToken(ctx, a.ID, w("tok")))
	eq(t, "token removed", mustTokens(t, s, a.ID), []store.PushToken{})
	noErr(t, "web push", s.AddWebPushSubscription(ctx, a.ID, store.WebPushSubscription{Endpoint: w("e"), P256dh: w("k"), Auth: w("a")}, 1))
	subs := mustSubs(t, s, a.ID)
	eq(t, "web push strings", []string{subs[0].Endpoint, subs[0].P256dh, subs[0].Auth}, []string{w("e"), w("k"), w("a")})
	noErr(t, "remove web push", s.RemoveWebPushSubscription(ctx, a.ID, w("e")))
	eq(t, "web push removed", mustSubs(t, s, a.ID), []store.WebPushSubscription{})
	u, err := s.UpsertUsageReport(ctx, a.ID, w("s"), w("k"), w("d"), 1)
	noErr(t, "usage", err)
	eq(t, "usage strings", []string{u.SessionID, u.Key, u.Data}, []string{w("s"), w("k"), w("d")})
	ar, err := s.UpsertAuthRequest(ctx, w("box"), false, 1)
	noErr(t, "auth request", err)
	noErr(t, "answer", s.AnswerAuthRequest(ctx, w("box"), w("resp"), a.ID))
	ar2, err := s.AuthRequest(ctx, w("box"))
	noErr(t, "read auth", err)
	eq(t, "auth strings", []any{ar2.ID, ar2.PublicKey, *ar2.Response}, []any{ar.ID, w("box"), w("resp")})
	_, err = s.AuthRequest(ctx, "box")
	isNotFound(t, "auth key prefix before NUL", err)
}

// testBytewiseOrder: client-chosen ids sort by their bytes (SQLite's
// BINARY collation), never by a locale.
func testBytewiseOrder(t *testing.T, s store.Store) {
	a := account(t, s, "pk")
	names := []string{"b", "B", "a", "_", "Z", "é", "a b", "ab", "A", "1", "10", "9"}
	for _, n := range names {
		_, _, err := s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: n, Metadata: "m"}, 7)
		noErr(t, "machine", err)
	}
	var got []string
	for _, m := range mustMachines(t, s, a.ID) {
		got = append(got, m.ID)
	}
	want := slices.Clone(names)
	sort.Strings(want)
	eq(t, "machines with one activity time, by id bytes", got, want)

	var sids []string
	for i := range 12 {
		sids = append(sids, session(t, s, a.ID, fmt.Sprint("tag", i), 5).ID)
	}
	list := ids(mustSessions(t, s, a.ID, -1))
	sort.Sort(sort.Reverse(sort.StringSlice(sids)))
	eq(t, "sessions with one update time, by id descending", list, sids)
}
