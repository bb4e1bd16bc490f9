package crypto

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/crypto/nacl/box"
)

func TestWrapDataKeyLayout(t *testing.T) {
	pk, sk := ContentKeyPair(testKey("account"))
	dataKey := testKey("data")
	ephSecret := testKey("ephemeral")
	nonce := [24]byte{1, 2, 3, 4}
	wrapped := WrapDataKeyWith(dataKey, pk, ephSecret, nonce)
	if len(wrapped) != 105 {
		t.Fatalf("wrapped key of %d bytes, want 105", len(wrapped))
	}
	ephPub := BoxPublicKey(ephSecret)
	if wrapped[0] != 0 || !bytes.Equal(wrapped[1:33], ephPub[:]) || !bytes.Equal(wrapped[33:57], nonce[:]) {
		t.Fatalf("layout is not 0x00 | ephemeralPublicKey | nonce | box")
	}
	// The tail is exactly NaCl box(dataKey, nonce, recipient, ephemeral secret).
	want := box.Seal(nil, dataKey[:], &nonce, &pk, &ephSecret)
	if !bytes.Equal(wrapped[57:], want) {
		t.Errorf("box part differs from nacl box")
	}
	got, err := UnwrapDataKey(wrapped, sk)
	if err != nil || got != dataKey {
		t.Errorf("unwrap: %x, %v", got, err)
	}
	// Deterministic with an injected stream; fresh otherwise.
	a, _ := WrapDataKey(dataKey, pk, WithRandom(newDetReader("w")))
	b, _ := WrapDataKey(dataKey, pk, WithRandom(newDetReader("w")))
	c, _ := WrapDataKey(dataKey, pk)
	d, _ := WrapDataKey(dataKey, pk)
	if !bytes.Equal(a, b) || bytes.Equal(c, d) || bytes.Equal(c[1:57], d[1:57]) {
		t.Errorf("injected wraps must match, random wraps must differ in ephemeral key and nonce")
	}
	if _, err := WrapDataKey(dataKey, pk, WithRandom(failingReader{})); err == nil {
		t.Error("wrap with a failing random source succeeded")
	}
}

func TestUnwrapDataKeyErrors(t *testing.T) {
	pk, sk := ContentKeyPair(testKey("account"))
	_, otherSK := ContentKeyPair(testKey("other account"))
	wrapped := WrapDataKeyWith(testKey("data"), pk, testKey("eph"), [24]byte{9})
	withVersion := func(v byte) []byte { c := bytes.Clone(wrapped); c[0] = v; return c }
	flipped := bytes.Clone(wrapped)
	flipped[70] ^= 0x80
	// A well-formed box of 31 bytes: opens, but is not a key.
	eph, nonce := testKey("eph2"), [24]byte{3}
	short := sealBox([]byte{0}, make([]byte, 31), &pk, &eph, &nonce)
	long := sealBox([]byte{0}, make([]byte, 33), &pk, &eph, &nonce)
	cases := []struct {
		name   string
		bundle []byte
		sk     [32]byte
		want   error
	}{
		{"empty", nil, sk, ErrTruncated},
		{"version only", []byte{0}, sk, ErrTruncated},
		{"header only", wrapped[:57], sk, ErrTruncated},
		{"one short", wrapped[:104], sk, ErrTruncated},
		{"box of 31 bytes", short, sk, ErrTruncated},
		{"box of 33 bytes", long, sk, ErrBadLength},
		{"one extra byte", append(bytes.Clone(wrapped), 0), sk, ErrBadLength},
		{"version 1", withVersion(1), sk, ErrUnsupportedVersion},
		{"version 0x80 and short", []byte{0x80}, sk, ErrUnsupportedVersion},
		{"wrong secret key", wrapped, otherSK, ErrAuthFailed},
		{"public key used as secret", wrapped, pk, ErrAuthFailed},
		{"flipped box byte", flipped, sk, ErrAuthFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UnwrapDataKey(tc.bundle, tc.sk)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if got != ([32]byte{}) {
				t.Errorf("non-zero key alongside an error")
			}
		})
	}
}

