package webapp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/webapp"
)

// These tests follow a new user of the app on a phone (390×844, the
// window openApp makes): what they found, each checked with the exact text
// the page shows, and a screenshot of it in the test's artifact directory
// (go test -artifacts keeps them).

// shot saves a screenshot of the page as name in the test's artifact
// directory.
func (p *appPage) shot(name string) {
	p.t.Helper()
	img, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(p.t.ArtifactDir(), name)
	if err := os.WriteFile(path, img, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// str evaluates expr to a string.
func (p *appPage) str(expr string) string {
	p.t.Helper()
	var s string
	if err := json.Unmarshal(p.eval(expr), &s); err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// strs evaluates expr to a list of strings.
func (p *appPage) strs(expr string) []string {
	p.t.Helper()
	var s []string
	if err := json.Unmarshal(p.eval(expr), &s); err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// fitsWidth fails when the page is wider than the phone (something makes
// it scroll sideways).
func (p *appPage) fitsWidth(where string) {
	p.t.Helper()
	if w := string(p.eval(`document.documentElement.scrollWidth`)); w != "390" {
		p.t.Errorf("%s: the page is %s px wide on a 390 px phone", where, w)
	}
}

// frames waits until the browser has drawn two frames (what a change of
// size sets off has run).
const frames = `new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(() => res(true))))`

// waitFor polls cond from Go (every 20 ms, at most 30 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Poll{Within: 30 * time.Second}.Until(t, what, cond)
}

// turnAgent answers each prompt with one turn: "answer N", a read tool
// whose result is pic when set, usage when usage is set; the first prompt
// also reports provider as the agent's own session id.
type turnAgent struct {
	events   chan agent.Event
	provider string
	pic      []byte
	usage    bool
	mu       sync.Mutex
	n        int
}

func newTurnAgent() *turnAgent { return &turnAgent{events: make(chan agent.Event, 256)} }

func (a *turnAgent) Events() <-chan agent.Event { return a.events }
func (a *turnAgent) Prompt(_ context.Context, p agent.Prompt) error {
	a.mu.Lock()
	a.n++
	n := a.n
	a.mu.Unlock()
	msg := fmt.Sprintf("m%d", n)
	go func() {
		if n == 1 && a.provider != "" {
			a.events <- &agent.SessionInfo{ProviderSessionID: a.provider}
		}
		a.events <- &agent.TurnStarted{TurnID: fmt.Sprint(n)}
		a.events <- &agent.MessageStarted{Message: msg}
		if a.pic != nil {
			in, _ := json.Marshal(map[string]string{"path": "/w/pic.png"})
			call := fmt.Sprintf("read-%d", n)
			a.events <- &agent.ToolCall{Message: msg, CallID: call, Tool: "read", Input: in}
			a.events <- &agent.ToolCompleted{CallID: call, Files: []agent.PromptFile{{Mime: "image/png", URL: "data:image/png;base64," + crypto.EncodeBase64(a.pic)}}}
		}
		a.events <- &agent.TextFinal{Message: msg, Block: "0", Text: fmt.Sprintf("answer %d", n)}
		if a.usage {
			in, out, cost := int64(1234), int64(340), 0.0123
			a.events <- &agent.Usage{Message: msg, Tokens: &agent.Tokens{Input: &in, Output: &out}, Cost: &cost}
		}
		a.events <- &agent.StepFinished{Message: msg, Finish: agent.FinishStop}
		a.events <- &agent.TurnEnded{TurnID: fmt.Sprint(n), Reason: agent.TurnCompleted}
	}()
	return nil
}
func (a *turnAgent) answered() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}
func (a *turnAgent) Decide(context.Context, string, agent.Verdict) error      { return nil }
func (a *turnAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *turnAgent) Interrupt(context.Context) error                          { return nil }
func (a *turnAgent) Close() error                                             { return nil }

// liveSession is a session app.RunSession runs in the background.
type liveSession struct {
	id     string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// runSession starts a session of home env and returns once the relay has it.
func runSession(t *testing.T, env app.Env, conn *app.Conn, ag agent.Agent, opts app.SessionOptions) *liveSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ls := &liveSession{cancel: cancel, done: make(chan error, 1)}
	ids := make(chan string, 1)
	opts.OnCreated = func(id string) { ids <- id }
	go func() {
		_, err := app.RunSession(ctx, env, conn, ag, opts)
		ls.done <- err
	}()
	select {
	case ls.id = <-ids:
	case err := <-ls.done:
		cancel()
		t.Fatalf("session in %s: %v", opts.Dir, err)
	}
	t.Cleanup(ls.end)
	return ls
}

// end ends the session (its happy writes lifecycleState "ended") and waits
// for its run to return.
func (ls *liveSession) end() {
	ls.once.Do(func() { ls.cancel(); <-ls.done })
}

// stateOf is the state `happy sessions` shows for session id.
func stateOf(t *testing.T, conn *app.Conn, id string) string {
	t.Helper()
	o, err := app.FindSession(context.Background(), conn, id)
	if err != nil {
		t.Fatal(err)
	}
	return o.State(time.Now())
}

// 1. Sign out sat next to Devices in the top bar, one mis-tap from losing
// the login, and asked nothing. The top bar now holds only the brand and
// the two pages; "Sign out of this browser" is on the devices page and
// asks first; Cancel keeps the login; yes forgets it (and only here: the
// token still works).
func TestSignOutAsksFirst(t *testing.T) {
	r, creds := startRelay(t)
	p := openApp(t, r.URL, creds)
	if got := p.strs(`[...document.querySelectorAll("header.top a, header.top button")].map(e => e.textContent)`); !slices.Equal(got, []string{"happy", "Machines", "Devices"}) {
		t.Errorf("top bar holds %q, want happy, Machines, Devices", got)
	}
	p.fitsWidth("top bar")
	p.wait("the sign-out button", `!!document.querySelector("#signout")`)
	if got := p.text("#signout"); got != "Sign out of this browser…" {
		t.Errorf("sign-out button %q", got)
	}
	hidden := `document.querySelector("#signout-confirm-row").classList.contains("hidden")`
	if string(p.eval(hidden)) != "true" {
		t.Errorf("the confirmation shows before the first click")
	}
	p.click("#signout")
	p.wait("the confirmation", "!"+hidden)
	if got := p.strs(`[...document.querySelectorAll("#signout-confirm-row button")].map(e => e.textContent)`); !slices.Equal(got, []string{"Yes, sign out", "Cancel"}) {
		t.Errorf("confirmation offers %q", got)
	}
	p.touchTargets("sign-out confirmation")
	p.fitsWidth("sign-out confirmation")
	p.shot("signout-confirm-phone.png")
	p.click("#signout-cancel")
	p.wait("the confirmation gone", hidden)
	if got := p.storedToken(); got != creds.Token {
		t.Fatalf("Cancel changed the stored login")
	}
	p.click("#signout")
	p.click("#signout-confirm")
	p.wait("the sign-in page", `!!document.querySelector(".signin") && localStorage.getItem("happy.account") === null`)
	if msg := p.text("#signin-message"); msg != "Signed out of this browser. Open a new link from `happy web`, or restore with your backup key, to sign in again." {
		t.Errorf("sign-in page says %q", msg)
	}
	if _, err := p.api.WithToken(creds.Token).ListSessions(context.Background()); err != nil {
		t.Errorf("signing out of the browser revoked the token: %v", err)
	}
	p.noPolicyViolations()
}

// 2. A session waiting for its next prompt said "running" and a session
// without a prompt was "(untitled)". Now every title is the one `happy
// sessions` prints (app.ListSessions: the summary, else the folder's
// name), and a running session whose heartbeat says no turn runs is
// "idle", in the list and on its page. The prompt box of the open session
// attaches with an SVG icon, not an emoji.
func TestIdleSessionAndTitles(t *testing.T) {
	r, creds := startRelay(t)
	env, conn := connectHome(t, r.URL, creds)
	agA, agB := newTurnAgent(), newTurnAgent()
	a := runSession(t, env, conn, agA, app.SessionOptions{Flavor: "claude", Dir: "/home/u/project"})
	b := runSession(t, env, conn, agB, app.SessionOptions{Flavor: "claude", Dir: "/home/u/other", Prompt: "fix the login page\nthen the tests"})
	ctx := context.Background()
	titles := map[string]string{}
	waitFor(t, "happy sessions' titles", func() bool {
		list, err := app.ListSessions(ctx, conn, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			titles[s.ID] = s.Title + " " + s.State
		}
		return agB.answered() == 1 && titles[a.id] == "project running" && titles[b.id] == "fix the login page running"
	})

	p := openApp(t, r.URL, creds)
	p.eval(`location.hash = "#", true`)
	for _, id := range []string{a.id, b.id} {
		row := fmt.Sprintf(`document.querySelector('.row[data-sid=%q]')`, id)
		p.wait("session "+id+" idle", row+`?.dataset.state === "idle"`)
		want, _, _ := strings.Cut(titles[id], " running")
		if got := p.str(row + `.querySelector(".title").textContent`); got != want {
			t.Errorf("list title of %s %q, happy sessions says %q", id, got, want)
		}
		if got := p.str(row + `.querySelector(".state").textContent`); got != "idle" {
			t.Errorf("list state of %s %q, want idle", id, got)
		}
	}
	p.fitsWidth("session list")
	p.touchTargets("session list")
	p.shot("sessions-idle-phone.png")

	p.eval(fmt.Sprintf(`location.hash = "#/s/" + %q, true`, a.id))
	p.wait("the open session", `document.querySelector("#session-state")?.textContent === "idle"`)
	if got := p.text("#session-head h2"); got != "project" {
		t.Errorf("page title %q, want project", got)
	}
	p.wait("the prompt box", `!!document.querySelector("#prompt:not(.hidden) #attach")`)
	if got := p.strs(`[document.querySelector("#attach").textContent, document.querySelector("#attach svg.icon")?.namespaceURI ?? "no svg",
		String(/\p{Extended_Pictographic}/u.test(document.querySelector("#prompt").textContent))]`); !slices.Equal(got, []string{"Attach", "http://www.w3.org/2000/svg", "false"}) {
		t.Errorf("attach button [text, icon, emoji in the prompt box]: %q", got)
	}
	p.touchTargets("idle session")
	p.fitsWidth("idle session")
	p.shot("session-idle-phone.png")
	p.noPolicyViolations()
}

// 3. Pictures that loaded after the transcript was drawn pushed the newest
// message out of view, and the usage line was bare numbers. Now the
// transcript stays at its newest message while pictures load and answers
// arrive, leaves the person where they are once they scrolled up, and the
// usage reads "tokens: 1.2k in · 340 out · cost $0.01".
func TestTranscriptFollowsNewest(t *testing.T) {
	r, creds := startRelay(t)
	env, conn := connectHome(t, r.URL, creds)
	pic := pngImage(t, 30, 40, color.NRGBA{40, 120, 60, 255})
	ag := newTurnAgent()
	ag.pic, ag.usage = pic, true
	s := runSession(t, env, conn, ag, app.SessionOptions{Flavor: "claude", Dir: "/home/u/pics", Prompt: "hello"})
	ctx := context.Background()
	o, err := app.FindSession(ctx, conn, s.id)
	if err != nil {
		t.Fatal(err)
	}
	send := func(text string, withPic bool) {
		t.Helper()
		var files []app.Blob
		if withPic {
			b, err := app.UploadBlob(ctx, conn.API, o.Cipher, s.id, "photo.png", "image/png", pngImage(t, 300, 400, color.NRGBA{200, 60, 20, 255}))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, b)
		}
		n := ag.answered()
		if _, err := app.SendFiles(ctx, conn, o, text, files, time.Now()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the agent to get "+text, func() bool { return ag.answered() == n+1 })
	}
	waitFor(t, "the first answer", func() bool { return ag.answered() == 1 })
	for i := range 4 {
		send(fmt.Sprintf("picture %d", i+1), true)
	}

	p := openApp(t, r.URL, creds)
	p.eval(fmt.Sprintf(`location.hash = "#/s/" + %q, true`, s.id))
	loaded := func(n int) string {
		return fmt.Sprintf(`(() => { const imgs = [...document.querySelectorAll("#transcript img")]; return imgs.length === %d && imgs.every(i => i.dataset.loaded === "true" && i.naturalWidth > 0); })()`, n)
	}
	gap := `(() => { const el = document.querySelector("#transcript"); return String(Math.round(el.scrollHeight - el.scrollTop - el.clientHeight)); })()`
	p.wait("the fifth answer", `(document.querySelector("#transcript")?.textContent ?? "").includes("answer 5")`)
	p.wait("nine pictures loaded (four sent, five from the tool)", loaded(9))
	p.eval(frames)
	if string(p.eval(`document.querySelector("#transcript").scrollHeight > 3 * document.querySelector("#transcript").clientHeight`)) != "true" {
		t.Fatalf("the transcript is not long enough to scroll")
	}
	if got := p.str(gap); got != "0" {
		t.Errorf("after the pictures loaded the newest message is %s px below the view, want 0", got)
	}
	if got := p.strs(`[...document.querySelectorAll("#transcript .msg.assistant .usage")].map(e => e.textContent)`); len(got) != 5 || got[4] != "tokens: 1.2k in · 340 out · cost $0.01" {
		t.Errorf("usage lines %q, want five of %q", got, "tokens: 1.2k in · 340 out · cost $0.01")
	}
	p.fitsWidth("transcript")
	p.shot("transcript-newest-phone.png")

	// Scrolled up, the person stays where they are when an answer arrives.
	p.eval(`document.querySelector("#transcript").scrollTop = 0, true`)
	p.eval(frames)
	send("one more", false)
	p.wait("the sixth answer", `(document.querySelector("#transcript")?.textContent ?? "").includes("answer 6")`)
	p.eval(frames)
	if got := string(p.eval(`document.querySelector("#transcript").scrollTop`)); got != "0" {
		t.Errorf("an answer moved a person who had scrolled up to %s px", got)
	}
	// Back at the bottom, it follows again, pictures included.
	p.eval(`(() => { const el = document.querySelector("#transcript"); el.scrollTop = el.scrollHeight; return true; })()`)
	p.eval(frames)
	send("a last picture", true)
	p.wait("the seventh answer", `(document.querySelector("#transcript")?.textContent ?? "").includes("answer 7")`)
	p.wait("twelve pictures loaded (five sent, seven from the tool)", loaded(12))
	p.eval(frames)
	if got := p.str(gap); got != "0" {
		t.Errorf("after the last picture loaded the newest message is %s px below the view, want 0", got)
	}
	p.noPolicyViolations()
}

// 4. There was no way to archive, delete or resume a session from the
// page, nor to find a machine's folders again. Now: a running session
// says why it cannot be archived or deleted (as the CLI refuses); an ended
// one archives from its page as app.Archive does (metadata fields, then
// POST archive), resumes from the list through its machine's daemon with
// the params of happy spawn --resume, and deletes from the list after a
// confirmation (Cancel keeps it); the New session form suggests the
// folders the machine ran sessions in.
func TestSessionActions(t *testing.T) {
	r, creds := startRelay(t)
	env, conn := connectHome(t, r.URL, creds)
	machineID, err := settings.EnsureMachineID(env.Home.Settings())
	if err != nil {
		t.Fatal(err)
	}
	agA := newTurnAgent()
	agA.provider = "claude-alpha"
	alpha := runSession(t, env, conn, agA, app.SessionOptions{Flavor: "claude", Dir: "/home/u/alpha", Prompt: "first task"})
	beta := runSession(t, env, conn, newTurnAgent(), app.SessionOptions{Flavor: "claude", Dir: "/home/u/beta"})
	gamma := runSession(t, env, conn, newTurnAgent(), app.SessionOptions{Flavor: "claude", Dir: "/home/u/gamma"})
	ctx := context.Background()
	waitFor(t, "alpha's own session id in its metadata", func() bool {
		o, err := app.FindSession(ctx, conn, alpha.id)
		return err == nil && bytes.Contains(o.RawMetadata, []byte(`"claudeSessionId":"claude-alpha"`))
	})
	alpha.end()
	beta.end()
	for id, want := range map[string]string{alpha.id: "ended", beta.id: "ended", gamma.id: "running"} {
		if got := stateOf(t, conn, id); got != want {
			t.Fatalf("session %s is %s, want %s", id, got, want)
		}
	}
	fm := startMachineWith(t, r.URL, creds, machineID,
		fmt.Sprintf(`{"host":"buildbox","platform":"linux","happyCliVersion":"9.9.9","homeDir":"/home/u","happyHomeDir":%q,"agents":[{"name":"claude","installed":true}]}`, env.Home.Path()),
		`{"status":"running","pid":4242,"startedAt":1,"sessions":[{"sessionId":"x","directory":"/home/u/daemon-only"}]}`)

	p := openApp(t, r.URL, creds)
	p.eval(`location.hash = "#", true`)
	row := func(id string) string { return fmt.Sprintf(`.row[data-sid=%q]`, id) }
	p.wait("the three sessions", fmt.Sprintf(`document.querySelector('%s')?.dataset.state === "ended" && document.querySelector('%s')?.dataset.state === "ended" && document.querySelector('%s')?.dataset.state === "idle"`,
		row(alpha.id), row(beta.id), row(gamma.id)))

	// A running session: no archive or delete, and why.
	p.click(row(gamma.id) + " button.more")
	panel := row(gamma.id) + " .actions-panel"
	p.wait("gamma's panel", fmt.Sprintf(`!!document.querySelector('%s')`, panel))
	if got := p.text(panel); got != fmt.Sprintf("Running: it can be archived or deleted once its happy ends (happy stop %s) or it is stale.", gamma.id) {
		t.Errorf("a running session's panel says %q", got)
	}
	if n := string(p.eval(fmt.Sprintf(`document.querySelectorAll('%s button').length`, panel))); n != "0" {
		t.Errorf("a running session's panel offers %s buttons", n)
	}
	p.touchTargets("list with a panel")
	p.fitsWidth("list with a panel")
	p.shot("actions-running-phone.png")

	// Archive alpha from its page.
	before, err := app.FindSession(ctx, conn, alpha.id)
	if err != nil {
		t.Fatal(err)
	}
	p.eval(fmt.Sprintf(`location.hash = "#/s/" + %q, true`, alpha.id))
	p.wait("alpha's page", `document.querySelector("#session-state")?.textContent === "ended"`)
	p.click("#session-more")
	p.wait("the resume button", `!!document.querySelector("#session-actions .act-resume")`)
	if got := p.strs(`[...document.querySelectorAll("#session-actions button")].map(e => e.textContent)`); !slices.Equal(got, []string{"Resume on buildbox", "Archive", "Delete…"}) {
		t.Errorf("an ended session's page offers %q", got)
	}
	p.touchTargets("session page with its panel")
	p.shot("actions-ended-phone.png")
	t0 := time.Now().UnixMilli()
	p.click("#session-actions .act-archive")
	p.wait("archived", `document.querySelector("#session-state")?.textContent === "archived" && document.querySelector("#session-actions .act-note")?.textContent === "Archived."`)
	t1 := time.Now().UnixMilli()
	after, err := app.FindSession(ctx, conn, alpha.id)
	if err != nil {
		t.Fatal(err)
	}
	var was, now map[string]any
	_ = json.Unmarshal(before.RawMetadata, &was)
	_ = json.Unmarshal(after.RawMetadata, &now)
	since, _ := now["lifecycleStateSince"].(float64)
	if int64(since) < t0 || int64(since) > t1 {
		t.Errorf("lifecycleStateSince %v not within the click (%d..%d)", now["lifecycleStateSince"], t0, t1)
	}
	// The activity it had before the archive (the page's view of it),
	// never the archive's own time.
	last, _ := now["lastActivityAt"].(float64)
	if ms := before.LastActivity().UnixMilli(); int64(last) < ms-10_000 || int64(last) > ms+10_000 || int64(last) >= int64(since) {
		t.Errorf("lastActivityAt %v, want about %d (before the archive at %v)", now["lastActivityAt"], ms, since)
	}
	was["lifecycleState"], was["lifecycleStateSince"], was["archivedBy"], was["archiveReason"], was["lastActivityAt"] = "archived", since, "web", "user", last
	wantJSON, _ := json.Marshal(was)
	gotJSON, _ := json.Marshal(now)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("archived metadata\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if after.Info.Active {
		t.Errorf("the relay still has the archived session active (POST archive not sent)")
	}
	if got := after.State(time.Now()); got != "archived" {
		t.Errorf("happy sessions says %s", got)
	}

	// Resume alpha from the list, where archived sessions are listed apart.
	p.eval(`location.hash = "#", true`)
	p.wait("the archived group", `document.querySelector("#list details.archived summary")?.textContent === "Archived (1)"`)
	p.eval(`document.querySelector("#list details.archived").open = true`)
	p.click(row(alpha.id) + " button.more")
	p.wait("the resume button", fmt.Sprintf(`document.querySelector('%s .act-resume')?.textContent === "Resume on buildbox"`, row(alpha.id)))
	if got := p.strs(fmt.Sprintf(`[...document.querySelectorAll('%s .actions-panel button')].map(e => e.textContent)`, row(alpha.id))); !slices.Equal(got, []string{"Resume on buildbox", "Delete…"}) {
		t.Errorf("an archived session's panel offers %q", got)
	}
	p.click(row(alpha.id) + " .act-resume")
	p.wait("alpha's page after resuming", fmt.Sprintf(`decodeURIComponent(location.hash) === "#/s/" + %q`, alpha.id))
	calls, _ := fm.snapshot()
	gotCalls, _ := json.Marshal(calls)
	if want := fmt.Sprintf(`[{"agent":"claude","directory":"","resumeSessionId":%q,"type":"spawn-in-directory"}]`, alpha.id); string(gotCalls) != want {
		t.Errorf("spawn-happy-session got %s, want %s", gotCalls, want)
	}

	// Delete beta: Cancel on its page keeps it; yes in the list deletes it.
	p.eval(fmt.Sprintf(`location.hash = "#/s/" + %q, true`, beta.id))
	p.wait("beta's page", `document.querySelector("#session-head h2")?.textContent === "beta"`)
	p.click("#session-more")
	p.click("#session-actions .act-delete")
	p.wait("the question", `!!document.querySelector("#session-actions .act-confirm-text")`)
	if got := p.text("#session-actions .act-confirm-text"); got != "Delete this session and its whole transcript from the relay? This cannot be undone." {
		t.Errorf("delete asks %q", got)
	}
	p.touchTargets("delete question")
	p.shot("actions-delete-phone.png")
	p.click("#session-actions .act-delete-no")
	p.wait("the question gone", `!document.querySelector("#session-actions .act-confirm-text") && !!document.querySelector("#session-actions .act-delete")`)
	if _, err := app.FindSession(ctx, conn, beta.id); err != nil {
		t.Fatalf("Cancel deleted beta: %v", err)
	}
	p.eval(`location.hash = "#", true`)
	p.click(row(beta.id) + " button.more")
	p.click(row(beta.id) + " .act-delete")
	p.click(row(beta.id) + " .act-delete-yes")
	p.wait("beta gone from the list", fmt.Sprintf(`!document.querySelector('%s')`, row(beta.id)))
	list, err := app.ListSessions(ctx, conn, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	want := []string{alpha.id, gamma.id}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("the relay lists %v after deleting beta, want %v", ids, want)
	}

	// The New session form suggests the machine's folders.
	p.click("#nav-machines")
	p.wait("the machine in the form", fmt.Sprintf(`[...document.querySelectorAll("#spawn-machine option")].some(o => o.value === %q)`, machineID))
	p.eval(fmt.Sprintf(`(() => { const s = document.querySelector("#spawn-machine"); s.value = %q; s.dispatchEvent(new Event("change")); return true; })()`, machineID))
	folders := p.strs(`[document.querySelector("#spawn-dir").getAttribute("list"), ...[...document.querySelectorAll("#spawn-dirs option")].map(o => o.value).sort()]`)
	if want := []string{"spawn-dirs", "/home/u/alpha", "/home/u/daemon-only", "/home/u/gamma"}; !slices.Equal(folders, want) {
		t.Errorf("folder suggestions %q, want %q", folders, want)
	}
	p.fitsWidth("machines page")
	p.noPolicyViolations()
}

// flakyRelay is a relay that can go away: a proxy to target whose
// connections are all cut while it is down, and new ones closed at once.
type flakyRelay struct {
	mu    sync.Mutex
	up    bool
	conns map[net.Conn]struct{}
}

type flakyListener struct {
	net.Listener
	f *flakyRelay
}

type flakyConn struct {
	net.Conn
	f *flakyRelay
}

func (c flakyConn) Close() error {
	c.f.mu.Lock()
	delete(c.f.conns, c.Conn)
	c.f.mu.Unlock()
	return c.Conn.Close()
}

func (l flakyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.f.mu.Lock()
		if !l.f.up {
			l.f.mu.Unlock()
			c.Close()
			continue
		}
		l.f.conns[c] = struct{}{}
		l.f.mu.Unlock()
		return flakyConn{c, l.f}, nil
	}
}

// set brings the relay up or takes it down (every connection cut).
func (f *flakyRelay) set(up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up = up
	if !up {
		for c := range f.conns {
			c.Close()
		}
		clear(f.conns)
	}
}

// startFlaky listens for the proxy (down until set(true)) and returns its
// base URL; start points it at target.
func startFlaky(t *testing.T) (f *flakyRelay, base string, start func(target string)) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f = &flakyRelay{conns: map[net.Conn]struct{}{}}
	return f, "http://" + l.Addr().String(), func(target string) {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(u)
		transport := &http.Transport{}
		proxy.Transport = transport
		srv := &http.Server{Handler: proxy}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(flakyListener{l, f}) }()
		t.Cleanup(func() { f.set(false); _ = srv.Close(); <-done; transport.CloseIdleConnections() })
	}
}

