package webapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/internal/webpushtest"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/webapp"
)

// permAgent runs, for each prompt, one shell tool that needs permission
// (command commands[n-1]); a decision completes or fails it and ends the
// turn with "Turn n: <decision>".
type permAgent struct {
	events    chan agent.Event
	commands  []string
	mu        sync.Mutex
	n         int
	decisions []string
}

func (a *permAgent) Events() <-chan agent.Event { return a.events }
func (a *permAgent) Prompt(_ context.Context, p agent.Prompt) error {
	a.mu.Lock()
	a.n++
	n := a.n
	a.mu.Unlock()
	in, _ := json.Marshal(map[string]string{"command": a.commands[n-1]})
	id, msg := fmt.Sprintf("call-%d", n), fmt.Sprintf("m%d", n)
	go func() {
		a.events <- &agent.TurnStarted{TurnID: fmt.Sprint(n)}
		a.events <- &agent.MessageStarted{Message: msg}
		a.events <- &agent.ToolCall{Message: msg, CallID: id, Tool: "bash", Input: in}
		a.events <- &agent.ToolBlocked{CallID: id, Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{a.commands[n-1]}}}
	}()
	return nil
}
func (a *permAgent) Decide(_ context.Context, callID string, v agent.Verdict) error {
	a.mu.Lock()
	a.decisions = append(a.decisions, callID+":"+string(v.Decision))
	n := a.n
	a.mu.Unlock()
	go func() {
		if v.Decision == agent.DecisionReject {
			a.events <- &agent.ToolFailed{CallID: callID, Error: "denied"}
		} else {
			a.events <- &agent.ToolCompleted{CallID: callID, Output: "ok"}
		}
		msg := fmt.Sprintf("final%d", n)
		a.events <- &agent.TextFinal{Message: msg, Block: "0", Text: fmt.Sprintf("Turn %d: %s", n, v.Decision)}
		a.events <- &agent.StepFinished{Message: msg, Finish: agent.FinishStop}
		a.events <- &agent.TurnEnded{TurnID: fmt.Sprint(n), Reason: agent.TurnCompleted}
	}()
	return nil
}
func (a *permAgent) decided() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.decisions)
}
func (a *permAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *permAgent) Interrupt(context.Context) error                          { return nil }
func (a *permAgent) Close() error                                             { return nil }

// serviceWorker waits until the page's service worker runs and returns a
// context attached to it (to evaluate in its global scope) and its
// registration id.
func (p *appPage) serviceWorker(origin string) (context.Context, serviceworker.RegistrationID) {
	p.t.Helper()
	p.wait("the service worker", `navigator.serviceWorker.controller !== null`)
	ev, err := chromedp.Run(p.ctx, chromedp.WaitEvent(serviceworker.WorkerRegistrationUpdated,
		func(e serviceworker.EventWorkerRegistrationUpdated) bool {
			return slices.ContainsFunc(e.Registrations, func(r *serviceworker.Registration) bool { return r.ScopeURL == origin+"/" && !r.IsDeleted })
		},
		func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
			return cdp.Call(ctx, t, serviceworker.Enable, cdp.Empty{})
		}))
	if err != nil {
		p.t.Fatalf("service worker registration: %v", err)
	}
	var reg serviceworker.RegistrationID
	for _, r := range ev.Registrations {
		if r.ScopeURL == origin+"/" {
			reg = r.RegistrationID
		}
	}
	targets, err := chromedp.Targets(p.ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	var id target.ID
	for _, ti := range targets {
		if ti.Type == "service_worker" && ti.URL == origin+"/sw.js" {
			id = ti.TargetID
		}
	}
	if id == "" {
		p.t.Fatalf("no service worker target among %d targets", len(targets))
	}
	sw, cancel := chromedp.NewContext(p.ctx, chromedp.WithTargetID(id))
	p.t.Cleanup(cancel)
	if err := chromedp.Do(sw); err != nil {
		p.t.Fatalf("attach to the service worker: %v", err)
	}
	p.swEval(sw, recordNotifications)
	go func() {
		for ev, err := range chromedp.Console(sw) {
			if err != nil {
				return
			}
			if ev.Type == chromedp.ConsoleError || ev.Type == chromedp.ConsoleException || ev.Type == chromedp.ConsoleWarning {
				p.mu.Lock()
				p.errors = append(p.errors, "service worker: "+ev.Text)
				p.mu.Unlock()
			}
		}
	}()
	return sw, reg
}

