package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
)

func TestServeWebApp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeWebApp(ctx, l, fstest.MapFS{"index.html": {Data: []byte("hi")}}, []string{"https://relay.example:8443"})
	}()
	resp, err := http.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hi" {
		t.Fatalf("GET / = %d %q", resp.StatusCode, b)
	}
	// The page may talk to the relay it was served for, and nowhere else.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://relay.example:8443 wss://relay.example:8443;") {
		t.Errorf("CSP %q does not let the page reach its relay", csp)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
