package embedded

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/home"
)

// TestProxyOnAnotherLoopbackIPIsRefused: this home's relay runs at
// 127.0.0.2:P; another local user listens on 127.0.0.1:P and forwards to it.
// The proof must name the address the client reached, so the proxy's
// forwarded proof (naming 127.0.0.2:P) is refused (found by an attack
// review).
func TestProxyOnAnotherLoopbackIPIsRefused(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envServe, "1")
	h, _ := home.New(t.TempDir())
	port := strconv.Itoa(freePort(t))
	real := "http://127.0.0.2:" + port
	if _, err := Ensure(context.Background(), Options{Home: h, URL: real, Exe: exe}); err != nil {
		t.Skipf("cannot start a relay on 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { _, _ = Stop(h, 5*time.Second) })

	// The other local user's proxy on the default address's IP, same port.
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(real)
	var seen atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1) // a real squatter would log Authorization headers here
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	if err := Verify(context.Background(), h, "http://127.0.0.1:"+port); err == nil {
		t.Fatalf("Verify accepted another user's proxy at 127.0.0.1:%s in front of this home's relay at 127.0.0.2:%s (%d request(s) went through the proxy)", port, port, seen.Load())
	}
}
