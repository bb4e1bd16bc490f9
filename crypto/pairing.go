package crypto

import (
	"crypto/hmac"
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
	return group(codeEncoding.EncodeToString(sum[:])[:PairingCodeChars])
}

// ParsePairingCode normalises a typed pairing code to the form PairingCode
// gives: case is ignored, and spaces and dashes anywhere are dropped; the
// digits 0, 1 and 8, which are not in the base32 alphabet, are read as the
// letters O, I and B they are mistaken for. Anything else outside the
// alphabet is ErrBadEncoding, any other length than 10 characters
// ErrBadLength; the error quotes at most the first 20 bytes of s.
func ParsePairingCode(s string) (string, error) {
	out, err := normaliseCode(s, PairingCodeChars)
	if err != nil {
		return "", err
	}
	if len(out) != PairingCodeChars {
		return "", fmt.Errorf("crypto: pairing code %q: %d characters, want %d: %w", cut(s, 20), len(out), PairingCodeChars, ErrBadLength)
	}
	return group(out), nil
}

// normaliseCode is the reading of ParsePairingCode, up to max characters.
func normaliseCode(s string, max int) (string, error) {
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
		if b.Len() == max {
			return "", fmt.Errorf("crypto: pairing code %q: more than %d characters: %w", cut(s, 20), max, ErrBadLength)
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// group writes base32 characters as groups of five joined by dashes.
func group(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i += 5 {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(s[i:min(i+5, len(s))])
	}
	return b.String()
}

// The pairing secret (docs/ARCHITECTURE.md, section "Pairing"): 50 random
// bits a terminal shows only to the person, after its pairing code, so the
// approving device can prove it saw the terminal's screen.
const (
	// PairingSecretChars is the number of base32 characters of a pairing
	// secret (50 bits: a request is answered once, so a device that did
	// not see it has one guess).
	PairingSecretChars = 10
	// PairingProofSize is the size of a pairing proof (HMAC-SHA256).
	PairingProofSize = sha256.Size
	// pairingProofDomain starts every proven message, so a proof is good
	// for nothing else.
	pairingProofDomain = "happy-pairing-proof-v1"
)

// NewPairingSecret draws a pairing secret (crypto/rand, or WithRandom) as
// "SSSSS-SSSSS": 10 base32 characters, 50 bits. It fails only when the
// random source fails.
func NewPairingSecret(opts ...Option) (string, error) {
	var raw [7]byte
	if err := readRandom(applyOptions(opts).random, raw[:], "pairing secret"); err != nil {
		return "", err
	}
	return group(codeEncoding.EncodeToString(raw[:])[:PairingSecretChars]), nil
}

// FullPairingCode is what `happy auth login` shows to be typed on the
// approving device: the key's PairingCode (the part the relay's lookup
// uses) and the pairing secret (never sent to the relay),
// "XXXXX-XXXXX-SSSSS-SSSSS". secret is as NewPairingSecret gives it.
func FullPairingCode(publicKey [32]byte, secret string) string {
	return PairingCode(publicKey) + "-" + secret
}

// ParseFullPairingCode reads a typed pairing code the way ParsePairingCode
// does and splits it: the first 10 characters are the code ("XXXXX-XXXXX"),
// the next 10, when present, the pairing secret ("SSSSS-SSSSS"). A code of
// 10 characters gives an empty secret (the short form, which cannot prove
// anything); any length other than 10 or 20 is ErrBadLength, a character
// outside the alphabet ErrBadEncoding.
func ParseFullPairingCode(s string) (code, secret string, err error) {
	const full = PairingCodeChars + PairingSecretChars
	out, err := normaliseCode(s, full)
	if err != nil {
		return "", "", err
	}
	switch len(out) {
	case PairingCodeChars:
		return group(out), "", nil
	case full:
		return group(out[:PairingCodeChars]), group(out[PairingCodeChars:]), nil
	}
	return "", "", fmt.Errorf("crypto: pairing code %q: %d characters, want %d or %d: %w", cut(s, 20), len(out), PairingCodeChars, full, ErrBadLength)
}

// ParsePairingSecret normalises a pairing secret as ParsePairingCode does a
// code: exactly 10 base32 characters, returned as "SSSSS-SSSSS". Errors
// wrap ErrBadEncoding or ErrBadLength.
func ParsePairingSecret(s string) (string, error) {
	out, err := normaliseCode(s, PairingSecretChars)
	if err != nil {
		return "", err
	}
	if len(out) != PairingSecretChars {
		return "", fmt.Errorf("crypto: pairing secret: %d characters, want %d: %w", len(out), PairingSecretChars, ErrBadLength)
	}
	return group(out), nil
}

// PairingProof is HMAC-SHA256, keyed by the 10 characters of the pairing
// secret (dashes dropped; secret as ParsePairingSecret gives it), over
// "happy-pairing-proof-v1" | the terminal's 32-byte box public key | body,
// body the pairing payload without the proof (PairingResponse.body). The
// key and body bind it: it cannot be moved to another request or payload.
func PairingProof(secret string, terminalPublicKey [32]byte, body []byte) [PairingProofSize]byte {
	mac := hmac.New(sha256.New, []byte(strings.ReplaceAll(secret, "-", "")))
	mac.Write([]byte(pairingProofDomain))
	mac.Write(terminalPublicKey[:])
	mac.Write(body)
	var out [PairingProofSize]byte
	mac.Sum(out[:0])
	return out
}

// ProvePairingResponse returns resp with the proof that the approver saw
// the terminal's pairing secret (Proven, Proof = PairingProof over the
// proven payload). secret is any spelling ParsePairingSecret accepts.
// Errors: its parse errors, ErrUnsupportedVersion for an unknown Variant.
func ProvePairingResponse(resp PairingResponse, secret string, terminalPublicKey [32]byte) (PairingResponse, error) {
	norm, err := ParsePairingSecret(secret)
	if err != nil {
		return PairingResponse{}, err
	}
	resp.Proven = true
	body, err := resp.body()
	if err != nil {
		return PairingResponse{}, fmt.Errorf("crypto: prove pairing response: %w", err)
	}
	resp.Proof = PairingProof(norm, terminalPublicKey, body)
	return resp, nil
}

// CheckProof tells whether r carries a proof made with the terminal's
// pairing secret for its public key and this payload (constant time). An
// unproven response or another proof is ErrPairingProof; a malformed secret
// is its parse error.
func (r PairingResponse) CheckProof(secret string, terminalPublicKey [32]byte) error {
	norm, err := ParsePairingSecret(secret)
	if err != nil {
		return err
	}
	if !r.Proven {
		return fmt.Errorf("crypto: pairing response without proof: %w", ErrPairingProof)
	}
	body, err := r.body()
	if err != nil {
		return fmt.Errorf("crypto: check pairing proof: %w", err)
	}
	want := PairingProof(norm, terminalPublicKey, body)
	if !hmac.Equal(want[:], r.Proof[:]) {
		return fmt.Errorf("crypto: check pairing proof: %w", ErrPairingProof)
	}
	return nil
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
