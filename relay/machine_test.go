package relay

import (
	"context"
	"encoding/json"
	"github.com/happy-dev/happy/control"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/sio"
)

func testMachineStateAndRPC(t *testing.T, url string) {
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, url, creds, t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := newTag(t)
	m, err := c.OpenMachine(ctx, MachineOptions{ID: id, Metadata: json.RawMessage(`{"host":"box"}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if md, v := m.Metadata(); string(md) != `{"host":"box"}` || v != 1 {
		t.Fatalf("metadata %s v%d", md, v)
	}
	if ds, v := m.DaemonState(); ds != nil || v != 0 {
		t.Fatalf("daemon state %s v%d", ds, v)
	}
	if err := m.UpdateDaemonState(ctx, func(cur json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"status":"running"}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if ds, v := m.DaemonState(); string(ds) != `{"status":"running"}` || v != 1 {
		t.Fatalf("daemon state %s v%d", ds, v)
	}
	// Opening the same id again returns the relay's record unchanged.
	m2, err := c.OpenMachine(ctx, MachineOptions{ID: id, Metadata: json.RawMessage(`{"host":"other"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if md, _ := m2.Metadata(); string(md) != `{"host":"box"}` {
		t.Fatalf("second open metadata %s", md)
	}
	_ = m2.Close()

	m.RegisterRPC("spawn", func(_ context.Context, p json.RawMessage) (any, error) {
		return map[string]any{"spawned": json.RawMessage(p)}, nil
	})
	waitFor(t, m.Connected, "machine socket")
	app, err := sio.Dial(ctx, url, sio.Options{Auth: map[string]any{"token": creds.Token, "clientType": "user-scoped"}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	enc, err := creds.MachineEncryption()
	if err != nil {
		t.Fatal(err)
	}
	env := envelopeFor(t, id, "spawn", map[string]any{"dir": "/w"}, time.Now())
	res, err := app.Call(ctx, "rpc-call", map[string]any{"method": id + ":spawn", "params": seal(t, enc.Cipher, env)})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := res[0].(map[string]any)
	s, _ := r["result"].(string)
	plain, err := openPayload(m.cipher, "result", 0, s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := control.OpenAnswer(plain, env.ID)
	if r["ok"] != true || err != nil || string(out) != `{"spawned":{"dir":"/w"}}` {
		t.Fatalf("rpc %v %s %v", r, out, err)
	}
}
