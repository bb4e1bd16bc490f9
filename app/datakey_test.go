package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
)

// TestDataKeyDeviceReadsItsOwnSessions: a device paired the default way
// (dataKey credentials without the account secret) opens the sessions it
// created with the key its outbox kept, so happy log and happy sessions
// work there; another device's session stays unreadable to it.
func TestDataKeyDeviceReadsItsOwnSessions(t *testing.T) {
	envA, connA, _ := twoDevices(t)
	creds := *connA.Creds
	if creds.Variant != crypto.VariantDataKey || creds.DataKey == nil {
		t.Fatalf("account credentials %v, want dataKey", creds.Variant)
	}
	creds.AccountSecret = nil // as happy auth login's pairing leaves them
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Save(h.AccessKey()); err != nil {
		t.Fatal(err)
	}
	envC := Env{Home: h, Getenv: envA.Getenv, Log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connC, err := Connect(ctx, envC, ConnectOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { connC.Close() })

	run := func(env Env, conn *Conn, prompt string) string {
		ag := &fileAgent{events: make(chan agent.Event, 64)}
		sidc := make(chan string, 1)
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := RunSession(rctx, env, conn, ag, SessionOptions{Flavor: "fake", Dir: "/work", Prompt: prompt, ProviderID: "test",
				OnCreated: func(id string) { sidc <- id }})
			done <- err
		}()
		sid := <-sidc
		o, err := FindSession(ctx, connA, sid) // the owner reads every session
		if err != nil {
			t.Fatal(err)
		}
		waitTurns(t, connA, o, 1)
		rcancel()
		<-done
		return sid
	}
	own := run(envC, connC, "written here")
	other := run(envA, connA, "written elsewhere")

	o, err := FindSession(ctx, connC, own)
	if err != nil {
		t.Fatalf("the paired device opens its own session: %v", err)
	}
	rb, _, err := ReadTranscript(ctx, connC, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr := rb.Transcript(); len(tr.Messages) < 2 || len(tr.Dropped) != 0 || o.Metadata.Path != "/work" {
		t.Fatalf("own session read back: %d messages, dropped %+v, metadata %+v", len(tr.Messages), tr.Dropped, o.Metadata)
	}
	if _, err := FindSession(ctx, connC, other); !errors.Is(err, crypto.ErrNoAccountSecret) {
		t.Fatalf("another device's session = %v, want ErrNoAccountSecret", err)
	}
	// happy sessions lists it with its state unknown, never a guess.
	list, err := ListSessions(ctx, connC, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == other && (s.State != StateUnknown || s.Error == "") {
			t.Fatalf("an unreadable session listed as %q (error %q), want %q", s.State, s.Error, StateUnknown)
		}
	}
}
