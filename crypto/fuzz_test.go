package crypto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Every open/decode function has a fuzz target. Each checks that arbitrary input never
// panics, that an error always wraps one of the package's sentinels with a nil/zero
// result, and that a success is real (round trips, correct sizes).

func sentinel(err error) bool {
	for _, s := range []error{ErrAuthFailed, ErrUnsupportedVersion, ErrTruncated, ErrBadEncoding,
		ErrBadLength, ErrBadCredentials, ErrNoAccountSecret, ErrPairingProof} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func FuzzLegacyOpen(f *testing.F) {
	key := testKey("fuzz")
	f.Add(SealLegacyWithNonce(key, [24]byte{1}, []byte(`{"a":1}`)))
	f.Add(SealLegacyWithNonce(key, [24]byte{2}, nil))
	f.Add([]byte{})
	f.Add(make([]byte, LegacyOverhead))
	c := NewLegacyCipher(key)
	f.Fuzz(func(t *testing.T, bundle []byte) {
		out, err := c.Open(bundle)
		if err != nil {
			if out != nil || !sentinel(err) {
				t.Fatalf("open: %v (result %d bytes)", err, len(out))
			}
			return
		}
		if out == nil || len(out) != len(bundle)-LegacyOverhead {
			t.Fatalf("opened %d bytes from a %d-byte bundle", len(out), len(bundle))
		}
		if again := SealLegacyWithNonce(key, [24]byte(bundle[:24]), out); !bytes.Equal(again, bundle) {
			t.Fatal("reseal with the same nonce differs")
		}
	})
}

func FuzzDataKeyOpen(f *testing.F) {
	key := testKey("fuzz")
	good, _ := SealDataKeyWithNonce(key, [12]byte{1}, []byte(`{"a":1}`))
	empty, _ := SealDataKeyWithNonce(key, [12]byte{2}, nil)
	f.Add(good)
	f.Add(empty)
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add(make([]byte, DataKeyOverhead))
	c := NewDataKeyCipher(key)
	f.Fuzz(func(t *testing.T, bundle []byte) {
		out, err := c.Open(bundle)
		if err != nil {
			if out != nil || !sentinel(err) {
				t.Fatalf("open: %v (result %d bytes)", err, len(out))
			}
			if len(bundle) > 0 && bundle[0] != 0 && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("version 0x%02x gave %v", bundle[0], err)
			}
			return
		}
		if out == nil || len(out) != len(bundle)-DataKeyOverhead || bundle[0] != 0 {
			t.Fatalf("opened %d bytes from a %d-byte bundle", len(out), len(bundle))
		}
		again, err := SealDataKeyWithNonce(key, [12]byte(bundle[1:13]), out)
		if err != nil || !bytes.Equal(again, bundle) {
			t.Fatalf("reseal with the same nonce differs: %v", err)
		}
	})
}

