package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/happy-dev/happy/internal/relayid"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// squatter is a program on the embedded relay's address that answers
// /health as a relay does; it records every request it gets.
func squatter(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/health" {
			fmt.Fprint(w, `{"status":"ok"}`)
			return
		}
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"Route %s %s not found"}`, r.Method, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// refusal is the message of a relay on the embedded address that cannot
// prove it is the home's.
func refusal(url, home, why string) string {
	return "happy: relay unusable: embedded relay: the program answering at " + url + " cannot prove it is this home's relay (" + why + "); nothing was sent to it. " +
		"If it is a relay an older happy started for this home, stop it with happy server stop and run again; otherwise stop that program, " +
		"set HAPPY_EMBEDDED_URL to another loopback address for the built-in relay, or set HAPPY_SERVER_URL (or serverUrl in " + filepath.Join(home, "settings.json") + ") to a relay you run\n" +
		"happy: happy doctor checks the relay and the login and says what to fix\n"
}

// TestEmbeddedRelayMustProveItIsOurs: with no relay configured, happy
// creates no account on, and sends nothing but the identity question to,
// a program on the embedded relay's address that cannot prove it is this
// home's relay: a squatter answering /health, a squatter after this home's
// relay ran once, another home's real relay. This home's relay is used.
func TestEmbeddedRelayMustProveItIsOurs(t *testing.T) {
	sq, seen := squatter(t)
	home := t.TempDir()
	env := map[string]string{"HAPPY_HOME_DIR": home, "HAPPY_EMBEDDED_URL": sq.URL}
	noKey := "this home has no relay identity key yet (" + filepath.Join(home, "server", "identity.key") + "), so no relay it started is running: the program at the local relay address is not this home's relay"
	code, stdout, stderr := runHappy(t, env, "auth", "login", "--new-account")
	if code != exitRelay || stdout != "" || stderr != refusal(sq.URL, home, noKey) {
		t.Fatalf("login on a squatter = %d %q %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "access.key")); !os.IsNotExist(err) {
		t.Fatalf("an account was saved: %v", err)
	}
	if got := seen(); strings.Join(got, ",") != "GET /health" {
		t.Fatalf("the squatter got %v, want only the health check", got)
	}

	// This home's relay ran once (its key is there), then something else
	// took the port: it is asked to prove itself, and cannot.
	if err := os.MkdirAll(filepath.Join(home, "server"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := relayid.LoadOrCreate(filepath.Join(home, "server")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runHappy(t, env, "auth", "login", "--new-account")
	if code != exitRelay || stderr != refusal(sq.URL, home, "relayid: "+sq.URL+" answered GET /v1/happy/identity with HTTP 404, not an identity proof: the program at the local relay address is not this home's relay") {
		t.Fatalf("login on a squatter after our relay ran = %d %q", code, stderr)
	}
	if got := seen(); strings.Join(got, ",") != "GET /health,GET /health,GET /v1/happy/identity" {
		t.Fatalf("the squatter got %v", got)
	}

	// Another home's (or user's) real relay on the address.
	foreign := servertest.Start(t).URL
	env["HAPPY_EMBEDDED_URL"] = foreign
	code, _, stderr = runHappy(t, env, "auth", "login", "--new-account")
	if code != exitRelay || stderr != refusal(foreign, home, "relayid: "+foreign+" does not hold this home's relay identity key: the program at the local relay address is not this home's relay") {
		t.Fatalf("login on another home's relay = %d %q", code, stderr)
	}

	// This home's relay (its data folder is the home's server folder).
	ours := servertest.StartConfig(t, server.Config{DataDir: filepath.Join(home, "server"),
		App: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>relay app</title>")}}}).URL
	env["HAPPY_EMBEDDED_URL"] = ours
	code, stdout, stderr = runHappy(t, env, "auth", "login", "--new-account")
	if code != exitOK || !strings.Contains(stdout, "Created account ") || !strings.Contains(stdout, " on "+ours+".") {
		t.Fatalf("login on our relay = %d %q %q", code, stdout, stderr)
	}

	// This home's relay serves the web app the link goes to.
	code, stdout, stderr = runHappy(t, env, "web")
	if code != exitOK || !strings.Contains(stdout, "    "+ours+"/#pair=") || strings.Contains(stdout, "&relay=") {
		t.Fatalf("happy web on our relay = %d %q %q", code, stdout, stderr)
	}

	// Logged in, a squatter gets neither the token nor a pairing link.
	env["HAPPY_EMBEDDED_URL"] = sq.URL
	before := len(seen())
	for _, args := range [][]string{{"web"}, {"auth", "status"}, {"sessions"}} {
		code, stdout, stderr := runHappy(t, env, args...)
		if code != exitRelay || strings.Contains(stdout, "#pair=") || !strings.Contains(stderr, "cannot prove it is this home's relay") {
			t.Errorf("happy %v on a squatter = %d %q %q", args, code, stdout, stderr)
		}
	}
	for _, r := range seen()[before:] {
		if r != "GET /health" && r != "GET /v1/happy/identity" {
			t.Errorf("the squatter got %s", r)
		}
	}
}

// netnsEnv marks the copy of the test binary that runs inside a fresh
// network namespace (its own loopback, where port 3005 is free to take).
const netnsEnv = "HAPPY_TEST_NETNS"

// TestEmbeddedRelaySquattedInANetworkNamespace takes the real default
// address, 127.0.0.1:3005, in a fresh network namespace (unshare -rn, as
// e2e does; skipped where user namespaces are not allowed): a squatter
// there is refused with no relay configured at all, and then this home's
// relay on the same address is used.
func TestEmbeddedRelaySquattedInANetworkNamespace(t *testing.T) {
	if os.Getenv(netnsEnv) == "" {
		if err := exec.Command("unshare", "-rn", "ip", "link", "set", "lo", "up").Run(); err != nil {
			t.Skipf("no network namespace (unshare -rn ip link set lo up: %v)", err)
		}
		cmd := exec.Command("unshare", "-rn", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0],
			"-test.run", "^TestEmbeddedRelaySquattedInANetworkNamespace$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), netnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestEmbeddedRelaySquattedInANetworkNamespace") {
			t.Fatalf("in the namespace: %v\n%s", err, out)
		}
		return
	}
	const url = "http://127.0.0.1:3005"
	l, err := net.Listen("tcp", "127.0.0.1:3005")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	sq := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/health" {
			fmt.Fprint(w, `{"status":"ok"}`)
			return
		}
		http.NotFound(w, r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = sq.Serve(l) }()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "server"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := relayid.LoadOrCreate(filepath.Join(home, "server")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HAPPY_HOME_DIR": home}
	code, _, stderr := runHappy(t, env, "auth", "login", "--new-account")
	want := refusal(url, home, "relayid: "+url+" answered GET /v1/happy/identity with HTTP 404, not an identity proof: the program at the local relay address is not this home's relay")
	if code != exitRelay || stderr != want {
		t.Fatalf("login with a squatter on %s = %d %q, want %q", url, code, stderr, want)
	}
	_ = sq.Close()
	<-done
	mu.Lock()
	if strings.Join(seen, ",") != "GET /health,GET /v1/happy/identity" {
		t.Errorf("the squatter got %v", seen)
	}
	mu.Unlock()

	// This home's relay on the same address is used.
	srv, err := server.New(server.Config{DataDir: filepath.Join(home, "server")})
	if err != nil {
		t.Fatal(err)
	}
	l, err = net.Listen("tcp", "127.0.0.1:3005")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	defer func() {
		cancel()
		<-served
		_ = srv.Close()
	}()
	code, stdout, stderr := runHappy(t, env, "auth", "login", "--new-account")
	if code != exitOK || !strings.Contains(stdout, " on "+url+".") {
		t.Fatalf("login with this home's relay on %s = %d %q %q", url, code, stdout, stderr)
	}
	http.DefaultClient.CloseIdleConnections()
}
