//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/browsertest"
	"github.com/happy-dev/happy/internal/fakemodel"
)

// webPart is one entry of what a transcript shows, as the web page and
// `happy log --json` both give it.
type webPart struct {
	Role   string `json:"role"`
	Type   string `json:"type"`
	Text   string `json:"text,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Status string `json:"status,omitempty"`
}

// pageParts reads the open transcript's parts from the page's DOM.
const pageParts = `[...document.querySelectorAll('#transcript .transcript > .messages > article > [data-part]')].map(e => {
  const role = e.closest('article').dataset.role, type = e.dataset.part;
  if (type === 'tool') return {role, type, tool: e.dataset.tool, status: e.dataset.status};
  if (type === 'text' || type === 'reasoning') return {role, type, text: e.querySelector('.md').textContent};
  return null;
}).filter(Boolean)`

// logParts reads the same from a `happy log --json` document.
func logParts(t *testing.T, doc string) []webPart {
	t.Helper()
	var tr struct {
		Messages []struct {
			Info struct {
				Role string `json:"role"`
			} `json:"info"`
			Parts []struct {
				Type  string `json:"type"`
				Text  string `json:"text"`
				Tool  string `json:"tool"`
				State struct {
					Status string `json:"status"`
				} `json:"state"`
			} `json:"parts"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(doc), &tr); err != nil {
		t.Fatalf("happy log --json: %v\n%s", err, doc)
	}
	out := []webPart{}
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			switch p.Type {
			case "text", "reasoning":
				out = append(out, webPart{Role: m.Info.Role, Type: p.Type, Text: collapse(renderedText(p.Text))})
			case "tool":
				out = append(out, webPart{Role: m.Info.Role, Type: p.Type, Tool: p.Tool, Status: p.State.Status})
			}
		}
	}
	return out
}

// renderedText is the text a person reads of the Markdown the model wrote,
// for the markup the test's model uses (strong emphasis and code spans).
func renderedText(md string) string { return strings.NewReplacer("**", "", "`", "").Replace(md) }

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// pairingLink runs `happy web` on home (which holds the account secret),
// as a person pairing a browser does, and returns the link it prints (the
// same link its QR code carries) with home's credentials.
func pairingLink(t *testing.T, env []string, home string) (string, *crypto.Credentials) {
	t.Helper()
	creds, err := crypto.LoadCredentials(filepath.Join(home, crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	var webEnv []string
	relayURL := ""
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HAPPY_HOME_DIR=") {
			webEnv = append(webEnv, kv)
		}
		if v, ok := strings.CutPrefix(kv, "HAPPY_SERVER_URL="); ok {
			relayURL = v
		}
	}
	webEnv = append(webEnv, "HAPPY_HOME_DIR="+home)
	// The test's relay is the tester's own: happy web may link to the app
	// it serves (otherwise it serves the app itself, until interrupted).
	trustWebRelay(t, home, relayURL)
	code, out, errb := happyRun(t, webEnv, home, "web")
	if code != 0 {
		t.Fatalf("happy web: exit %d\n%s\n%s", code, out, errb)
	}
	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "http") && strings.Contains(l, "/#pair=") {
			return l, creds
		}
	}
	t.Fatalf("no pairing link in the output of happy web:\n%s", out)
	return "", nil
}

