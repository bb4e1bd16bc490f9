package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// send makes one request with the given headers and returns the status, the
// response headers and the body.
func send(t *testing.T, method, url string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestCORSAnyOrigin(t *testing.T) {
	r := servertest.Start(t)
	st, h, body := send(t, "OPTIONS", r.URL+"/v1/sessions", map[string]string{
		"Origin": "https://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
	eq(t, "preflight", []any{st, h.Get("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Methods"), h.Get("Access-Control-Allow-Headers"), h.Get("Access-Control-Max-Age"), body},
		[]any{204, "*", "GET, POST, PUT, DELETE", "authorization, content-type", "600", ""})
	st, h, _ = send(t, "GET", r.URL+"/health", map[string]string{"Origin": "https://app.example"})
	eq(t, "simple request", []any{st, h.Get("Access-Control-Allow-Origin")}, []any{200, "*"})
	st, h, _ = send(t, "GET", r.URL+"/health", nil)
	eq(t, "no Origin, no CORS headers", []any{st, h.Get("Access-Control-Allow-Origin")}, []any{200, ""})
}

func TestCORSListedOrigins(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{CORSOrigins: []string{"https://app.example"}})
	tok := servertest.NewAccount(t, r.URL).Token
	st, h, _ := send(t, "OPTIONS", r.URL+"/v1/sessions", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"})
	eq(t, "listed preflight", []any{st, h.Get("Access-Control-Allow-Origin"), h.Get("Vary")}, []any{204, "https://app.example", "Origin"})
	st, h, body := send(t, "OPTIONS", r.URL+"/v1/sessions", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
	eq(t, "other preflight", []any{st, h.Get("Access-Control-Allow-Origin"), strings.TrimSpace(body)}, []any{403, "", `{"error":"Origin not allowed"}`})
	st, _, body = send(t, "GET", r.URL+"/v1/sessions", map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer " + tok})
	eq(t, "other origin's request", []any{st, strings.TrimSpace(body)}, []any{403, `{"error":"Origin not allowed"}`})
	st, h, _ = send(t, "GET", r.URL+"/v1/sessions", map[string]string{"Origin": r.URL, "Authorization": "Bearer " + tok})
	eq(t, "the relay's own origin", []any{st, h.Get("Access-Control-Allow-Origin")}, []any{200, r.URL})

	// The Socket.IO handshake: a page of another origin cannot open it.
	ws := "ws" + strings.TrimPrefix(r.URL, "http") + "/v1/updates/?EIO=4&transport=websocket"
	_, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {"https://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("websocket from another origin: %v, %v", err, resp)
	}
	c, _, err := websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {"https://app.example"}})
	if err != nil {
		t.Fatalf("websocket from a listed origin: %v", err)
	}
	defer c.Close()
	_, open, err := c.ReadMessage()
	if err != nil || len(open) == 0 || open[0] != '0' {
		t.Fatalf("engine.io open packet %q, %v", open, err)
	}
}

func TestTrustProxy(t *testing.T) {
	hdr := map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "relay.example", "X-Forwarded-For": "203.0.113.9, 198.51.100.7"}
	upload := func(r *servertest.Relay) string {
		a := newAPI(t, r)
		sid := a.createSession("t", "m")["id"].(string)
		req, _ := http.NewRequest("POST", r.URL+"/v1/sessions/"+sid+"/attachments/request-upload", strings.NewReader(`{"filename":"a","size":1}`))
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			UploadURL string `json:"uploadUrl"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.UploadURL
	}
	plain := servertest.Start(t)
	if u := upload(plain); !strings.HasPrefix(u, plain.URL+"/") {
		t.Fatalf("without --trust-proxy the forwarded headers were used: %s", u)
	}
	behind := servertest.StartConfig(t, server.Config{TrustProxy: true})
	if u := upload(behind); !strings.HasPrefix(u, "https://relay.example/") {
		t.Fatalf("with --trust-proxy: %s", u)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and
// returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "happy test relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	srv, err := server.New(server.Config{DataDir: filepath.Join(dir, "data"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := server.TLSListener(l, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(t.Context(), tl) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	base := "https://" + l.Addr().String()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(base + "/health")
	if err != nil {
		t.Fatalf("GET /health over TLS: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("health: %d, TLS %v", resp.StatusCode, resp.TLS)
	}
	tok := servertest.NewAccountClient(t, client, base).Token
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}}
	c, _, err := d.Dial("wss://"+l.Addr().String()+"/v1/updates/?EIO=4&transport=websocket", nil)
	if err != nil {
		t.Fatalf("WSS: %v", err)
	}
	defer c.Close()
	if _, open, err := c.ReadMessage(); err != nil || len(open) == 0 || open[0] != '0' {
		t.Fatalf("engine.io open packet %q, %v", open, err)
	}
	// Socket.IO CONNECT with the token: the relay answers CONNECT ("40{…sid…}").
	if err := c.WriteMessage(websocket.TextMessage, []byte(`40{"token":"`+tok+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.ReadMessage(); err != nil || !strings.HasPrefix(string(msg), `40{"sid"`) {
		t.Fatalf("socket.io connect over WSS: %q, %v", msg, err)
	}
	// A second message (the relay's reader waits on a TLS connection by
	// reading its first byte): an acked ping event.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`421["ping"]`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.ReadMessage(); err != nil || string(msg) != "431[{}]" {
		t.Fatalf("ping ack over WSS: %q, %v", msg, err)
	}
	plain, err := http.Get("http://" + l.Addr().String() + "/health")
	if err == nil {
		_ = plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Fatal("plain HTTP answered on the TLS port")
		}
	}
}