func TestBoxKeyPairs(t *testing.T) {
	seed := testKey("seed")
	pk, sk := BoxKeyPairFromSeed(seed)
	if sk == seed {
		t.Error("seeded secret must be SHA-512(seed)[:32], not the seed")
	}
	if BoxPublicKey(sk) != pk {
		t.Error("BoxPublicKey(secret) differs from the seeded pair")
	}
	// BoxPublicKey agrees with x/crypto's own key generation.
	genPub, genPriv, err := box.GenerateKey(newDetReader("gen"))
	if err != nil {
		t.Fatal(err)
	}
	if BoxPublicKey(*genPriv) != *genPub {
		t.Error("BoxPublicKey disagrees with box.GenerateKey")
	}
	pub, sec, err := NewBoxKeyPair(WithRandom(newDetReader("pair")))
	if err != nil || BoxPublicKey(sec) != pub {
		t.Errorf("NewBoxKeyPair: %v", err)
	}
	first := make([]byte, 32)
	newDetReader("pair").Read(first)
	if !bytes.Equal(sec[:], first) {
		t.Error("NewBoxKeyPair did not take its secret from the injected stream")
	}
	if _, _, err := NewBoxKeyPair(WithRandom(failingReader{})); err == nil {
		t.Error("NewBoxKeyPair with a failing random source succeeded")
	}
	a, _, _ := NewBoxKeyPair()
	b, _, _ := NewBoxKeyPair()
	if a == b {
		t.Error("two random pairing key pairs are equal")
	}
}

func TestPairingRoundTrip(t *testing.T) {
	termPub, termSec, err := NewBoxKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	contentPub, _ := ContentKeyPair(testKey("account"))
	cases := []struct {
		resp    PairingResponse
		wantLen int
	}{
		{PairingResponse{Variant: VariantLegacy, Secret: testKey("account")}, 32 + 24 + 16 + 32},
		{PairingResponse{Variant: VariantDataKey, ContentPublicKey: contentPub}, 32 + 24 + 16 + 33},
	}
	for _, tc := range cases {
		t.Run(tc.resp.Variant.String(), func(t *testing.T) {
			bundle, err := SealPairingResponse(tc.resp, termPub)
			if err != nil {
				t.Fatal(err)
			}
			if len(bundle) != tc.wantLen {
				t.Errorf("bundle of %d bytes, want %d", len(bundle), tc.wantLen)
			}
			got, err := OpenPairingResponse(bundle, termSec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.resp {
				t.Errorf("opened %+v, want %+v", got.Variant, tc.resp.Variant)
			}
			// The payload is exactly what the reference app boxes.
			var ephPub [32]byte
			var nonce [24]byte
			copy(ephPub[:], bundle[:32])
			copy(nonce[:], bundle[32:56])
			payload, ok := box.Open(nil, bundle[56:], &nonce, &ephPub, &termSec)
			if !ok {
				t.Fatal("nacl box.Open failed on our bundle")
			}
			want := tc.resp.Secret[:]
			if tc.resp.Variant == VariantDataKey {
				want = append([]byte{0}, tc.resp.ContentPublicKey[:]...)
			}
			if !bytes.Equal(payload, want) {
				t.Errorf("payload %x, want %x", payload, want)
			}
		})
	}
	if _, err := SealPairingResponse(PairingResponse{}, termPub); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("sealing an unknown variant: %v", err)
	}
	if _, err := SealPairingResponse(cases[0].resp, termPub, WithRandom(failingReader{})); err == nil {
		t.Error("sealing with a failing random source succeeded")
	}
}

func TestOpenPairingResponseErrors(t *testing.T) {
	termPub, termSec, _ := NewBoxKeyPair(WithRandom(newDetReader("term")))
	_, otherSec, _ := NewBoxKeyPair(WithRandom(newDetReader("other")))
	eph, nonce := testKey("eph"), [24]byte{5}
	payload := func(p []byte) []byte { return sealBox(nil, p, &termPub, &eph, &nonce) }
	good := payload(make([]byte, 32))
	tagged := append([]byte{1}, make([]byte, 32)...)
	cases := []struct {
		name   string
		bundle []byte
		sec    [32]byte
		want   error
	}{
		{"empty", nil, termSec, ErrTruncated},
		{"header only", good[:56], termSec, ErrTruncated},
		{"one short of tag", good[:71], termSec, ErrTruncated},
		{"wrong terminal secret", good, otherSec, ErrAuthFailed},
		{"truncated payload", good[:len(good)-1], termSec, ErrAuthFailed},
		{"payload 0 bytes", payload(nil), termSec, ErrBadLength},
		{"payload 31 bytes", payload(make([]byte, 31)), termSec, ErrBadLength},
		{"payload 33 bytes tagged 0x01", payload(tagged), termSec, ErrUnsupportedVersion},
		{"payload 34 bytes", payload(make([]byte, 34)), termSec, ErrBadLength},
		{"payload 63 bytes", payload(make([]byte, 63)), termSec, ErrBadLength},
		{"payload 65 bytes tagged 0x00", payload(make([]byte, 65)), termSec, ErrUnsupportedVersion},
		{"payload 66 bytes", payload(make([]byte, 66)), termSec, ErrBadLength},
		{"oversized bundle", make([]byte, 4096), termSec, ErrBadLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OpenPairingResponse(tc.bundle, tc.sec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if got != (PairingResponse{}) {
				t.Errorf("non-zero response alongside an error")
			}
		})
	}
}
