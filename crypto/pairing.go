package crypto

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
)

// PairingCodeChars is the number of base32 characters in a pairing code
// (50 bits of the fingerprint).
const PairingCodeChars = 10

var codeEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// PairingCode is the short code a terminal shows next to its pairing QR
// code: the first 10 characters of the RFC 4648 base32 (upper case, no
// padding) of SHA-256(publicKey), shown as two groups of five joined by a
// dash, "XXXXX-XXXXX". It is a fingerprint of the terminal's box public key,
// so the approving device can check that the key a relay hands it is the
// terminal's (docs/ARCHITECTURE.md, section "Pairing").
func PairingCode(publicKey [32]byte) string {
	sum := sha256.Sum256(publicKey[:])
	enc := codeEncoding.EncodeToString(sum[:])[:PairingCodeChars]
	return enc[:5] + "-" + enc[5:]
}

// ParsePairingCode normalises a typed pairing code to the form PairingCode
// gives: case is ignored, and spaces and dashes anywhere are dropped; the
// digits 0, 1 and 8, which are not in the base32 alphabet, are read as the
// letters O, I and B they are mistaken for. Anything else outside the
// alphabet is ErrBadEncoding, any other length than 10 characters
// ErrBadLength; the error quotes at most the first 20 bytes of s.
func ParsePairingCode(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '-' || c == '\t':
			continue
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c == '0':
			c = 'O'
		case c == '1':
			c = 'I'
		case c == '8':
			c = 'B'
		}
		if !(c >= 'A' && c <= 'Z') && !(c >= '2' && c <= '7') {
			return "", fmt.Errorf("crypto: pairing code %q: byte %d is not a base32 character: %w", cut(s, 20), i+1, ErrBadEncoding)
		}
		if b.Len() == PairingCodeChars {
			return "", fmt.Errorf("crypto: pairing code %q: more than %d characters: %w", cut(s, 20), PairingCodeChars, ErrBadLength)
		}
		b.WriteByte(c)
	}
	if b.Len() != PairingCodeChars {
		return "", fmt.Errorf("crypto: pairing code %q: %d characters, want %d: %w", cut(s, 20), b.Len(), PairingCodeChars, ErrBadLength)
	}
	out := b.String()
	return out[:5] + "-" + out[5:], nil
}

// cut returns at most n bytes of s, with "…" when it was longer.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
