package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

func TestSocketHandshakeRejections(t *testing.T) {
	r := servertest.Start(t)
	tok := servertest.NewAccount(t, r.URL).Token
	for _, c := range []struct {
		name string
		auth map[string]any
		want string
	}{
		{"no token", map[string]any{"clientType": "user-scoped"}, "Missing authentication token"},
		{"bad token", map[string]any{"token": "x.y.z"}, "Invalid authentication token"},
		{"session without id", map[string]any{"token": tok, "clientType": "session-scoped"}, "Session ID required for session-scoped clients"},
		{"machine without id", map[string]any{"token": tok, "clientType": "machine-scoped"}, "Machine ID required for machine-scoped clients"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			cl, err := sio.Dial(ctx, r.URL, sio.Options{Auth: c.auth, ConnectTimeout: 3 * time.Second})
			if err == nil {
				_ = cl.Close()
				t.Fatal("connection accepted")
			}
			var ce *sio.ConnectError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a ConnectError", err)
			}
			eq(t, "message", ce.Message, c.want)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("refusal took %s", d)
			}
		})
	}
	// A good handshake of each kind connects; ping answers {}.
	for _, auth := range []map[string]any{
		{"token": tok}, {"token": tok, "clientType": "user-scoped"},
		{"token": tok, "clientType": "session-scoped", "sessionId": "s"},
		{"token": tok, "clientType": "machine-scoped", "machineId": "m"},
	} {
		c := dial(t, r.URL, auth)
		eq(t, "ping", call(t, c, "ping", nil), map[string]any{})
	}
}

