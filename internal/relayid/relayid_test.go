package relayid

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of an empty folder: %v", err)
	}
	key, err := LoadOrCreate(dir)
	if err != nil || len(key) != KeySize {
		t.Fatalf("LoadOrCreate = %d bytes, %v", len(key), err)
	}
	st, err := os.Stat(filepath.Join(dir, File))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, st.Mode())
	}
	again, err := LoadOrCreate(dir)
	if err != nil || string(again) != string(key) {
		t.Fatalf("second LoadOrCreate made another key (%v)", err)
	}
	if err := os.Chmod(filepath.Join(dir, File), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrBadKey) {
		t.Fatalf("a key others may read: %v", err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, File), []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(bad); !errors.Is(err, ErrBadKey) {
		t.Fatalf("a short key: %v", err)
	}
}

// prover answers Route as a relay holding key does.
func prover(key []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Route {
			http.NotFound(w, r)
			return
		}
		nonce, _ := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("nonce"))
		a := r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
		_ = json.NewEncoder(w).Encode(Answer{Address: a, Proof: base64.RawURLEncoding.EncodeToString(Proof(key, nonce, a))})
	})
}

func TestVerify(t *testing.T) {
	key := make([]byte, KeySize)
	key[0] = 1
	ctx := context.Background()
	ours := httptest.NewServer(prover(key))
	defer ours.Close()
	if err := Verify(ctx, nil, ours.URL, key); err != nil {
		t.Fatalf("our relay: %v", err)
	}
	other := append([]byte(nil), key...)
	other[0] = 2
	for name, h := range map[string]http.Handler{
		"another key": prover(other),
		"no route":    http.NotFoundHandler(),
		"not JSON":    http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		"a replayed proof": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(Answer{Address: r.Host, Proof: base64.RawURLEncoding.EncodeToString(Proof(key, []byte("old nonce"), r.Host))})
		}),
		"a remote address": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			nonce, _ := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("nonce"))
			_ = json.NewEncoder(w).Encode(Answer{Address: "192.0.2.1:" + r.URL.Port(), Proof: base64.RawURLEncoding.EncodeToString(Proof(key, nonce, "192.0.2.1:"+r.URL.Port()))})
		}),
	} {
		srv := httptest.NewServer(h)
		if err := Verify(ctx, nil, srv.URL, key); !errors.Is(err, ErrNotOurs) {
			t.Errorf("%s: %v, want ErrNotOurs", name, err)
		}
		srv.Close()
	}
	// A proxy in front of our relay (on another port) is refused: the
	// relay proves the address it was reached at.
	u, _ := url.Parse(ours.URL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	defer proxy.Close()
	if err := Verify(ctx, nil, proxy.URL, key); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("a proxy to our relay: %v, want ErrNotOurs", err)
	}
	// Nothing listening is not a squatter.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if err := Verify(ctx, nil, "http://"+addr, key); err == nil || errors.Is(err, ErrNotOurs) {
		t.Fatalf("nothing listening: %v", err)
	}
}
