package embedded

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/home"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestEnsureStartsReusesAndStops(t *testing.T) {
	// The test binary is the relay (TestMain, envServe): no build.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envServe, "1")
	h, _ := home.New(t.TempDir())
	url := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx := context.Background()
	opts := Options{Home: h, URL: url, Exe: exe}

	started, err := Ensure(ctx, opts)
	if err != nil || !started {
		t.Fatalf("Ensure = %v, %v; want started", started, err)
	}
	t.Cleanup(func() { _, _ = Stop(h, 5*time.Second) })
	if ok, err := Healthy(ctx, url); !ok || err != nil {
		t.Fatalf("Healthy after start = %v, %v", ok, err)
	}
	if err := Verify(ctx, h, url); err != nil {
		t.Fatalf("the relay Ensure started does not prove it is the home's: %v", err)
	}
	other, _ := home.New(t.TempDir())
	if err := Verify(ctx, other, url); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("another home accepts it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.Server(), PIDFile)); err != nil {
		t.Fatalf("pid file: %v", err)
	}
	started, err = Ensure(ctx, opts)
	if err != nil || started {
		t.Fatalf("second Ensure = %v, %v; want reuse", started, err)
	}
	stopped, err := Stop(h, 5*time.Second)
	if err != nil || !stopped {
		t.Fatalf("Stop = %v, %v", stopped, err)
	}
	if ok, _ := Healthy(ctx, url); ok {
		t.Fatal("relay still answers after Stop")
	}
	if stopped, err := Stop(h, time.Second); stopped || err != nil {
		t.Fatalf("Stop with nothing running = %v, %v", stopped, err)
	}
}

func TestEnsureRefusesForeignProgramAndRemoteURL(t *testing.T) {
	foreign := httptest.NewServer(http.NotFoundHandler())
	defer foreign.Close()
	h, _ := home.New(t.TempDir())
	_, err := Ensure(context.Background(), Options{Home: h, URL: foreign.URL, Exe: "/nonexistent"})
	if !errors.Is(err, ErrPortTaken) {
		t.Fatalf("foreign program: err %v, want ErrPortTaken", err)
	}
	for _, u := range []string{"https://127.0.0.1:3005", "http://192.0.2.1:3005", "not a url"} {
		if _, err := Ensure(context.Background(), Options{Home: h, URL: u, Exe: "/nonexistent"}); err == nil {
			t.Errorf("Ensure(%q) succeeded", u)
		}
	}
}

// A program that answers /health like a relay is not started over, and
// Verify refuses it: it is not this home's relay.
func TestVerifyRefusesASquatter(t *testing.T) {
	sq := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer sq.Close()
	h, _ := home.New(t.TempDir())
	ctx := context.Background()
	if started, err := Ensure(ctx, Options{Home: h, URL: sq.URL, Exe: "/nonexistent"}); started || err != nil {
		t.Fatalf("Ensure = %v, %v", started, err)
	}
	if err := Verify(ctx, h, sq.URL); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), "cannot prove it is this home's relay") {
		t.Fatalf("Verify of a squatter: %v", err)
	}
}

func TestEnsureReportsAServerThatDies(t *testing.T) {
	h, _ := home.New(t.TempDir())
	url := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	_, err := Ensure(context.Background(), Options{Home: h, URL: url, Exe: "/bin/false", StartTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "exited before answering") {
		t.Fatalf("err %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(h.Server(), PIDFile)); !os.IsNotExist(statErr) {
		t.Fatal("pid file left behind")
	}
}