// trustWebRelay sets trustedWebRelay to url in home's settings.json,
// keeping the other keys.
func trustWebRelay(t *testing.T, home, url string) {
	t.Helper()
	path := filepath.Join(home, "settings.json")
	st := map[string]any{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	st["trustedWebRelay"] = url
	b, _ := json.Marshal(st)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The web app against a live `happy claude` (interactive, in a PTY) and the
// fake model: the page signs in with a pairing link, finds the session in
// its list, sends prompts, allows one tool once, denies another with a
// reason, aborts a slow turn, and shows exactly the parts and tool states
// that `happy log --json` reads from the relay. Screenshots at phone and
// desktop sizes go to e2e/artifacts/.
func TestE2EWebApp(t *testing.T) {
	var phase atomic.Int32
	arrived := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	r := startSwitchRun(t, func(q fakemodel.Request) fakemodel.Reply {
		switch {
		case !q.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case q.ToolDone && phase.Load() == 1:
			return fakemodel.Reply{Text: "Wrote one.txt for you."}
		case q.ToolDone && phase.Load() == 2:
			return fakemodel.Reply{Text: "Understood, two.txt stays unwritten."}
		case q.ToolDone && phase.Load() == 4:
			return fakemodel.Reply{Text: "SQLite it is."}
		case strings.Contains(q.LastText, "Ask me"):
			return fakemodel.Reply{ToolName: "AskUserQuestion", ToolInput: map[string]any{"questions": []any{map[string]any{
				"question": "Which database?", "header": "DB", "multiSelect": false,
				"options": []any{map[string]any{"label": "PostgreSQL", "description": "a server"}, map[string]any{"label": "SQLite", "description": "a file"}},
			}}}}
		case strings.Contains(q.LastText, "Write one"):
			return fakemodel.Reply{ToolName: "Bash", ToolInput: map[string]any{"command": "echo one > one.txt", "description": "Write one.txt"}}
		case strings.Contains(q.LastText, "Write two"):
			return fakemodel.Reply{ToolName: "Bash", ToolInput: map[string]any{"command": "echo two > two.txt", "description": "Write two.txt"}}
		case strings.Contains(q.LastText, "Describe the picture") && len(q.Images) > 0:
			return fakemodel.Reply{Text: "I see a picture."}
		case strings.Contains(q.LastText, "Say done"):
			// (After an abort Claude may send the aborted prompt again
			// together with this one.)
			return fakemodel.Reply{Text: "All **done** here."}
		case strings.Contains(q.LastText, "Take your time"):
			// The model is slow: the turn runs until the page aborts it
			// (a turn that is not aborted keeps the session busy for
			// longer than the test waits for the next answer).
			once.Do(func() { close(arrived) })
			select {
			case <-release:
			case <-time.After(3 * time.Minute):
			}
			return fakemodel.Reply{Text: "Too late."}
		}
		return fakemodel.Reply{Text: "Unexpected request."}
	})
	defer close(release)

	// The session and its root record are on the relay.
	r.wait(30*time.Second, "the session record on the relay", func() bool {
		if r.sid == "" {
			code, out, _ := happyRun(t, r.envB, r.work, "sessions", "--json")
			var list []struct{ ID string }
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
				return false
			}
			r.sid = list[0].ID
		}
		var d struct {
			Session struct{ ID string } `json:"session"`
		}
		_, out, ok := r.doc()
		return ok && json.Unmarshal([]byte(out), &d) == nil && strings.HasPrefix(d.Session.ID, "ses_")
	})
	link, creds := pairingLink(t, r.envB, r.homeA)

	ctx := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
			t.Fatalf("%s: %v\npage text:\n%s\nlast transcript: %s", what, err, body, r.lastDoc)
		}
	}
	eval := func(expr string, v any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("evaluate %s: %s: %v", expr, raw, err)
		}
	}
	waitJS := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
			_, _, _ = r.doc()
			t.Fatalf("waiting for %s: %v\npage text:\n%s\nlast transcript: %s\nhappy logs:\n%s", what, err, body, r.lastDoc, r.logs())
		}
	}
	row := fmt.Sprintf(`.row[data-sid=%q]`, r.sid)
	do("open the pairing link", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(link))
	waitJS("the session in the list", fmt.Sprintf(`!!document.querySelector(%q)`, row))
	var href string
	eval("location.href", &href)
	if strings.Contains(href, "pair=") {
		t.Fatalf("the pairing key stays in the address bar: %s", href)
	}
	var stored bool
	eval(`!!JSON.parse(localStorage.getItem("happy.account")).secret`, &stored)
	if !stored {
		t.Fatal("the account is not kept in localStorage")
	}
	do("open the session", chromedp.Click(row+" a"))
	waitJS("the transcript", `!!document.querySelector('#transcript .transcript')`)

	send := func(text string) {
		t.Helper()
		do("send "+text, chromedp.SendKeys("#prompt-text", text), chromedp.Click("#send"))
		waitJS("the prompt box emptied", `document.querySelector('#prompt-text').value === ''`)
	}
	blocked := `#transcript [data-part="tool"][data-status="blocked"]`

	// 1. A tool that needs permission, allowed once from the page.
	phase.Store(1)
	send("Write one")
	waitJS("the first tool blocked", fmt.Sprintf(`!!document.querySelector(%q)`, blocked))
	shoot(t, ctx, "web-desktop-blocked.png", 1280, 800)
	shoot(t, ctx, "web-phone-blocked.png", 390, 844)
	// Touch targets on the phone layout are at least 44 px.
	var small []string
	eval(`[...document.querySelectorAll('button, .row a, input[type=text], textarea')].filter(e => e.offsetParent && e.getBoundingClientRect().height < 44).map(e => e.outerHTML.slice(0, 80))`, &small)
	if len(small) > 0 {
		t.Errorf("touch targets under 44 px at 390x844: %q", small)
	}
	do("desktop again", chromedp.EmulateViewport(1280, 800))
	do("allow once", chromedp.Click(blocked+` button[data-decision="once"]`))
	waitJS("the first tool completed", `!!document.querySelector('#transcript [data-part="tool"][data-status="completed"]')`)
	waitJS("the first answer", `document.querySelector('#transcript').textContent.includes('Wrote one.txt for you.')`)
	if b, err := os.ReadFile(filepath.Join(r.work, "one.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("one.txt: %q, %v", b, err)
	}

	// 2. Another tool, denied with a reason.
	phase.Store(2)
	send("Write two")
	waitJS("the second tool blocked", fmt.Sprintf(`!!document.querySelector(%q)`, blocked))
	do("deny with a reason", chromedp.SendKeys(blocked+" input.reason", "not this one"), chromedp.Click(blocked+` button[data-decision="reject"]`))
	waitJS("the second tool failed", `!!document.querySelector('#transcript [data-part="tool"][data-status="error"] .resolved[data-decision="reject"]')`)
	waitJS("the second answer", `document.querySelector('#transcript').textContent.includes('two.txt stays unwritten')`)
	if _, err := os.Stat(filepath.Join(r.work, "two.txt")); err == nil {
		t.Fatal("two.txt was written although the tool was denied")
	}

	// 3. A question, answered from the page; then a stale answer (to the
	// first tool, answered long ago) shows as a notice on that tool.
	phase.Store(4)
	send("Ask me")
	waitJS("the question blocked", fmt.Sprintf(`!!document.querySelector(%q)`, blocked+`[data-tool="question"] input[value="SQLite"]`))
	do("answer the question", chromedp.Click(blocked+` input[value="SQLite"]`), chromedp.Click(blocked+` button.allow`))
	waitJS("the question answered", `[...document.querySelectorAll('#transcript [data-tool="question"][data-status="completed"] .resolved')].some(e => e.textContent === 'answered: SQLite')`)
	waitJS("the answer's reply", `document.querySelector('#transcript').textContent.includes('SQLite it is.')`)
	var first string
	eval(`document.querySelector('#transcript [data-part="tool"][data-status="completed"]').dataset.callId`, &first)
	eval(fmt.Sprintf(`(window.happyApp.decide(%q, "once"), true)`, first), new(bool))
	waitJS("the stale notice", fmt.Sprintf(`document.querySelector('#transcript [data-call-id=%q] .notice')?.textContent.startsWith('Already answered elsewhere')`, first))

	// 4. A slow turn, aborted from the page; the session goes on.
	phase.Store(5)
	send("Take your time")
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the slow prompt never reached the model")
	}
	do("abort", chromedp.Click("#abort"))
	waitJS("the abort acknowledged", `document.querySelector('#prompt-note').textContent === 'aborted'`)
	send("Say done")
	waitJS("the last answer", `document.querySelector('#transcript').textContent.includes('All done here.')`)
	waitJS("the last answer's markdown", `[...document.querySelectorAll('#transcript strong')].some(e => e.textContent === 'done')`)

	// 5. A picture attached through the page reaches Claude as an image
	// block with the file's bytes, and the page shows it decrypted.
	pic := image.NewNRGBA(image.Rect(0, 0, 12, 8))
	for y := range 8 {
		for x := range 12 {
			pic.Set(x, y, color.NRGBA{uint8(20 * x), uint8(30 * y), 90, 255})
		}
	}
	var picPNG bytes.Buffer
	if err := png.Encode(&picPNG, pic); err != nil {
		t.Fatal(err)
	}
	picFile := filepath.Join(t.TempDir(), "picture.png")
	if err := os.WriteFile(picFile, picPNG.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	do("attach a picture", chromedp.SetUploadFiles("#attach-input", []string{picFile}, chromedp.NodeReady))
	waitJS("the picture attached", `document.querySelectorAll('#attached .chip').length === 1`)
	send("Describe the picture")
	waitJS("the picture's answer", `document.querySelector('#transcript').textContent.includes('I see a picture.')`)
	waitJS("the picture shown", `[...document.querySelectorAll('#transcript .msg.user .attachment img')].some(i => i.dataset.loaded === 'true' && i.naturalWidth === 12)`)
	var seen *fakemodel.Image
	for _, q := range r.model.Requests() {
		if strings.Contains(q.LastText, "Describe the picture") && len(q.Images) > 0 {
			seen = &q.Images[0]
		}
	}
	if seen == nil || seen.MediaType != "image/png" || !bytes.Equal(seen.Data, picPNG.Bytes()) {
		t.Fatalf("the model did not see the attached PNG (seen %+v)", seen)
	}

	// What the page shows is what the relay holds.
	var want []webPart
	r.wait(30*time.Second, "the page and happy log to agree", func() bool {
		_, doc, ok := r.doc()
		if !ok {
			return false
		}
		want = logParts(t, doc)
		var got []webPart
		eval(pageParts, &got)
		for i := range got {
			got[i].Text = collapse(got[i].Text)
		}
		if reflect.DeepEqual(got, want) {
			return true
		}
		r.lastDoc = fmt.Sprintf("page %+v\nlog  %+v", got, want)
		return false
	})
	var tools []string
	for _, p := range want {
		if p.Type == "tool" {
			tools = append(tools, p.Tool+":"+p.Status)
		}
	}
	if strings.Join(tools, " ") != "bash:completed bash:error question:completed" {
		t.Errorf("tools %v, want bash:completed bash:error question:completed", tools)
	}
	t.Logf("page and happy log agree on %d parts", len(want))
	shoot(t, ctx, "web-desktop.png", 1280, 800)
	shoot(t, ctx, "web-phone.png", 390, 844)
	r.finish()
	// The ended session shows as ended, without controls.
	waitJS("the session ended in the page", fmt.Sprintf(`document.querySelector(%q)?.dataset.state === 'ended'`, row))
	waitJS("no prompt box for an ended session", `document.querySelector('#prompt').classList.contains('hidden')`)

	// Sign out forgets the account; the backup key brings it back.
	do("sign out", chromedp.Click("#nav-devices"), chromedp.Click("#signout"), chromedp.Click("#signout-confirm"))
	waitJS("the sign-in page", `!!document.querySelector('.signin') && localStorage.getItem('happy.account') === null`)
	shoot(t, ctx, "web-phone-signin.png", 390, 844)
	do("restore with the backup key", chromedp.SendKeys("#backup-key", strings.ToLower(crypto.FormatBackupKey(*creds.AccountSecret))), chromedp.Click(".signin button[type=submit]"))
	waitJS("the session listed again", fmt.Sprintf(`document.querySelector(%q)?.dataset.state === 'ended'`, row))
	shoot(t, ctx, "web-phone-list.png", 390, 844)

	// A fresh home runs happy auth login; the page approves it by the code
	// it prints, and the terminal is logged in to the account (dataKey: the
	// account's content key, not its secret).
	fresh := t.TempDir()
	var freshEnv []string
	for _, kv := range r.envB {
		if !strings.HasPrefix(kv, "HAPPY_HOME_DIR=") {
			freshEnv = append(freshEnv, kv)
		}
	}
	freshEnv = append(freshEnv, "HAPPY_HOME_DIR="+fresh)
	code, login := loginCode(t, freshEnv, r.work)
	do("the devices page", chromedp.Click("#nav-devices"))
	do("approve "+code, chromedp.SendKeys("#approve-code", code), chromedp.Click("#approve-submit"))
	waitJS("the approval", `document.querySelector('#approve-result').className === 'ok'`)
	shoot(t, ctx, "web-phone-approved.png", 390, 844)
	select {
	case err := <-login:
		if err != nil {
			t.Fatalf("happy auth login: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("happy auth login did not finish within 30 s of the approval")
	}
	got, err := crypto.LoadCredentials(filepath.Join(fresh, crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	contentPub, _ := crypto.ContentKeyPair(*creds.AccountSecret)
	if got.Variant != crypto.VariantDataKey || got.DataKey == nil || got.DataKey.ContentPublicKey != contentPub {
		t.Errorf("the approved terminal holds %v credentials, want dataKey with the account's content key", got.Variant)
	}
	if c, out, errb := happyRun(t, freshEnv, r.work, "sessions", "--json"); c != 0 || !strings.Contains(out, r.sid) {
		t.Errorf("happy sessions on the approved terminal: exit %d, %s %s (want session %s listed)", c, out, errb, r.sid)
	}
}

// loginCode starts `happy auth login` on env's home and returns the pairing
// code it prints, and a channel that receives its result when it exits
// (nil for exit 0).
func loginCode(t *testing.T, env []string, dir string) (string, <-chan error) {
	t.Helper()
	cmd := exec.Command(happyBin, "auth", "login", "--timeout", "90s")
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	codes := make(chan string, 1)
	var printed strings.Builder
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if m := approveLine.FindStringSubmatch(sc.Text()); m != nil {
				codes <- m[1]
			}
		}
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, errb.String())
		}
		done <- err
	}()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	select {
	case code := <-codes:
		return code, done
	case err := <-done:
		t.Fatalf("happy auth login exited before printing a code: %v\n%s", err, printed.String())
	case <-time.After(30 * time.Second):
		t.Fatal("happy auth login printed no pairing code within 30 s")
	}
	return "", nil
}

// approveLine is the line of `happy auth login` that shows the full pairing
// code (fingerprint and pairing secret).
var approveLine = regexp.MustCompile(`happy auth approve ([A-Z2-7]{5}-[A-Z2-7]{5}-[A-Z2-7]{5}-[A-Z2-7]{5})$`)

// shoot writes a screenshot of the page at width x height to
// e2e/artifacts/name and prints its path.
func shoot(t *testing.T, ctx context.Context, name string, width, height int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatalf("viewport %dx%d: %v", width, height, err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll("artifacts", 0o755); err != nil {
		t.Fatal(err)
	}
	path, _ := filepath.Abs(filepath.Join("artifacts", name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	// Printed, not logged: the paths show without -v too.
	fmt.Printf("e2e: screenshot %dx%d: %s\n", width, height, path)
}
