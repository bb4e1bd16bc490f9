package crypto

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"testing"
)

func TestAuthKeyPairAndSignature(t *testing.T) {
	secret := testKey("account")
	pub, priv := AuthKeyPair(secret)
	if len(pub) != 32 || len(priv) != 64 || !bytes.Equal(priv.Seed(), secret[:]) {
		t.Fatalf("key pair shapes: pub %d, priv %d", len(pub), len(priv))
	}
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), pub) {
		t.Fatal("public key does not match the private key")
	}
	challenge := bytes.Repeat([]byte{7}, ChallengeSize)
	sig, err := SignChallenge(priv, challenge)
	if err != nil || len(sig) != 64 {
		t.Fatalf("signature of %d bytes, %v", len(sig), err)
	}
	if err := VerifyChallenge(pub, challenge, sig); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if fromSeed, err := SignChallenge(ed25519.PrivateKey(secret[:]), challenge); err != nil || !bytes.Equal(fromSeed, sig) {
		t.Errorf("signing with the 32-byte seed differs from the 64-byte key: %v", err)
	}

	otherPub, _ := AuthKeyPair(testKey("other"))
	badSig := bytes.Clone(sig)
	badSig[0] ^= 1
	cases := []struct {
		name           string
		pub, chal, sig []byte
		want           error
	}{
		{"other key", otherPub, challenge, sig, ErrAuthFailed},
		{"other challenge", pub, bytes.Repeat([]byte{8}, 32), sig, ErrAuthFailed},
		{"flipped signature", pub, challenge, badSig, ErrAuthFailed},
		{"short public key", pub[:31], challenge, sig, ErrBadLength},
		{"nil public key", nil, challenge, sig, ErrBadLength},
		{"short signature", pub, challenge, sig[:63], ErrBadLength},
		{"nil signature", pub, challenge, nil, ErrBadLength},
	}
	for _, tc := range cases {
		if err := VerifyChallenge(tc.pub, tc.chal, tc.sig); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestNewAuthRequest(t *testing.T) {
	secret := testKey("account")
	req, err := NewAuthRequest(secret, WithRandom(newDetReader("challenge")))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := AuthKeyPair(secret)
	wantChallenge := make([]byte, 32)
	newDetReader("challenge").Read(wantChallenge)
	if req.PublicKey != EncodeBase64(pub) || req.Challenge != EncodeBase64(wantChallenge) {
		t.Errorf("request %+v", req)
	}
	sig, err := DecodeBase64(req.Signature)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyChallenge(pub, wantChallenge, sig); err != nil {
		t.Errorf("request signature: %v", err)
	}
	if _, err := NewAuthRequest(secret, WithRandom(failingReader{})); err == nil {
		t.Error("auth request with a failing random source succeeded")
	}
	a, _ := NewAuthRequest(secret)
	b, _ := NewAuthRequest(secret)
	if a.Challenge == b.Challenge {
		t.Error("two challenges are equal")
	}
}

// TestDeriveKeyDefinition restates the key tree with the standard library, step by
// step, so a refactor of DeriveKey cannot drift from the reference's definition.
func TestDeriveKeyDefinition(t *testing.T) {
	master := []byte("master bytes")
	root := hmac.New(sha512.New, []byte("use Master Seed"))
	root.Write(master)
	i := root.Sum(nil)
	if got := DeriveKey(master, "use"); !bytes.Equal(got[:], i[:32]) {
		t.Errorf("root key %x, want %x", got, i[:32])
	}
	for _, elem := range []string{"a", "", "ünï"} {
		child := hmac.New(sha512.New, i[32:])
		child.Write(append([]byte{0}, elem...))
		i = child.Sum(nil)
	}
	if got := DeriveKey(master, "use", "a", "", "ünï"); !bytes.Equal(got[:], i[:32]) {
		t.Errorf("path key %x, want %x", got, i[:32])
	}
	if DeriveKey(master, "use", "a") == DeriveKey(master, "use", "b") ||
		DeriveKey(master, "use", "a") == DeriveKey(master, "other", "a") ||
		DeriveKey(master, "use", "a", "b") == DeriveKey(master, "use", "ab") {
		t.Error("distinct derivations collide")
	}
	// ContentKeyPair is the seeded box pair of the "content" key.
	secret := testKey("account")
	seed := DeriveKey(secret[:], "Happy EnCoder", "content")
	digest := sha512.Sum512(seed[:])
	pub, sec := ContentKeyPair(secret)
	if !bytes.Equal(sec[:], digest[:32]) || BoxPublicKey(sec) != pub {
		t.Errorf("content key pair: secret %s", hex.EncodeToString(sec[:4]))
	}
}

// TestSignChallengeBadKey: a private key of the wrong length is an error wrapping
// ErrBadLength, never a silent empty signature.
func TestSignChallengeBadKey(t *testing.T) {
	challenge := bytes.Repeat([]byte{7}, ChallengeSize)
	_, priv := AuthKeyPair(testKey("account"))
	cases := []struct {
		name string
		key  ed25519.PrivateKey
		msg  string
	}{
		{"nil", nil, "crypto: sign challenge: private key of 0 bytes, want 64 (or a 32-byte seed): wrong length"},
		{"10 bytes", make(ed25519.PrivateKey, 10), "crypto: sign challenge: private key of 10 bytes, want 64 (or a 32-byte seed): wrong length"},
		{"31 bytes", priv[:31], "crypto: sign challenge: private key of 31 bytes, want 64 (or a 32-byte seed): wrong length"},
		{"33 bytes", priv[:33], "crypto: sign challenge: private key of 33 bytes, want 64 (or a 32-byte seed): wrong length"},
		{"63 bytes", priv[:63], "crypto: sign challenge: private key of 63 bytes, want 64 (or a 32-byte seed): wrong length"},
		{"65 bytes", append(bytes.Clone(priv), 0), "crypto: sign challenge: private key of 65 bytes, want 64 (or a 32-byte seed): wrong length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := SignChallenge(tc.key, challenge)
			if sig != nil || !errors.Is(err, ErrBadLength) || err.Error() != tc.msg {
				t.Fatalf("got %d bytes, %v; want %q", len(sig), err, tc.msg)
			}
		})
	}
}
