package webapp_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/browsertest"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/webapp"
)

// These tests run the app as a user gets it: served by an in-process relay
// (servertest, with webapp.Files and its strict CSP), signed in with an
// account made by relay.CreateAccount, driven through its forms in headless
// Chromium, and checked from Go through the relay package.

// appPage is a signed-in page of the app and the account behind it.
type appPage struct {
	t      *testing.T
	ctx    context.Context
	base   string // the page's origin, which is its relay
	creds  *crypto.Credentials
	api    *relay.API // without a token
	mu     sync.Mutex
	errors []string // console errors and uncaught exceptions
}

// startRelay runs a relay that serves the app and makes an account on it.
func startRelay(t *testing.T) (*servertest.Relay, *crypto.Credentials) {
	t.Helper()
	r := servertest.StartConfig(t, server.Config{App: webapp.Files()})
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api := newAPI(t, r.URL)
	creds, err := relay.CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	return r, creds
}

func newAPI(t *testing.T, base string) *relay.API {
	t.Helper()
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// openApp opens the app at base (a phone-sized window) signed in as creds,
// as a browser is after pairing: the account in localStorage.
func openApp(t *testing.T, base string, creds *crypto.Credentials) *appPage {
	t.Helper()
	return openAppAt(t, base, base, creds)
}

// openAppAt opens the app served at page, signed in as creds to the relay
// at relayBase (which may be another origin), on the devices page.
func openAppAt(t *testing.T, page, base string, creds *crypto.Credentials) *appPage {
	t.Helper()
	ctx := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	p := &appPage{t: t, ctx: ctx, base: base, creds: creds, api: newAPI(t, base)}
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for ev, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if ev.Type == chromedp.ConsoleError {
				p.mu.Lock()
				p.errors = append(p.errors, ev.Text)
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-consoleDone })
	account, _ := json.Marshal(map[string]string{"relay": base, "token": creds.Token, "secret": crypto.EncodeBase64(creds.AccountSecret[:])})
	p.do("open the app", chromedp.EmulateViewport(390, 844), chromedp.Navigate(page+"/"))
	p.eval(fmt.Sprintf(`localStorage.setItem("happy.account", %q), location.hash = "#/devices", true`, account))
	p.do("reload signed in", chromedp.Reload())
	p.wait("the signed-in page", `!!document.querySelector("#nav-machines")`)
	return p
}

func (p *appPage) body() string {
	b, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string]("document.body.innerText"))
	return b
}

func (p *appPage) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v (page: %q)", what, err, p.body())
	}
}

// click clicks the element sel names once it is there. The app re-renders
// a session's header and the list when the relay's updates come (and every
// 5 s), so the element found can be replaced before the click lands: then
// the click is tried again on the new one (the mouse events of a click on
// a replaced node are never sent, so nothing is clicked twice).
func (p *appPage) click(sel string) {
	p.t.Helper()
	for try := 0; ; try++ {
		err := chromedp.Do(p.ctx, chromedp.Click(sel))
		if err == nil {
			return
		}
		if try < 5 && (strings.Contains(err.Error(), "Could not find node") || strings.Contains(err.Error(), "not attached") || strings.Contains(err.Error(), "No node with given id")) {
			continue
		}
		p.t.Fatalf("click %s: %v (page: %q)", sel, err, p.body())
	}
}

func (p *appPage) eval(expr string) json.RawMessage {
	p.t.Helper()
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return raw
}

func (p *appPage) text(sel string) string {
	p.t.Helper()
	var s string
	if err := json.Unmarshal(p.eval(fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel)), &s); err != nil {
		p.t.Fatal(err)
	}
	return s
}

func (p *appPage) wait(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		p.t.Fatalf("waiting for %s: %v (page: %q; console: %q)", what, err, p.body(), p.consoleErrors())
	}
}

func (p *appPage) consoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errors...)
}

