package webapp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
)

// imageAgent answers every prompt with one turn; a prompt with files gets
// a read tool whose result is an inline PNG (as Claude's Read of an image
// returns it), which the session stores as a blob.
type imageAgent struct {
	events  chan agent.Event
	toolPNG []byte
	mu      sync.Mutex
	prompts []agent.Prompt
}

func (a *imageAgent) Events() <-chan agent.Event { return a.events }
func (a *imageAgent) Prompt(_ context.Context, p agent.Prompt) error {
	a.mu.Lock()
	a.prompts = append(a.prompts, p)
	n := len(a.prompts)
	a.mu.Unlock()
	msg := fmt.Sprintf("m%d", n)
	go func() {
		a.events <- &agent.TurnStarted{TurnID: fmt.Sprint(n)}
		a.events <- &agent.MessageStarted{Message: msg}
		if len(p.Files) > 0 {
			in, _ := json.Marshal(map[string]string{"path": "/w/chart.png"})
			call := fmt.Sprintf("read-%d", n)
			a.events <- &agent.ToolCall{Message: msg, CallID: call, Tool: "read", Input: in}
			a.events <- &agent.ToolCompleted{CallID: call, Files: []agent.PromptFile{{Mime: "image/png",
				URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(a.toolPNG)}}}
		}
		a.events <- &agent.TextFinal{Message: msg, Block: "0", Text: fmt.Sprintf("answer %d", n)}
		a.events <- &agent.StepFinished{Message: msg, Finish: agent.FinishStop}
		a.events <- &agent.TurnEnded{TurnID: fmt.Sprint(n), Reason: agent.TurnCompleted}
	}()
	return nil
}
func (a *imageAgent) last() agent.Prompt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prompts[len(a.prompts)-1]
}
func (a *imageAgent) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.prompts)
}
func (a *imageAgent) Decide(context.Context, string, agent.Verdict) error      { return nil }
func (a *imageAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *imageAgent) Interrupt(context.Context) error                          { return nil }
func (a *imageAgent) Close() error                                             { return nil }