func TestSessionCompareAndSet(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	sid := a.createSession("t", "meta-0")["id"].(string)
	other := a.createSession("t2", "x")["id"].(string)
	sock := sessionSocket(t, r.URL, a.token, sid)
	sockIn := listen(t, sock, "update")
	app := listen(t, userSocket(t, r.URL, a.token), "update")
	otherIn := listen(t, sessionSocket(t, r.URL, a.token, other), "update")

	eq(t, "first write", call(t, sock, "update-metadata", map[string]any{"sid": sid, "metadata": "meta-1", "expectedVersion": 0}),
		map[string]any{"result": "success", "version": 1.0, "metadata": "meta-1"})
	eq(t, "stale write", call(t, sock, "update-metadata", map[string]any{"sid": sid, "metadata": "meta-x", "expectedVersion": 0}),
		map[string]any{"result": "version-mismatch", "version": 1.0, "metadata": "meta-1"})
	eq(t, "state", call(t, sock, "update-state", map[string]any{"sid": sid, "agentState": "st-1", "expectedVersion": 0}),
		map[string]any{"result": "success", "version": 1.0, "agentState": "st-1"})
	eq(t, "state to null", call(t, sock, "update-state", map[string]any{"sid": sid, "agentState": nil, "expectedVersion": 1}),
		map[string]any{"result": "success", "version": 2.0, "agentState": nil})
	eq(t, "stale state", call(t, sock, "update-state", map[string]any{"sid": sid, "agentState": "x", "expectedVersion": 1}),
		map[string]any{"result": "version-mismatch", "version": 2.0, "agentState": nil})
	eq(t, "unknown session", call(t, sock, "update-metadata", map[string]any{"sid": "nope", "metadata": "m", "expectedVersion": 0}),
		map[string]any{"result": "error", "message": "Session not found"})
	eq(t, "unknown session state", call(t, sock, "update-state", map[string]any{"sid": "nope", "agentState": "m", "expectedVersion": 0}),
		map[string]any{"result": "error", "message": "Session not found"})
	eq(t, "bad params", call(t, sock, "update-metadata", map[string]any{"sid": sid, "metadata": 5, "expectedVersion": 0}),
		map[string]any{"result": "error", "message": "Invalid parameters"})
	eq(t, "missing agentState", call(t, sock, "update-state", map[string]any{"sid": sid, "expectedVersion": 0}),
		map[string]any{"result": "error", "message": "Invalid parameters"})

	wantBodies := []map[string]any{
		{"t": "update-session", "id": sid, "metadata": map[string]any{"value": "meta-1", "version": 1.0}},
		{"t": "update-session", "id": sid, "agentState": map[string]any{"value": "st-1", "version": 1.0}},
		{"t": "update-session", "id": sid, "agentState": map[string]any{"value": nil, "version": 2.0}},
	}
	for _, in := range []*inbox{sockIn, app} {
		var lastSeq float64
		for i, want := range wantBodies {
			u := in.nextObj("update")
			eq(t, "update keys", keys(u), []string{"body", "createdAt", "id", "seq"})
			eq(t, "body", u["body"], want)
			if seq := u["seq"].(float64); i > 0 && seq != lastSeq+1 {
				t.Fatalf("update seq %v after %v", seq, lastSeq)
			} else {
				lastSeq = seq
			}
		}
	}
	otherIn.none()
	s := obj(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"].([]any)[0])
	eq(t, "stored (and most recently updated)", []any{s["id"], s["metadata"], s["metadataVersion"], s["agentState"], s["agentStateVersion"]}, []any{sid, "meta-1", 1.0, nil, 2.0})
}

func TestMachineCompareAndSet(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	app := listen(t, userSocket(t, r.URL, a.token), "update", "ephemeral")
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "md-1"})
	nm := app.nextObj("update")["body"].(map[string]any)
	eq(t, "new-machine", []any{nm["t"], nm["machineId"], nm["metadata"], nm["metadataVersion"], nm["active"]}, []any{"new-machine", "m1", "md-1", 1.0, false})
	eq(t, "update-machine on create", app.nextObj("update")["body"], map[string]any{"t": "update-machine", "machineId": "m1", "metadata": map[string]any{"value": "md-1", "version": 1.0}})
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m2", "metadata": "md-2"})
	app.nextObj("update")
	app.nextObj("update")

	daemon := machineSocket(t, r.URL, a.token, "m1")
	din := listen(t, daemon, "update")
	on := app.nextObj("ephemeral")
	eq(t, "machine online", []any{on["type"], on["id"], on["active"]}, []any{"machine-activity", "m1", true})
	otherIn := listen(t, machineSocket(t, r.URL, a.token, "m2"), "update")
	app.nextObj("ephemeral")

	eq(t, "metadata", call(t, daemon, "machine-update-metadata", map[string]any{"machineId": "m1", "metadata": "md-2", "expectedVersion": 1}),
		map[string]any{"result": "success", "version": 2.0, "metadata": "md-2"})
	eq(t, "stale metadata", call(t, daemon, "machine-update-metadata", map[string]any{"machineId": "m1", "metadata": "md-x", "expectedVersion": 1}),
		map[string]any{"result": "version-mismatch", "version": 2.0, "metadata": "md-2"})
	eq(t, "daemon state", call(t, daemon, "machine-update-state", map[string]any{"machineId": "m1", "daemonState": "running", "expectedVersion": 0}),
		map[string]any{"result": "success", "version": 1.0, "daemonState": "running"})
	eq(t, "stale daemon state", call(t, daemon, "machine-update-state", map[string]any{"machineId": "m1", "daemonState": "x", "expectedVersion": 0}),
		map[string]any{"result": "version-mismatch", "version": 1.0, "daemonState": "running"})
	eq(t, "unknown machine", call(t, daemon, "machine-update-state", map[string]any{"machineId": "zz", "daemonState": "x", "expectedVersion": 0}),
		map[string]any{"result": "error", "message": "Machine not found"})
	eq(t, "bad params", call(t, daemon, "machine-update-metadata", map[string]any{"machineId": "m1"}),
		map[string]any{"result": "error", "message": "Invalid parameters"})
	for _, in := range []*inbox{din, app} {
		eq(t, "update 1", in.nextObj("update")["body"], map[string]any{"t": "update-machine", "machineId": "m1", "metadata": map[string]any{"value": "md-2", "version": 2.0}})
		eq(t, "update 2", in.nextObj("update")["body"], map[string]any{"t": "update-machine", "machineId": "m1", "daemonState": map[string]any{"value": "running", "version": 1.0}})
	}
	otherIn.none()
	m := obj(t, a.must(200, "GET", "/v1/machines/m1", nil)["machine"])
	eq(t, "daemon state makes active", m["active"], true)
	_ = daemon.Close()
	off := app.nextObj("ephemeral")
	eq(t, "machine offline", []any{off["type"], off["id"], off["active"]}, []any{"machine-activity", "m1", false})
}