// 5. With the relay out of reach the page showed raw errors ("cannot
// reach the relay at …: Failed to fetch", "live updates unavailable:
// websocket error") squeezed into the top bar. Now a banner says what to
// check, fits the phone, and has Retry; it goes once the relay answers:
// at once on Retry, and by itself when the live connection comes back.
func TestRelayUnreachable(t *testing.T) {
	f, base, startProxy := startFlaky(t)
	r := servertest.StartConfig(t, server.Config{App: webapp.Files(), AppConnectSrc: []string{base}})
	startProxy(r.URL)
	creds := newAccountOn(t, r.URL)
	openSession(t, r.URL, creds, `{"path":"/home/u/proj","host":"box","flavor":"claude","lifecycleState":"ended","lifecycleStateSince":1}`)

	p := openAppAt(t, r.URL, base, creds)
	p.eval(`location.hash = "#", true`)
	want := fmt.Sprintf(`Can't reach the relay at %s. Is it running? Start it with "happy server" on its computer, or check that this device can reach that address. happy tries again every few seconds.`, base)
	banner := `!document.querySelector("#relay-down").classList.contains("hidden")`
	p.wait("the banner", banner)
	if got := p.text("#relay-down-text"); got != want {
		t.Errorf("banner says\n%q\nwant\n%q", got, want)
	}
	if got := p.text("#status"); got != "" {
		t.Errorf("the top bar also says %q", got)
	}
	if got := p.text("#list .empty"); got != "The sessions show once the relay answers." {
		t.Errorf("the empty list says %q", got)
	}
	if got := p.text("#relay-retry"); got != "Retry now" {
		t.Errorf("retry button %q", got)
	}
	p.fitsWidth("banner")
	p.touchTargets("banner")
	if got := string(p.eval(`(() => { const r = document.querySelector("#relay-down").getBoundingClientRect(); return r.left >= 0 && r.right <= 390 && r.top < 844; })()`)); got != "true" {
		t.Errorf("the banner is not within the phone's screen")
	}
	p.shot("relay-down-phone.png")

	// Up again: Retry brings the sessions at once.
	f.set(true)
	p.click("#relay-retry")
	p.wait("the session list", `!!document.querySelector(".row") && document.querySelector("#relay-down").classList.contains("hidden")`)
	if got := p.text(".row .title"); got != "proj" {
		t.Errorf("after Retry the list shows %q", got)
	}

	// Going away while open: the banner comes back, and goes by itself.
	f.set(false)
	p.wait("the banner again", banner)
	if got := p.text("#relay-down-text"); got != want {
		t.Errorf("banner after a drop says %q", got)
	}
	f.set(true)
	p.wait("the banner gone by itself", `document.querySelector("#relay-down").classList.contains("hidden")`)
	p.noPolicyViolations()

	// Signing in to a relay that is not there says the same.
	p.eval(`localStorage.clear(), true`)
	f.set(false)
	p.do("reload signed out", chromedp.Reload())
	p.wait("the sign-in page", `!!document.querySelector("#backup-key")`)
	p.eval(fmt.Sprintf(`document.querySelector("#relay-url").value = %q, true`, base))
	p.do("restore", chromedp.SendKeys("#backup-key", crypto.FormatBackupKey(*creds.AccountSecret)), chromedp.Click(".signin button[type=submit]"))
	p.wait("the refusal", `(document.querySelector("#signin-message")?.textContent ?? "").startsWith("Can't reach")`)
	if got, want := p.text("#signin-message"), strings.TrimSuffix(want, " happy tries again every few seconds."); got != want {
		t.Errorf("sign-in says %q, want %q", got, want)
	}
	p.fitsWidth("sign-in refusal")
	p.shot("relay-down-signin-phone.png")
}

