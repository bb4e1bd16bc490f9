package crypto

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

const testToken = "eyJhbGciOiJFZERTQSJ9.payload.signature"

func goldenCredentials(t *testing.T) map[string]*Credentials {
	t.Helper()
	secret := testKey("account secret")
	contentPub, _ := ContentKeyPair(secret)
	machineKey := testKey("machine key")
	owner, err := NewAccountCredentials(testToken, secret, WithRandom(newDetReader("machine")))
	if err != nil {
		t.Fatal(err)
	}
	provisioned := NewLegacyCredentials(testToken, secret)
	provisioned.DataKey = &DataKeyMaterial{ContentPublicKey: contentPub, MachineKey: machineKey}
	return map[string]*Credentials{
		"legacy":                 NewLegacyCredentials(testToken, secret),
		"datakey":                NewDataKeyCredentials(testToken, contentPub, machineKey),
		"datakey-account-secret": owner,
		"legacy-with-encryption": provisioned,
	}
}

func TestCredentialsGolden(t *testing.T) {
	for name, creds := range goldenCredentials(t) {
		t.Run(name, func(t *testing.T) {
			got, err := creds.Encode()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "credentials", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encoded:\n%s\nwant:\n%s", got, want)
			}
			back, err := ParseCredentials(want)
			if err != nil {
				t.Fatal(err)
			}
			if !credentialsEqual(back, creds) {
				t.Errorf("parsed %v, want %v", back, creds)
			}
		})
	}
}

func credentialsEqual(a, b *Credentials) bool {
	eqSecret := (a.AccountSecret == nil) == (b.AccountSecret == nil) &&
		(a.AccountSecret == nil || *a.AccountSecret == *b.AccountSecret)
	eqData := (a.DataKey == nil) == (b.DataKey == nil) && (a.DataKey == nil || *a.DataKey == *b.DataKey)
	return a.Token == b.Token && a.Variant == b.Variant && eqSecret && eqData
}

