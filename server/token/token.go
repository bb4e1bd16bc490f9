// Package token is the relay's bearer tokens: compact JWS tokens (alg
// EdDSA) shaped like the reference relay's, signed with the relay's
// Ed25519 key, the file that key lives in, and the cache of verified
// tokens. Whether a token was revoked is the relay's business (its
// account generations): the claims carry the generation a token was
// issued at. It imports nothing of happy's but internal/private.
package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/happy-dev/happy/internal/private"
)

// ErrInvalid is returned by token verification for anything that is not
// a well-formed token signed with this server's secret.
var ErrInvalid = errors.New("server: invalid token")

// SecretFile is the name of the signing secret inside the data folder.
const SecretFile = "secret.key"

// LoadOrCreateSecret reads the Ed25519 seed at path (base64 text), creating a
// random one with mode 0600 when the file is missing.
func LoadOrCreateSecret(path string) (ed25519.PrivateKey, bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, perr := ParseSecret(b)
		if perr != nil {
			return nil, false, fmt.Errorf("server: signing secret %s: %w", path, perr)
		}
		return key, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("server: read signing secret: %w", err)
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, false, fmt.Errorf("server: create signing secret: %w", err)
	}
	f, err := private.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	if err != nil {
		return nil, false, fmt.Errorf("server: create signing secret: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(seed) + "\n"); err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("server: write signing secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("server: sync signing secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("server: close signing secret: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), true, nil
}

// ErrBadSecret is returned for a signing secret file that is not the base64
// text of a 32-byte Ed25519 seed.
var ErrBadSecret = errors.New("server: malformed signing secret")

// ParseSecret decodes the secret file's content: base64 of a 32-byte seed,
// surrounding white space allowed.
func ParseSecret(b []byte) (ed25519.PrivateKey, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSecret, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadSecret, len(seed), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// Claims is the payload of a token, shaped like the reference relay's:
// {sub, iat, nbf, iss:"handy", jti} plus `session` for terminal pairing.
type Claims struct {
	Sub     string `json:"sub"`
	Iat     int64  `json:"iat"`
	Nbf     int64  `json:"nbf"`
	Iss     string `json:"iss"`
	Jti     string `json:"jti"`
	Session string `json:"session,omitempty"`
	// Gen is the account's token generation when the token was issued
	// (absent for 0); a token whose generation is no longer the
	// account's was revoked (the relay's server/revoke.go).
	Gen int64 `json:"gen,omitempty"`
}

const tokenIssuer = "handy"

var tokenHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA"}`))

// Signer signs and verifies compact JWS tokens (alg EdDSA) with the server's key.
//
// Tokens do not expire (as on the reference relay), so a token whose
// signature verified once keeps its claims: the claims of recently verified
// tokens are kept, which saves the Ed25519 verification (about 0.1 ms) that
// every request and socket handshake would otherwise pay. Whether the
// token was revoked is checked after this cache, on every use
// (the relay's Server.verifyToken); Forget drops an account's entries when it revokes.
type Signer struct {
	key ed25519.PrivateKey
	pub ed25519.PublicKey

	mu    sync.Mutex
	known map[string]Claims // at most MaxKnown entries
}

// MaxKnown bounds the verified-token cache (and the relay's cache of
// account generations); when it is full it is emptied and refills with
// the tokens in use.
const MaxKnown = 4096

// New returns a Signer that signs with key and verifies with its public
// key.
func New(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, pub: key.Public().(ed25519.PublicKey), known: map[string]Claims{}}
}

// Issue returns a token for accountID at generation 0; session, when set,
// names the pairing request it came from.
func (t *Signer) Issue(accountID, session string, now time.Time) string {
	return t.IssueGen(accountID, session, 0, now)
}

// IssueGen is Issue for the account's token generation gen.
func (t *Signer) IssueGen(accountID, session string, gen int64, now time.Time) string {
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	c := Claims{Sub: accountID, Iat: now.Unix(), Nbf: now.Unix(), Iss: tokenIssuer, Jti: base64.RawURLEncoding.EncodeToString(jti[:]), Session: session, Gen: gen}
	payload, _ := json.Marshal(c) // a struct of strings and ints always marshals
	signing := tokenHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	sig := ed25519.Sign(t.key, []byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Verify checks token and returns its account id, or an error wrapping
// ErrInvalid.
func (t *Signer) Verify(token string) (string, error) {
	c, err := t.Claims(token)
	if err != nil {
		return "", err
	}
	return c.Sub, nil
}

// Claims is Verify returning the whole of token's claims (from the cache
// of verified tokens when token is in it).
func (t *Signer) Claims(token string) (Claims, error) {
	t.mu.Lock()
	c, ok := t.known[token]
	t.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := t.check(token)
	if err != nil {
		return Claims{}, err
	}
	t.mu.Lock()
	if len(t.known) >= MaxKnown {
		clear(t.known)
	}
	t.known[token] = c
	t.mu.Unlock()
	return c, nil
}

// Forget drops the cached claims of every token of accountID.
func (t *Signer) Forget(accountID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tok, c := range t.known {
		if c.Sub == accountID {
			delete(t.known, tok)
		}
	}
}

// check verifies token's header, signature and claims.
func (t *Signer) check(token string) (Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: want 3 parts, got %d", ErrInvalid, len(parts))
	}
	hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: header: %w", ErrInvalid, err)
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil || h.Alg != "EdDSA" {
		return Claims{}, fmt.Errorf("%w: header is not EdDSA", ErrInvalid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Claims{}, fmt.Errorf("%w: bad signature encoding", ErrInvalid)
	}
	if !ed25519.Verify(t.pub, []byte(parts[0]+"."+parts[1]), sig) {
		return Claims{}, fmt.Errorf("%w: signature mismatch", ErrInvalid)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrInvalid, err)
	}
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&c); err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrInvalid, err)
	}
	if c.Sub == "" || c.Iss != tokenIssuer {
		return Claims{}, fmt.Errorf("%w: missing subject or wrong issuer", ErrInvalid)
	}
	return c, nil
}