func TestNewMessageFanout(t *testing.T) {
	r := servertest.Start(t)
	a, b := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	other := a.createSession("t2", "m")["id"].(string)
	sess := listen(t, sessionSocket(t, r.URL, a.token, sid), "update")
	app := listen(t, userSocket(t, r.URL, a.token), "update")
	otherIn := listen(t, sessionSocket(t, r.URL, a.token, other), "update")
	bApp := listen(t, userSocket(t, r.URL, b.token), "update", "ephemeral")
	bSess := listen(t, sessionSocket(t, r.URL, b.token, sid), "update", "ephemeral")

	rows := a.postMessages(sid, [2]string{"l1", "c1"}, [2]string{"l2", "c2"}, [2]string{"l3", "c3"})
	a.postMessages(sid, [2]string{"l2", "c2"}) // a retry creates nothing and sends nothing
	for _, in := range []*inbox{sess, app} {
		var first float64
		for i := 0; i < 3; i++ {
			u := in.nextObj("update")
			body := obj(t, u["body"])
			eq(t, "body keys", keys(body), []string{"message", "sid", "t"})
			eq(t, "t", body["t"], "new-message")
			eq(t, "sid", body["sid"], sid)
			msg := obj(t, body["message"])
			row := obj(t, rows[i])
			eq(t, "message", msg, map[string]any{"id": row["id"], "seq": row["seq"], "localId": row["localId"], "createdAt": row["createdAt"], "updatedAt": row["updatedAt"],
				"content": map[string]any{"t": "encrypted", "c": []string{"c1", "c2", "c3"}[i]}})
			if i == 0 {
				first = u["seq"].(float64)
			} else {
				eq(t, "update seq", u["seq"], first+float64(i))
			}
		}
		in.none()
	}
	otherIn.none()
	bApp.none()
	bSess.none()
}