// swEval evaluates expr in the service worker (awaiting a promise).
func (p *appPage) swEval(sw context.Context, expr string) json.RawMessage {
	p.t.Helper()
	raw, err := chromedp.Run(sw, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate in the service worker %s: %v (console: %q)", expr, err, p.consoleErrors())
	}
	return raw
}

// shown is a notification as the service worker's registration lists it.
type shown struct {
	Title   string         `json:"title"`
	Body    string         `json:"body"`
	Tag     string         `json:"tag"`
	Actions []string       `json:"actions"`
	Data    map[string]any `json:"data"`
}

// recordNotifications makes the service worker keep what it shows (each
// notification once its showNotification resolved) in self.__shown.
// Headless Chromium's getNotifications can miss a notification that was
// shown (it drops one from its database when its list of displayed ones
// lags, which happens under load), so the tests read this record.
const recordNotifications = `(() => {
  if (self.__shown) return true;
  self.__shown = [];
  const show = ServiceWorkerRegistration.prototype.showNotification;
  ServiceWorkerRegistration.prototype.showNotification = function (title, options = {}) {
    return show.call(this, title, options).then(() => {
      self.__shown.push({title, body: options.body ?? "", tag: options.tag ?? "", actions: (options.actions ?? []).map((a) => a.action + ":" + a.title), data: options.data ?? null});
    });
  };
  return true;
})()`

// notifications waits until the service worker has shown n notifications
// with a tag matching tag, and returns them (oldest first).
func (p *appPage) notifications(sw context.Context, tag *regexp.Regexp, n int) []shown {
	p.t.Helper()
	var list, all []shown
	if !(waitfor.Poll{Every: 50 * time.Millisecond, Within: 20 * time.Second}).True(func() bool {
		all = nil
		if err := json.Unmarshal(p.swEval(sw, `self.__shown`), &all); err != nil {
			p.t.Fatal(err)
		}
		list = list[:0]
		for _, s := range all {
			if tag.MatchString(s.Tag) {
				list = append(list, s)
			}
		}
		return len(list) >= n
	}) {
		p.t.Fatalf("waiting for %d notification(s) tagged %s: have %+v (console: %q)", n, tag, all, p.consoleErrors())
	}
	return list
}

// stubPush replaces the browser's push subscription (headless Chromium has
// no push service) by one whose endpoint is ps's and whose keys are its.
func (p *appPage) stubPush(ps *webpushtest.Service, path string) {
	p.t.Helper()
	p256dh, auth := ps.Keys()
	p.eval(fmt.Sprintf(`(() => {
  const json = {endpoint: %q, expirationTime: null, keys: {p256dh: %q, auth: %q}};
  window.__sub = null;
  PushManager.prototype.subscribe = async function (opts) {
    window.__sub = {endpoint: json.endpoint, options: {applicationServerKey: opts.applicationServerKey}, toJSON: () => json,
      unsubscribe: async () => { window.__sub = null; return true; }};
    return window.__sub;
  };
  PushManager.prototype.getSubscription = async function () { return window.__sub; };
  return true;
})()`, ps.URL+path, p256dh, auth))
}

