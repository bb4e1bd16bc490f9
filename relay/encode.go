package relay

import (
	"encoding/base64"
	"encoding/json"
)

// b64 is standard base64 with padding, the encoding of every binary field of
// the relay contract.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// unb64 decodes standard base64 (padding optional).
func unb64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
