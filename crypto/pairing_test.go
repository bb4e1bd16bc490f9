package crypto

import (
	"errors"
	"testing"
)

func TestPairingCode(t *testing.T) {
	var zero [32]byte
	// SHA-256 of 32 zero bytes is 66687aad…; its base32 starts MZUHVLPYMK.
	if got := PairingCode(zero); got != "MZUHV-LPYMK" {
		t.Fatalf("PairingCode(zero) = %q", got)
	}
	pub := BoxPublicKey([32]byte{8})
	code := PairingCode(pub)
	if len(code) != 11 || code[5] != '-' {
		t.Fatalf("code %q", code)
	}
	if other := PairingCode(BoxPublicKey([32]byte{16})); other == code {
		t.Fatalf("two keys, one code %q", code)
	}
}

func TestParsePairingCode(t *testing.T) {
	cases := []struct {
		in, want string
		err      error
	}{
		{"MZUHV-LPYMK", "MZUHV-LPYMK", nil},
		{"mzuhvlpymk", "MZUHV-LPYMK", nil},
		{" mzu hv-lpy mk ", "MZUHV-LPYMK", nil},
		{"0O1I8B22AA", "OOIIB-B22AA", nil},
		{"MZUHV-LPYM", "", ErrBadLength},
		{"MZUHV-LPYMKN", "", ErrBadLength},
		{"", "", ErrBadLength},
		{"MZUHV-LPY9K", "", ErrBadEncoding},
		{"MZUHV_LPYMK", "", ErrBadEncoding},
		{"MZUHVéLPYMK", "", ErrBadEncoding},
	}
	for _, c := range cases {
		got, err := ParsePairingCode(c.in)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ParsePairingCode(%q) = %q, %v; want %q, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func FuzzParsePairingCode(f *testing.F) {
	for _, s := range []string{"MZUHV-LPYMK", "mzuhvlpymk", "", "-----", "0O1I8B22AA", "MZUHV-LPYMKN", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParsePairingCode(s)
		if err != nil {
			if got != "" {
				t.Fatalf("error %v with result %q", err, got)
			}
			return
		}
		again, err := ParsePairingCode(got)
		if err != nil || again != got {
			t.Fatalf("normal form %q does not parse to itself: %q, %v", got, again, err)
		}
	})
}