// pushStatus is the relay's GET /v1/push/status for the account of token.
func pushStatus(t *testing.T, base, token string) relay.PushStatus {
	t.Helper()
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: base, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	st, err := api.PushStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestInstallable: Chromium finds nothing missing to install the app (a
// manifest with a name, icons of 192 and 512 px, a start URL, standalone
// display, a service worker), the manifest is served as such, and the
// service worker's list of the app's files is the whole app.
func TestInstallable(t *testing.T) {
	r, creds := startRelay(t)
	p := openApp(t, r.URL, creds)
	p.wait("the service worker", `navigator.serviceWorker.controller !== null`)
	res, err := chromedp.Call(p.ctx, page.GetInstallabilityErrors, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.InstallabilityErrors) != 0 {
		var errs []string
		for _, e := range res.InstallabilityErrors {
			errs = append(errs, e.ErrorID)
		}
		t.Errorf("installability errors: %v", errs)
	}
	resp, err := http.Get(r.URL + "/manifest.webmanifest")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name, StartURL, Display, ThemeColor string
		Icons                               []struct{ Src, Sizes, Type string }
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || resp.Header.Get("Content-Type") != "application/manifest+json" {
		t.Fatalf("manifest: %v, %s", err, resp.Header.Get("Content-Type"))
	}
	if m.Name != "happy" || m.Display != "standalone" || len(m.Icons) != 2 || m.Icons[0].Sizes != "192x192" || m.Icons[1].Sizes != "512x512" {
		t.Errorf("manifest %+v", m)
	}

	sw, err := webappFile("sw.js")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)const SHELL = \[(.*?)\];`).FindStringSubmatch(sw)
	if block == nil {
		t.Fatal("sw.js has no SHELL list")
	}
	var shell []string
	for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(block[1], -1) {
		shell = append(shell, m[1])
	}
	want := []string{"./"}
	_ = fs.WalkDir(webapp.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && path != "sw.js" && !strings.HasSuffix(path, "/LICENSE") {
			want = append(want, path)
		}
		return err
	})
	slices.Sort(shell)
	slices.Sort(want)
	if !slices.Equal(shell, want) {
		t.Errorf("sw.js keeps %v\nthe app is %v", shell, want)
	}
	p.noPolicyViolations()
}

// TestNotificationAllowOnce follows a phone that turns notifications on:
// the Devices switch subscribes with the relay's VAPID key; a session's
// blocked tool reaches the push service encrypted and as ciphertext of the
// session only; delivered to the service worker (DevTools), it shows the
// permission request with the session's title and the command, opened with
// the keys the page left in IndexedDB, and Allow once and Deny; with no
// page of the app open, Allow once answers the session through the sealed,
// bound RPC and the tool completes; the same click again is refused by the
// session and says so in a notification; a message the relay made up
// shows no claim and no buttons; a second tool is denied the same way; the
// switch turns notifications off again.
func TestNotificationAllowOnce(t *testing.T) {
	ps := webpushtest.Start(t)
	r := servertest.StartConfig(t, server.Config{App: webapp.Files(), WebPushServices: []string{"127.0.0.1"}})
	creds := newAccountOn(t, r.URL)
	p := openApp(t, r.URL, creds)
	if _, err := chromedp.CallBrowser(p.ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted, Origin: r.URL}); err != nil {
		t.Fatal(err)
	}
	p.stubPush(ps, "/sub/phone")
	p.wait("the switch", `document.querySelector("#notify-toggle")?.textContent === "Turn on" && !document.querySelector("#notify-toggle").classList.contains("hidden")`)
	p.touchTargets("devices with the notification switch")
	p.shot("notifications-off-phone.png")
	p.click("#notify-toggle")
	p.wait("on", `document.querySelector("#notify-state")?.textContent === "On for this browser."`)
	p.shot("notifications-on-phone.png")
	if st := pushStatus(t, r.URL, creds.Token); st.WebPush.Subscriptions != 1 {
		t.Fatalf("the relay has %d subscriptions", st.WebPush.Subscriptions)
	}
	var key string
	if err := json.Unmarshal(p.eval(`btoa(String.fromCharCode(...new Uint8Array(window.__sub.options.applicationServerKey))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")`), &key); err != nil {
		t.Fatal(err)
	}
	var vapid struct{ PublicKey string }
	if resp, err := http.Get(r.URL + "/v1/web-push/vapid-public-key"); err != nil {
		t.Fatal(err)
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&vapid)
		resp.Body.Close()
	}
	if key == "" || key != vapid.PublicKey {
		t.Fatalf("subscribed with key %q, the relay's is %q", key, vapid.PublicKey)
	}
	sw, reg := p.serviceWorker(r.URL)

	const title, command = "Clean the secret cache", "rm -rf build/secret-cache"
	env, conn := connectHome(t, r.URL, creds)
	ag := &permAgent{events: make(chan agent.Event, 64), commands: []string{command, "git push --force"}}
	ls := runSession(t, env, conn, ag, app.SessionOptions{Flavor: "claude", Dir: "/home/u/project", Prompt: title, ProviderID: "test"})

	// What the push service carries: ciphertext of the session only.
	deliver := func(kind string) webpushtest.Message {
		t.Helper()
		m := ps.Next(t, 30*time.Second)
		if m.Err != nil {
			t.Fatal(m.Err)
		}
		for _, secret := range []string{title, command, "git push", "secret", "Turn "} {
			if strings.Contains(string(m.Body), secret) || strings.Contains(string(m.Payload), secret) {
				t.Fatalf("the push service carries %q: %s", secret, m.Payload)
			}
		}
		if !strings.Contains(string(m.Payload), `"kind":"`+kind+`"`) {
			t.Fatalf("push %s, want kind %s", m.Payload, kind)
		}
		if _, err := chromedp.Call(p.ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{
			Origin: r.URL, RegistrationID: reg, Data: string(m.Payload)}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	deliver("permission")
	got := p.notifications(sw, regexp.MustCompile(`:call-1$`), 1)
	want := shown{Title: "Permission request", Body: title + "\nbash: " + command, Tag: ls.id + ":call-1",
		Actions: []string{"allow:Allow once", "deny:Deny"}, Data: map[string]any{"sessionId": ls.id, "kind": "permission", "callID": "call-1"}}
	if fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Fatalf("notification\n got  %+v\n want %+v", got[0], want)
	}

	// No page of the app is open: the service worker answers on its own.
	p.do("leave the app", chromedp.Navigate("about:blank"))
	click := func(tag, action string) {
		t.Helper()
		// The click as the platform delivers it to the worker's listener:
		// the notification last shown with tag (its data; close), and the
		// button's action.
		p.swEval(sw, fmt.Sprintf(`(() => {
  const s = self.__shown.findLast((s) => s.tag === %q);
  if (!s) throw new Error("no notification tagged " + %q);
  const e = new Event("notificationclick");
  Object.defineProperties(e, {notification: {value: {...s, close() {}}}, action: {value: %q}});
  self.dispatchEvent(e);
  return true;
})()`, tag, tag, action))
	}
	click(ls.id+":call-1", "allow")
	waitFor(t, "the agent's decision", func() bool { return len(ag.decided()) == 1 })
	if d := ag.decided(); d[0] != "call-1:once" {
		t.Fatalf("decisions %v", d)
	}
	o, err := app.FindSession(context.Background(), conn, ls.id)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tool completed", func() bool {
		return toolStatus(conn, o, "call-1") == mapper.StatusCompleted
	})
	deliver("done")
	done := p.notifications(sw, regexp.MustCompile(`:done$`), 1)
	if done[0].Title != "It's ready!" || done[0].Body != title+"\nTurn 1: once" || len(done[0].Actions) != 0 {
		t.Fatalf("turn done: %+v", done[0])
	}

	// A message the relay made up (its sealed part does not open with the
	// session's key) claims nothing and offers no buttons.
	if _, err := chromedp.Call(p.ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: r.URL, RegistrationID: reg,
		Data: `{"v":1,"sessionId":"` + ls.id + `","kind":"permission","sealed":"` + crypto.EncodeBase64(make([]byte, 64)) + `"}`}); err != nil {
		t.Fatal(err)
	}
	forged := p.notifications(sw, regexp.MustCompile(`:permission$`), 1)
	if forged[0].Title != "happy" || forged[0].Body != "A notification this device could not open: look in happy." || len(forged[0].Actions) != 0 {
		t.Fatalf("forged push: %+v", forged[0])
	}

	// A second Allow once for the same call: the session refuses it, and
	// the refusal shows.
	p.swEval(sw, fmt.Sprintf(`self.registration.showNotification("Permission request", {tag: %q, data: {sessionId: %q, kind: "permission", callID: "call-1"}, actions: [{action: "allow", title: "Allow once"}]}).then(() => true)`, ls.id+":call-1", ls.id))
	click(ls.id+":call-1", "allow")
	failed := p.notifications(sw, regexp.MustCompile(`:call-1:failed$`), 1)
	if failed[0].Title != "Not answered" || !strings.HasPrefix(failed[0].Body, "Allow once did not reach the session: ") {
		t.Fatalf("refusal: %+v", failed[0])
	}
	if d := ag.decided(); len(d) != 1 {
		t.Fatalf("the second click reached the agent: %v", d)
	}

	// Deny, the same way.
	if _, err := app.Send(context.Background(), conn, o, "and push it", time.Now()); err != nil {
		t.Fatal(err)
	}
	deliver("permission")
	p.notifications(sw, regexp.MustCompile(`:call-2$`), 1)
	click(ls.id+":call-2", "deny")
	waitFor(t, "the denial", func() bool { return len(ag.decided()) == 2 })
	if d := ag.decided(); d[1] != "call-2:reject" {
		t.Fatalf("decisions %v", d)
	}

	// Back in the app: the switch turns notifications off.
	p.do("open the app again", chromedp.Navigate(r.URL+"/#/devices"))
	p.wait("the signed-in page", `!!document.querySelector("#notify-state")`)
	p.stubPush(ps, "/sub/phone")
	p.eval(`PushManager.prototype.subscribe({applicationServerKey: new Uint8Array(65)}).then(() => { location.hash = "#"; location.hash = "#/devices"; return true; })`)
	p.wait("the switch", `document.querySelector("#notify-toggle")?.textContent === "Turn off"`)
	p.click("#notify-toggle")
	p.wait("off", `document.querySelector("#notify-state")?.textContent === "Off for this browser."`)
	if st := pushStatus(t, r.URL, creds.Token); st.WebPush.Subscriptions != 0 {
		t.Fatalf("the relay still has %d subscriptions", st.WebPush.Subscriptions)
	}
	for _, e := range p.consoleErrors() {
		if strings.Contains(e, "Content Security Policy") || strings.Contains(e, "Uncaught") {
			t.Errorf("console: %s", e)
		}
	}
}

