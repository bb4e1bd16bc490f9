package server_test

import (
	"fmt"
	"testing"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/server/servertest"
)

// TestCompareAndSetEvents drives each of the four compare-and-set events
// through the shared handler: the exact ack of a success, of a stale write,
// of null, of every malformed field and of an unknown id; the update a
// success sends to the object's socket and to the account's apps (and to
// nobody else); and what the relay stores.
func TestCompareAndSetEvents(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	type object struct {
		id          string
		sock, other *sio.Client // the object's socket, another object's socket
	}
	newSession := func(name string) object {
		id := a.createSession(name, "v0")["id"].(string)
		otherID := a.createSession(name+"-other", "x")["id"].(string)
		return object{id, sessionSocket(t, r.URL, a.token, id), sessionSocket(t, r.URL, a.token, otherID)}
	}
	newMachine := func(name string) object {
		a.must(200, "POST", "/v1/machines", map[string]any{"id": name, "metadata": "v0"})
		a.must(200, "POST", "/v1/machines", map[string]any{"id": name + "-other", "metadata": "x"})
		return object{name, machineSocket(t, r.URL, a.token, name), machineSocket(t, r.URL, a.token, name+"-other")}
	}
	// stored reads the value, its version and the active flag back over HTTP.
	storedSession := func(id, key string) []any {
		for _, x := range arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"]) {
			if s := obj(t, x); s["id"] == id {
				return []any{s[key], s[key+"Version"], s["active"]}
			}
		}
		t.Fatalf("session %s not listed", id)
		return nil
	}
	storedMachine := func(id, key string) []any {
		m := obj(t, a.must(200, "GET", "/v1/machines/"+id, nil)["machine"])
		return []any{m[key], m[key+"Version"], m["active"]}
	}

	for _, tc := range []struct {
		event, idKey, valueKey string
		open                   func(name string) object
		stored                 func(id, key string) []any
		notFound               string
		// update is the t and id key of the update a success sends.
		updateT, updateIDKey string
		// base is the version before the first write (machine metadata
		// is written once when the machine is created).
		base     float64
		nullable bool
		// active is the active flag stored after a success (a session is
		// active from its creation; a machine's daemon state marks it
		// active, its metadata does not).
		active bool
	}{
		{"update-metadata", "sid", "metadata", newSession, storedSession, "Session not found", "update-session", "id", 0, false, true},
		{"update-state", "sid", "agentState", newSession, storedSession, "Session not found", "update-session", "id", 0, true, true},
		{"machine-update-metadata", "machineId", "metadata", newMachine, storedMachine, "Machine not found", "update-machine", "machineId", 1, false, false},
		{"machine-update-state", "machineId", "daemonState", newMachine, storedMachine, "Machine not found", "update-machine", "machineId", 0, false, true},
	} {
		t.Run(tc.event, func(t *testing.T) {
			o := tc.open("cas-" + tc.event)
			own := listen(t, o.sock, "update")
			other := listen(t, o.other, "update")
			app := listen(t, userSocket(t, r.URL, a.token), "update")
			args := func(id, value any, expected any) map[string]any {
				m := map[string]any{}
				for k, v := range map[string]any{tc.idKey: id, tc.valueKey: value, "expectedVersion": expected} {
					if _, skip := v.(missing); !skip {
						m[k] = v
					}
				}
				return m
			}
			send := func(m map[string]any) map[string]any { return call(t, o.sock, tc.event, m) }
			invalid := map[string]any{"result": "error", "message": "Invalid parameters"}
			v1, v2 := tc.base+1, tc.base+2

			eq(t, "success", send(args(o.id, "v1", tc.base)), map[string]any{"result": "success", "version": v1, tc.valueKey: "v1"})
			eq(t, "stale write", send(args(o.id, "vx", tc.base)), map[string]any{"result": "version-mismatch", "version": v1, tc.valueKey: "v1"})
			eq(t, "future version", send(args(o.id, "vx", v2)), map[string]any{"result": "version-mismatch", "version": v1, tc.valueKey: "v1"})
			wantUpdates := []map[string]any{{"t": tc.updateT, tc.updateIDKey: o.id, tc.valueKey: map[string]any{"value": "v1", "version": v1}}}
			wantStored := []any{"v1", v1, tc.active}
			if tc.nullable {
				eq(t, "null", send(args(o.id, nil, v1)), map[string]any{"result": "success", "version": v2, tc.valueKey: nil})
				eq(t, "stale after null", send(args(o.id, "vx", v1)), map[string]any{"result": "version-mismatch", "version": v2, tc.valueKey: nil})
				wantUpdates = append(wantUpdates, map[string]any{"t": tc.updateT, tc.updateIDKey: o.id, tc.valueKey: map[string]any{"value": nil, "version": v2}})
				wantStored = []any{nil, v2, tc.active}
			} else {
				eq(t, "null", send(args(o.id, nil, v1)), invalid)
			}
			for _, bad := range []struct {
				name string
				m    map[string]any
			}{
				{"value a number", args(o.id, 5.0, v1)},
				{"value an object", args(o.id, map[string]any{"a": "b"}, v1)},
				{"value missing", args(o.id, absent, v1)},
				{"id empty", args("", "vx", v1)},
				{"id a number", args(7.0, "vx", v1)},
				{"id missing", args(absent, "vx", v1)},
				{"version fractional", args(o.id, "vx", 0.5)},
				{"version negative", args(o.id, "vx", -1.0)},
				{"version a string", args(o.id, "vx", fmt.Sprint(v1))},
				{"version missing", args(o.id, "vx", absent)},
			} {
				eq(t, bad.name, send(bad.m), invalid)
			}
			eq(t, "unknown id", send(args("nope", "vx", 0.0)), map[string]any{"result": "error", "message": tc.notFound})

			for name, in := range map[string]*inbox{"object socket": own, "apps": app} {
				var first float64
				for i, want := range wantUpdates {
					u := in.nextObj("update")
					eq(t, name+" update body", u["body"], want)
					if i == 0 {
						first = u["seq"].(float64)
					} else {
						eq(t, name+" update seq", u["seq"], first+float64(i))
					}
				}
				in.none()
			}
			other.none()
			eq(t, "stored", tc.stored(o.id, tc.valueKey), wantStored)
		})
	}
}

// missing marks a field left out of an event's arguments.
type missing struct{}

var absent missing