// TestParseReferenceShapes parses files exactly as the reference CLI writes them
// (JSON.stringify(value, null, 2)), independent of our encoder.
func TestParseReferenceShapes(t *testing.T) {
	secret := testKey("account secret")
	pub, _ := ContentKeyPair(secret)
	machine := testKey("machine key")
	legacy := fmt.Sprintf("{\n  \"secret\": %q,\n  \"token\": %q\n}", EncodeBase64(secret[:]), testToken)
	dataKey := fmt.Sprintf("{\n  \"encryption\": {\n    \"publicKey\": %q,\n    \"machineKey\": %q\n  },\n  \"token\": %q\n}",
		EncodeBase64(pub[:]), EncodeBase64(machine[:]), testToken)

	c, err := ParseCredentials([]byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	if c.Variant != VariantLegacy || c.Token != testToken || *c.AccountSecret != secret || c.DataKey != nil {
		t.Errorf("legacy parsed as %v", c)
	}
	c, err = ParseCredentials([]byte(dataKey))
	if err != nil {
		t.Fatal(err)
	}
	if c.Variant != VariantDataKey || c.AccountSecret != nil || c.DataKey.ContentPublicKey != pub || c.DataKey.MachineKey != machine {
		t.Errorf("dataKey parsed as %v", c)
	}
	// Our encoder writes the reference's bytes for both shapes.
	if enc, _ := NewLegacyCredentials(testToken, secret).Encode(); string(enc) != legacy {
		t.Errorf("legacy encoded as\n%s\nwant\n%s", enc, legacy)
	}
	if enc, _ := NewDataKeyCredentials(testToken, pub, machine).Encode(); string(enc) != dataKey {
		t.Errorf("dataKey encoded as\n%s\nwant\n%s", enc, dataKey)
	}
	// Unknown fields and nulls are tolerated, as the reference's schema does.
	tolerant := fmt.Sprintf(`{"secret":%q,"encryption":null,"token":%q,"newField":{"x":1}}`, EncodeBase64(secret[:]), testToken)
	if c, err := ParseCredentials([]byte(tolerant)); err != nil || c.Variant != VariantLegacy {
		t.Errorf("tolerant legacy: %v, %v", c, err)
	}
}

func TestParseCredentialsErrors(t *testing.T) {
	secret := testKey("account secret")
	pub, _ := ContentKeyPair(secret)
	otherPub, _ := ContentKeyPair(testKey("someone else"))
	s := EncodeBase64(secret[:])
	p := EncodeBase64(pub[:])
	machineKey := testKey("machine")
	m := EncodeBase64(machineKey[:])
	short := EncodeBase64(secret[:31])
	enc := func(pk, mk string) string { return fmt.Sprintf(`{"publicKey":%q,"machineKey":%q}`, pk, mk) }
	cases := map[string]string{
		"empty file":                  ``,
		"not JSON":                    `secret=abc`,
		"truncated JSON":              `{"secret":"` + s,
		"array":                       `[]`,
		"string":                      `"x"`,
		"null":                        `null`,
		"trailing garbage":            `{"secret":"` + s + `","token":"t"} x`,
		"no token":                    `{"secret":"` + s + `"}`,
		"empty token":                 `{"secret":"` + s + `","token":""}`,
		"numeric token":               `{"secret":"` + s + `","token":5}`,
		"no keys":                     `{"token":"t"}`,
		"secret not base64":           `{"secret":"!!!","token":"t"}`,
		"secret 31 bytes":             `{"secret":"` + short + `","token":"t"}`,
		"secret is a number":          `{"secret":12,"token":"t"}`,
		"encryption without machine":  `{"encryption":{"publicKey":"` + p + `"},"token":"t"}`,
		"encryption not an object":    `{"encryption":"` + p + `","token":"t"}`,
		"publicKey 31 bytes":          `{"encryption":` + enc(short, m) + `,"token":"t"}`,
		"machineKey garbage":          `{"encryption":` + enc(p, "%%%") + `,"token":"t"}`,
		"accountSecret alone":         `{"accountSecret":"` + s + `","token":"t"}`,
		"secret and accountSecret":    `{"secret":"` + s + `","accountSecret":"` + s + `","encryption":` + enc(p, m) + `,"token":"t"}`,
		"accountSecret mismatch":      `{"encryption":` + enc(EncodeBase64(otherPub[:]), m) + `,"accountSecret":"` + s + `","token":"t"}`,
		"legacy secret mismatches pk": `{"secret":"` + s + `","encryption":` + enc(EncodeBase64(otherPub[:]), m) + `,"token":"t"}`,
		"accountSecret bad":           `{"encryption":` + enc(p, m) + `,"accountSecret":"` + short + `","token":"t"}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ParseCredentials([]byte(in))
			if !errors.Is(err, ErrBadCredentials) || c != nil {
				t.Fatalf("got %v, %v; want ErrBadCredentials", c, err)
			}
			for _, secretText := range []string{s, m, short, s[:12]} {
				if strings.Contains(err.Error(), secretText) {
					t.Errorf("error %q quotes key material", err)
				}
			}
		})
	}
}

func TestSaveAndLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", ".happy")
	path := filepath.Join(dir, CredentialsFileName)
	if _, err := LoadCredentials(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	for name, creds := range goldenCredentials(t) {
		if err := creds.Save(path); err != nil {
			t.Fatalf("%s: save: %v", name, err)
		}
		back, err := LoadCredentials(path)
		if err != nil {
			t.Fatalf("%s: load: %v", name, err)
		}
		if !credentialsEqual(back, creds) {
			t.Errorf("%s: loaded %v, want %v", name, back, creds)
		}
		if runtime.GOOS != "windows" {
			st, _ := os.Stat(path)
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
			}
			dst, _ := os.Stat(dir)
			if dst.Mode().Perm() != 0o700 {
				t.Errorf("folder mode %v, want 0700", dst.Mode().Perm())
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries after saves, want only %s", len(entries), CredentialsFileName)
	}

	// An existing world-readable file is replaced by a 0600 one.
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewLegacyCredentials("t", testKey("x")).Save(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file mode %v", st.Mode().Perm())
	}

	// Invalid credentials are refused before anything is written.
	before, _ := os.ReadFile(path)
	for _, bad := range []*Credentials{nil, {Token: "t"}, {Variant: VariantLegacy, AccountSecret: &[32]byte{}},
		{Token: "t", Variant: VariantDataKey}, {Token: "t", Variant: VariantLegacy}} {
		if err := bad.Save(path); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("save %v: %v", bad, err)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused save changed the file")
	}

	// A malformed file and an oversized one are refused with the path named.
	if err := os.WriteFile(path, []byte(`{"token":"t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(path); !errors.Is(err, ErrBadCredentials) || !strings.Contains(err.Error(), path) {
		t.Errorf("malformed file: %v", err)
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte(" "), maxCredentialsFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(path); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("oversized file: %v", err)
	}
}

func TestCredentialsRedacted(t *testing.T) {
	for name, c := range goldenCredentials(t) {
		js, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		jsValue, err := json.Marshal(*c)
		if err != nil {
			t.Fatal(err)
		}
		outputs := []string{
			fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%v %+v %#v", *c, *c, *c),
			string(js), string(jsValue),
		}
		secrets := []string{testToken, "payload"}
		if c.AccountSecret != nil {
			secrets = append(secrets, EncodeBase64(c.AccountSecret[:]), fmt.Sprintf("%x", c.AccountSecret[:4]))
		}
		if c.DataKey != nil {
			secrets = append(secrets, EncodeBase64(c.DataKey.MachineKey[:]))
		}
		for _, out := range outputs {
			for _, sec := range secrets {
				if strings.Contains(out, sec) {
					t.Errorf("%s: output %q leaks a secret", name, out)
				}
			}
			if !strings.Contains(out, "variant="+c.Variant.String()) {
				t.Errorf("%s: output %q lacks the variant", name, out)
			}
		}
	}
}

func TestSessionEncryption(t *testing.T) {
	secret := testKey("account secret")
	contentPub, _ := ContentKeyPair(secret)
	legacy := NewLegacyCredentials(testToken, secret)
	paired := NewDataKeyCredentials(testToken, contentPub, testKey("machine"))
	owner, err := NewAccountCredentials(testToken, secret)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"kind":"message","version":1}`)

	// Legacy: secretbox under the secret, null dataEncryptionKey.
	s, err := legacy.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if s.Cipher.Variant() != VariantLegacy || s.DataEncryptionKey != nil || s.Key != nil || s.DataEncryptionKeyBase64() != nil {
		t.Errorf("legacy session: %+v", s)
	}
	b, _ := s.Cipher.Seal(plain)
	if got, err := NewLegacyCipher(secret).Open(b); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("legacy session is not sealed with the account secret: %v", err)
	}
	c, err := legacy.OpenSession("")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Open(b); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("legacy reopen: %v", err)
	}

	// dataKey, paired machine: fresh key per session, wrapped for the content key; only
	// the account secret (the app, or an owner machine) can reopen it.
	s1, err := paired.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := paired.NewSession()
	if s1.Cipher.Variant() != VariantDataKey || s1.Key == nil || *s1.Key == *s2.Key {
		t.Fatalf("dataKey sessions must get distinct fresh keys")
	}
	if dek := s1.DataEncryptionKeyBase64(); dek == nil || *dek != EncodeBase64(s1.DataEncryptionKey) {
		t.Errorf("dataEncryptionKey base64: %v", dek)
	}
	b, _ = s1.Cipher.Seal(plain)
	if got, err := NewDataKeyCipher(*s1.Key).Open(b); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("session not sealed with its key: %v", err)
	}
	if _, err := paired.OpenSession(*s1.DataEncryptionKeyBase64()); !errors.Is(err, ErrNoAccountSecret) {
		t.Errorf("paired machine reopening: %v, want ErrNoAccountSecret", err)
	}
	reopened, err := owner.OpenSession(*s1.DataEncryptionKeyBase64())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := reopened.Open(b); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("owner reopen: %v", err)
	}
	// The owner can also read legacy sessions of the same account.
	legacyBundle, _ := NewLegacyCipher(secret).Seal(plain)
	if c, err := owner.OpenSession(""); err != nil {
		t.Fatal(err)
	} else if got, err := c.Open(legacyBundle); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("owner reading a legacy session: %v", err)
	}
	// Bad dataEncryptionKey strings are typed errors.
	if _, err := owner.OpenSession("!!"); !errors.Is(err, ErrBadEncoding) {
		t.Errorf("garbage dataEncryptionKey: %v", err)
	}
	if _, err := owner.OpenSession(EncodeBase64([]byte{1, 2, 3})); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("bad version dataEncryptionKey: %v", err)
	}
	otherOwner, _ := NewAccountCredentials(testToken, testKey("other account"))
	if _, err := otherOwner.OpenSession(*s1.DataEncryptionKeyBase64()); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("other account reopening: %v", err)
	}

	// Machine encryption: the machine key, wrapped for the content key.
	m, err := paired.MachineEncryption()
	if err != nil {
		t.Fatal(err)
	}
	if *m.Key != paired.DataKey.MachineKey {
		t.Error("machine encryption does not use the machine key")
	}
	_, contentSec := ContentKeyPair(secret)
	if k, err := UnwrapDataKey(m.DataEncryptionKey, contentSec); err != nil || k != paired.DataKey.MachineKey {
		t.Errorf("machine key wrap: %v", err)
	}
	if lm, err := legacy.MachineEncryption(); err != nil || lm.Cipher.Variant() != VariantLegacy || lm.DataEncryptionKey != nil {
		t.Errorf("legacy machine encryption: %+v, %v", lm, err)
	}

	// Deterministic with an injected stream; random failures surface.
	d1, _ := paired.NewSession(WithRandom(newDetReader("s")))
	d2, _ := paired.NewSession(WithRandom(newDetReader("s")))
	if !bytes.Equal(d1.DataEncryptionKey, d2.DataEncryptionKey) || *d1.Key != *d2.Key {
		t.Error("injected streams gave different sessions")
	}
	if _, err := paired.NewSession(WithRandom(failingReader{})); err == nil {
		t.Error("session with a failing random source succeeded")
	}
	if _, err := (&Credentials{}).NewSession(); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("invalid credentials: %v", err)
	}
}

func TestCredentialsFromPairingAndAuth(t *testing.T) {
	secret := testKey("account secret")
	contentPub, _ := ContentKeyPair(secret)
	termPub, termSec, _ := NewBoxKeyPair()

	for _, resp := range []PairingResponse{
		{Variant: VariantLegacy, Secret: secret},
		{Variant: VariantDataKey, ContentPublicKey: contentPub},
	} {
		bundle, err := SealPairingResponse(resp, termPub)
		if err != nil {
			t.Fatal(err)
		}
		opened, err := OpenPairingResponse(bundle, termSec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := CredentialsFromPairing(testToken, opened, WithRandom(newDetReader("mk")))
		if err != nil {
			t.Fatal(err)
		}
		if c.Variant != resp.Variant || c.Token != testToken {
			t.Errorf("from pairing: %v", c)
		}
		switch resp.Variant {
		case VariantLegacy:
			if c.AccountSecret == nil || *c.AccountSecret != secret || c.DataKey != nil {
				t.Errorf("legacy pairing: %v", c)
			}
			pub, _, err := c.AuthKeyPair()
			wantPub, _ := AuthKeyPair(secret)
			if err != nil || !bytes.Equal(pub, wantPub) {
				t.Errorf("auth key pair: %v", err)
			}
			if req, err := c.NewAuthRequest(); err != nil || req.PublicKey != EncodeBase64(wantPub) {
				t.Errorf("auth request: %+v, %v", req, err)
			}
		case VariantDataKey:
			first := make([]byte, 32)
			newDetReader("mk").Read(first)
			if c.AccountSecret != nil || c.DataKey.ContentPublicKey != contentPub || !bytes.Equal(c.DataKey.MachineKey[:], first) {
				t.Errorf("dataKey pairing: %v", c)
			}
			if _, _, err := c.AuthKeyPair(); !errors.Is(err, ErrNoAccountSecret) {
				t.Errorf("auth key pair without secret: %v", err)
			}
			if _, err := c.NewAuthRequest(); !errors.Is(err, ErrNoAccountSecret) {
				t.Errorf("auth request without secret: %v", err)
			}
		}
	}
	if _, err := CredentialsFromPairing("", PairingResponse{Variant: VariantLegacy}); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("empty token: %v", err)
	}
	if _, err := CredentialsFromPairing("t", PairingResponse{}); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("unknown variant: %v", err)
	}
	if _, err := CredentialsFromPairing("t", PairingResponse{Variant: VariantDataKey}, WithRandom(failingReader{})); err == nil {
		t.Error("pairing with a failing random source succeeded")
	}
	if _, err := NewAccountCredentials("t", secret, WithRandom(failingReader{})); err == nil {
		t.Error("account credentials with a failing random source succeeded")
	}
}
