package server

import (
	"errors"
	"testing"
)

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"messages":[{"localId":"a","content":"b"}]}`, `{"messages":"x"}`, `[`, `{"messages":[1]}`, "\x00", `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req struct {
			Messages *[]struct {
				Content *string `json:"content"`
				LocalID *string `json:"localId"`
			} `json:"messages"`
		}
		err := decodeJSON(b, &req)
		if err == nil {
			return
		}
		var he *httpError
		if !errors.As(err, &he) || he.status != 400 || he.msg == "" {
			t.Fatalf("decodeJSON(%q) = %v, want a 400 with a reason", b, err)
		}
	})
}
