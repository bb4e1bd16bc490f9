package crypto

import (
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
)

// EncodeBase64 is standard base64 with '=' padding (RFC 4648 §4), the encoding of every
// opaque string and key the relay and access.key carry (Node's Buffer 'base64').
func EncodeBase64(b []byte) string {
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeBase64 decodes standard base64, with or without '=' padding. Line breaks
// (\r, \n) are ignored wherever they appear, before, inside or after the padding.
// Anything else outside the alphabet, including spaces and the URL-safe '-' and '_', is
// refused with ErrBadEncoding; the error gives the offending offset (counted in s, line
// breaks included) only, never the text. Unused low bits of the last character are not
// checked, as Node's Buffer does not check them, so a few spellings alias one value.
func DecodeBase64(s string) ([]byte, error) {
	b, err := decodeBase64(s, base64.StdEncoding, base64.RawStdEncoding, "base64")
	if err != nil {
		return nil, fmt.Errorf("crypto: %w", err)
	}
	return b, nil
}

// EncodeBase64URL is URL-safe base64 without padding (RFC 4648 §5), as the reference
// writes public keys into pairing URLs (happy://terminal?<base64url>).
func EncodeBase64URL(b []byte) string {
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeBase64URL decodes URL-safe base64, padded or unpadded (the reference appends
// the missing '=' itself, so both forms circulate). Line breaks are ignored as in
// DecodeBase64. Characters of the standard alphabet ('+', '/') are refused with
// ErrBadEncoding.
func DecodeBase64URL(s string) ([]byte, error) {
	b, err := decodeBase64(s, base64.URLEncoding, base64.RawURLEncoding, "base64url")
	if err != nil {
		return nil, fmt.Errorf("crypto: %w", err)
	}
	return b, nil
}

// decodeBase64 is DecodeBase64 and DecodeBase64URL without the package prefix on the
// error, for callers that add their own. Both encodings skip '\r' and '\n' anywhere;
// the unpadded one refuses '=' anywhere, so any '=' (even one followed by a line break)
// selects the padded decoder.
func decodeBase64(s string, padded, raw *base64.Encoding, name string) ([]byte, error) {
	enc := raw
	if strings.IndexByte(s, '=') >= 0 {
		enc = padded
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		// CorruptInputError carries only an offset.
		return nil, fmt.Errorf("decode %s of %d characters: %v: %w", name, len(s), err, ErrBadEncoding)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// Backup key: RFC 4648 base32 of the 32-byte account secret, without padding (52
// characters), in groups of 5 joined by '-' — the format the reference app shows as the
// account's secret key backup ("XXXXX-XXXXX-…-XX", 10 groups of 5 and one of 2).
const (
	backupGroup = 5
	backupChars = 52 // ceil(256 / 5)
)

var backupEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// FormatBackupKey formats an account secret the way the reference app prints it for
// backup: all 32 bytes in unpadded RFC 4648 base32 (upper case), in groups of 5 joined
// by '-', e.g. "RVUWY-NMN2H-…-DUHTI-AA" (52 characters, 62 with dashes).
func FormatBackupKey(secret [32]byte) string {
	enc := backupEncoding.EncodeToString(secret[:])
	var b strings.Builder
	b.Grow(len(enc) + len(enc)/backupGroup)
	for i := 0; i < len(enc); i += backupGroup {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(enc[i:min(i+backupGroup, len(enc))])
	}
	return b.String()
}

// ParseBackupKey reads a backup key typed or pasted by a person. Like the reference app
// it is tolerant: case is ignored; whitespace, dashes, '.', '_', '/', quotes, backticks
// and '=' padding are dropped wherever they appear; the look-alike digits 0, 1, 8,
// 9 are read as O, I, B, G. Unlike the reference, any other character is refused
// (ErrBadEncoding, with its position) rather than silently skipped. The remaining text
// must be exactly 52 base32 characters (ErrBadLength otherwise).
//
// Aliasing: 52 characters carry 260 bits for 256, so only the top bit of the last
// character counts and its 4 low bits are ignored, as the reference ignores them. Each
// secret therefore has 16 spellings of its last character (a key ending "-AA" reads the
// same with "-AB" … "-AP"), on top of the case and look-alike tolerance above. Compare
// secrets, never backup-key strings; FormatBackupKey always writes the canonical form
// (unused bits zero).
func ParseBackupKey(s string) ([32]byte, error) {
	var secret [32]byte
	clean := make([]byte, 0, backupChars)
	for i, r := range s {
		switch {
		case r >= 'A' && r <= 'Z', r >= '2' && r <= '7':
			clean = append(clean, byte(r))
		case r >= 'a' && r <= 'z':
			clean = append(clean, byte(r-'a'+'A'))
		case r == '0':
			clean = append(clean, 'O')
		case r == '1':
			clean = append(clean, 'I')
		case r == '8':
			clean = append(clean, 'B')
		case r == '9':
			clean = append(clean, 'G')
		case isBackupSeparator(r):
		default:
			return secret, fmt.Errorf("crypto: parse backup key: unexpected character at byte %d: %w", i, ErrBadEncoding)
		}
		if len(clean) > backupChars {
			return secret, fmt.Errorf("crypto: parse backup key: more than %d base32 characters: %w", backupChars, ErrBadLength)
		}
	}
	if len(clean) != backupChars {
		return secret, fmt.Errorf("crypto: parse backup key: %d base32 characters, want %d: %w", len(clean), backupChars, ErrBadLength)
	}
	n, err := backupEncoding.Decode(secret[:], clean)
	if err != nil || n != KeySize {
		// Unreachable for 52 alphabet characters; kept so a library change cannot
		// turn into a silently short key.
		return [32]byte{}, fmt.Errorf("crypto: parse backup key: base32 decode gave %d bytes: %w", n, ErrBadEncoding)
	}
	return secret, nil
}

func isBackupSeparator(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', '\u00a0', '-', '\u2010', '\u2011', '\u2013', '\u2014',
		'.', '_', '/', '"', '\'', '`', '=':
		return true
	}
	return false
}
