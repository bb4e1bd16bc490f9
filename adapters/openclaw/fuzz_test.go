package openclaw

import (
	"bytes"
	"errors"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// FuzzDecodeFrame: any bytes give a frame or a *FrameError with a drop
// reason, never a panic; a frame is one of the three types.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		prompt, accepted,
		`{"type":"event","event":"connect.challenge","payload":{"nonce":"n","ts":1}}`,
		`{"type":"event","event":"agent","payload":{"runId":"r","seq":1,"stream":"tool","ts":1,"data":{"phase":"start","toolCallId":"c","name":"exec","args":{"command":"ls"}}},"seq":3}`,
		`{"type":"res","id":"1","ok":false,"error":{"code":"UNAVAILABLE","message":"starting","retryable":true,"retryAfterMs":500}}`,
		`{"type":"event","event":"x","seq":-1}`, `{"type":"res","id":"1"}`, `[]`, `nul`, ``, `{"type":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeFrame(data)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Reason == "" || !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v is not a *FrameError with a reason", err)
			}
			return
		}
		switch fr.Type {
		case TypeReq, TypeRes, TypeEvent:
		default:
			t.Fatalf("frame type %q accepted", fr.Type)
		}
	})
}

// FuzzReplay: any traffic log replays without a panic; every line that is
// not blank yields events or a Dropped record, and an open turn is closed.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(`{"t":1,"dir":"c2a","msg":` + prompt + "}\n" + `{"t":2,"dir":"a2c","msg":` + accepted + "}\n"))
	f.Add([]byte(`{"t":1,"dir":"note","msg":{"happy":"gone","error":"x"}}` + "\nnot json\n"))
	f.Add([]byte(`{"t":1,"dir":"a2c","msg":{"type":"event","event":"exec.approval.requested","payload":{"id":"a","request":{"command":"ls"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := Replay(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		open := false
		for _, e := range evs {
			if agent.IsNilEvent(e) {
				t.Fatal("nil event")
			}
			switch e.(type) {
			case *agent.TurnStarted:
				open = true
			case *agent.TurnEnded:
				open = false
			}
		}
		if open {
			t.Fatal("a turn is left open at the end of the replay")
		}
	})
}
