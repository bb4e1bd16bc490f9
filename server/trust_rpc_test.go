package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// The relay's refusal texts of rpc-register (events.go).
const (
	errRPCUserScoped = "RPC methods are registered by the socket of their session (clientType session-scoped) or machine (machine-scoped); a user-scoped socket can only call them"
	errRPCHeld       = "Method already registered by another connected socket; this socket takes it over (and gets rpc-registered) when that one disconnects"
)

// register emits rpc-register and returns the answer (rpc-registered or
// rpc-error) as {event, ...fields}.
func register(t *testing.T, c *sio.Client, in *inbox, method string) map[string]any {
	t.Helper()
	if err := c.Emit("rpc-register", map[string]any{"method": method}); err != nil {
		t.Fatal(err)
	}
	e := in.next()
	if e.name != "rpc-registered" && e.name != "rpc-error" {
		t.Fatalf("rpc-register %s: got %q %v", method, e.name, e.args)
	}
	m := obj(t, e.args[0])
	m["event"] = e.name
	return m
}

func registered(method string) map[string]any {
	return map[string]any{"event": "rpc-registered", "method": method}
}

func refused(method, msg string) map[string]any {
	return map[string]any{"event": "rpc-error", "type": "register", "method": method, "error": msg}
}

// callOnce has app call method and the socket of in answer with result;
// it returns the caller's reply.
func callOnce(t *testing.T, app *sio.Client, in *inbox, method, result string) map[string]any {
	t.Helper()
	done := make(chan map[string]any, 1)
	go func() { done <- call(t, app, "rpc-call", map[string]any{"method": method, "params": "p"}) }()
	req := in.next()
	if req.name != "rpc-request" || req.ack == nil {
		t.Fatalf("callee got %q %v, want rpc-request", req.name, req.args)
	}
	eq(t, "request", obj(t, req.args[0]), map[string]any{"method": method, "params": "p"})
	req.ack(result)
	return <-done
}

// A socket holding only the account's token (user-scoped, as the app's)
// can register neither a session's nor a machine's method: calls keep
// going to the session's and the machine's own sockets.
func TestRPCUserScopedSocketCannotTakeOver(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	sess := sessionSocket(t, r.URL, a.token, sid)
	sessIn := listen(t, sess, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "session registers", register(t, sess, sessIn, sid+":permission"), registered(sid+":permission"))
	mach := machineSocket(t, r.URL, a.token, "m1")
	machIn := listen(t, mach, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "machine registers", register(t, mach, machIn, "m1:spawn-happy-session"), registered("m1:spawn-happy-session"))

	thief := userSocket(t, r.URL, a.token)
	thiefIn := listen(t, thief, "rpc-registered", "rpc-error", "rpc-request")
	for _, m := range []string{sid + ":permission", "m1:spawn-happy-session", sid + ":new-method"} {
		eq(t, "user-scoped registers "+m, register(t, thief, thiefIn, m), refused(m, errRPCUserScoped))
	}
	app := userSocket(t, r.URL, a.token)
	eq(t, "session call", callOnce(t, app, sessIn, sid+":permission", "allow"), map[string]any{"ok": true, "result": "allow"})
	eq(t, "machine call", callOnce(t, app, machIn, "m1:spawn-happy-session", "spawned"), map[string]any{"ok": true, "result": "spawned"})
	thiefIn.none()
	metric(t, r.URL, `happy_relay_refusals_total{reason="rpc_scope"} 3`)
}

// A session-scoped socket registers only its own session's methods, a
// machine-scoped socket only its own machine's.
func TestRPCScopedSocketsRegisterOnlyTheirOwn(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a := newAPI(t, r)
	sidA := a.createSession("a", "m")["id"].(string)
	sidB := a.createSession("b", "m")["id"].(string)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	sockA := sessionSocket(t, r.URL, a.token, sidA)
	inA := listen(t, sockA, "rpc-registered", "rpc-error", "rpc-request")
	otherSession := `A session-scoped socket registers only methods of its own session: "` + sidB + `:permission" does not start with "` + sidA + `:"`
	eq(t, "A registers B's method", register(t, sockA, inA, sidB+":permission"), refused(sidB+":permission", otherSession))
	eq(t, "A registers the machine's method", register(t, sockA, inA, "m1:spawn-happy-session"),
		refused("m1:spawn-happy-session", `A session-scoped socket registers only methods of its own session: "m1:spawn-happy-session" does not start with "`+sidA+`:"`))
	mach := machineSocket(t, r.URL, a.token, "m1")
	machIn := listen(t, mach, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "the machine registers a session's method", register(t, mach, machIn, sidA+":bash"),
		refused(sidA+":bash", `A machine-scoped socket registers only methods of its own machine: "`+sidA+`:bash" does not start with "m1:"`))

	sockB := sessionSocket(t, r.URL, a.token, sidB)
	inB := listen(t, sockB, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "B registers its own", register(t, sockB, inB, sidB+":permission"), registered(sidB+":permission"))
	app := userSocket(t, r.URL, a.token)
	eq(t, "B's method reaches B", callOnce(t, app, inB, sidB+":permission", "b"), map[string]any{"ok": true, "result": "b"})
	inA.none()
	// A session-scoped socket of a session the account does not have.
	ghost := sessionSocket(t, r.URL, a.token, "no-such-session")
	ghostIn := listen(t, ghost, "rpc-registered", "rpc-error")
	eq(t, "unknown session", register(t, ghost, ghostIn, "no-such-session:bash"),
		refused("no-such-session:bash", "Method must be <sessionId>:<name> or <machineId>:<name> for a session or machine of this account"))
}

