//go:build linux

package webapp_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/happy-dev/happy/internal/browsertest"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/webapp"
)

// netnsEnv marks the copy of the test binary that runs inside a fresh
// network namespace, where lanIP is an address of its own.
const (
	netnsEnv = "HAPPY_WEBAPP_TEST_NETNS"
	lanIP    = "10.77.0.1"
)

// TestInsecureContextOnTheNetwork opens the app as a phone on the LAN
// does: from a relay serving it over plain http on a network address (in
// a network namespace of its own, where 10.77.0.1 is not a loopback
// address, so Chromium gives the page no secure context and no
// crypto.subtle; it treats all of 127.0.0.0/8 as secure). The page opened
// with a pairing link says it cannot open sessions and what to do, sends
// nothing to the relay, and takes the link out of the address bar; the
// same relay opened on 127.0.0.1 shows the sign-in page.
func TestInsecureContextOnTheNetwork(t *testing.T) {
	if os.Getenv(netnsEnv) == "" {
		if browsertest.Path() == "" {
			browsertest.Start(t) // skips, or fails when CI is set
		}
		if err := exec.Command("unshare", "-rn", "ip", "link", "set", "lo", "up").Run(); err != nil {
			msg := "no network namespace (unshare -rn ip link set lo up: " + err.Error() + ")"
			if os.Getenv("CI") != "" {
				t.Fatal(msg + " and CI is set")
			}
			t.Skip(msg)
		}
		cmd := exec.Command("unshare", "-rn", "sh", "-c", `ip link set lo up && ip addr add `+lanIP+`/32 dev lo && exec "$0" "$@"`, os.Args[0],
			"-test.run", "^TestInsecureContextOnTheNetwork$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), netnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestInsecureContextOnTheNetwork") {
			t.Fatalf("in the namespace: %v\n%s", err, out)
		}
		return
	}

	srv, err := server.New(server.Config{DataDir: t.TempDir(), App: webapp.Files()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var mu sync.Mutex
	var seen []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		srv.Handler().ServeHTTP(w, r)
	})
	serve := func(addr string) string {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: h}
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(l) }()
		t.Cleanup(func() { _ = hs.Close(); <-done })
		return "http://" + l.Addr().String()
	}
	lan, local := serve(lanIP+":0"), serve("127.0.0.1:0")

	ctx := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	const link = "#pair=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(lan+"/"+link)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector("#insecure")`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
		t.Fatalf("no #insecure: %v (page %q)", err, body)
	}
	var got struct {
		Secure bool
		Subtle string
		Hash   string
		Kind   string
		Title  string
		Text   []string
		Role   string
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](`({
		secure: window.isSecureContext, subtle: typeof crypto.subtle, hash: location.hash,
		kind: document.querySelector("#insecure").dataset.kind, role: document.querySelector("#insecure").getAttribute("role"),
		title: document.querySelector("#insecure h1").textContent,
		text: [...document.querySelectorAll("#insecure p")].map((p) => p.textContent)})`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(lan, "http://")
	_, port, _ := net.SplitHostPort(host)
	want := []string{
		"Your browser opened it over plain http at " + host + ", and browsers give WebCrypto (crypto.subtle), which this app decrypts with, only to https pages and to pages of their own computer. Nothing was sent to the relay, and the pairing link was not used (it expires within minutes).",
		"Open the app over https instead: on the computer that runs the relay, give it an https address (happy server --domain NAME with a domain of yours, a tunnel such as Tailscale Serve or Cloudflare Tunnel, or an https reverse proxy: see \"From your phone\" in happy's README), then run happy web again and open its new link.",
		"On the relay's own computer, http://localhost:" + port + "/ works as it is.",
	}
	if got.Secure || got.Subtle != "undefined" || got.Hash != "" || got.Kind != "insecure" || got.Role != "alert" ||
		got.Title != "This page cannot open your sessions" || !slices.Equal(got.Text, want) {
		t.Fatalf("the page over plain http on %s: %+v", host, got)
	}
	mu.Lock()
	for _, r := range seen {
		if !strings.HasPrefix(r, "GET /") || slices.ContainsFunc([]string{"/v1/", "/v2/", "/v3/", "/socket.io"}, func(p string) bool { return strings.HasPrefix(r, "GET "+p) }) {
			t.Errorf("the page sent %s to the relay", r)
		}
	}
	mu.Unlock()

	// The same relay on loopback is a secure context: the sign-in page.
	if err := chromedp.Do(ctx, chromedp.Navigate(local+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector("#signin-message") && !document.querySelector("#insecure") && window.isSecureContext && !!crypto.subtle`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
		t.Fatalf("the page on loopback: %v (page %q)", err, body)
	}
}
