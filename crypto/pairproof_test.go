package crypto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"regexp"
	"testing"

	"golang.org/x/crypto/nacl/box"
)

// The pairing secret and its proof (docs/ARCHITECTURE.md, section "Pairing").

func TestNewPairingSecret(t *testing.T) {
	got, err := NewPairingSecret(WithRandom(bytes.NewReader([]byte{0, 0, 0, 0, 0, 0, 0})))
	if err != nil || got != "AAAAA-AAAAA" {
		t.Fatalf("zero secret = %q, %v", got, err)
	}
	got, err = NewPairingSecret(WithRandom(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})))
	if err != nil || got != "77777-77777" {
		t.Fatalf("all-ones secret = %q, %v", got, err)
	}
	a, _ := NewPairingSecret()
	b, _ := NewPairingSecret()
	if !regexp.MustCompile(`^[A-Z2-7]{5}-[A-Z2-7]{5}$`).MatchString(a) || a == b {
		t.Fatalf("random secrets %q %q", a, b)
	}
	if _, err := NewPairingSecret(WithRandom(failingReader{})); err == nil {
		t.Fatal("a failing random source gave a secret")
	}
	if full := FullPairingCode([32]byte{}, "AAAAA-BBBBB"); full != "MZUHV-LPYMK-AAAAA-BBBBB" {
		t.Fatalf("FullPairingCode = %q", full)
	}
}

func TestParseFullPairingCode(t *testing.T) {
	for _, c := range []struct {
		in, code, secret string
		err              error
	}{
		{"MZUHV-LPYMK-AAAAA-BBBBB", "MZUHV-LPYMK", "AAAAA-BBBBB", nil},
		{"mzuhv lpymk aaaaa bbbbb", "MZUHV-LPYMK", "AAAAA-BBBBB", nil},
		{"MZUHVLPYMK0018B", "", "", ErrBadLength},
		{"MZUHVLPYMKOOIIB00000", "MZUHV-LPYMK", "OOIIB-OOOOO", nil},
		{"mzuhv-lpymk-0018b-aaaaa", "MZUHV-LPYMK", "OOIBB-AAAAA", nil},
		{"MZUHV-LPYMK", "MZUHV-LPYMK", "", nil},
		{"MZUHV-LPYMK-AAAAA", "", "", ErrBadLength},
		{"MZUHV-LPYMK-AAAAA-BBBBB-C", "", "", ErrBadLength},
		{"MZUHV-LPYMK-AAAAA-BBBB9", "", "", ErrBadEncoding},
		{"", "", "", ErrBadLength},
	} {
		code, secret, err := ParseFullPairingCode(c.in)
		if code != c.code || secret != c.secret || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ParseFullPairingCode(%q) = %q %q %v; want %q %q %v", c.in, code, secret, err, c.code, c.secret, c.err)
		}
	}
	// The short form's parser is unchanged: 20 characters are not a code.
	if _, err := ParsePairingCode("MZUHV-LPYMK-AAAAA-BBBBB"); !errors.Is(err, ErrBadLength) {
		t.Errorf("ParsePairingCode took the full code: %v", err)
	}
}

// TestPairingProofGolden pins the proof's construction (HMAC-SHA256 keyed
// by the 10 secret characters over domain | key | body); the web app's test
// checks its own against the same value.
func TestPairingProofGolden(t *testing.T) {
	var key [32]byte
	for i := range key {
		key[i] = byte(i)
	}
	body := append([]byte{1}, bytes.Repeat([]byte{0xab}, 32)...)
	got := PairingProof("ABCDE-FGHIJ", key, body)
	const want = "193340706b021267bb203021b75e4fea8a73a4ef5e4120c90642b62cff5d3123"
	if hex.EncodeToString(got[:]) != want {
		t.Fatalf("proof %x, want %s", got, want)
	}
}