// toolStatus is the state of the tool call callID in the session's
// transcript as another device reads it ("" when absent).
func toolStatus(conn *app.Conn, o app.Opened, callID string) mapper.ToolStatus {
	rb, _, err := app.ReadTranscript(context.Background(), conn, o, app.ReadOptions{})
	if err != nil {
		return ""
	}
	for _, m := range rb.Transcript().Messages {
		for _, part := range m.Parts {
			if tp, ok := part.(*mapper.ToolPart); ok && tp.CallID == callID {
				return tp.State.Status
			}
		}
	}
	return ""
}

// TestOfflineStart: once the service worker has run, the app starts with
// no network (the relay and the page's origin both gone): the signed-in
// page shows, with the banner saying the relay is out of reach.
func TestOfflineStart(t *testing.T) {
	f, base, startProxy := startFlaky(t)
	r := servertest.StartConfig(t, server.Config{App: webapp.Files()})
	startProxy(r.URL)
	f.set(true)
	creds := newAccountOn(t, r.URL)
	p := openAppAt(t, base, base, creds)
	p.wait("the service worker", `navigator.serviceWorker.controller !== null`)
	p.eval(`location.hash = "#", true`)
	f.set(false)
	p.do("reload offline", chromedp.Reload())
	p.wait("the app, offline", `!!document.querySelector("#nav-machines") && !document.querySelector("#relay-down").classList.contains("hidden")`)
	if got := p.text("#relay-down-text"); !strings.HasPrefix(got, "Can't reach the relay at "+base) {
		t.Errorf("banner %q", got)
	}
	p.shot("offline-start-phone.png")
}