func TestPresenceAliveEndAndSkew(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	cli := sessionSocket(t, r.URL, a.token, sid)
	cliIn := listen(t, cli, "clock-skew")
	app := listen(t, userSocket(t, r.URL, a.token), "ephemeral")

	now := float64(time.Now().UnixMilli())
	if err := cli.Emit("session-alive", map[string]any{"sid": sid, "time": now - 1000, "thinking": true, "mode": "remote"}); err != nil {
		t.Fatal(err)
	}
	e := app.nextObj("ephemeral")
	eq(t, "activity", e, map[string]any{"type": "activity", "id": sid, "active": true, "activeAt": now - 1000, "thinking": true})
	// A future time is clamped to the server's clock.
	res := call(t, cli, "session-alive", map[string]any{"sid": sid, "time": now + 3_600_000})
	if at := res["activeAt"].(float64); at > float64(time.Now().UnixMilli()) || at < now-5000 {
		t.Fatalf("future time not clamped: %v", res)
	}
	app.nextObj("ephemeral")

	// B29: a client 11 minutes behind is not dropped: the server uses its own time and says so once.
	skewed := now - 11*60*1000
	res = call(t, cli, "session-alive", map[string]any{"sid": sid, "time": skewed, "thinking": false})
	eq(t, "skewed alive accepted", res["result"], "success")
	if at := res["activeAt"].(float64); at < now {
		t.Fatalf("skewed keep-alive recorded at %v, want server time ≥ %v", at, now)
	}
	skew := cliIn.nextObj("clock-skew")
	eq(t, "skew event", []any{skew["event"], skew["clientTime"]}, []any{"session-alive", skewed})
	if s := skew["skewMs"].(float64); s < 11*60*1000 || s > 11*60*1000+10_000 {
		t.Fatalf("skewMs = %v", s)
	}
	e = app.nextObj("ephemeral")
	eq(t, "skewed activity", []any{e["active"], e["activeAt"]}, []any{true, res["activeAt"]})
	call(t, cli, "session-alive", map[string]any{"sid": sid, "time": skewed})
	app.nextObj("ephemeral")
	cliIn.none() // told once per connection
	// A time far outside the int64 range is no exception.
	res = call(t, cli, "session-alive", map[string]any{"sid": sid, "time": -9.3e18})
	if at := res["activeAt"].(float64); at < now {
		t.Fatalf("keep-alive at -9.3e18 recorded at %v, want server time ≥ %v", at, now)
	}
	app.nextObj("ephemeral")

	res = call(t, cli, "session-end", map[string]any{"sid": sid, "time": skewed})
	eq(t, "skewed end accepted", res["result"], "success")
	e = app.nextObj("ephemeral")
	eq(t, "end activity", []any{e["type"], e["id"], e["active"]}, []any{"activity", sid, false})
	s := obj(t, arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])[0])
	eq(t, "inactive after end", s["active"], false)
	eq(t, "v2 active after end", a.must(200, "GET", "/v2/sessions/active", nil), map[string]any{"sessions": []any{}})

	// Keep-alives right after an end are ignored (explicitly), until the session is asked for again by tag.
	eq(t, "alive after end", call(t, cli, "session-alive", map[string]any{"sid": sid, "time": now}), map[string]any{"result": "error", "message": "Session was ended"})
	a.createSession("t", "m")
	eq(t, "alive after resume", call(t, cli, "session-alive", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())})["result"], "success")
	app.nextObj("ephemeral")
	eq(t, "active again", obj(t, arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])[0])["active"], true)

	eq(t, "end unknown", call(t, cli, "session-end", map[string]any{"sid": "nope", "time": now}), map[string]any{"result": "error", "message": "Session not found"})
	eq(t, "end bad time", call(t, cli, "session-end", map[string]any{"sid": sid, "time": "x"}), map[string]any{"result": "error", "message": "Invalid parameters"})
	eq(t, "alive unknown", call(t, cli, "session-alive", map[string]any{"sid": "nope", "time": now}), map[string]any{"result": "error", "message": "Session not found"})

	// machine-alive
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	d := machineSocket(t, r.URL, a.token, "m1")
	app.nextObj("ephemeral") // online
	eq(t, "machine-alive", call(t, d, "machine-alive", map[string]any{"machineId": "m1", "time": float64(time.Now().UnixMilli())})["result"], "success")
	e = app.nextObj("ephemeral")
	eq(t, "machine activity", []any{e["type"], e["id"], e["active"]}, []any{"machine-activity", "m1", true})
	eq(t, "machine active", obj(t, a.must(200, "GET", "/v1/machines/m1", nil)["machine"])["active"], true)
	eq(t, "machine-alive unknown", call(t, d, "machine-alive", map[string]any{"machineId": "zz", "time": now}), map[string]any{"result": "error", "message": "Machine not found"})
}

func TestPresenceIdleTimeout(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{IdleTimeout: 400 * time.Millisecond, SweepInterval: 50 * time.Millisecond})
	a := newAPI(t, r)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	app := listen(t, userSocket(t, r.URL, a.token), "ephemeral")
	d := machineSocket(t, r.URL, a.token, "m1")
	app.nextObj("ephemeral")
	// Created only now, so its timeout cannot happen before the app listens.
	sid := a.createSession("t", "m")["id"].(string)
	call(t, d, "machine-alive", map[string]any{"machineId": "m1", "time": float64(time.Now().UnixMilli())})
	got := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-app.ch:
			e := obj(t, ev.args[0])
			if e["active"] == false && !(e["type"] == "machine-activity" && e["id"] == "m1" && got["machine-activity:m1"]) {
				got[e["type"].(string)+":"+e["id"].(string)] = true
			}
		case <-deadline:
			t.Fatalf("idle timeouts seen: %v", got)
		}
	}
	eq(t, "timed out", got, map[string]bool{"activity:" + sid: true, "machine-activity:m1": true})
	eq(t, "session inactive", obj(t, arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])[0])["active"], false)
	eq(t, "machine inactive", obj(t, a.must(200, "GET", "/v1/machines/m1", nil)["machine"])["active"], false)
}

