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
	unpadded := strings.TrimRight(s, "=")
	enc := func(pk, mk string) string { return fmt.Sprintf(`{"publicKey":%q,"machineKey":%q}`, pk, mk) }
	const prefix, suffix = "crypto: parse credentials: ", ": malformed credentials"
	cases := []struct {
		name, in, msg string
	}{
		{"empty file", ``, `not valid JSON (at byte 0)`},
		{"not JSON", `secret=abc`, `not valid JSON (at byte 1)`},
		{"truncated JSON", `{"secret":"` + s, `not valid JSON (at byte 55)`},
		{"array", `[]`, `not a JSON object (found array)`},
		{"string", `"x"`, `not a JSON object (found string)`},
		{"null", `null`, `not a JSON object (found null)`},
		{"trailing garbage", `{"secret":"` + s + `","token":"t"} x`, `not valid JSON (at byte 71)`},
		{"no token", `{"secret":"` + s + `"}`, `field "token": missing or empty`},
		{"empty token", `{"secret":"` + s + `","token":""}`, `field "token": missing or empty`},
		{"null token", `{"secret":"` + s + `","token":null}`, `field "token": missing or empty`},
		{"numeric token", `{"secret":"` + s + `","token":5}`, `field "token": not a JSON string (found number)`},
		{"no keys", `{"token":"t"}`, `neither "secret" nor "encryption"`},
		{"secret not base64", `{"secret":"!!!!","token":"t"}`, `field "secret": bad base64: illegal base64 data at input byte 0`},
		{"secret url alphabet", `{"secret":"-_` + s[2:] + `","token":"t"}`, `field "secret": bad base64: illegal base64 data at input byte 0`},
		{"secret unpadded", `{"secret":"` + unpadded + `","token":"t"}`,
			`field "secret": bad base64: 43 characters, want a multiple of 4 (padded standard base64)`},
		{"secret with LF inside", `{"secret":"` + s[:20] + `\n` + s[20:] + `","token":"t"}`, `field "secret": bad base64: line break at byte 20`},
		{"secret with trailing CRLF", `{"secret":"` + s + `\r\n","token":"t"}`, `field "secret": bad base64: line break at byte 44`},
		{"secret with trailing space", `{"secret":"` + s + ` ","token":"t"}`,
			`field "secret": bad base64: 45 characters, want a multiple of 4 (padded standard base64)`},
		{"secret 31 bytes", `{"secret":"` + short + `","token":"t"}`, `field "secret": 31 bytes, want 32`},
		{"secret empty", `{"secret":"","token":"t"}`, `field "secret": 0 bytes, want 32`},
		{"secret is a number", `{"secret":12,"token":"t"}`, `field "secret": not a JSON string (found number)`},
		{"secret is an object", `{"secret":{},"token":"t"}`, `field "secret": not a JSON string (found object)`},
		{"encryption without machine", `{"encryption":{"publicKey":"` + p + `"},"token":"t"}`,
			`field "encryption": needs both "publicKey" and "machineKey"`},
		{"encryption machineKey null", `{"encryption":{"publicKey":"` + p + `","machineKey":null},"token":"t"}`,
			`field "encryption": needs both "publicKey" and "machineKey"`},
		{"encryption not an object", `{"encryption":"` + p + `","token":"t"}`, `field "encryption": not a JSON object (found string)`},
		{"encryption an array", `{"encryption":[],"token":"t"}`, `field "encryption": not a JSON object (found array)`},
		{"publicKey 31 bytes", `{"encryption":` + enc(short, m) + `,"token":"t"}`, `field "encryption.publicKey": 31 bytes, want 32`},
		{"publicKey a number", `{"encryption":{"publicKey":1,"machineKey":"` + m + `"},"token":"t"}`,
			`field "encryption.publicKey": not a JSON string (found number)`},
		{"machineKey garbage", `{"encryption":` + enc(p, "%%%%") + `,"token":"t"}`,
			`field "encryption.machineKey": bad base64: illegal base64 data at input byte 0`},
		{"accountSecret alone", `{"accountSecret":"` + s + `","token":"t"}`, `"accountSecret" without "encryption"`},
		{"secret and accountSecret", `{"secret":"` + s + `","accountSecret":"` + s + `","encryption":` + enc(p, m) + `,"token":"t"}`,
			`both "secret" and "accountSecret"`},
		{"accountSecret mismatch", `{"encryption":` + enc(EncodeBase64(otherPub[:]), m) + `,"accountSecret":"` + s + `","token":"t"}`,
			`"accountSecret" does not match "encryption.publicKey"`},
		{"accountSecret bad", `{"encryption":` + enc(p, m) + `,"accountSecret":"` + short + `","token":"t"}`,
			`field "accountSecret": 31 bytes, want 32`},
		// Field names are case-sensitive, as JSON.parse and the reference's schema are.
		{"upper-case field names", `{"TOKEN":"t","SECRET":"` + s + `"}`, `field "token": missing or empty`},
		{"capitalised token", `{"Token":"t","secret":"` + s + `"}`, `field "token": missing or empty`},
		{"upper-case secret", `{"token":"t","SECRET":"` + s + `"}`, `neither "secret" nor "encryption"`},
		{"capitalised publicKey", `{"encryption":{"PublicKey":"` + p + `","machineKey":"` + m + `"},"token":"t"}`,
			`field "encryption": needs both "publicKey" and "machineKey"`},
		{"over 64 KiB", `{"secret":"` + s + `","token":"t"}` + strings.Repeat(" ", maxCredentialsFile), `larger than 65536 bytes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCredentials([]byte(tc.in))
			if !errors.Is(err, ErrBadCredentials) || c != nil {
				t.Fatalf("got %v, %v; want ErrBadCredentials", c, err)
			}
			if want := prefix + tc.msg + suffix; err.Error() != want {
				t.Errorf("error\n%s\nwant\n%s", err, want)
			}
			for _, secretText := range []string{s, m, short, s[:12]} {
				if strings.Contains(err.Error(), secretText) {
					t.Errorf("error %q quotes key material", err)
				}
			}
		})
	}
}

// TestParseCredentialsAsReference: inputs the reference CLI reads, and how.
func TestParseCredentialsAsReference(t *testing.T) {
	secret := testKey("account secret")
	pub, _ := ContentKeyPair(secret)
	otherPub, _ := ContentKeyPair(testKey("someone else"))
	machine := testKey("machine")
	s, m := EncodeBase64(secret[:]), EncodeBase64(machine[:])
	enc := func(pk [32]byte) string {
		return fmt.Sprintf(`{"publicKey":%q,"machineKey":%q}`, EncodeBase64(pk[:]), m)
	}
	cases := []struct {
		name  string
		in    string
		token string
		want  string // the redacted summary
		pub   *[32]byte
	}{
		// The reference keeps "encryption" next to "secret" whatever public key it holds
		// (it comes from a separate setup step, not from the secret).
		{"secret with another account's publicKey", `{"token":"t","secret":"` + s + `","encryption":` + enc(otherPub) + `}`,
			"t", "Credentials{variant=legacy token=set accountSecret=set encryption=set}", &otherPub},
		{"secret with its own publicKey", `{"secret":"` + s + `","encryption":` + enc(pub) + `,"token":"t"}`,
			"t", "Credentials{variant=legacy token=set accountSecret=set encryption=set}", &pub},
		{"exact and capitalised token", `{"token":"a","Token":"b","secret":"` + s + `"}`,
			"a", "Credentials{variant=legacy token=set accountSecret=set encryption=absent}", nil},
		{"capitalised then exact token", `{"Token":"b","token":"a","secret":"` + s + `"}`,
			"a", "Credentials{variant=legacy token=set accountSecret=set encryption=absent}", nil},
		{"duplicate token, last wins as in JSON.parse", `{"token":"a","token":"b","secret":"` + s + `"}`,
			"b", "Credentials{variant=legacy token=set accountSecret=set encryption=absent}", nil},
		{"unknown fields and nulls", `{"secret":"` + s + `","encryption":null,"accountSecret":null,"token":"t","newField":{"x":1},"SECRET":5}`,
			"t", "Credentials{variant=legacy token=set accountSecret=set encryption=absent}", nil},
		{"unknown field inside encryption", `{"encryption":{"publicKey":"` + EncodeBase64(pub[:]) + `","machineKey":"` + m + `","v":2},"token":"t"}`,
			"t", "Credentials{variant=dataKey token=set accountSecret=absent encryption=set}", &pub},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCredentials([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if c.Token != tc.token || c.String() != tc.want {
				t.Errorf("got token %q, %v; want %q, %s", c.Token, c, tc.token, tc.want)
			}
			if c.AccountSecret != nil && *c.AccountSecret != secret {
				t.Error("wrong account secret")
			}
			if tc.pub != nil && (c.DataKey == nil || c.DataKey.ContentPublicKey != *tc.pub || c.DataKey.MachineKey != machine) {
				t.Errorf("encryption %v", c.DataKey)
			}
			// What was read is written back and reads the same.
			out, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseCredentials(out)
			if err != nil || !credentialsEqual(back, c) {
				t.Errorf("round trip: %v, %v", back, err)
			}
		})
	}
}

func TestLoadCredentialsErrors(t *testing.T) {
	dir := t.TempDir()
	secret := testKey("account secret")
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	unpadded := strings.TrimRight(EncodeBase64(secret[:]), "=")
	cases := []struct {
		name, path, msg string
		is              error
	}{
		{"bad base64", write("a.key", `{"secret":"`+unpadded+`","token":"t"}`),
			`crypto: load credentials ` + filepath.Join(dir, "a.key") +
				`: field "secret": bad base64: 43 characters, want a multiple of 4 (padded standard base64): malformed credentials`,
			ErrBadCredentials},
		{"no token", write("b.key", `{"secret":"`+EncodeBase64(secret[:])+`"}`),
			`crypto: load credentials ` + filepath.Join(dir, "b.key") + `: field "token": missing or empty: malformed credentials`,
			ErrBadCredentials},
		{"oversized", write("c.key", strings.Repeat(" ", maxCredentialsFile+1)),
			`crypto: load credentials ` + filepath.Join(dir, "c.key") + `: larger than 65536 bytes: malformed credentials`,
			ErrBadCredentials},
		{"missing", filepath.Join(dir, "none.key"),
			`crypto: load credentials: open ` + filepath.Join(dir, "none.key") + `: no such file or directory`,
			fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadCredentials(tc.path)
			if c != nil || !errors.Is(err, tc.is) {
				t.Fatalf("got %v, %v; want %v", c, err, tc.is)
			}
			if runtime.GOOS != "windows" && err.Error() != tc.msg {
				t.Errorf("error\n%s\nwant\n%s", err, tc.msg)
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

// TestOpenSessionErrors: each failure reads once, with one "crypto:" prefix.
func TestOpenSessionErrors(t *testing.T) {
	secret := testKey("account secret")
	owner, err := NewAccountCredentials(testToken, secret, WithRandom(newDetReader("m")))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := ContentKeyPair(secret)
	otherPub, _ := ContentKeyPair(testKey("other account"))
	wrapped := WrapDataKeyWith(testKey("session"), pub, testKey("eph"), [24]byte{1})
	foreign := WrapDataKeyWith(testKey("session"), otherPub, testKey("eph"), [24]byte{1})
	paired := NewDataKeyCredentials(testToken, pub, testKey("machine"))
	cases := []struct {
		name  string
		creds *Credentials
		dek   string
		is    error
		msg   string
	}{
		{"not base64", owner, "!!", ErrBadEncoding,
			"crypto: open session key: decode base64 of 2 characters: illegal base64 data at input byte 0: bad encoding"},
		{"bad version", owner, EncodeBase64([]byte{1, 2, 3}), ErrUnsupportedVersion,
			"crypto: open session key: open wrapped data key: version byte 0x01: unsupported version byte (or a bundle of the other variant)"},
		{"short", owner, EncodeBase64(wrapped[:50]), ErrTruncated,
			"crypto: open session key: open wrapped data key of 50 bytes (want 105): truncated input"},
		{"long", owner, EncodeBase64(append(bytes.Clone(wrapped), 0)), ErrBadLength,
			"crypto: open session key: open wrapped data key of 106 bytes (want 105): wrong length"},
		{"other account's key", owner, EncodeBase64(foreign), ErrAuthFailed,
			"crypto: open session key: open wrapped data key: authentication failed (wrong key, wrong variant or altered data)"},
		{"no account secret", paired, EncodeBase64(wrapped), ErrNoAccountSecret,
			"crypto: open session key: account secret not available on this machine"},
		{"nil credentials", nil, "", ErrNoAccountSecret,
			"crypto: open session key: account secret not available on this machine"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.creds.OpenSession(tc.dek)
			if c != nil || !errors.Is(err, tc.is) || err.Error() != tc.msg {
				t.Fatalf("got %v, %v; want %q", c, err, tc.msg)
			}
		})
	}
	if c, err := owner.OpenSession(EncodeBase64(wrapped)); err != nil || c.Variant() != VariantDataKey {
		t.Fatalf("good key: %v, %v", c, err)
	}
}