func pngImage(t *testing.T, w, h int, c color.NRGBA) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{c.R, uint8(int(c.G) + x*8), uint8(int(c.B) + y*8), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// connectHome is a terminal of the account: its own home and connection.
func connectHome(t *testing.T, relayURL string, creds *crypto.Credentials) (app.Env, *app.Conn) {
	t.Helper()
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Save(h.AccessKey()); err != nil {
		t.Fatal(err)
	}
	env := app.Env{Home: h, Log: zerolog.Nop(), Getenv: func(k string) string {
		if k == "HAPPY_SERVER_URL" {
			return relayURL
		}
		return ""
	}}
	conn, err := app.Connect(context.Background(), env, app.ConnectOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return env, conn
}

// TestAttachFromTheBrowser: in a running session, the page attaches a PNG
// and a text file through its file input; the relay holds only their
// ciphertext; the agent gets the PNG's bytes as happy send --file would
// deliver them; the transcript shows the ThumbHash placeholder first, then
// the decrypted picture, the text file as a download, the tool's image
// result inline, and a file whose blob is missing as "attachment
// unavailable". A file over the limit is refused before anything is sent.
func TestAttachFromTheBrowser(t *testing.T) {
	r, creds := startRelay(t)
	env, conn := connectHome(t, r.URL, creds)
	sent := pngImage(t, 24, 16, color.NRGBA{200, 30, 90, 255})
	ag := &imageAgent{events: make(chan agent.Event, 64), toolPNG: pngImage(t, 8, 8, color.NRGBA{10, 100, 200, 255})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sidc, done := make(chan string, 1), make(chan error, 1)
	go func() {
		_, err := app.RunSession(ctx, env, conn, ag, app.SessionOptions{Flavor: "claude", Dir: "/home/u/project", Prompt: "hello", ProviderID: "test",
			OnCreated: func(id string) { sidc <- id }})
		done <- err
	}()
	sid := <-sidc
	t.Cleanup(func() { cancel(); <-done })

	p := openApp(t, r.URL, creds)
	p.eval(fmt.Sprintf(`location.hash = "#/s/" + %q, true`, sid))
	p.wait("the first answer", `(document.querySelector("#transcript")?.textContent ?? "").includes("answer 1")`)
	p.wait("the prompt form", `!!document.querySelector("#prompt:not(.hidden) #attach")`)
	p.touchTargets("prompt with the attach button")

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Past the limit: refused at once, by its size, nothing uploaded.
	big := filepath.Join(dir, "huge.png")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(app.MaxAttachmentSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p.do("attach a file over the limit", chromedp.SetUploadFiles("#attach-input", []string{big}, chromedp.NodeReady))
	p.wait("the refusal", `(document.querySelector("#prompt-note")?.textContent ?? "").includes("huge.png is")`)
	if msg := p.text("#prompt-note"); msg != fmt.Sprintf("huge.png is 10,485,721 bytes; an attachment is at most %s bytes", "10,485,720") {
		t.Errorf("refusal %q", msg)
	}

	// The picture (named .jpg: its bytes decide) and a text file.
	files := []string{write("shot.jpg", sent), write("notes.txt", []byte("line one\nline two\n"))}
	p.do("attach two files", chromedp.SetUploadFiles("#attach-input", files, chromedp.NodeReady))
	p.wait("two chips", `document.querySelectorAll("#attached .chip").length === 2`)
	if got := p.text("#attached"); !strings.Contains(got, "shot.jpg · "+fmt.Sprint(len(sent))+" bytes") || !strings.Contains(got, "notes.txt · 18 bytes") {
		t.Errorf("chips %q", got)
	}
	// Record what the transcript shows, in order: the placeholder must come
	// before the decrypted picture.
	p.eval(`window.__seen = [];
new MutationObserver(() => {
  const fig = document.querySelector('#transcript .msg.user .attachment');
  if (fig?.querySelector('canvas.placeholder') && !window.__seen.includes("placeholder")) window.__seen.push("placeholder");
}).observe(document.querySelector("#transcript"), {childList: true, subtree: true});
document.addEventListener("load", (e) => { if (e.target.closest?.('#transcript .msg.user .attachment')) window.__seen.push("image"); }, true);
true`)
	p.do("send", chromedp.SendKeys("#prompt-text", "what is in these?"), chromedp.Click("#send"))
	p.wait("the picture", `[...document.querySelectorAll('#transcript .msg.user .attachment img')].some(i => i.dataset.loaded === "true" && i.naturalWidth > 0)`)
	var seen []string
	if err := json.Unmarshal(p.eval(`window.__seen`), &seen); err != nil || len(seen) < 2 || seen[0] != "placeholder" || seen[1] != "image" {
		t.Errorf("shown in order %v (%v), want the placeholder, then the image", seen, err)
	}
	var natural []int
	_ = json.Unmarshal(p.eval(`(() => { const i = document.querySelector('#transcript .msg.user .attachment img'); return [i.naturalWidth, i.naturalHeight]; })()`), &natural)
	if len(natural) != 2 || natural[0] != 24 || natural[1] != 16 {
		t.Errorf("decrypted picture %v, want 24x16", natural)
	}
	p.wait("the download link", `(document.querySelector('#transcript .msg.user a.download')?.textContent ?? "") === "⬇ notes.txt"`)
	p.wait("the tool's picture", `[...document.querySelectorAll('#transcript .part.tool .attachment img')].some(i => i.dataset.loaded === "true" && i.naturalWidth === 8)`)
	// (A click through the DOM: the transcript re-renders as records arrive,
	// which can replace the node between a query and a synthetic click.)
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(p.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	p.eval(`document.querySelector("#transcript .msg.user a.download").click(), true`)
	var saved []byte
	waitfor.Poll{Within: 20 * time.Second}.True(func() bool {
		saved, err = os.ReadFile(filepath.Join(downloads, "notes.txt"))
		return err == nil && len(saved) == 18
	})
	if string(saved) != "line one\nline two\n" {
		t.Errorf("downloaded notes.txt: %q (%v)", saved, err)
	}
	if n := p.eval(`document.querySelectorAll("#attached .chip").length`); string(n) != "0" {
		t.Errorf("%s chips left after sending", n)
	}

	// The agent got the picture inline, as from happy send --file, and the text file.
	waitfor.Poll{Within: 20 * time.Second}.True(func() bool { return ag.count() >= 2 })
	got := ag.last()
	if got.Text != "what is in these?" || len(got.Files) != 2 || got.Files[0].URL != "data:image/png;base64,"+base64.StdEncoding.EncodeToString(sent) ||
		got.Files[0].Mime != "image/png" || got.Files[0].Filename != "shot.jpg" || got.Files[1].Mime != "text/plain" || got.Files[1].Filename != "notes.txt" {
		t.Fatalf("agent got %q with %+v", got.Text, got.Files)
	}

	// The relay holds only ciphertext: the stored bytes are not the file and
	// open with the session's key.
	o, err := app.FindSession(context.Background(), conn, sid)
	if err != nil {
		t.Fatal(err)
	}
	rb, _, err := app.ReadTranscript(context.Background(), conn, o, app.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var userFiles []*mapper.FilePart
	for _, m := range rb.Transcript().Messages {
		if _, ok := m.Info.(*mapper.UserMessage); !ok {
			continue
		}
		for _, part := range m.Parts {
			if fp, ok := part.(*mapper.FilePart); ok {
				userFiles = append(userFiles, fp)
			}
		}
	}
	if len(userFiles) != 2 {
		t.Fatalf("user file parts %+v", userFiles)
	}
	src, ok := mapper.ParseBlobSource(userFiles[0].Source)
	if !ok || src.Size != int64(len(sent)) || src.Width != 24 || src.Height != 16 || src.Thumbhash == "" || userFiles[0].Mime != "image/png" {
		t.Errorf("image part %+v source %s", userFiles[0], userFiles[0].Source)
	}
	stored := rawBlob(t, r.URL, creds.Token, userFiles[0].URL)
	if bytes.Contains(stored, sent[8:40]) || len(stored) != len(sent)+29 {
		t.Errorf("the relay holds %d bytes for a %d-byte file, not its ciphertext", len(stored), len(sent))
	}
	if plain, err := o.Cipher.Open(stored); err != nil || !bytes.Equal(plain, sent) {
		t.Errorf("stored blob opened with the session's key: %d bytes, %v", len(plain), err)
	}

	// A file whose blob is not on the relay shows as unavailable.
	missing := app.Blob{Mime: "image/png", Filename: "lost.png", URL: "sessions/" + sid + "/attachments/00000000-0000-0000-0000-000000000000.enc",
		Source: json.RawMessage(`{"type":"blob","size":10,"width":2,"height":2}`)}
	if _, err := app.SendFiles(context.Background(), conn, o, "and this?", []app.Blob{missing}, time.Now()); err != nil {
		t.Fatal(err)
	}
	p.wait("the missing blob", `[...document.querySelectorAll('#transcript [data-unavailable]')].some(e => e.textContent.includes("lost.png"))`)
	var msg string
	_ = json.Unmarshal(p.eval(`[...document.querySelectorAll('#transcript [data-unavailable]')].find(e => e.textContent.includes("lost.png")).textContent`), &msg)
	if msg != "⚠ attachment unavailable: lost.png (the relay does not have it)" {
		t.Errorf("missing blob shows %q", msg)
	}
	p.noPolicyViolations()
}

// rawBlob is what the relay stores for a ref, as it serves it.
func rawBlob(t *testing.T, base, token, ref string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/"+ref, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Close = true // no idle connection outlives the test
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", ref, resp.StatusCode, b)
	}
	return b
}