// noPolicyViolations fails on console errors that say the page broke its
// Content-Security-Policy or threw (refused fetches of missing routes are
// expected in some tests and are not counted).
func (p *appPage) noPolicyViolations() {
	p.t.Helper()
	for _, e := range p.consoleErrors() {
		if strings.Contains(e, "Content Security Policy") || strings.Contains(e, "Uncaught") {
			p.t.Errorf("console: %s", e)
		}
	}
}

// smallTargets lists the visible controls of the page smaller than 44 px
// in either direction (a checkbox counts by its label).
const smallTargets = `[...document.querySelectorAll("button, a[href], input:not([type=checkbox]), select, textarea, label.check")]
  .filter(e => e.offsetParent !== null && !e.closest(".hidden"))
  .map(e => { const r = e.getBoundingClientRect(); return {e, w: r.width, h: r.height}; })
  .filter(x => x.w < 44 || x.h < 44)
  .map(x => (x.e.id || x.e.tagName + "." + x.e.className) + " " + Math.round(x.w) + "x" + Math.round(x.h))`

func (p *appPage) touchTargets(where string) {
	p.t.Helper()
	var small []string
	if err := json.Unmarshal(p.eval(smallTargets), &small); err != nil {
		p.t.Fatal(err)
	}
	if len(small) > 0 {
		p.t.Errorf("%s: touch targets under 44 px: %v", where, small)
	}
}

// openPairing opens a terminal's pairing request as `happy auth login`
// does and waits for its approval in the background.
func openPairing(t *testing.T, api *relay.API) (*relay.PairingRequest, <-chan *crypto.Credentials, <-chan error) {
	t.Helper()
	req, err := relay.NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if _, err := api.AuthRequest(ctx, req.PublicKey[:]); err != nil {
		cancel()
		t.Fatal(err)
	}
	got, failed := make(chan *crypto.Credentials, 1), make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The CLI's own poll interval. (The relay reads a request back
		// after answering it; a poll that takes the answer in between
		// makes POST /v1/auth/response say 404 although the terminal got
		// it. Fast polls make that likely.)
		c, err := req.WaitApproved(ctx, api, relay.DefaultPairPoll, nil)
		if err != nil {
			failed <- err
			return
		}
		got <- c
	}()
	t.Cleanup(func() { cancel(); <-done })
	return req, got, failed
}

func waitCreds(t *testing.T, got <-chan *crypto.Credentials, failed <-chan error) *crypto.Credentials {
	t.Helper()
	select {
	case c := <-got:
		return c
	case err := <-failed:
		t.Fatalf("the terminal was not approved: %v", err)
	}
	return nil
}

// The page approves a terminal by the code it shows; the terminal's
// WaitApproved returns the credentials the page chose (dataKey by
// default, the account secret with the checkbox), and its token works.
func TestApproveTerminalByCode(t *testing.T) {
	r, creds := startRelay(t)
	p := openApp(t, r.URL, creds)
	p.wait("the devices page", `!!document.querySelector("#approve-code")`)
	p.touchTargets("devices page")
	contentPub, _ := crypto.ContentKeyPair(*creds.AccountSecret)
	for _, tc := range []struct {
		name   string
		legacy bool
		typed  func(code string) string
	}{
		{"dataKey", false, func(code string) string { return strings.ToLower(strings.ReplaceAll(code, "-", " ")) }},
		{"legacy", true, func(code string) string { return code }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.t = t
			req, got, failed := openPairing(t, p.api)
			p.eval(`document.querySelector("#approve-code").value = ""`)
			steps := []chromedp.Action[chromedp.Void]{chromedp.SendKeys("#approve-code", tc.typed(req.FullCode()))}
			if string(p.eval(`document.querySelector("#approve-legacy").checked`)) != fmt.Sprint(tc.legacy) {
				steps = append(steps, chromedp.Click("#approve-legacy"))
			}
			steps = append(steps, chromedp.Click("#approve-submit"))
			p.do("approve "+req.Code(), steps...)
			p.wait("the approval", `document.querySelector("#approve-result").className === "ok"`)
			if msg := p.text("#approve-result"); !strings.Contains(msg, req.Code()) {
				t.Errorf("result %q does not name the code %s", msg, req.Code())
			}
			c := waitCreds(t, got, failed)
			if tc.legacy {
				if c.Variant != crypto.VariantLegacy || c.AccountSecret == nil || *c.AccountSecret != *creds.AccountSecret {
					t.Errorf("legacy approval gave %v credentials, secret shared %v", c.Variant, c.AccountSecret != nil)
				}
			} else {
				if c.Variant != crypto.VariantDataKey || c.DataKey == nil || c.DataKey.ContentPublicKey != contentPub || c.AccountSecret != nil {
					t.Errorf("dataKey approval gave %v credentials (%+v)", c.Variant, c.DataKey)
				}
			}
			if _, err := p.api.WithToken(c.Token).ListSessions(context.Background()); err != nil {
				t.Errorf("the terminal's token does not work: %v", err)
			}
		})
	}
	p.t = t
	// A code nobody shows is refused with a message; nothing changes.
	p.eval(`document.querySelector("#approve-code").value = ""`)
	p.do("approve an unknown code", chromedp.SendKeys("#approve-code", "AAAAA-AAAAA-AAAAA-AAAAA"), chromedp.Click("#approve-submit"))
	p.wait("the refusal", `document.querySelector("#approve-result").className === "error"`)
	if msg := p.text("#approve-result"); !strings.Contains(msg, "no open pairing request has the code AAAAA-AAAAA") {
		t.Errorf("unknown code: %q", msg)
	}
	p.noPolicyViolations()
}

