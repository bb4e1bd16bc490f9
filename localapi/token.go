package localapi

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/happy-dev/happy/internal/private"
)

// TokenLen is the length of a token: 32 random bytes in lowercase hex.
const TokenLen = 64

// ErrBadToken wraps every refusal of a token file's content.
var ErrBadToken = errors.New("localapi: bad token")

// ParseToken reads a token file's content: exactly TokenLen lowercase hex
// digits, optionally followed by one "\n" (what LoadOrCreateToken writes).
// Anything else is an error wrapping ErrBadToken that says what is wrong
// (the file's bytes are never echoed: they are a secret).
func ParseToken(b []byte) (string, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if len(s) != TokenLen {
		return "", fmt.Errorf("%w: %d bytes, want %d hex digits and a newline", ErrBadToken, len(b), TokenLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("%w: byte %d is not a lowercase hex digit", ErrBadToken, i)
		}
	}
	return s, nil
}

// LoadOrCreateToken returns the token kept in the file path (in the happy
// home folder: home.Dir.EventsToken), making it on first use: 32 random
// bytes in hex and a newline, mode 0600, the folder made 0700 when
// missing. Two processes creating it at once end up with the same token
// (the file appears whole, by a hard link, or not at all). A file that
// other users may read (any group or other permission bit) is refused, and
// so is content ParseToken refuses: delete the file to get a new token.
func LoadOrCreateToken(path string) (string, error) {
	if tok, err := readToken(path); !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	dir := filepath.Dir(path)
	if err := private.MkdirAll(dir); err != nil {
		return "", fmt.Errorf("localapi: token folder: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("localapi: new token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	tmp, err := os.CreateTemp(dir, ".events-token-*")
	if err != nil {
		return "", fmt.Errorf("localapi: write token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(tok + "\n")
	if werr == nil {
		werr = tmp.Chmod(0o600) // CreateTemp makes 0600; said again for umask-free certainty
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("localapi: write token: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readToken(path) // another process made it first
		}
		return "", fmt.Errorf("localapi: write token: %w", err)
	}
	return tok, nil
}

// readToken reads and checks an existing token file.
func readToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("localapi: token file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("localapi: token file %s may be read by other users (mode %04o): chmod 600 it, or delete it for a new token", path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("localapi: read token: %w", err)
	}
	tok, err := ParseToken(b)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w (delete it for a new token)", path, err)
	}
	return tok, nil
}

// bearer returns the token of an Authorization header value
// "Bearer <token>" (the scheme in any case, RFC 9110 section 11.1; spaces
// around the token ignored), and false for anything else.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// tokenOK compares in constant time.
func tokenOK(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