// A second machine-scoped socket of the same machine cannot take the
// machine's methods while the first is connected: it is refused and waits
// as a standby, and becomes the holder (rpc-registered) when the first
// disconnects. A socket registering after the holder left gets the method
// at once.
func TestRPCSecondMachineSocketWaitsForTheFirst(t *testing.T) {
	r := servertest.StartConfig(t, rpcConfig())
	a := newAPI(t, r)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	const method = "m1:spawn-happy-session"
	first := machineSocket(t, r.URL, a.token, "m1")
	firstIn := listen(t, first, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "first", register(t, first, firstIn, method), registered(method))
	second := machineSocket(t, r.URL, a.token, "m1")
	secondIn := listen(t, second, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "second", register(t, second, secondIn, method), refused(method, errRPCHeld))
	eq(t, "second again", register(t, second, secondIn, method), refused(method, errRPCHeld))

	app := userSocket(t, r.URL, a.token)
	eq(t, "call while both are connected", callOnce(t, app, firstIn, method, "one"), map[string]any{"ok": true, "result": "one"})
	secondIn.none()

	_ = first.Close()
	eq(t, "the standby takes over", secondIn.nextObj("rpc-registered"), map[string]any{"method": method})
	eq(t, "call after the first left", callOnce(t, app, secondIn, method, "two"), map[string]any{"ok": true, "result": "two"})

	_ = second.Close()
	server.WaitUntil(t, 5*time.Second, "the second socket's registration is gone", func() bool {
		res := call(t, app, "rpc-call", map[string]any{"method": method, "params": "p"})
		return res["error"] == "RPC method not available"
	})
	third := machineSocket(t, r.URL, a.token, "m1")
	thirdIn := listen(t, third, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "a new socket after the holder left", register(t, third, thirdIn, method), registered(method))
	eq(t, "call to the new socket", callOnce(t, app, thirdIn, method, "three"), map[string]any{"ok": true, "result": "three"})
	metric(t, r.URL, `happy_relay_refusals_total{reason="rpc_held"} 2`)
}

// Across relays on one database: a socket of another instance cannot take
// a method a socket holds on one instance; its registration waits as a
// standby, calls from any instance reach the holder, and the standby takes
// over when the holder disconnects, or when the holder's relay stops.
// Revoking the account's tokens on one instance ends its message streams on
// the others.
func TestClusterRPCOneHolder(t *testing.T) {
	rs := startCluster(t, "memory", 3, rpcConfig())
	a := newAPI(t, rs[0])
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	const method = "m1:spawn-happy-session"
	first := machineSocket(t, rs[0].URL, a.token, "m1")
	firstIn := listen(t, first, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "first", register(t, first, firstIn, method), registered(method))
	server.WaitUntil(t, 5*time.Second, "the others know the claim", func() bool {
		return rs[1].Server.RPCRemoteClaims() == 1 && rs[2].Server.RPCRemoteClaims() == 1
	})
	second := machineSocket(t, rs[1].URL, a.token, "m1")
	secondIn := listen(t, second, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "second, on another relay", register(t, second, secondIn, method), refused(method, errRPCHeld))
	for i, r := range rs {
		app := userSocket(t, r.URL, a.token)
		eq(t, fmt.Sprint("call from relay ", i), callOnce(t, app, firstIn, method, "one"), map[string]any{"ok": true, "result": "one"})
	}
	secondIn.none()

	_ = first.Close()
	eq(t, "the standby on relay 1 takes over", secondIn.nextObj("rpc-registered"), map[string]any{"method": method})
	server.WaitUntil(t, 5*time.Second, "relay 0 knows the new holder", func() bool { return rs[0].Server.RPCRemoteClaims() == 1 })
	app0 := userSocket(t, rs[0].URL, a.token)
	eq(t, "call from relay 0", callOnce(t, app0, secondIn, method, "two"), map[string]any{"ok": true, "result": "two"})

	third := machineSocket(t, rs[2].URL, a.token, "m1")
	thirdIn := listen(t, third, "rpc-registered", "rpc-error", "rpc-request")
	eq(t, "third, on relay 2", register(t, third, thirdIn, method), refused(method, errRPCHeld))
	// Relay 1 stops: its holder's method is free, relay 2's standby takes it.
	if err := rs[1].Server.Close(); err != nil {
		t.Fatal(err)
	}
	eq(t, "the standby on relay 2 takes over", thirdIn.nextObj("rpc-registered"), map[string]any{"method": method})
	// Until every instance has seen relay 1 go, relay 2's grant may meet
	// relay 1's older claim and step down once, to be granted again when
	// the goodbye arrives: wait until relay 0 knows one holder and the
	// socket holds the method.
	server.WaitUntil(t, 5*time.Second, "relay 0 knows the new holder", func() bool { return rs[0].Server.RPCRemoteClaims() == 1 })
	thirdIn.holds()
	eq(t, "call from relay 0 to relay 2", callOnce(t, app0, thirdIn, method, "three"), map[string]any{"ok": true, "result": "three"})

	// A stream on relay 2 ends when relay 0 revokes the account's tokens.
	st := &streamTest{t: t, base: rs[2].URL, token: a.token}
	sid := a.createSession("s", "m")["id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := st.open(ctx, sid, "", "")
	eq(t, "stream", resp.StatusCode, 200)
	_, items := readStream(resp.Body)
	server.WaitUntil(t, 5*time.Second, "the stream is open", func() bool { return rs[2].Server.StreamStats().Open == 1 })
	a.must(200, "POST", "/v1/auth/revoke", nil)
	streamEnds(t, items)
}