func TestProvenPairingRoundTrip(t *testing.T) {
	termPub, termSec, _ := NewBoxKeyPair(WithRandom(newDetReader("term")))
	otherPub, _, _ := NewBoxKeyPair(WithRandom(newDetReader("other")))
	contentPub, _ := ContentKeyPair(testKey("account"))
	const secret = "QWERT-YUIOP"
	account := testKey("account")
	for _, tc := range []struct {
		resp    PairingResponse
		payload []byte
	}{
		{PairingResponse{Variant: VariantLegacy, Secret: account}, account[:]},
		{PairingResponse{Variant: VariantDataKey, ContentPublicKey: contentPub}, append([]byte{1}, contentPub[:]...)},
	} {
		t.Run(tc.resp.Variant.String(), func(t *testing.T) {
			proven, err := ProvePairingResponse(tc.resp, "qwert yuiop", termPub)
			if err != nil {
				t.Fatal(err)
			}
			wantProof := PairingProof(secret, termPub, tc.payload)
			if !proven.Proven || proven.Proof != wantProof {
				t.Fatalf("proof %x, want %x", proven.Proof, wantProof)
			}
			bundle, err := SealPairingResponse(proven, termPub)
			if err != nil {
				t.Fatal(err)
			}
			if want := 72 + len(tc.payload) + 32; len(bundle) != want {
				t.Fatalf("bundle of %d bytes, want %d", len(bundle), want)
			}
			var eph [32]byte
			var nonce [24]byte
			copy(eph[:], bundle[:32])
			copy(nonce[:], bundle[32:56])
			plain, ok := box.Open(nil, bundle[56:], &nonce, &eph, &termSec)
			if !ok || !bytes.Equal(plain, append(append([]byte(nil), tc.payload...), wantProof[:]...)) {
				t.Fatalf("payload %x", plain)
			}
			got, err := OpenPairingResponse(bundle, termSec)
			if err != nil || got != proven {
				t.Fatalf("opened %+v, %v", got, err)
			}
			if err := got.CheckProof(secret, termPub); err != nil {
				t.Fatalf("CheckProof: %v", err)
			}
			// Another secret, another request, no proof, another payload: refused.
			if err := got.CheckProof("QWERT-YUIOQ", termPub); !errors.Is(err, ErrPairingProof) {
				t.Errorf("wrong secret: %v", err)
			}
			if err := got.CheckProof(secret, otherPub); !errors.Is(err, ErrPairingProof) {
				t.Errorf("moved to another request: %v", err)
			}
			if err := tc.resp.CheckProof(secret, termPub); !errors.Is(err, ErrPairingProof) {
				t.Errorf("unproven: %v", err)
			}
			moved := got
			moved.Secret[0] ^= 1
			moved.ContentPublicKey[0] ^= 1
			if err := moved.CheckProof(secret, termPub); !errors.Is(err, ErrPairingProof) {
				t.Errorf("moved to another payload: %v", err)
			}
			if err := got.CheckProof("short", termPub); !errors.Is(err, ErrBadLength) {
				t.Errorf("malformed secret: %v", err)
			}
		})
	}
	// A proof made for the legacy payload does not hold for the dataKey one.
	legacy, _ := ProvePairingResponse(PairingResponse{Variant: VariantLegacy, Secret: contentPub}, secret, termPub)
	swapped := PairingResponse{Variant: VariantDataKey, ContentPublicKey: contentPub, Proven: true, Proof: legacy.Proof}
	if err := swapped.CheckProof(secret, termPub); !errors.Is(err, ErrPairingProof) {
		t.Errorf("a legacy proof on a dataKey payload: %v", err)
	}
	if _, err := ProvePairingResponse(PairingResponse{}, secret, termPub); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("proving an unknown variant: %v", err)
	}
	if _, err := ProvePairingResponse(PairingResponse{Variant: VariantLegacy}, "AAAA!-AAAAA", termPub); !errors.Is(err, ErrBadEncoding) {
		t.Errorf("proving with a malformed secret: %v", err)
	}
}

// FuzzDecodePairingPayload: whatever the opened payload, the decoder gives a
// sentinel error and a zero response, or a response whose payload is the
// input byte for byte.
func FuzzDecodePairingPayload(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add(make([]byte, 33))
	f.Add(append([]byte{1}, make([]byte, 64)...))
	f.Add(make([]byte, 64))
	f.Add(make([]byte, 65))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, plain []byte) {
		resp, err := decodePairingPayload(plain)
		if err != nil {
			if resp != (PairingResponse{}) || !sentinel(err) {
				t.Fatalf("decode: %v", err)
			}
			return
		}
		back, err := resp.payload()
		if err != nil || !bytes.Equal(back, plain) {
			t.Fatalf("payload %x re-encodes as %x (%v)", plain, back, err)
		}
	})
}

// FuzzParseFullPairingCode: a typed code is refused with a parse sentinel,
// or split into a code in normal form and a secret ("" or normal form)
// that read back to themselves.
func FuzzParseFullPairingCode(f *testing.F) {
	for _, s := range []string{"MZUHV-LPYMK-AAAAA-BBBBB", "mzuhvlpymk0018b22aaa", "MZUHV-LPYMK", "", "MZUHV-LPYMK-A", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, secret, err := ParseFullPairingCode(s)
		if err != nil {
			if code != "" || secret != "" || !(errors.Is(err, ErrBadEncoding) || errors.Is(err, ErrBadLength)) {
				t.Fatalf("error %v with %q %q", err, code, secret)
			}
			return
		}
		full := code
		if secret != "" {
			full += "-" + secret
		}
		c2, s2, err := ParseFullPairingCode(full)
		if err != nil || c2 != code || s2 != secret {
			t.Fatalf("normal form %q reads as %q %q, %v", full, c2, s2, err)
		}
		if again, err := ParsePairingCode(code); err != nil || again != code {
			t.Fatalf("code %q: %q, %v", code, again, err)
		}
	})
}
