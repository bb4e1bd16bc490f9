package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/server/bus"
)

// Two instances that granted one method at once settle on the earlier
// registration: a later local holder steps down (and takes the method
// back when the other lets go), an earlier one stays and says so again.
func TestRPCClaimConflictEarlierWins(t *testing.T) {
	r := newRPCRegistry()
	r.self = "B"
	c := &conn{acct: "acct"}
	e, res := r.add(c, "m:x", time.Unix(0, 200))
	if res != addCandidate || !r.activate(e) {
		t.Fatalf("add: %v", res)
	}
	demoted, reassert := r.remoteClaim(rpcClaim{Inst: "A", Acct: "acct", Method: "m:x", Sock: "s1", At: 100})
	if demoted != e || reassert != nil || r.peek("acct", "m:x") != nil {
		t.Fatalf("an earlier claim elsewhere: demoted %v, reassert %v, local holder %v", demoted, reassert, r.peek("acct", "m:x"))
	}
	if next := r.remoteRelease("A", "acct", "m:x", "other-socket"); next != nil {
		t.Fatal("a release naming another socket freed the method")
	}
	if next := r.remoteRelease("A", "acct", "m:x", "s1"); next != e || !r.activate(e) {
		t.Fatalf("after the release: next %v", next)
	}
	demoted, reassert = r.remoteClaim(rpcClaim{Inst: "C", Acct: "acct", Method: "m:x", Sock: "s2", At: 300})
	if demoted != nil || reassert != e || r.peek("acct", "m:x") != e {
		t.Fatalf("a later claim elsewhere: demoted %v, reassert %v", demoted, reassert)
	}
	if got := r.instanceClaims("C"); got != 1 {
		t.Fatalf("C's claims: %d", got)
	}
	next, dem, re := r.replaceInstance("C", nil)
	if len(next)+len(dem)+len(re) != 0 || r.instanceClaims("C") != 0 || r.peek("acct", "m:x") != e {
		t.Fatalf("forgetting C: %v %v %v", next, dem, re)
	}
}

// The claims of an instance that went silent (no heartbeat for three
// periods) are forgotten; an instance whose heartbeat announces another
// count than the claims known of it is asked for all of them.
func TestClusterForgetsSilentInstances(t *testing.T) {
	var mem bus.Memory
	b := mem.Join()
	t.Cleanup(func() { _ = b.Close() })
	s, err := New(Config{DataDir: t.TempDir(), Logger: zerolog.Nop(), Bus: b, clusterAlive: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	peer := mem.Join()
	t.Cleanup(func() { _ = peer.Close() })
	got := make(chan busMsg, 64)
	if err := peer.Start(func(raw []byte) {
		var m busMsg
		if json.Unmarshal(raw, &m) == nil && m.Kind == busSync {
			got <- m
		}
	}); err != nil {
		t.Fatal(err)
	}
	publish := func(m busMsg) {
		raw, _ := json.Marshal(m)
		if err := peer.Publish(t.Context(), raw); err != nil {
			t.Fatal(err)
		}
	}
	publish(busMsg{Kind: busClaim, From: "X", Claims: []rpcClaim{{Acct: "acct", Method: "m:x", Sock: "s", At: 1}}})
	waitUntil(t, 5*time.Second, "the claim is known", func() bool { return s.rpc.instanceClaims("X") == 1 })
	publish(busMsg{Kind: busAlive, From: "X", Seq: 2})
	select {
	case m := <-got:
		if m.To != "X" {
			t.Fatalf("sync asked of %q", m.To)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no sync asked for after a heartbeat with another count")
	}
	waitUntil(t, 5*time.Second, "the silent instance's claims are forgotten", func() bool { return s.rpc.instanceClaims("X") == 0 })
}

// A socket that leaves between its registration and its activation does
// not strand the standby behind it.
func TestRPCCandidateLeavingPromotesTheStandby(t *testing.T) {
	r := newRPCRegistry()
	a, b := &conn{acct: "acct"}, &conn{acct: "acct"}
	ea, res := r.add(a, "m:x", time.Unix(0, 1))
	if res != addCandidate {
		t.Fatalf("first add: %v", res)
	}
	eb, res := r.add(b, "m:x", time.Unix(0, 2))
	if res != addStandby {
		t.Fatalf("second add: %v", res)
	}
	released, next := r.remove(a, "m:x")
	if released != nil || next != eb {
		t.Fatalf("remove the candidate: released %v, next %v", released, next)
	}
	if r.activate(ea) || !r.activate(eb) || !r.activate(eb) || r.peek("acct", "m:x") != eb {
		t.Fatal("the standby did not become the holder")
	}
}
