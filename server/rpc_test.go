package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

func rpcConfig() server.Config {
	return server.Config{RPCGrace: 300 * time.Millisecond, RPCCallTimeout: 400 * time.Millisecond}
}

func TestRPCForwarding(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	callee := sessionSocket(t, r.URL, a.token, sid)
	calleeIn := listen(t, callee, "rpc-registered", "rpc-unregistered", "rpc-error", "rpc-request")
	app := userSocket(t, r.URL, a.token)

	if err := callee.Emit("rpc-register", map[string]any{"method": sid + ":bash"}); err != nil {
		t.Fatal(err)
	}
	eq(t, "registered", calleeIn.nextObj("rpc-registered"), map[string]any{"method": sid + ":bash"})

	// Forwarded with ack: the callee's ack value comes back as result.
	done := make(chan map[string]any, 1)
	go func() {
		done <- call(t, app, "rpc-call", map[string]any{"method": sid + ":bash", "params": "b64-ciphertext"})
	}()
	req := calleeIn.next()
	eq(t, "request name", req.name, "rpc-request")
	eq(t, "request", obj(t, req.args[0]), map[string]any{"method": sid + ":bash", "params": "b64-ciphertext"})
	if req.ack == nil {
		t.Fatal("rpc-request without ack")
	}
	req.ack("b64-result")
	eq(t, "reply", <-done, map[string]any{"ok": true, "result": "b64-result"})

	// Calling a method registered by the caller's own socket.
	eq(t, "same socket", call(t, callee, "rpc-call", map[string]any{"method": sid + ":bash", "params": "x"}),
		map[string]any{"ok": false, "error": "Cannot call RPC on the same socket"})

	// A callee that never answers: timeout.
	go func() { done <- call(t, app, "rpc-call", map[string]any{"method": sid + ":bash", "params": "x"}) }()
	calleeIn.nextObj("rpc-request") // not acked
	eq(t, "timeout", <-done, map[string]any{"ok": false, "error": "operation has timed out"})

	// Nobody registered: not available after the grace window.
	start := time.Now()
	eq(t, "not available", call(t, app, "rpc-call", map[string]any{"method": sid + ":other", "params": "x"}),
		map[string]any{"ok": false, "error": "RPC method not available"})
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("answered after %s, before the grace window", d)
	}
	eq(t, "no method", call(t, app, "rpc-call", map[string]any{"params": "x"}), map[string]any{"ok": false, "error": "Invalid parameters: method is required"})

	// Registered during the grace window: the call goes through.
	daemon := machineSocket(t, r.URL, a.token, "m1")
	din := listen(t, daemon, "rpc-registered", "rpc-request")
	go func() {
		done <- call(t, app, "rpc-call", map[string]any{"method": "m1:spawn-happy-session", "params": "p"})
	}()
	server.WaitUntil(t, 5*time.Second, "the call waits for its method", func() bool { return r.Server.RPCWaiting() == 1 })
	_ = daemon.Emit("rpc-register", map[string]any{"method": "m1:spawn-happy-session"})
	din.nextObj("rpc-registered")
	rq := din.next()
	eq(t, "late request", rq.name, "rpc-request")
	rq.ack(map[string]any{"any": "json"})
	eq(t, "late reply", <-done, map[string]any{"ok": true, "result": map[string]any{"any": "json"}})

	// Target disconnects while a call waits.
	go func() {
		done <- call(t, app, "rpc-call", map[string]any{"method": "m1:spawn-happy-session", "params": "p"})
	}()
	din.nextObj("rpc-request")
	_ = daemon.Close()
	eq(t, "disconnected", <-done, map[string]any{"ok": false, "error": "RPC target disconnected"})

	// Unregister.
	_ = callee.Emit("rpc-unregister", map[string]any{"method": sid + ":bash"})
	eq(t, "unregistered", calleeIn.nextObj("rpc-unregistered"), map[string]any{"method": sid + ":bash"})
	eq(t, "after unregister", call(t, app, "rpc-call", map[string]any{"method": sid + ":bash", "params": "x"}), map[string]any{"ok": false, "error": "RPC method not available"})

	// Bad names.
	_ = callee.Emit("rpc-register", map[string]any{"method": ""})
	eq(t, "empty name", calleeIn.nextObj("rpc-error"), map[string]any{"type": "register", "error": "Invalid method name"})
	_ = callee.Emit("rpc-register", map[string]any{"method": "no-prefix"})
	e := calleeIn.nextObj("rpc-error")
	eq(t, "no prefix", []any{e["type"], e["method"]}, []any{"register", "no-prefix"})
}

