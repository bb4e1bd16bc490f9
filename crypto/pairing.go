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

// MaxSealedToken is the most bytes of token SealToken seals and
// OpenSealedToken accepts (a relay token is a few hundred bytes).
const MaxSealedToken = 4096

// SealToken is the relay's side of delivering a pairing answer
// (docs/ARCHITECTURE.md, section "Pairing"): it seals the bearer token of
// the account for the pairing request's box public key as
// ephemeralPublicKey(32) | nonce(24) | box(token), the layout of the pairing
// response, with a fresh ephemeral key pair and nonce (crypto/rand, or
// WithRandom). Only the holder of the request's secret key opens it
// (OpenSealedToken), so a caller who knows only the public key gets nothing
// usable. Errors: ErrBadEncoding for a token that is empty or not printable
// ASCII (it must fit an Authorization header), ErrBadLength beyond
// MaxSealedToken bytes, or the random source's failure.
func SealToken(token string, publicKey [32]byte, opts ...Option) ([]byte, error) {
	if err := checkToken(token); err != nil {
		return nil, fmt.Errorf("crypto: seal token: %w", err)
	}
	ephemeralSecret, nonce, err := randomEphemeral(opts, "sealed token")
	if err != nil {
		return nil, err
	}
	return sealBox(nil, []byte(token), &publicKey, &ephemeralSecret, &nonce), nil
}

// OpenSealedToken opens a bundle of SealToken with the pairing request's box
// secret key and returns the token. Errors wrap ErrTruncated (shorter than
// the 72-byte header and tag), ErrBadLength (a token longer than
// MaxSealedToken), ErrAuthFailed (another key, or an altered bundle) or
// ErrBadEncoding (a token that is empty or not printable ASCII).
func OpenSealedToken(bundle []byte, secret [32]byte) (string, error) {
	if len(bundle) > boxMinBundle+MaxSealedToken {
		return "", fmt.Errorf("crypto: open sealed token of %d bytes (at most %d): %w", len(bundle), boxMinBundle+MaxSealedToken, ErrBadLength)
	}
	plain, err := openBox(bundle, &secret, "sealed token")
	if err != nil {
		return "", fmt.Errorf("crypto: %w", err)
	}
	if err := checkToken(string(plain)); err != nil {
		return "", fmt.Errorf("crypto: open sealed token: %w", err)
	}
	return string(plain), nil
}

// checkToken accepts 1 to MaxSealedToken bytes of printable ASCII (0x21 to
// 0x7e).
func checkToken(token string) error {
	if len(token) == 0 {
		return fmt.Errorf("empty token: %w", ErrBadEncoding)
	}
	if len(token) > MaxSealedToken {
		return fmt.Errorf("token of %d bytes (at most %d): %w", len(token), MaxSealedToken, ErrBadLength)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("token byte %d is 0x%02x, not printable ASCII: %w", i+1, c, ErrBadEncoding)
		}
	}
	return nil
}
