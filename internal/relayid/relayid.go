// Package relayid lets happy tell its own relay from anything else that
// answers on the relay's loopback address (docs/ARCHITECTURE.md, "Relay
// default"). A relay keeps a random key in its data folder (File, mode
// 0600 in a 0700 folder: another local user cannot read it); a client of
// the same home reads the key, sends a fresh nonce to Route, and checks the
// answer, an HMAC-SHA256 under the key of the nonce and of the address the
// relay was reached at. A squatter on the port, another user's relay, or a
// proxy in front of this home's relay on another port cannot answer it.
package relayid

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// File is the name of the identity key inside a relay's data folder.
const File = "identity.key"

// Route is the relay route that proves its identity:
// GET Route?nonce=<base64url, 16 to 64 bytes> →
// {"address": "<host:port the connection reached>", "proof": "<base64url HMAC>"}.
const Route = "/v1/happy/identity"

// KeySize is the size of the identity key in bytes.
const KeySize = 32

// Nonce sizes the relay accepts, in bytes.
const (
	MinNonce = 16
	MaxNonce = 64
)

// ErrNotOurs: the program that answers at the relay's address cannot prove
// that it is the relay of this home.
var ErrNotOurs = errors.New("the program at the local relay address is not this home's relay")

// ErrBadKey: the identity key file is not the base64 of KeySize bytes, or
// others than its owner may read it.
var ErrBadKey = errors.New("unusable relay identity key")

// LoadOrCreate returns the identity key in dir (File), creating a random
// one with mode 0600 when there is none. It is what a relay does at start.
// Errors wrap ErrBadKey for a file that is not a key, or the file system's.
func LoadOrCreate(dir string) ([]byte, error) {
	key, err := Load(dir)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("relayid: draw the identity key: %w", err)
	}
	path := filepath.Join(dir, File)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return Load(dir) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("relayid: create %s: %w", path, err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("relayid: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("relayid: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("relayid: close %s: %w", path, err)
	}
	return key, nil
}

// Load reads the identity key in dir (File). A missing file is an error
// wrapping os.ErrNotExist; a file that group or others may read or write,
// or that is not the base64 of KeySize bytes, wraps ErrBadKey.
func Load(dir string) ([]byte, error) {
	path := filepath.Join(dir, File)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("relayid: read the identity key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("relayid: read the identity key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("relayid: %s has mode %04o, others may read it (chmod 600 %s, or remove it and restart the relay): %w", path, st.Mode().Perm(), path, ErrBadKey)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return nil, fmt.Errorf("relayid: read %s: %w", path, err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != KeySize {
		return nil, fmt.Errorf("relayid: %s is not the base64 of a %d-byte key (remove it and restart the relay): %w", path, KeySize, ErrBadKey)
	}
	return key, nil
}

// Proof is the relay's answer to nonce when reached at address (host:port
// as the relay's side of the connection sees it): HMAC-SHA256 under key of
// "happy relay identity v1\n" | nonce | "\n" | address.
func Proof(key, nonce []byte, address string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("happy relay identity v1\n"))
	m.Write(nonce)
	m.Write([]byte("\n"))
	m.Write([]byte(address))
	return m.Sum(nil)
}

// Answer is the JSON body of Route's answer.
type Answer struct {
	// Address is the relay's side of the connection (host:port).
	Address string `json:"address"`
	// Proof is Proof(key, nonce, Address), base64url without padding.
	Proof string `json:"proof"`
}

// Verify proves that the relay at baseURL (a loopback http URL) holds key:
// it sends a fresh random nonce to Route over a connection of its own and
// checks that the answer names exactly the address that connection reached
// (so a proxy on one loopback address in front of this home's relay on
// another is refused) and carries Proof(key, nonce, address), compared in
// constant time. client nil is a client of its own; a client given is
// used for its timeout only. A connection that fails returns that error (nothing
// answers); any answer that is not the proof (another program, another
// home's relay, an older happy without the route, a proxy to this home's
// relay on another port) wraps ErrNotOurs with what was wrong.
func Verify(ctx context.Context, client *http.Client, baseURL string, key []byte) error {
	// The address this request reaches is the one the proof must name.
	var mu sync.Mutex
	var dialled string
	d := &net.Dialer{}
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				mu.Lock()
				dialled = c.RemoteAddr().String()
				mu.Unlock()
			}
			return c, err
		}}
	defer tr.CloseIdleConnections()
	own := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if client != nil {
		own.Timeout = client.Timeout
	}
	client = own
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("relayid: relay URL %q: %w", baseURL, ErrNotOurs)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	nonce := make([]byte, 32)
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("relayid: draw a nonce: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+Route+"?nonce="+base64.RawURLEncoding.EncodeToString(nonce), nil)
	if err != nil {
		return fmt.Errorf("relayid: identity request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("relayid: ask %s for its identity: %w", baseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("relayid: %s answered GET %s with HTTP %d, not an identity proof: %w", baseURL, Route, resp.StatusCode, ErrNotOurs)
	}
	var a Answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&a); err != nil {
		return fmt.Errorf("relayid: %s answered GET %s with something that is not an identity proof: %w", baseURL, Route, ErrNotOurs)
	}
	host, aport, err := net.SplitHostPort(a.Address)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || aport != port {
		return fmt.Errorf("relayid: %s says it was reached at %q, not at a loopback address on port %s: %w", baseURL, a.Address, port, ErrNotOurs)
	}
	mu.Lock()
	reached := dialled
	mu.Unlock()
	if !sameAddr(reached, a.Address) {
		return fmt.Errorf("relayid: %s was reached at %s but says it was reached at %s (a program in front of it forwards): %w", baseURL, reached, a.Address, ErrNotOurs)
	}
	got, err := base64.RawURLEncoding.DecodeString(a.Proof)
	if err != nil || !hmac.Equal(got, Proof(key, nonce, a.Address)) {
		return fmt.Errorf("relayid: %s does not hold this home's relay identity key: %w", baseURL, ErrNotOurs)
	}
	return nil
}

// sameAddr reports whether two host:port addresses name the same IP and
// port.
func sameAddr(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	ai, bi := net.ParseIP(ah), net.ParseIP(bh)
	return err1 == nil && err2 == nil && ai != nil && bi != nil && ai.Equal(bi) && ap == bp
}
