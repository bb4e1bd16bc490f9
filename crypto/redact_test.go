package crypto

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// keyForms are the ways a 32-byte key could show up in formatted output: base64,
// base64url, hex (lower and upper), and Go's decimal array form.
func keyForms(k []byte) []string {
	dec := make([]string, 4)
	for i := range dec {
		dec[i] = fmt.Sprint(k[i])
	}
	return []string{
		EncodeBase64(k), EncodeBase64URL(k), fmt.Sprintf("%x", k[:6]), fmt.Sprintf("%X", k[:6]),
		strings.Join(dec, " "), strings.Join(dec, ", "),
	}
}

// TestKeyMaterialRedacted formats every type that holds a secret key with every verb a
// log line might use, and checks that the output is the redacted summary and that no
// form of the key appears.
func TestKeyMaterialRedacted(t *testing.T) {
	secret := testKey("account secret")
	machine := testKey("machine key")
	contentPub, _ := ContentKeyPair(secret)
	pubB64 := EncodeBase64(contentPub[:])
	paired := NewDataKeyCredentials(testToken, contentPub, machine)
	dataSession, err := paired.NewSession(WithRandom(newDetReader("session")))
	if err != nil {
		t.Fatal(err)
	}
	legacySession, err := NewLegacyCredentials(testToken, secret).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	material := DataKeyMaterial{ContentPublicKey: contentPub, MachineKey: machine}
	legacyResp := PairingResponse{Variant: VariantLegacy, Secret: secret}
	dataResp := PairingResponse{Variant: VariantDataKey, ContentPublicKey: contentPub}

	cases := []struct {
		name    string
		value   any
		summary string // what %v, %+v, %#v, %s and friends print
		secrets [][]byte
	}{
		{"legacy cipher", NewLegacyCipher(secret), "Cipher{variant=legacy key=redacted}", [][]byte{secret[:]}},
		{"blob cipher", NewBlobCipher(machine), "Cipher{variant=legacy key=redacted}", [][]byte{machine[:]}},
		{"dataKey cipher", NewDataKeyCipher(machine), "Cipher{variant=dataKey key=redacted}", [][]byte{machine[:]}},
		{"DataKeyMaterial", material,
			"DataKeyMaterial{publicKey=" + pubB64 + " machineKey=redacted}", [][]byte{machine[:]}},
		{"*DataKeyMaterial", &material,
			"DataKeyMaterial{publicKey=" + pubB64 + " machineKey=redacted}", [][]byte{machine[:]}},
		{"legacy PairingResponse", legacyResp, "PairingResponse{variant=legacy secret=redacted}", [][]byte{secret[:]}},
		{"*legacy PairingResponse", &legacyResp, "PairingResponse{variant=legacy secret=redacted}", [][]byte{secret[:]}},
		{"dataKey PairingResponse", dataResp, "PairingResponse{variant=dataKey contentPublicKey=" + pubB64 + "}", nil},
		{"*dataKey SessionEncryption", dataSession,
			"SessionEncryption{variant=dataKey dataEncryptionKey=105 bytes key=redacted}", [][]byte{dataSession.Key[:]}},
		{"dataKey SessionEncryption", *dataSession,
			"SessionEncryption{variant=dataKey dataEncryptionKey=105 bytes key=redacted}", [][]byte{dataSession.Key[:]}},
		{"*legacy SessionEncryption", legacySession,
			"SessionEncryption{variant=legacy dataEncryptionKey=null key=absent}", [][]byte{secret[:]}},
		{"Credentials", *paired,
			"Credentials{variant=dataKey token=set accountSecret=absent encryption=set}", [][]byte{machine[:], []byte(testToken)}},
		{"*Credentials", paired,
			"Credentials{variant=dataKey token=set accountSecret=absent encryption=set}", [][]byte{machine[:], []byte(testToken)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q", "%20v", "%-4s"} {
				got := fmt.Sprintf(verb, tc.value)
				want := tc.summary
				if verb == "%q" {
					want = fmt.Sprintf("%q", tc.summary)
				}
				if got != want {
					t.Errorf("%s: %q, want %q", verb, got, want)
				}
			}
			if got := fmt.Sprint(tc.value); got != tc.summary {
				t.Errorf("Sprint: %q", got)
			}
			if s, ok := tc.value.(fmt.Stringer); !ok || s.String() != tc.summary {
				t.Errorf("String() missing or %v", tc.value)
			}
			if g, ok := tc.value.(fmt.GoStringer); !ok || g.GoString() != tc.summary {
				t.Errorf("GoString() missing or different")
			}
			js, err := json.Marshal(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := json.Marshal(tc.summary); string(js) != string(want) {
				t.Errorf("JSON %s, want %s", js, want)
			}
			// Inside a container the summary must hold too (fmt recurses with %v).
			nested := fmt.Sprintf("%v %+v %#v", []any{tc.value}, map[string]any{"k": tc.value},
				struct{ V any }{tc.value})
			all := nested + string(js)
			for _, sec := range tc.secrets {
				forms := keyForms(sec)
				if len(sec) != KeySize {
					forms = []string{string(sec)}
				}
				for _, form := range forms {
					if strings.Contains(all, form) {
						t.Errorf("output %q leaks %q", all, form)
					}
				}
			}
		})
	}
}