// foreignRelay puts a proxy in front of the relay at target that behaves
// like a relay the page cannot trust or that lacks happy's own routes: the
// code lookup answers with a key of its own, and POST /v1/auth/revoke is
// 404. Everything else (the app, the API, Socket.IO) goes to target.
func foreignRelay(t *testing.T, target string, substitute [32]byte) (base string, posted func() int) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	responses := 0
	proxy := httputil.NewSingleHostReverseProxy(u)
	transport := &http.Transport{}
	proxy.Transport = transport
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("GET /v1/auth/request/lookup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"requests":[{"publicKey":%q,"supportsV2":true,"createdAt":1,"expiresAt":2}]}`, crypto.EncodeBase64(substitute[:]))
	})
	mux.HandleFunc("POST /v1/auth/revoke", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("POST /v1/auth/response", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		responses++
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done; transport.CloseIdleConnections() })
	return "http://" + l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return responses }
}

// A relay that answers a code with another key gets nothing: the page
// checks the fingerprint, says so, and posts no answer; on a relay without
// POST /v1/auth/revoke, "Sign out everywhere" says revocation is not
// supported there and signs out this browser only.
func TestForeignRelay(t *testing.T) {
	r, creds := startRelay(t)
	attacker, err := relay.NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	base, posted := foreignRelay(t, r.URL, attacker.PublicKey)
	p := openApp(t, base, creds)
	req, got, failed := openPairing(t, newAPI(t, r.URL))
	p.wait("the devices page", `!!document.querySelector("#approve-code")`)
	p.do("approve through the foreign relay", chromedp.SendKeys("#approve-code", req.FullCode()), chromedp.Click("#approve-submit"))
	p.wait("the refusal", `document.querySelector("#approve-result").className === "error"`)
	msg := p.text("#approve-result")
	if want := fmt.Sprintf("the relay answered code %s with a key whose code is %s: refused, nothing was sent", req.Code(), attacker.Code()); !strings.Contains(msg, want) {
		t.Errorf("refusal %q, want it to contain %q", msg, want)
	}
	if n := posted(); n != 0 {
		t.Errorf("the page posted %d pairing answers after a fingerprint mismatch", n)
	}
	select {
	case c := <-got:
		t.Errorf("the terminal was approved (%v) although the page refused", c.Variant)
	case err := <-failed:
		t.Errorf("the terminal's wait failed: %v", err)
	default:
	}

	p.click("#revoke")
	p.click("#revoke-confirm")
	p.wait("the sign-in page", `!!document.querySelector(".signin") && localStorage.getItem("happy.account") === null`)
	if msg := p.text("#signin-message"); !strings.Contains(msg, "does not support revoking tokens; signed out of this browser only") {
		t.Errorf("sign-in page says %q", msg)
	}
	if _, err := p.api.WithToken(creds.Token).ListSessions(context.Background()); err != nil {
		t.Errorf("the token stopped working although nothing was revoked: %v", err)
	}
	p.noPolicyViolations()
}

