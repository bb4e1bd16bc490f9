package crypto

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// vectors mirrors testdata/vectors.json (see testdata/README.md for its origin).
type vectors struct {
	Generator string `json:"generator"`
	Secretbox []struct {
		KeyB64        string `json:"keyB64"`
		PlaintextJSON string `json:"plaintextJSON"`
		BundleB64     string `json:"bundleB64"`
		Layout        string `json:"layout"`
	} `json:"secretbox"`
	AESGCM []struct {
		KeyB64        string `json:"keyB64"`
		PlaintextJSON string `json:"plaintextJSON"`
		BundleB64     string `json:"bundleB64"`
		Layout        string `json:"layout"`
	} `json:"aesgcm"`
	BoxBundle []struct {
		AccountSecretB64      string `json:"accountSecretB64"`
		ContentKeySeedB64     string `json:"contentKeySeedB64"`
		RecipientSecretKeyB64 string `json:"recipientSecretKeyB64"`
		RecipientPublicKeyB64 string `json:"recipientPublicKeyB64"`
		DataKeyB64            string `json:"dataKeyB64"`
		DataEncryptionKeyB64  string `json:"dataEncryptionKeyB64"`
		Layout                string `json:"layout"`
	} `json:"boxBundle"`
	DeriveKey []struct {
		SeedUTF8 string   `json:"seedUTF8"`
		Usage    string   `json:"usage"`
		Path     []string `json:"path"`
		KeyHex   string   `json:"keyHex"`
	} `json:"deriveKey"`
	LibsodiumPublicKey []struct {
		SeedB64         string `json:"seedB64"`
		BoxSecretKeyB64 string `json:"boxSecretKeyB64"`
		PublicKeyB64    string `json:"publicKeyB64"`
		Rule            string `json:"rule"`
	} `json:"libsodiumPublicKey"`
	Sign []struct {
		SeedB64      string `json:"seedB64"`
		PublicKeyB64 string `json:"publicKeyB64"`
		ChallengeB64 string `json:"challengeB64"`
		SignatureB64 string `json:"signatureB64"`
	} `json:"sign"`
	Base64URL []struct {
		Hex       string `json:"hex"`
		Base64    string `json:"base64"`
		Base64URL string `json:"base64url"`
	} `json:"base64url"`
	BackupKey []struct {
		SecretB64 string `json:"secretB64"`
		BackupKey string `json:"backupKey"`
		Rule      string `json:"rule"`
	} `json:"backupKey"`
}

func loadVectors(t testing.TB) *vectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var v vectors
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode vectors: %v", err)
	}
	// Guard against a truncated copy: every section the tests rely on has rows.
	counts := map[string]int{
		"secretbox": len(v.Secretbox), "aesgcm": len(v.AESGCM), "boxBundle": len(v.BoxBundle),
		"deriveKey": len(v.DeriveKey), "libsodiumPublicKey": len(v.LibsodiumPublicKey), "sign": len(v.Sign),
		"base64url": len(v.Base64URL), "backupKey": len(v.BackupKey),
	}
	for name, n := range counts {
		if n == 0 {
			t.Fatalf("vectors: section %q is empty", name)
		}
	}
	return &v
}

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := DecodeBase64(s)
	if err != nil {
		t.Fatalf("decode vector base64: %v", err)
	}
	return b
}

func mustKey(t testing.TB, s string) [32]byte {
	t.Helper()
	b := mustB64(t, s)
	if len(b) != 32 {
		t.Fatalf("vector key of %d bytes", len(b))
	}
	return [32]byte(b)
}

func TestVectorsSecretbox(t *testing.T) {
	for i, row := range loadVectors(t).Secretbox {
		key := mustKey(t, row.KeyB64)
		bundle := mustB64(t, row.BundleB64)
		got, err := NewLegacyCipher(key).Open(bundle)
		if err != nil {
			t.Fatalf("row %d: open: %v", i, err)
		}
		if string(got) != row.PlaintextJSON {
			t.Errorf("row %d: opened %q, want %q", i, got, row.PlaintextJSON)
		}
		sealed := SealLegacyWithNonce(key, [24]byte(bundle[:24]), []byte(row.PlaintextJSON))
		if !bytes.Equal(sealed, bundle) {
			t.Errorf("row %d: sealed with the vector's nonce:\n got %s\nwant %s", i, EncodeBase64(sealed), row.BundleB64)
		}
	}
}

