package crypto

import (
	"encoding/json"
	"fmt"
	"io"
)

// Every type of this package that holds a secret key (the Ciphers, DataKeyMaterial,
// PairingResponse, SessionEncryption, Credentials) prints as a one-line summary that
// names the variant and says which keys are present, never their bytes or the token:
//
//   - String and GoString return the summary;
//   - Format prints it for every fmt verb (%v %+v %#v %s %d %x …), so no verb can fall
//     through to fmt's field-by-field printing; %q quotes it; width and flags are
//     ignored;
//   - MarshalJSON writes it as a JSON string, for loggers that encode values as JSON.
//
// Public keys (the content public key) are public and shown in base64. The access.key
// file format comes only from Credentials.Encode.

// formatRedacted writes summary for any verb; %q quotes it.
func formatRedacted(f fmt.State, verb rune, summary string) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", summary)
		return
	}
	io.WriteString(f, summary)
}

func marshalRedacted(summary string) ([]byte, error) {
	return json.Marshal(summary)
}

func (c *legacyCipher) summary() string { return "Cipher{variant=legacy key=redacted}" }

// String is the redacted summary "Cipher{variant=legacy key=redacted}".
func (c *legacyCipher) String() string { return c.summary() }

// GoString is the same redacted summary, for %#v.
func (c *legacyCipher) GoString() string { return c.summary() }

// Format prints the redacted summary for every verb.
func (c *legacyCipher) Format(f fmt.State, verb rune) { formatRedacted(f, verb, c.summary()) }

// MarshalJSON writes the redacted summary as a JSON string.
func (c *legacyCipher) MarshalJSON() ([]byte, error) { return marshalRedacted(c.summary()) }

func (c *dataKeyCipher) summary() string { return "Cipher{variant=dataKey key=redacted}" }

// String is the redacted summary "Cipher{variant=dataKey key=redacted}".
func (c *dataKeyCipher) String() string { return c.summary() }

// GoString is the same redacted summary, for %#v.
func (c *dataKeyCipher) GoString() string { return c.summary() }

// Format prints the redacted summary for every verb.
func (c *dataKeyCipher) Format(f fmt.State, verb rune) { formatRedacted(f, verb, c.summary()) }

// MarshalJSON writes the redacted summary as a JSON string.
func (c *dataKeyCipher) MarshalJSON() ([]byte, error) { return marshalRedacted(c.summary()) }

// String is a redacted summary: "DataKeyMaterial{publicKey=<base64> machineKey=redacted}".
func (m DataKeyMaterial) String() string {
	return fmt.Sprintf("DataKeyMaterial{publicKey=%s machineKey=redacted}", EncodeBase64(m.ContentPublicKey[:]))
}

// GoString is the same redacted summary, for %#v.
func (m DataKeyMaterial) GoString() string { return m.String() }

// Format prints the redacted summary for every verb.
func (m DataKeyMaterial) Format(f fmt.State, verb rune) { formatRedacted(f, verb, m.String()) }

// MarshalJSON writes the redacted summary as a JSON string (the file shape is
// Credentials.Encode's).
func (m DataKeyMaterial) MarshalJSON() ([]byte, error) { return marshalRedacted(m.String()) }

// String is a redacted summary: "PairingResponse{variant=legacy secret=redacted}", or
// "PairingResponse{variant=dataKey contentPublicKey=<base64>}".
func (r PairingResponse) String() string {
	if r.Variant == VariantDataKey {
		return fmt.Sprintf("PairingResponse{variant=%s contentPublicKey=%s}", r.Variant, EncodeBase64(r.ContentPublicKey[:]))
	}
	return fmt.Sprintf("PairingResponse{variant=%s secret=%s}", r.Variant, redactedOr(r.Secret != [32]byte{}))
}

// GoString is the same redacted summary, for %#v.
func (r PairingResponse) GoString() string { return r.String() }

// Format prints the redacted summary for every verb.
func (r PairingResponse) Format(f fmt.State, verb rune) { formatRedacted(f, verb, r.String()) }

// MarshalJSON writes the redacted summary as a JSON string.
func (r PairingResponse) MarshalJSON() ([]byte, error) { return marshalRedacted(r.String()) }

// String is a redacted summary: "SessionEncryption{variant=dataKey dataEncryptionKey=105
// bytes key=redacted}" (legacy: dataEncryptionKey=null key=absent). The wrapped key is
// only counted; the raw key never shown.
func (s SessionEncryption) String() string {
	variant := "none"
	if s.Cipher != nil {
		variant = s.Cipher.Variant().String()
	}
	dek := "null"
	if s.DataEncryptionKey != nil {
		dek = fmt.Sprintf("%d bytes", len(s.DataEncryptionKey))
	}
	return fmt.Sprintf("SessionEncryption{variant=%s dataEncryptionKey=%s key=%s}", variant, dek, redactedOr(s.Key != nil))
}

// GoString is the same redacted summary, for %#v.
func (s SessionEncryption) GoString() string { return s.String() }

// Format prints the redacted summary for every verb.
func (s SessionEncryption) Format(f fmt.State, verb rune) { formatRedacted(f, verb, s.String()) }

// MarshalJSON writes the redacted summary as a JSON string.
func (s SessionEncryption) MarshalJSON() ([]byte, error) { return marshalRedacted(s.String()) }

// String is a redacted summary for logs: the variant and which keys are present, never
// the token or key bytes: "Credentials{variant=legacy token=set accountSecret=set
// encryption=absent}".
func (c Credentials) String() string {
	return fmt.Sprintf("Credentials{variant=%s token=%s accountSecret=%s encryption=%s}",
		c.Variant, presence(c.Token != ""), presence(c.AccountSecret != nil), presence(c.DataKey != nil))
}

// GoString is the same redacted summary, for %#v.
func (c Credentials) GoString() string { return c.String() }

// Format prints the redacted summary for every verb (so %d or %x cannot reach the token).
func (c Credentials) Format(f fmt.State, verb rune) { formatRedacted(f, verb, c.String()) }

// MarshalJSON writes the redacted summary as a JSON string, so a logger that encodes
// values as JSON cannot leak the token or keys. The file format is Encode's.
func (c Credentials) MarshalJSON() ([]byte, error) { return marshalRedacted(c.String()) }

func presence(ok bool) string {
	if ok {
		return "set"
	}
	return "absent"
}

func redactedOr(ok bool) string {
	if ok {
		return "redacted"
	}
	return "absent"
}