func FuzzCipherRoundTrip(f *testing.F) {
	f.Add([]byte(`{"role":"user"}`), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, plain []byte, dataKey bool) {
		var c Cipher = NewLegacyCipher(testKey("rt"))
		if dataKey {
			c = NewDataKeyCipher(testKey("rt"))
		}
		b, err := c.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Open(b)
		if err != nil || !bytes.Equal(out, plain) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzUnwrapDataKey(f *testing.F) {
	pk, sk := ContentKeyPair(testKey("account"))
	f.Add(WrapDataKeyWith(testKey("data"), pk, testKey("eph"), [24]byte{1}))
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add(make([]byte, 105))
	f.Fuzz(func(t *testing.T, bundle []byte) {
		key, err := UnwrapDataKey(bundle, sk)
		if err != nil {
			if key != ([32]byte{}) || !sentinel(err) {
				t.Fatalf("unwrap: %v", err)
			}
			return
		}
		if len(bundle) != 105 || bundle[0] != 0 {
			t.Fatalf("opened a %d-byte bundle", len(bundle))
		}
	})
}

func FuzzOpenPairingResponse(f *testing.F) {
	termPub, termSec, _ := NewBoxKeyPair(WithRandom(newDetReader("term")))
	legacy, _ := SealPairingResponse(PairingResponse{Variant: VariantLegacy, Secret: testKey("s")}, termPub,
		WithRandom(newDetReader("a")))
	dataKey, _ := SealPairingResponse(PairingResponse{Variant: VariantDataKey, ContentPublicKey: testKey("p")}, termPub,
		WithRandom(newDetReader("b")))
	f.Add(legacy)
	f.Add(dataKey)
	f.Add([]byte{})
	f.Add(make([]byte, 104))
	f.Fuzz(func(t *testing.T, bundle []byte) {
		resp, err := OpenPairingResponse(bundle, termSec)
		if err != nil {
			if resp != (PairingResponse{}) || !sentinel(err) {
				t.Fatalf("open: %v", err)
			}
			return
		}
		want := map[[2]bool]int{{false, false}: 104, {true, false}: 105, {false, true}: 136, {true, true}: 137}[[2]bool{resp.Variant == VariantDataKey, resp.Proven}]
		switch resp.Variant {
		case VariantLegacy, VariantDataKey:
			if len(bundle) != want {
				t.Fatalf("%s response (proven %v) from %d bytes", resp.Variant, resp.Proven, len(bundle))
			}
		default:
			t.Fatalf("success with variant %s", resp.Variant)
		}
	})
}

func FuzzDecodeBase64(f *testing.F) {
	for _, s := range []string{"", "+/8=", "+/8", "AAECAwQF+vv8/f7/", "-_8", "a", "====", "AA\nAA", "QQ==\n", "QQ=\r\n="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := DecodeBase64(s)
		if err != nil {
			if b != nil || !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("decode: %v", err)
			}
			return
		}
		if b == nil {
			t.Fatal("nil result without an error")
		}
		back, err := DecodeBase64(EncodeBase64(b))
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("re-encode round trip: %v", err)
		}
	})
}

func FuzzDecodeBase64URL(f *testing.F) {
	for _, s := range []string{"", "-w", "-w==", "-_-_", "AAECAwQF-vv8_f7_", "+/", "a", "-w==\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := DecodeBase64URL(s)
		if err != nil {
			if b != nil || !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("decode: %v", err)
			}
			return
		}
		if b == nil {
			t.Fatal("nil result without an error")
		}
		back, err := DecodeBase64URL(EncodeBase64URL(b))
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("re-encode round trip: %v", err)
		}
	})
}

func FuzzParseBackupKey(f *testing.F) {
	f.Add(FormatBackupKey(testKey("k")))
	f.Add("RVUWY-NMN2H-CFNDJ-PMSEN-4QPJT-B27UV-LOCFT-23ESL-ZG622-DUHTI-AA")
	f.Add("rvuwy nmn2h cfndj pmsen 4qpjt b27uv locft 23esl zg622 duhti aa")
	f.Add("")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, s string) {
		secret, err := ParseBackupKey(s)
		if err != nil {
			if secret != ([32]byte{}) || !(errors.Is(err, ErrBadEncoding) || errors.Is(err, ErrBadLength)) {
				t.Fatalf("parse: %v", err)
			}
			return
		}
		// Whatever was accepted reads back to the same key from its canonical form.
		again, err := ParseBackupKey(FormatBackupKey(secret))
		if err != nil || again != secret {
			t.Fatalf("canonical round trip: %v", err)
		}
	})
}