func TestVectorsAESGCM(t *testing.T) {
	for i, row := range loadVectors(t).AESGCM {
		key := mustKey(t, row.KeyB64)
		bundle := mustB64(t, row.BundleB64)
		got, err := NewDataKeyCipher(key).Open(bundle)
		if err != nil {
			t.Fatalf("row %d: open: %v", i, err)
		}
		if string(got) != row.PlaintextJSON {
			t.Errorf("row %d: opened %q, want %q", i, got, row.PlaintextJSON)
		}
		sealed, err := SealDataKeyWithNonce(key, [12]byte(bundle[1:13]), []byte(row.PlaintextJSON))
		if err != nil {
			t.Fatalf("row %d: seal: %v", i, err)
		}
		if !bytes.Equal(sealed, bundle) {
			t.Errorf("row %d: sealed with the vector's nonce:\n got %s\nwant %s", i, EncodeBase64(sealed), row.BundleB64)
		}
	}
}

func TestVectorsBoxBundle(t *testing.T) {
	for i, row := range loadVectors(t).BoxBundle {
		secret := mustKey(t, row.AccountSecretB64)
		wantSeed := mustKey(t, row.ContentKeySeedB64)
		wantSK := mustKey(t, row.RecipientSecretKeyB64)
		wantPK := mustKey(t, row.RecipientPublicKeyB64)
		dataKey := mustKey(t, row.DataKeyB64)
		bundle := mustB64(t, row.DataEncryptionKeyB64)

		if seed := DeriveKey(secret[:], "Happy EnCoder", "content"); seed != wantSeed {
			t.Errorf("row %d: content seed %x, want %x", i, seed, wantSeed)
		}
		pk, sk := ContentKeyPair(secret)
		if pk != wantPK || sk != wantSK {
			t.Errorf("row %d: content key pair (%x, %x), want (%x, %x)", i, pk, sk, wantPK, wantSK)
		}
		got, err := UnwrapDataKey(bundle, sk)
		if err != nil {
			t.Fatalf("row %d: unwrap: %v", i, err)
		}
		if got != dataKey {
			t.Errorf("row %d: unwrapped %x, want %x", i, got, dataKey)
		}
		if len(bundle) != 105 || bundle[0] != 0 {
			t.Errorf("row %d: vector layout: %d bytes, first 0x%02x", i, len(bundle), bundle[0])
		}
		// Seal direction: the vector does not carry the ephemeral secret, so the bytes
		// cannot be reproduced; a fresh wrap must have the same layout and open to the
		// same key, and the session reopens through Credentials.
		wrapped, err := WrapDataKey(dataKey, pk)
		if err != nil {
			t.Fatalf("row %d: wrap: %v", i, err)
		}
		if len(wrapped) != len(bundle) || wrapped[0] != 0 {
			t.Errorf("row %d: wrapped layout: %d bytes, first 0x%02x", i, len(wrapped), wrapped[0])
		}
		if again, err := UnwrapDataKey(wrapped, sk); err != nil || again != dataKey {
			t.Errorf("row %d: round trip: %x, %v", i, again, err)
		}
		creds, err := NewAccountCredentials("t", secret)
		if err != nil {
			t.Fatal(err)
		}
		c, err := creds.OpenSession(row.DataEncryptionKeyB64)
		if err != nil {
			t.Fatalf("row %d: open session: %v", i, err)
		}
		probe := SealDataKeyWithNonceMust(t, dataKey, []byte(`{"probe":true}`))
		if out, err := c.Open(probe); err != nil || string(out) != `{"probe":true}` {
			t.Errorf("row %d: session cipher opens %q, %v", i, out, err)
		}
	}
}