// "Sign out everywhere" revokes every token of the account on happy's
// relay, then forgets the browser's keys.
func TestSignOutEverywhere(t *testing.T) {
	r, creds := startRelay(t)
	p := openApp(t, r.URL, creds)
	p.wait("the devices page", `!!document.querySelector("#revoke")`)
	if hidden := string(p.eval(`document.querySelector("#revoke-confirm-row").classList.contains("hidden")`)); hidden != "true" {
		t.Errorf("the confirmation shows before the first click")
	}
	p.click("#revoke")
	p.touchTargets("revocation confirmation")
	p.click("#revoke-confirm")
	p.wait("the sign-in page", `!!document.querySelector(".signin") && localStorage.getItem("happy.account") === null`)
	if msg := p.text("#signin-message"); !strings.Contains(msg, "Signed out everywhere: every token of the account is revoked") {
		t.Errorf("sign-in page says %q", msg)
	}
	_, err := p.api.WithToken(creds.Token).ListSessions(context.Background())
	if !errors.Is(err, relay.ErrUnauthorized) {
		t.Errorf("the old token after revocation: %v, want ErrUnauthorized", err)
	}
	p.noPolicyViolations()
}

// fakeMachine is a machine of the account as a daemon registers it
// (relay.Client.OpenMachine: metadata and daemon state sealed with the
// machine key), whose spawn-happy-session answers like the daemon's:
// "/new…" folders need approvedNewDirectoryCreation, "/fail" is an error,
// anything else opens a relay session and returns its id.
type fakeMachine struct {
	client *relay.Client
	m      *relay.Machine
	mu     sync.Mutex
	calls  []map[string]any
	opened []string
}

func startMachine(t *testing.T, base string, creds *crypto.Credentials) *fakeMachine {
	t.Helper()
	return startMachineWith(t, base, creds, "machine-0001",
		`{"host":"buildbox","platform":"linux","happyCliVersion":"9.9.9","homeDir":"/home/u","arch":"amd64",`+
			`"agents":[{"name":"claude","installed":true,"path":"/usr/bin/claude"},{"name":"codex","installed":false,"error":"not found"},{"name":"gemini","installed":true}]}`,
		`{"status":"running","pid":4242,"startedAt":1,"sessions":[]}`)
}

