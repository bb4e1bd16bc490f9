package jsonrpc

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestDecodeFrame(t *testing.T) {
	tests := []struct {
		in      string
		kind    Kind
		method  string
		id      string
		version bool
	}{
		{`{"method":"turn/started","params":{"threadId":"t"}}`, KindNotification, "turn/started", "0", false},
		{`{"jsonrpc":"2.0","method":"n","id":null}`, KindNotification, "n", "0", true},
		{`{"method":"item/commandExecution/requestApproval","id":0,"params":{}}`, KindRequest, "item/commandExecution/requestApproval", "0", false},
		{`{"jsonrpc":"2.0","id":"abc","method":"elicitation/create","params":{}}`, KindRequest, "elicitation/create", `"abc"`, true},
		{`{"id":3,"result":{"turn":{}}}`, KindResponse, "", "3", false},
		{`{"id":3,"result":null}`, KindResponse, "", "3", false},
		{`{"id":4,"error":{"code":-32601,"message":"nope"}}`, KindResponse, "", "4", false},
		{`{"id":5,"result":1,"error":null}`, KindResponse, "", "5", false},
		{"  {\"method\":\"x\"}\r\n", KindNotification, "x", "0", false},
	}
	for _, tt := range tests {
		m, err := DecodeFrame([]byte(tt.in))
		if err != nil {
			t.Errorf("DecodeFrame(%s): %v", tt.in, err)
			continue
		}
		if m.Kind != tt.kind || m.Method != tt.method || m.ID.String() != tt.id || m.Version != tt.version {
			t.Errorf("DecodeFrame(%s) = %v %q %s v=%v, want %v %q %s v=%v", tt.in, m.Kind, m.Method, m.ID, m.Version, tt.kind, tt.method, tt.id, tt.version)
		}
	}
	m, _ := DecodeFrame([]byte(`{"id":4,"error":{"code":-32601,"message":"nope"}}`))
	if m.Error == nil || m.Error.Code != -32601 || m.Error.Message != "nope" {
		t.Errorf("error object = %+v", m.Error)
	}
	_, err := DecodeFrame([]byte(`{`))
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrBadFrame) || fe.Reason != agent.DropUnparseableJSON {
		t.Errorf("err = %v", err)
	}
}

func TestStripVersion(t *testing.T) {
	out, err := stripVersion([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"jsonrpc":"keep"}}`))
	if err != nil || string(out) != `{"id":1,"method":"m","params":{"jsonrpc":"keep"}}` {
		t.Fatalf("stripVersion = %s, %v", out, err)
	}
}

// FuzzDecodeFrame: any input either decodes to a consistent message or is
// refused with a reason; never a panic.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"method":"turn/started","params":{"threadId":"t"}}`,
		`{"jsonrpc":"2.0","id":"abc","method":"x","params":[]}`,
		`{"id":3,"result":{"turn":{}}}`,
		`{"id":4,"error":{"code":-32601,"message":"nope"}}`,
		`{"id":null,"error":{"code":1,"message":"m"}}`,
		`[1]`, `"x"`, `{`, ``, `{"id":-1,"result":1}`, `{"id":1e3,"method":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeFrame(data)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Reason == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		switch m.Kind {
		case KindRequest, KindNotification:
			if m.Method == "" {
				t.Fatal("request without method")
			}
		case KindResponse:
			if m.Method != "" || (m.Error == nil) == (m.Result == nil) {
				t.Fatalf("inconsistent response %+v", m)
			}
		default:
			t.Fatalf("kind %v", m.Kind)
		}
		if !json.Valid(m.Raw) {
			t.Fatal("raw not valid JSON")
		}
	})
}

func BenchmarkDecodeFrame(b *testing.B) {
	line := []byte(`{"method":"item/agentMessage/delta","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","turnId":"01a227ce-b3d3-7bb2-bfd7-076c40458e4a","itemId":"msg_fake_2","delta":"Done: "},"emittedAtMs":1795964187793}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeFrame(line); err != nil {
			b.Fatal(err)
		}
	}
}