func FuzzParseCredentials(f *testing.F) {
	secret := testKey("account secret")
	legacy, _ := NewLegacyCredentials("t", secret).Encode()
	owner, _ := NewAccountCredentials("t", secret, WithRandom(newDetReader("m")))
	ownerFile, _ := owner.Encode()
	pub, _ := ContentKeyPair(secret)
	paired, _ := NewDataKeyCredentials("t", pub, testKey("m")).Encode()
	f.Add(legacy)
	f.Add(ownerFile)
	f.Add(paired)
	f.Add([]byte(`{"token":"t"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"TOKEN":"t","SECRET":"` + EncodeBase64(secret[:]) + `"}`))
	f.Add([]byte(`{"token":"a","Token":"b","secret":"` + EncodeBase64(secret[:]) + `\n"}`))
	f.Add([]byte(`{"token":"t","secret":"` + strings.TrimRight(EncodeBase64(secret[:]), "=") + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCredentials(data)
		if err != nil {
			if c != nil || !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("parse: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed credentials do not validate: %v", err)
		}
		enc, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseCredentials(enc)
		if err != nil || !credentialsEqual(back, c) {
			t.Fatalf("encode round trip: %v", err)
		}
	})
}

func FuzzVerifyChallenge(f *testing.F) {
	pub, priv := AuthKeyPair(testKey("a"))
	challenge := bytes.Repeat([]byte{1}, 32)
	sig, err := SignChallenge(priv, challenge)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(pub), challenge, sig)
	f.Add([]byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, pub, challenge, sig []byte) {
		err := VerifyChallenge(pub, challenge, sig)
		if err != nil && !sentinel(err) {
			t.Fatalf("verify: %v", err)
		}
	})
}

func FuzzOpenSession(f *testing.F) {
	secret := testKey("account secret")
	owner, err := NewAccountCredentials("t", secret, WithRandom(newDetReader("m")))
	if err != nil {
		f.Fatal(err)
	}
	pub, _ := ContentKeyPair(secret)
	sessionKey := testKey("session")
	good := WrapDataKeyWith(sessionKey, pub, testKey("eph"), [24]byte{1})
	f.Add(EncodeBase64(good))
	f.Add(EncodeBase64(good) + "\n")
	f.Add(strings.TrimRight(EncodeBase64(good), "="))
	f.Add("")
	f.Add("!!")
	f.Add(EncodeBase64([]byte{1, 2, 3}))
	f.Add(EncodeBase64(make([]byte, 105)))
	f.Add(EncodeBase64(good[:104]))
	probe := []byte(`{"probe":true}`)
	legacyBundle := SealLegacyWithNonce(secret, [24]byte{3}, probe)
	dataBundle, err := SealDataKeyWithNonce(sessionKey, [12]byte{3}, probe)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, dek string) {
		c, err := owner.OpenSession(dek)
		if err != nil {
			if c != nil || !sentinel(err) || strings.Count(err.Error(), "crypto:") != 1 {
				t.Fatalf("open session: %v (cipher %v)", err, c)
			}
			return
		}
		if c == nil {
			t.Fatal("nil cipher without an error")
		}
		if dek == "" {
			// Legacy: the account secret's secretbox.
			if out, err := c.Open(legacyBundle); c.Variant() != VariantLegacy || err != nil || !bytes.Equal(out, probe) {
				t.Fatalf("legacy session cipher: %s, %v", c.Variant(), err)
			}
			return
		}
		// A success means the string decoded to a 105-byte bundle that opened with the
		// content secret key, and the Cipher is AES-GCM under the key it held.
		wrapped, err := DecodeBase64(dek)
		if err != nil || len(wrapped) != 105 || c.Variant() != VariantDataKey {
			t.Fatalf("opened %q (%d bytes, %v) as %s", dek, len(wrapped), err, c.Variant())
		}
		_, contentSecret := ContentKeyPair(secret)
		key, err := UnwrapDataKey(wrapped, contentSecret)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := c.Seal(probe)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := NewDataKeyCipher(key).Open(sealed); err != nil || !bytes.Equal(out, probe) {
			t.Fatalf("cipher does not use the unwrapped key: %v", err)
		}
		if key == sessionKey {
			if out, err := c.Open(dataBundle); err != nil || !bytes.Equal(out, probe) {
				t.Fatalf("session cipher cannot open the session's bundle: %v", err)
			}
		}
	})
}