func TestRPCIsolation(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a, b := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "mA", "metadata": "m"})
	callee := sessionSocket(t, r.URL, a.token, sid)
	in := listen(t, callee, "rpc-registered", "rpc-request")
	_ = callee.Emit("rpc-register", map[string]any{"method": sid + ":bash"})
	in.nextObj("rpc-registered")

	bSock := userSocket(t, r.URL, b.token)
	bIn := listen(t, bSock, "rpc-registered", "rpc-error")
	// B cannot call A's method: for B it does not exist.
	eq(t, "B calls A", call(t, bSock, "rpc-call", map[string]any{"method": sid + ":bash", "params": "x"}), map[string]any{"ok": false, "error": "RPC method not available"})
	in.none()
	// B cannot register methods under A's session or machine ids.
	for _, m := range []string{sid + ":bash", "mA:spawn-happy-session"} {
		_ = bSock.Emit("rpc-register", map[string]any{"method": m})
		e := bIn.nextObj("rpc-error")
		eq(t, "B registers "+m, []any{e["type"], e["method"]}, []any{"register", m})
	}
	// A's callers still reach A.
	app := userSocket(t, r.URL, a.token)
	done := make(chan map[string]any, 1)
	go func() { done <- call(t, app, "rpc-call", map[string]any{"method": sid + ":bash", "params": "x"}) }()
	rq := in.next()
	rq.ack("ok")
	eq(t, "A calls A", <-done, map[string]any{"ok": true, "result": "ok"})
}