func TestUsageReport(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	c := sessionSocket(t, r.URL, a.token, sid)
	app := listen(t, userSocket(t, r.URL, a.token), "ephemeral")
	rep := map[string]any{"key": "claude", "sessionId": sid, "tokens": map[string]any{"total": 10.0, "input": 4.0}, "cost": map[string]any{"total": 0.5}}
	res := call(t, c, "usage-report", rep)
	eq(t, "keys", keys(res), []string{"createdAt", "reportId", "success", "updatedAt"})
	eq(t, "success", res["success"], true)
	again := call(t, c, "usage-report", rep)
	eq(t, "same report updated", again["reportId"], res["reportId"])
	e := app.nextObj("ephemeral")
	eq(t, "usage", []any{e["type"], e["id"], e["key"], e["tokens"], e["cost"]}, []any{"usage", sid, "claude", rep["tokens"], rep["cost"]})
	app.nextObj("ephemeral")
	for _, c2 := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0}}, "Invalid key"},
		{map[string]any{"key": "k", "tokens": map[string]any{}, "cost": map[string]any{"total": 1.0}}, "Invalid tokens object - must include total"},
		{map[string]any{"key": "k", "tokens": map[string]any{"total": 1.0}}, "Invalid cost object - must include total"},
		{map[string]any{"key": "k", "tokens": map[string]any{"total": -1.0}, "cost": map[string]any{"total": 1.0}}, "Invalid tokens object - every count must be a number >= 0"},
		{map[string]any{"key": "k", "tokens": map[string]any{"total": 1.0, "input": "7"}, "cost": map[string]any{"total": 1.0}}, "Invalid tokens object - every count must be a number >= 0"},
		{map[string]any{"key": "k", "tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0, "output": -0.5}}, "Invalid cost object - every amount must be a number >= 0"},
		{map[string]any{"key": "k", "sessionId": 5.0, "tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0}}, "Invalid sessionId"},
		{map[string]any{"key": "k", "sessionId": "nope", "tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0}}, "Session not found"},
	} {
		eq(t, c2.want, call(t, c, "usage-report", c2.in), map[string]any{"success": false, "error": c2.want})
	}
	// Without a session: stored, no ephemeral.
	eq(t, "no session", call(t, c, "usage-report", map[string]any{"key": "k", "tokens": map[string]any{"total": 1.0}, "cost": map[string]any{"total": 1.0}})["success"], true)
	app.none()
}

func TestOversizedSocketPayload(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{MaxSocketPayload: 10_000})
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	c := sessionSocket(t, r.URL, a.token, sid)
	in := listen(t, c, "event-error")
	disc := make(chan string, 4)
	c.OnDisconnect(func(reason string) { disc <- reason })
	big := strings.Repeat("x", 20_000)
	res := call(t, c, "update-metadata", map[string]any{"sid": sid, "metadata": big, "expectedVersion": 0})
	eq(t, "result", res["result"], "error")
	if msg := res["message"].(string); !strings.HasPrefix(msg, "Payload too large: ") || !strings.HasSuffix(msg, " > limit 10000") {
		t.Fatalf("message = %q", msg)
	}
	rpc := call(t, c, "rpc-call", map[string]any{"method": sid + ":bash", "params": big})
	eq(t, "rpc-call shape", rpc["ok"], false)
	if err := c.Emit("session-alive", map[string]any{"sid": sid, "time": 1.0, "pad": big}); err != nil {
		t.Fatal(err)
	}
	ee := in.nextObj("event-error")
	eq(t, "event-error", []any{ee["event"], ee["limit"]}, []any{"session-alive", 10000.0})
	// The connection is still up and the metadata unchanged.
	eq(t, "ping after oversize", call(t, c, "ping", nil), map[string]any{})
	eq(t, "not written", obj(t, arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])[0])["metadataVersion"], 0.0)
	select {
	case reason := <-disc:
		t.Fatalf("disconnected: %s", reason)
	default:
	}
	// Just under the limit is processed.
	eq(t, "under limit", call(t, c, "update-metadata", map[string]any{"sid": sid, "metadata": strings.Repeat("y", 9000), "expectedVersion": 0})["result"], "success")
}