// openSession opens a relay session of the account with the given
// metadata (JSON), as a terminal would, and returns its id.
func openSession(t *testing.T, base string, creds *crypto.Credentials, md string) string {
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
	s, err := c.OpenSession(ctx, relay.SessionOptions{Tag: fmt.Sprintf("test-%d", time.Now().UnixNano()), Metadata: json.RawMessage(md)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.ID()
}

// 6. The browser's request for /favicon.ico was a 404 (from the relay and
// from happy web's own server), and the page named no icon. Both now serve
// an icon (an SVG, and an ICO of 16 and 32 px PNGs), and index.html links
// them.
func TestIcons(t *testing.T) {
	r, _ := startRelay(t)
	local := httptest.NewServer(webapp.Handler(webapp.Files(), nil)) // what happy web serves
	t.Cleanup(local.Close)
	for _, base := range []string{r.URL, local.URL} {
		for path, ct := range map[string]string{"/favicon.ico": "image/x-icon", "/icon.svg": "image/svg+xml"} {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			req.Close = true
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ct {
				t.Errorf("GET %s%s: %d %s, want 200 %s", base, path, resp.StatusCode, resp.Header.Get("Content-Type"), ct)
				continue
			}
			if path == "/favicon.ico" {
				checkICO(t, body, 16, 32)
			} else if !bytes.HasPrefix(body, []byte(`<svg xmlns="http://www.w3.org/2000/svg"`)) {
				t.Errorf("icon.svg starts %q", body[:min(len(body), 40)])
			}
		}
	}
	index, err := webappFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{`<link rel="icon" href="icon.svg" type="image/svg+xml">`, `<link rel="icon" href="favicon.ico" sizes="16x16 32x32">`} {
		if !strings.Contains(index, link) {
			t.Errorf("index.html lacks %s", link)
		}
	}
}

// webappFile reads one file of the embedded app.
func webappFile(name string) (string, error) {
	f, err := webapp.Files().Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

// checkICO checks an ICO file: one PNG image per size, each decoding to
// that size.
func checkICO(t *testing.T, b []byte, sizes ...int) {
	t.Helper()
	if len(b) < 6 || binary.LittleEndian.Uint16(b[0:]) != 0 || binary.LittleEndian.Uint16(b[2:]) != 1 || int(binary.LittleEndian.Uint16(b[4:])) != len(sizes) {
		t.Fatalf("favicon.ico: not an icon file of %d images", len(sizes))
	}
	for i, size := range sizes {
		e := b[6+16*i:]
		n, off := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		if int(e[0]) != size || int(e[1]) != size || int(off)+int(n) > len(b) {
			t.Errorf("favicon.ico entry %d: %dx%d at %d+%d of %d bytes", i, e[0], e[1], off, n, len(b))
			continue
		}
		img, err := png.Decode(bytes.NewReader(b[off : off+n]))
		if err != nil || img.Bounds().Dx() != size || img.Bounds().Dy() != size {
			t.Errorf("favicon.ico entry %d: %v (%v)", i, err, img)
		}
	}
}

// TestWaitingTitleAtPhoneWidth: on a 390 px wide page the header of a
// session whose tool waits for permission held "tidy the b…": the "waiting
// for you" badge and the actions button left the title a dozen letters.
// The title now takes up to two lines: a short one reads whole, a long one
// is cut at the end of its second line, and the header still fits the
// width.
func TestWaitingTitleAtPhoneWidth(t *testing.T) {
	r, creds := startRelay(t)
	env, conn := connectHome(t, r.URL, creds)
	const short = "tidy the build please"
	const long = "fix the login page, then the flaky payment tests, then update the changelog and the docs"
	agS := &permAgent{events: make(chan agent.Event, 64), commands: []string{"rm -rf build/cache"}}
	agL := &permAgent{events: make(chan agent.Event, 64), commands: []string{"npm test"}}
	s := runSession(t, env, conn, agS, app.SessionOptions{Flavor: "claude", Dir: "/home/u/project", Prompt: short, ProviderID: "test"})
	l := runSession(t, env, conn, agL, app.SessionOptions{Flavor: "claude", Dir: "/home/u/project", Prompt: long, ProviderID: "test"})
	p := openApp(t, r.URL, creds)
	for _, tc := range []struct {
		id, title string
		whole     string
	}{{s.id, short, "true"}, {l.id, long, "false"}} {
		p.eval(fmt.Sprintf(`location.hash = "#/s/" + %q, true`, tc.id))
		p.wait("waiting for you", `document.querySelector("#session-state")?.textContent === "waiting for you"`)
		h2 := `document.querySelector("#session-head h2")`
		got := p.strs(`[` + h2 + `.textContent.slice(0, 40),
  String(Math.round(` + h2 + `.getBoundingClientRect().height / parseFloat(getComputedStyle(` + h2 + `).lineHeight)) <= 2),
  String(` + h2 + `.scrollHeight <= ` + h2 + `.clientHeight + 1 && ` + h2 + `.scrollWidth <= ` + h2 + `.clientWidth + 1)]`)
		if want := []string{tc.title[:min(40, len(tc.title))], "true", tc.whole}; !slices.Equal(got, want) {
			t.Errorf("header of %q [text, at most two lines, all shown]: %q, want %q", tc.title, got, want)
		}
		p.fitsWidth("waiting session")
		p.shot("session-waiting-" + tc.whole + "-phone.png")
	}
}