// TestSocketIsolation: account B's sockets get nothing of account A, and
// B's events on A's ids change nothing.
func TestSocketIsolation(t *testing.T) {
	r := servertest.Start(t)
	a, b := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "mA", "metadata": "m"})
	bUser := userSocket(t, r.URL, b.token)
	bIn := listen(t, bUser, "update", "ephemeral", "rpc-request")
	bSessIn := listen(t, sessionSocket(t, r.URL, b.token, sid), "update", "ephemeral")
	// B's own machine-scoped socket with A's machine id: its "online"
	// ephemeral goes to B's own apps.
	bMachIn := listen(t, machineSocket(t, r.URL, b.token, "mA"), "update", "ephemeral")
	e := bIn.nextObj("ephemeral")
	eq(t, "B's own machine online", []any{e["type"], e["id"], e["active"]}, []any{"machine-activity", "mA", true})

	// Everything A does that fans out.
	aSess := sessionSocket(t, r.URL, a.token, sid)
	aMach := machineSocket(t, r.URL, a.token, "mA")
	a.postMessages(sid, [2]string{"l", "c"})
	call(t, aSess, "update-metadata", map[string]any{"sid": sid, "metadata": "m2", "expectedVersion": 0})
	call(t, aSess, "update-state", map[string]any{"sid": sid, "agentState": "s", "expectedVersion": 0})
	call(t, aSess, "session-alive", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())})
	call(t, aSess, "usage-report", map[string]any{"key": "k", "sessionId": sid, "tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0}})
	call(t, aMach, "machine-update-metadata", map[string]any{"machineId": "mA", "metadata": "x", "expectedVersion": 1})
	call(t, aMach, "machine-update-state", map[string]any{"machineId": "mA", "daemonState": "x", "expectedVersion": 0})
	call(t, aMach, "machine-alive", map[string]any{"machineId": "mA", "time": float64(time.Now().UnixMilli())})
	a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "done", "title": "t", "body": "b"})
	a.createSession("t-new", "m")
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "mA2", "metadata": "m"})
	a.must(200, "POST", "/v1/sessions/"+sid+"/archive", nil)
	for _, in := range []*inbox{bIn, bSessIn, bMachIn} {
		in.none()
	}

	// B's events on A's ids: errors, and A's rows unchanged.
	for _, c := range []struct {
		ev   string
		arg  map[string]any
		want map[string]any
	}{
		{"update-metadata", map[string]any{"sid": sid, "metadata": "B", "expectedVersion": 1}, map[string]any{"result": "error", "message": "Session not found"}},
		{"update-state", map[string]any{"sid": sid, "agentState": "B", "expectedVersion": 1}, map[string]any{"result": "error", "message": "Session not found"}},
		{"session-alive", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())}, map[string]any{"result": "error", "message": "Session not found"}},
		{"session-end", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())}, map[string]any{"result": "error", "message": "Session not found"}},
		{"machine-update-metadata", map[string]any{"machineId": "mA", "metadata": "B", "expectedVersion": 2}, map[string]any{"result": "error", "message": "Machine not found"}},
		{"machine-update-state", map[string]any{"machineId": "mA", "daemonState": "B", "expectedVersion": 1}, map[string]any{"result": "error", "message": "Machine not found"}},
		{"machine-alive", map[string]any{"machineId": "mA", "time": float64(time.Now().UnixMilli())}, map[string]any{"result": "error", "message": "Machine not found"}},
		{"usage-report", map[string]any{"key": "k", "sessionId": sid, "tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0}}, map[string]any{"success": false, "error": "Session not found"}},
	} {
		eq(t, "B "+c.ev, call(t, bUser, c.ev, c.arg), c.want)
	}
	s := obj(t, a.must(200, "GET", "/v3/sessions/"+sid+"/messages", nil))
	eq(t, "A's messages", len(arr(t, s["messages"])), 1)
	var mine map[string]any
	for _, x := range arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"]) {
		if o := obj(t, x); o["id"] == sid {
			mine = o
		}
	}
	eq(t, "A's session", []any{mine["metadata"], mine["metadataVersion"], mine["agentState"], mine["agentStateVersion"]}, []any{"m2", 1.0, "s", 1.0})
	m := obj(t, a.must(200, "GET", "/v1/machines/mA", nil)["machine"])
	eq(t, "A's machine", []any{m["metadata"], m["metadataVersion"], m["daemonState"], m["daemonStateVersion"]}, []any{"x", 2.0, "x", 1.0})
}

// A client that reconnected registers its methods again from the new
// socket while the old one may still look connected (its network went
// away without a close): the new registration waits as a standby, calls
// stay with the old socket, and the new one takes the method over, told
// by rpc-registered, once the relay drops the old one.
func TestRPCFirstRegistrationHolds(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a := newAPI(t, r)
	sid := a.createSession("t2", "m")["id"].(string)
	old := sessionSocket(t, r.URL, a.token, sid)
	oldIn := listen(t, old, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "old", register(t, old, oldIn, sid+":permission"), registered(sid+":permission"))
	fresh := sessionSocket(t, r.URL, a.token, sid)
	freshIn := listen(t, fresh, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "fresh", register(t, fresh, freshIn, sid+":permission"), refused(sid+":permission", errRPCHeld))
	app := userSocket(t, r.URL, a.token)
	eq(t, "reply from the old socket", callOnce(t, app, oldIn, sid+":permission", "from-old"), map[string]any{"ok": true, "result": "from-old"})
	freshIn.none()
	_ = old.Close()
	eq(t, "the fresh socket takes over", freshIn.nextObj("rpc-registered"), map[string]any{"method": sid + ":permission"})
	eq(t, "reply from the fresh socket", callOnce(t, app, freshIn, sid+":permission", "from-fresh"), map[string]any{"ok": true, "result": "from-fresh"})
}

