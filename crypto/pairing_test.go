package crypto

import (
	"errors"
	"strings"
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

func TestSealedToken(t *testing.T) {
	pub, sec, err := NewBoxKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	const token = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhIn0.c2ln"
	bundle, err := SealToken(token, pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 72+len(token) {
		t.Fatalf("bundle of %d bytes, want %d", len(bundle), 72+len(token))
	}
	if got, err := OpenSealedToken(bundle, sec); err != nil || got != token {
		t.Fatalf("OpenSealedToken = %q, %v", got, err)
	}
	// Whoever knows only the public key (or holds another key) gets nothing.
	_, other, _ := NewBoxKeyPair()
	if _, err := OpenSealedToken(bundle, other); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("another key: %v", err)
	}
	bundle[len(bundle)-1] ^= 1
	if _, err := OpenSealedToken(bundle, sec); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("altered bundle: %v", err)
	}
	if _, err := OpenSealedToken(bundle[:71], sec); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated bundle: %v", err)
	}
	if _, err := OpenSealedToken(make([]byte, 72+MaxSealedToken+1), sec); !errors.Is(err, ErrBadLength) {
		t.Fatalf("oversized bundle: %v", err)
	}
	for _, bad := range []string{"", "a b", "tok\n", "é"} {
		if _, err := SealToken(bad, pub); !errors.Is(err, ErrBadEncoding) {
			t.Errorf("SealToken(%q): %v", bad, err)
		}
	}
	// A bundle that opens to something that is not a token is refused.
	sealed, _ := SealPairingResponse(PairingResponse{Variant: VariantLegacy, Secret: [32]byte{1}}, pub)
	if _, err := OpenSealedToken(sealed, sec); !errors.Is(err, ErrBadEncoding) {
		t.Fatalf("a pairing response opened as a token: %v", err)
	}
	if _, err := SealToken(strings.Repeat("a", MaxSealedToken+1), pub); !errors.Is(err, ErrBadLength) {
		t.Fatalf("oversized token: %v", err)
	}
}
