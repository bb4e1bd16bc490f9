package claude

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// numberByDecoder is the reference numberOf keeps to: a json.Decoder
// with UseNumber.
func numberByDecoder(v []byte) (json.Number, bool) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	return n, dec.Decode(&n) == nil
}

func TestNumberOf(t *testing.T) {
	tests := []struct {
		raw  string
		want json.Number
		ok   bool
	}{
		{`106000`, "106000", true},
		{`-1.5e3`, "-1.5e3", true},
		{`null`, "", true},
		{`"42"`, "42", true},
		{`"4\u0032"`, "42", true},
		{`"x"`, "", false},
		{`""`, "", false},
		{`true`, "", false},
		{`{}`, "", false},
		{``, "", false},
	}
	for _, tt := range tests {
		got, ok := numberOf([]byte(tt.raw))
		if got != tt.want || ok != tt.ok {
			t.Errorf("numberOf(%s) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
		if ref, refOK := numberByDecoder([]byte(tt.raw)); ref != got || refOK != ok {
			t.Errorf("numberOf(%s) = %q, %v; encoding/json %q, %v", tt.raw, got, ok, ref, refOK)
		}
	}
}

// FuzzNumberOf compares numberOf with encoding/json on valid values.
func FuzzNumberOf(f *testing.F) {
	for _, s := range []string{`1`, `"2"`, `null`, `"1e"`, `[1]`, `"\u0031"`, `-0.0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !jsonlex.Valid(raw) || len(bytes.TrimSpace(raw)) != len(raw) {
			return
		}
		got, ok := numberOf(raw)
		if ref, refOK := numberByDecoder(raw); ref != got || refOK != ok {
			t.Fatalf("numberOf(%s) = %q, %v; encoding/json %q, %v", raw, got, ok, ref, refOK)
		}
	})
}