// A compare-and-set with a fractional or negative expectedVersion is
// invalid, never truncated into a valid one.
func TestCompareAndSetRefusesNonIntegerVersions(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a := newAPI(t, r)
	sid := a.createSession("t3", "m")["id"].(string)
	sock := sessionSocket(t, r.URL, a.token, sid)
	for _, v := range []any{1.5, -1.0, "1"} {
		eq(t, "bad expectedVersion", call(t, sock, "update-metadata", map[string]any{"sid": sid, "metadata": "x", "expectedVersion": v}),
			map[string]any{"result": "error", "message": "Invalid parameters"})
	}
	eq(t, "whole version", call(t, sock, "update-metadata", map[string]any{"sid": sid, "metadata": "m2", "expectedVersion": 0}),
		map[string]any{"result": "success", "version": 1.0, "metadata": "m2"})
}

// One socket may have at most 64 rpc-calls waiting; the next is refused at
// once, and a slot frees when a call ends.
func TestRPCInFlightLimit(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{RPCGrace: 3 * time.Second})
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	app := userSocket(t, r.URL, a.token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	answers := make(chan string, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := app.Call(ctx, "rpc-call", map[string]any{"method": sid + ":nobody", "params": i})
			if err != nil || len(res) == 0 {
				answers <- fmt.Sprint("error ", err)
				return
			}
			m, _ := res[0].(map[string]any)
			answers <- fmt.Sprint(m["error"])
		}()
	}
	server.WaitUntil(t, 5*time.Second, "64 calls waiting for a callee", func() bool { return r.Server.RPCWaiting() == 64 })
	start := time.Now()
	eq(t, "65th call", call(t, app, "rpc-call", map[string]any{"method": sid + ":nobody"}), map[string]any{"ok": false, "error": "Too many RPC calls in flight on this socket (limit 64)"})
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the refusal took %v: it waited for the grace window", d)
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		eq(t, "waiting call", a, "RPC method not available")
	}
	// Slots are free again.
	eq(t, "after", call(t, app, "rpc-call", map[string]any{"method": sid + ":nobody"})["error"], "RPC method not available")
}

// A call to a method of a machine whose socket left the relay (its daemon
// stopped or died) fails at once, not after the grace window; a machine the
// relay has not seen since it started (its daemon reconnecting after a relay
// restart) is waited for, as a connected machine's method is.
func TestRPCToMachineWithoutSocketFailsAtOnce(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{RPCGrace: 10 * time.Second, RPCCallTimeout: 5 * time.Second})
	a := newAPI(t, r)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	app := userSocket(t, r.URL, a.token)
	const method = "m1:spawn-happy-session"
	// A machine this relay has not seen since it started (as after a
	// relay restart, while its daemon reconnects): the call waits.
	done := make(chan map[string]any, 1)
	go func() { done <- call(t, app, "rpc-call", map[string]any{"method": method, "params": "p"}) }()
	server.WaitUntil(t, 5*time.Second, "the call waits for a machine not seen yet", func() bool { return r.Server.RPCWaiting() == 1 })
	daemon := machineSocket(t, r.URL, a.token, "m1")
	din := listen(t, daemon, "rpc-registered", "rpc-request")
	_ = daemon.Emit("rpc-register", map[string]any{"method": method})
	din.nextObj("rpc-registered")
	din.next().ack("ok")
	eq(t, "answered", <-done, map[string]any{"ok": true, "result": "ok"})

	_ = daemon.Close()
	server.WaitUntil(t, 5*time.Second, "the machine's socket is gone", func() bool { return r.Server.RPCWaiting() == 0 })
	waitGone := time.Now().Add(5 * time.Second)
	for {
		start := time.Now()
		res := call(t, app, "rpc-call", map[string]any{"method": method, "params": "p"})
		if res["error"] == "RPC method not available" && time.Since(start) < time.Second {
			break
		}
		if time.Now().After(waitGone) {
			t.Fatalf("after the daemon left: %v", res)
		}
	}
}