// SealDataKeyWithNonceMust seals with a fixed nonce for probes.
func SealDataKeyWithNonceMust(t testing.TB, key [32]byte, plaintext []byte) []byte {
	t.Helper()
	b, err := SealDataKeyWithNonce(key, [12]byte{1, 2, 3}, plaintext)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVectorsDeriveKey(t *testing.T) {
	for i, row := range loadVectors(t).DeriveKey {
		got := DeriveKey([]byte(row.SeedUTF8), row.Usage, row.Path...)
		if hex.EncodeToString(got[:]) != row.KeyHex {
			t.Errorf("row %d (%q, %q, %q): %x, want %s", i, row.SeedUTF8, row.Usage, row.Path, got, row.KeyHex)
		}
	}
}

func TestVectorsLibsodiumPublicKey(t *testing.T) {
	for i, row := range loadVectors(t).LibsodiumPublicKey {
		pk, sk := BoxKeyPairFromSeed(mustKey(t, row.SeedB64))
		if sk != mustKey(t, row.BoxSecretKeyB64) {
			t.Errorf("row %d: secret %s, want %s", i, EncodeBase64(sk[:]), row.BoxSecretKeyB64)
		}
		if pk != mustKey(t, row.PublicKeyB64) {
			t.Errorf("row %d: public %s, want %s", i, EncodeBase64(pk[:]), row.PublicKeyB64)
		}
		if BoxPublicKey(sk) != pk {
			t.Errorf("row %d: BoxPublicKey(secret) differs from the pair's public key", i)
		}
	}
}

func TestVectorsSign(t *testing.T) {
	for i, row := range loadVectors(t).Sign {
		pub, priv := AuthKeyPair(mustKey(t, row.SeedB64))
		if EncodeBase64(pub) != row.PublicKeyB64 {
			t.Errorf("row %d: public key %s, want %s", i, EncodeBase64(pub), row.PublicKeyB64)
		}
		challenge := mustB64(t, row.ChallengeB64)
		sig, err := SignChallenge(priv, challenge)
		if err != nil {
			t.Fatalf("row %d: sign: %v", i, err)
		}
		if EncodeBase64(sig) != row.SignatureB64 {
			t.Errorf("row %d: signature %s, want %s", i, EncodeBase64(sig), row.SignatureB64)
		}
		if err := VerifyChallenge(pub, challenge, mustB64(t, row.SignatureB64)); err != nil {
			t.Errorf("row %d: verify: %v", i, err)
		}
	}
}

func TestVectorsBase64(t *testing.T) {
	for i, row := range loadVectors(t).Base64URL {
		raw, err := hex.DecodeString(row.Hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeBase64(raw); got != row.Base64 {
			t.Errorf("row %d: base64 %q, want %q", i, got, row.Base64)
		}
		if got := EncodeBase64URL(raw); got != row.Base64URL {
			t.Errorf("row %d: base64url %q, want %q", i, got, row.Base64URL)
		}
		padded := row.Base64URL
		for len(padded)%4 != 0 {
			padded += "="
		}
		for _, in := range []struct {
			name string
			s    string
			dec  func(string) ([]byte, error)
		}{
			{"base64", row.Base64, DecodeBase64},
			{"base64url", row.Base64URL, DecodeBase64URL},
			{"base64url padded", padded, DecodeBase64URL},
		} {
			got, err := in.dec(in.s)
			if err != nil {
				t.Errorf("row %d: decode %s %q: %v", i, in.name, in.s, err)
				continue
			}
			if !bytes.Equal(got, raw) {
				t.Errorf("row %d: decode %s %q = %x, want %s", i, in.name, in.s, got, row.Hex)
			}
		}
	}
}

func TestVectorsBackupKey(t *testing.T) {
	for i, row := range loadVectors(t).BackupKey {
		secret := mustKey(t, row.SecretB64)
		if got := FormatBackupKey(secret); got != row.BackupKey {
			t.Errorf("row %d: format %q, want %q", i, got, row.BackupKey)
		}
		got, err := ParseBackupKey(row.BackupKey)
		if err != nil {
			t.Fatalf("row %d: parse: %v", i, err)
		}
		if got != secret {
			t.Errorf("row %d: parsed %x, want %x", i, got, secret)
		}
	}
}
