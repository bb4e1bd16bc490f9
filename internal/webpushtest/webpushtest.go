// Package webpushtest is a push service for tests (RFC 8030), on a loopback
// port: it holds the browser's side of a subscription (a P-256 key pair and
// an auth secret it draws itself), decrypts every message posted to it
// (RFC 8291, aes128gcm) and checks its VAPID signature (RFC 8292), so a
// test sees what a real push service would carry and what the browser
// would read, with nothing reaching the network.
package webpushtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one message a push service received: the path it was posted
// to, its headers and raw body, and what decrypting it and checking its
// signature gave: Payload (the plaintext), VAPIDKey (the k= parameter,
// base64url) and Claims (the JWT's, after its ES256 signature verified
// with VAPIDKey). Err says what failed, if anything.
type Message struct {
	Path     string
	Header   http.Header
	Body     []byte
	Payload  []byte
	VAPIDKey string
	Claims   map[string]any
	Err      error
}

// Service is a running push service. Its subscriptions all share one key
// pair and auth secret; each path under its URL is an endpoint.
type Service struct {
	// URL is the service's base URL ("http://127.0.0.1:port").
	URL  string
	key  *ecdh.PrivateKey
	auth []byte
	msgs chan Message

	mu     sync.Mutex
	status map[string]int
}

// Start runs a push service until the test ends. Messages are answered
// 201, or what SetStatus set for their path.
func Start(t testing.TB) *Service {
	t.Helper()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{key: key, auth: make([]byte, 16), msgs: make(chan Message, 256), status: map[string]int{}}
	_, _ = rand.Read(s.auth)
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Keys returns the subscription's keys as a browser's
// PushSubscription.toJSON() gives them: p256dh (the 65-byte public key)
// and auth (16 bytes), base64url without padding.
func (s *Service) Keys() (p256dh, auth string) {
	return base64.RawURLEncoding.EncodeToString(s.key.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(s.auth)
}

// PrivateKey is the subscription's private key (what only the browser holds).
func (s *Service) PrivateKey() *ecdh.PrivateKey { return s.key }

// Auth is the subscription's auth secret.
func (s *Service) Auth() []byte { return append([]byte(nil), s.auth...) }

// SetStatus makes the service answer code to messages posted to path.
func (s *Service) SetStatus(path string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[path] = code
}

// Next returns the next message, failing t when none comes within wait.
func (s *Service) Next(t testing.TB, wait time.Duration) Message {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(wait):
		t.Fatalf("webpushtest: no message within %s", wait)
		return Message{}
	}
}

// Pending returns the messages received and not yet taken, without waiting.
func (s *Service) Pending() []Message {
	var out []Message
	for {
		select {
		case m := <-s.msgs:
			out = append(out, m)
		default:
			return out
		}
	}
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	m := Message{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Err: err}
	if err == nil {
		m.Err = s.check(r, &m)
	}
	s.msgs <- m
	s.mu.Lock()
	code, ok := s.status[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		code = http.StatusCreated
	}
	w.WriteHeader(code)
}

// check decrypts m and verifies its VAPID header.
func (s *Service) check(r *http.Request, m *Message) error {
	if r.Method != http.MethodPost {
		return fmt.Errorf("method %s, want POST", r.Method)
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return fmt.Errorf("Content-Encoding %q, want aes128gcm", ce)
	}
	p, err := Decrypt(m.Body, s.key, s.auth)
	if err != nil {
		return err
	}
	m.Payload = p
	m.VAPIDKey, m.Claims, err = VerifyVAPID(r.Header.Get("Authorization"))
	return err
}

// Decrypt opens an RFC 8291 message (one aes128gcm record, RFC 8188) with
// the subscription's private key and auth secret and returns its
// plaintext without padding.
func Decrypt(body []byte, key *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, fmt.Errorf("aes128gcm: %d bytes, shorter than a header", len(body))
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("aes128gcm: key id of %d bytes, want the sender's 65-byte public key", idlen)
	}
	asPub, ct := body[21:21+idlen], body[21+idlen:]
	if uint32(len(ct)) > rs {
		return nil, fmt.Errorf("aes128gcm: %d bytes of ciphertext, more than one record of %d", len(ct), rs)
	}
	sender, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, fmt.Errorf("aes128gcm: sender key: %w", err)
	}
	shared, err := key.ECDH(sender)
	if err != nil {
		return nil, fmt.Errorf("aes128gcm: ECDH: %w", err)
	}
	info := append(append([]byte("WebPush: info\x00"), key.PublicKey().Bytes()...), asPub...)
	ikm, err := hkdf.Key(sha256.New, shared, auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("aes128gcm: %w", err)
	}
	end := len(plain)
	for end > 0 && plain[end-1] == 0 {
		end--
	}
	if end == 0 || plain[end-1] != 2 {
		return nil, errors.New("aes128gcm: the last record lacks its 0x02 delimiter")
	}
	return plain[:end-1], nil
}

// VerifyVAPID checks an RFC 8292 Authorization header ("vapid t=JWT,
// k=KEY"): the JWT's ES256 signature under KEY. It returns KEY and the
// JWT's claims.
func VerifyVAPID(header string) (key string, claims map[string]any, err error) {
	rest, ok := strings.CutPrefix(header, "vapid ")
	if !ok {
		return "", nil, fmt.Errorf("the Authorization header %q is not vapid", header)
	}
	var jwt string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			jwt = v
		case "k":
			key = v
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return "", nil, fmt.Errorf("vapid k: %w", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return "", nil, fmt.Errorf("vapid k: %w", err)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "", nil, fmt.Errorf("vapid t: not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "", nil, fmt.Errorf("vapid t: signature is not 64 bytes of base64url")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", nil, errors.New("vapid t: the signature does not verify with k")
	}
	var hdr map[string]any
	if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &hdr) != nil || hdr["alg"] != "ES256" {
		return "", nil, fmt.Errorf("vapid t: header is not {alg: ES256}")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", nil, fmt.Errorf("vapid t: claims: %w", err)
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		return "", nil, fmt.Errorf("vapid t: claims: %w", err)
	}
	return key, claims, nil
}