// startMachineWith registers machine id with the metadata md and daemon
// state ds (JSON) and serves its spawn-happy-session (see fakeMachine); a
// request with resumeSessionId answers success with that session's id, as
// the daemon's happy resume continues the session in place.
func startMachineWith(t *testing.T, base string, creds *crypto.Credentials, id, md, ds string) *fakeMachine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := relay.New(context.Background(), relay.Config{BaseURL: base, Credentials: creds, OutboxDir: t.TempDir(), ClientName: "cli/test",
		AckTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second, Backoff: relay.Backoff{Min: 20 * time.Millisecond, Max: 400 * time.Millisecond},
		Dialer: relay.SIODialer(time.Second), NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fm := &fakeMachine{client: c}
	m, err := c.OpenMachine(ctx, relay.MachineOptions{ID: id, Metadata: json.RawMessage(md), DaemonState: json.RawMessage(ds)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	fm.m = m
	m.RegisterRPC("spawn-happy-session", func(ctx context.Context, params json.RawMessage) (any, error) {
		var p map[string]any
		if err := json.Unmarshal(params, &p); err != nil {
			return map[string]any{"type": "error", "errorMessage": "bad params: " + err.Error()}, nil
		}
		fm.mu.Lock()
		fm.calls = append(fm.calls, p)
		fm.mu.Unlock()
		dir, _ := p["directory"].(string)
		approved, _ := p["approvedNewDirectoryCreation"].(bool)
		if resume, _ := p["resumeSessionId"].(string); resume != "" {
			return map[string]any{"type": "success", "sessionId": resume, "pid": 778}, nil
		}
		switch {
		case dir == "/fail":
			return map[string]any{"type": "error", "errorMessage": "folder /fail: permission denied"}, nil
		case strings.HasPrefix(dir, "/new") && !approved:
			return map[string]any{"type": "requestToApproveDirectoryCreation", "directory": dir}, nil
		}
		s, err := c.OpenSession(ctx, relay.SessionOptions{Tag: fmt.Sprintf("spawn-%d", time.Now().UnixNano()),
			Metadata: json.RawMessage(fmt.Sprintf(`{"path":%q,"host":"buildbox","flavor":%q,"startedBy":"daemon","machineId":%q}`, dir, p["agent"], id))})
		if err != nil {
			return map[string]any{"type": "error", "errorMessage": err.Error()}, nil
		}
		fm.mu.Lock()
		fm.opened = append(fm.opened, s.ID())
		fm.mu.Unlock()
		t.Cleanup(func() { _ = s.Close() })
		return map[string]any{"type": "success", "sessionId": s.ID(), "pid": 777}, nil
	})
	return fm
}

func (fm *fakeMachine) snapshot() ([]map[string]any, []string) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return append([]map[string]any(nil), fm.calls...), append([]string(nil), fm.opened...)
}

// The machines page lists the account's machine with what its metadata
// and daemon state say, and its New session form calls the machine's
// spawn-happy-session: an error reply shows as an error, a folder to
// create as a question, and success opens the new session.
func TestMachinesAndNewSession(t *testing.T) {
	r, creds := startRelay(t)
	fm := startMachine(t, r.URL, creds)
	p := openApp(t, r.URL, creds)
	p.click("#nav-machines")
	row := `.machine[data-machine="machine-0001"]`
	p.wait("the machine", `!!document.querySelector('`+row+`')`)
	p.wait("the machine online", `document.querySelector('`+row+`').dataset.online === "true" || (document.querySelector("#machines-refresh").click(), false)`)
	text := p.text(row)
	for _, want := range []string{"buildbox", "online", "linux", "happy 9.9.9", "agents: claude, gemini", "daemon running, pid 4242, 0 sessions"} {
		if !strings.Contains(text, want) {
			t.Errorf("machine row %q lacks %q", text, want)
		}
	}
	var agents []string
	if err := json.Unmarshal(p.eval(`[...document.querySelectorAll("#spawn-agent option")].map(o => o.value)`), &agents); err != nil || strings.Join(agents, ",") != "claude,gemini" {
		t.Errorf("agent choices %v (%v), want the installed ones: claude, gemini", agents, err)
	}
	p.touchTargets("machines page")

	// An error reply.
	p.do("spawn in /fail", chromedp.SendKeys("#spawn-dir", "/fail"), chromedp.Click("#spawn-submit"))
	p.wait("the error", `document.querySelector("#spawn-result").className === "error"`)
	if msg := p.text("#spawn-result"); msg != "Not started: folder /fail: permission denied" {
		t.Errorf("error reply shows %q", msg)
	}
	// A relative folder is refused before anything is sent.
	p.eval(`document.querySelector("#spawn-dir").value = ""`)
	p.do("spawn in a relative folder", chromedp.SendKeys("#spawn-dir", "rel/dir"), chromedp.Click("#spawn-submit"))
	p.wait("the refusal", `document.querySelector("#spawn-result").textContent.includes("give an absolute path")`)

	// A folder to create: the page asks, then sends the approval.
	p.eval(`document.querySelector("#spawn-dir").value = ""; document.querySelector("#spawn-agent").value = "gemini"`)
	p.do("spawn in /new/project", chromedp.SendKeys("#spawn-dir", "/new/project"), chromedp.SendKeys("#spawn-prompt", "write the tests"), chromedp.Click("#spawn-submit"))
	p.wait("the question", `!document.querySelector("#spawn-ask").classList.contains("hidden")`)
	if q := p.text("#spawn-ask-text"); q != "The folder /new/project does not exist on buildbox. Create it?" {
		t.Errorf("question %q", q)
	}
	p.touchTargets("folder question")
	p.click("#spawn-ask-yes")
	p.wait("the new session", `location.hash.startsWith("#/s/")`)
	calls, opened := fm.snapshot()
	if len(opened) != 1 {
		t.Fatalf("sessions opened %v, want 1", opened)
	}
	var hash string
	_ = json.Unmarshal(p.eval(`decodeURIComponent(location.hash)`), &hash)
	if hash != "#/s/"+opened[0] {
		t.Errorf("page at %q, want the new session %s", hash, opened[0])
	}
	p.wait("the session's header", `(document.querySelector("#session-head .meta")?.textContent ?? "").includes("/new/project")`)
	want := []map[string]any{
		{"type": "spawn-in-directory", "directory": "/fail", "agent": "claude"},
		{"type": "spawn-in-directory", "directory": "/new/project", "agent": "gemini", "prompt": "write the tests"},
		{"type": "spawn-in-directory", "directory": "/new/project", "agent": "gemini", "prompt": "write the tests", "approvedNewDirectoryCreation": true},
	}
	gotJSON, _ := json.Marshal(calls)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("spawn params\n got %s\nwant %s", gotJSON, wantJSON)
	}

	// The checkbox approves the folder up front: one call, straight to the session.
	p.click("#nav-machines")
	p.wait("the form", `!!document.querySelector("#spawn-dir")`)
	p.do("spawn in /new/other with the checkbox", chromedp.SendKeys("#spawn-dir", "/new/other"), chromedp.Click(`label[for="spawn-create"]`), chromedp.Click("#spawn-submit"))
	p.wait("the second session", `location.hash.startsWith("#/s/")`)
	calls, opened = fm.snapshot()
	if len(calls) != 4 || calls[3]["approvedNewDirectoryCreation"] != true || len(opened) != 2 {
		t.Errorf("with the checkbox: calls %v, sessions %v", calls, opened)
	}
	p.noPolicyViolations()
}

// A pairing link opened a second time (or after it expired) fails at once
// with a message that says so, instead of polling the relay.
func TestUsedPairingLink(t *testing.T) {
	r, creds := startRelay(t)
	api := newAPI(t, r.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := relay.PairBrowser(ctx, api.WithToken(creds.Token), creds)
	if err != nil {
		t.Fatal(err)
	}
	link, err := relay.BrowserLink(r.URL, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.CollectBrowserPairing(ctx, api, p); err != nil {
		t.Fatalf("first use: %v", err)
	}
	bctx, bcancel := context.WithTimeout(browsertest.Start(t), 30*time.Second)
	defer bcancel()
	page := &appPage{t: t, ctx: bctx, base: r.URL, creds: creds, api: api}
	page.do("open the used link", chromedp.EmulateViewport(390, 844), chromedp.Navigate(link))
	// (wait gives up after 20 s; the page used to poll for 30 s before it said anything)
	page.wait("the refusal", `(document.querySelector("#signin-message")?.textContent ?? "").includes("pairing failed")`)
	if msg := page.text("#signin-message"); msg != "pairing failed: this pairing link was used already or has expired (a link works once, within 5 minutes); run `happy web` again" {
		t.Errorf("sign-in message %q", msg)
	}
	if got := string(page.eval(`localStorage.getItem("happy.account")`)); got != "null" {
		t.Errorf("a refused link left an account in the browser: %s", got)
	}
}

// storedToken is the token of the account the page keeps in localStorage.
func (p *appPage) storedToken() string {
	p.t.Helper()
	var s string
	if err := json.Unmarshal(p.eval(`JSON.parse(localStorage.getItem("happy.account") || "{}").token ?? ""`), &s); err != nil {
		p.t.Fatal(err)
	}
	return s
}

// Any page may send the browser to a pairing link of another account. A
// signed-in page asks first: the confirmation shows, the old login stays
// (in localStorage and on screen) and the link's request is not collected
// until the person says yes; "Keep" drops the link; "Sign in with the
// link" replaces the login. Both ways in are covered: a fragment change in
// the open page and a fresh load of the link.
func TestPairingLinkAsksBeforeReplacingALogin(t *testing.T) {
	r, creds := startRelay(t)
	intruder := newAccountOn(t, r.URL)
	p := openApp(t, r.URL, creds)
	ctx := context.Background()
	newLink := func() (string, relay.BrowserPairing) {
		t.Helper()
		bp, err := relay.PairBrowser(ctx, p.api, intruder)
		if err != nil {
			t.Fatal(err)
		}
		link, err := relay.BrowserLink(r.URL, bp)
		if err != nil {
			t.Fatal(err)
		}
		return link, bp
	}
	status := func(bp relay.BrowserPairing) string {
		t.Helper()
		pub := crypto.BoxPublicKey(bp.Secret)
		st, err := p.api.AuthRequestStatus(ctx, pub[:])
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, how := range []string{"fragment change", "fresh load"} {
		link, bp := newLink()
		switch how {
		case "fragment change":
			p.eval(fmt.Sprintf(`location.href = %q, true`, link))
		case "fresh load":
			p.do("load the link", chromedp.Navigate("about:blank"), chromedp.Navigate(link))
		}
		p.wait(how+": the confirmation", `!!document.querySelector("#pair-confirm-yes")`)
		if href := string(p.eval(`location.href`)); strings.Contains(href, "pair=") {
			t.Errorf("%s: the pairing key stays in the address bar: %s", how, href)
		}
		if got := p.storedToken(); got != creds.Token {
			t.Fatalf("%s: the stored login changed before any confirmation", how)
		}
		if !strings.Contains(p.text("#pair-confirm-text"), "replaces the current login") {
			t.Errorf("%s: confirmation text %q", how, p.text("#pair-confirm-text"))
		}
		if string(p.eval(`!!document.querySelector("#nav-machines")`)) != "true" {
			t.Errorf("%s: the signed-in page is gone while the confirmation waits", how)
		}
		if st := status(bp); st != "authorized" {
			t.Errorf("%s: the link's request is %q before any confirmation, want it untouched (authorized)", how, st)
		}
		p.touchTargets(how + ": confirmation")
		p.do(how+": keep", chromedp.Click("#pair-confirm-no"))
		p.wait(how+": the confirmation gone", `!document.querySelector("#pair-confirm")`)
		if got := p.storedToken(); got != creds.Token {
			t.Fatalf("%s: keeping the login changed it", how)
		}
	}

	link, bp := newLink()
	p.eval(fmt.Sprintf(`location.href = %q, true`, link))
	p.wait("the confirmation", `!!document.querySelector("#pair-confirm-yes")`)
	p.click("#pair-confirm-yes")
	p.wait("the new login", `!document.querySelector("#pair-confirm") && !!document.querySelector("#nav-machines") && JSON.parse(localStorage.getItem("happy.account") || "{}").token !== `+fmt.Sprintf("%q", creds.Token))
	tok := p.storedToken()
	if _, err := p.api.WithToken(tok).ListSessions(ctx); err != nil {
		t.Fatalf("the new login's token: %v", err)
	}
	var secret string
	if err := json.Unmarshal(p.eval(`JSON.parse(localStorage.getItem("happy.account")).secret`), &secret); err != nil || secret != crypto.EncodeBase64(intruder.AccountSecret[:]) {
		t.Errorf("the new login holds secret %q, want the link's account's (%v)", secret, err)
	}
	if st := status(bp); st != "not_found" {
		t.Errorf("the used link's request is %q, want not_found (collected)", st)
	}
	p.noPolicyViolations()
}

// newAccountOn makes another account on the relay at url.
func newAccountOn(t *testing.T, url string) *crypto.Credentials {
	t.Helper()
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	creds, err := relay.CreateAccount(context.Background(), newAPI(t, url), secret)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}
