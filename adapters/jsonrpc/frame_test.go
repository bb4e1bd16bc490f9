package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
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
		{`{"jsonrpc":"2\u002e0","method":"x"}`, KindNotification, "x", "0", true},
		{`{"jsonrpc" : "2.0" ,"method":"x"}`, KindNotification, "x", "0", true},
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

// TestEncode: outgoing frames keep the bytes happy has always written
// (members in a fixed order, the version member only when asked for).
func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		m    Message
		want string
	}{
		{Message{Kind: KindRequest, ID: ID{Num: 7}, Method: "m", Params: json.RawMessage(`{"a":1}`), Version: true}, `{"id":7,"jsonrpc":"2.0","method":"m","params":{"a":1}}`},
		{Message{Kind: KindRequest, ID: ID{Num: 7}, Method: "m"}, `{"id":7,"method":"m"}`},
		{Message{Kind: KindNotification, Method: "n", Params: json.RawMessage(`{}`), Version: true}, `{"jsonrpc":"2.0","method":"n","params":{}}`},
		{Message{Kind: KindNotification, Method: "a<b"}, `{"method":"a\u003cb"}`},
		{Message{Kind: KindResponse, ID: ID{Str: "x", IsString: true}, Result: json.RawMessage(`null`), Version: true}, `{"id":"x","result":null,"jsonrpc":"2.0"}`},
		{Message{Kind: KindResponse, ID: ID{Num: 0}, Result: json.RawMessage(`{"decision":"accept"}`)}, `{"id":0,"result":{"decision":"accept"}}`},
		{Message{Kind: KindResponse, ID: ID{Num: 3}, Error: &ErrorObject{Code: -32601, Message: "no"}, Version: true}, `{"id":3,"error":{"code":-32601,"message":"no"},"jsonrpc":"2.0"}`},
		{Message{Kind: KindResponse, ID: ID{Num: 3}, Error: &ErrorObject{Code: -32601, Message: "no"}}, `{"error":{"code":-32601,"message":"no"},"id":3}`},
	} {
		if got := string(encode(&tc.m)); got != tc.want {
			t.Errorf("encode(%+v) = %s, want %s", tc.m, got, tc.want)
		}
		if _, err := DecodeFrame([]byte(tc.want)); err != nil {
			t.Errorf("%s does not decode: %v", tc.want, err)
		}
	}
}

// TestDecodeFrameExtra: members JSON-RPC does not define are kept, once.
func TestDecodeFrameExtra(t *testing.T) {
	m, err := DecodeFrame([]byte(`{"method":"n","params":{},"emittedAtMs":17}`))
	if err != nil || m.Extra != nil || string(m.EmittedAtMs()) != "17" {
		t.Fatalf("emittedAtMs = %s, extra = %v, %v", m.EmittedAtMs(), m.Extra, err)
	}
	m, err = DecodeFrame([]byte(`{"method":"n","emittedAtMs":1,"x":[],"emittedAtMs":2,"x":{}}`))
	if err != nil || len(m.Extra) != 1 || string(m.Extra["x"]) != "{}" || string(m.EmittedAtMs()) != "2" {
		t.Fatalf("emittedAtMs = %s, extra = %v, %v", m.EmittedAtMs(), m.Extra, err)
	}
	// An emittedAtMs value of any length is given by EmittedAtMs.
	long := `"` + strings.Repeat("x", 1<<16) + `"`
	m, err = DecodeFrame([]byte(`{"method":"n","emittedAtMs":` + long + `}`))
	if err != nil || string(m.EmittedAtMs()) != long || m.Extra != nil {
		t.Fatalf("long emittedAtMs: %d bytes, extra %d members, %v", len(m.EmittedAtMs()), len(m.Extra), err)
	}
	if m, _ := DecodeFrame([]byte(`{"method":"n"}`)); m.Extra != nil {
		t.Fatalf("extra of a plain frame = %v", m.Extra)
	}
	// Member names are exact: "Method" is not the method.
	if _, err := DecodeFrame([]byte(`{"Method":"n"}`)); err == nil {
		t.Fatal("accepted a frame whose only method member is \"Method\"")
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
