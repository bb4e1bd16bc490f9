package token

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func FuzzTokenVerify(f *testing.F) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	tk := New(key)
	good := tk.Issue("acct", "", time.Unix(1_700_000_000, 0))
	for _, s := range []string{good, "", "a.b.c", "..", good + "x", strings.Replace(good, ".", "..", 1), "eyJhbGciOiJFZERTQSJ9.e30." + base64.RawURLEncoding.EncodeToString(make([]byte, 64))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		acct, err := tk.Verify(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("verify error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if s != good || acct != "acct" {
			// Only tokens this key signed verify; with a fixed key the fuzzer
			// cannot forge one, so anything else that verifies is a bug.
			if _, err := tk.Claims(s); err != nil || acct == "" {
				t.Fatalf("verify(%q) = %q without a valid signature", s, acct)
			}
		}
	})
}

func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n", "", "!!", base64.StdEncoding.EncodeToString(make([]byte, 31))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseSecret(b)
		if err != nil {
			if !errors.Is(err, ErrBadSecret) {
				t.Fatalf("error %v does not wrap ErrBadSecret", err)
			}
			return
		}
		if len(k) != ed25519.PrivateKeySize {
			t.Fatalf("key of %d bytes", len(k))
		}
	})
}

func TestTokens(t *testing.T) {
	k1 := ed25519.NewKeyFromSeed(make([]byte, 32))
	seed2 := make([]byte, 32)
	seed2[0] = 1
	t1, t2 := New(k1), New(ed25519.NewKeyFromSeed(seed2))
	tok := t1.Issue("acct-1", "req-9", time.Unix(1_700_000_000, 0))
	c, err := t1.Claims(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sub != "acct-1" || c.Session != "req-9" || c.Iss != "handy" || c.Iat != 1_700_000_000 || c.Nbf != 1_700_000_000 || c.Jti == "" {
		t.Fatalf("claims = %+v", c)
	}
	if _, err := t2.Verify(tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another key's token: %v", err)
	}
	parts := strings.Split(tok, ".")
	for name, bad := range map[string]string{
		"two parts":     parts[0] + "." + parts[1],
		"HS256 header":  base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256"}`)) + "." + parts[1] + "." + parts[2],
		"other payload": parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"acct-2","iss":"handy"}`)) + "." + parts[2],
		"bad signature": parts[0] + "." + parts[1] + ".AAAA",
	} {
		if _, err := t1.Verify(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Verified tokens are cached: the cache answers the same claims, stays
	// within MaxKnown, and a token verifies again after eviction.
	if again, err := t1.Claims(tok); err != nil || again != c {
		t.Fatalf("cached claims = %+v, %v", again, err)
	}
	for i := 0; i < MaxKnown+5; i++ {
		if _, err := t1.Verify(t1.Issue(fmt.Sprint("a", i), "", time.Unix(1_700_000_000, 0))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(t1.known); n > MaxKnown || n == 0 {
		t.Fatalf("%d cached tokens", n)
	}
	if acct, err := t1.Verify(tok); err != nil || acct != "acct-1" {
		t.Fatalf("after eviction: %q %v", acct, err)
	}
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	k1, created, err := LoadOrCreateSecret(dir + "/secret.key")
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if fi, err := os.Stat(dir + "/secret.key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret mode: %v %v", fi, err)
	}
	k2, created, err := LoadOrCreateSecret(dir + "/secret.key")
	if err != nil || created || !k1.Equal(k2) {
		t.Fatalf("reload: created %v, same %v, %v", created, k1.Equal(k2), err)
	}
	if _, _, err := LoadOrCreateSecret(dir + "/missing/secret.key"); err == nil {
		t.Fatal("no error for a missing folder")
	}
}
