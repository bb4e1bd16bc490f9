package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/media"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
)

// fileAgent answers every prompt with one turn; a prompt with files gets
// a read tool whose result is an inline PNG (toolPNG), as Claude's Read of
// an image returns it.
type fileAgent struct {
	events  chan agent.Event
	mu      sync.Mutex
	n       int
	prompts []agent.Prompt
	toolPNG []byte
}

func (a *fileAgent) Events() <-chan agent.Event { return a.events }
func (a *fileAgent) Prompt(_ context.Context, p agent.Prompt) error {
	a.mu.Lock()
	a.n++
	n := a.n
	a.prompts = append(a.prompts, p)
	a.mu.Unlock()
	msg := fmt.Sprintf("m%d", n)
	go func() {
		a.events <- &agent.TurnStarted{TurnID: fmt.Sprint(n)}
		a.events <- &agent.MessageStarted{Message: msg}
		if len(p.Files) > 0 {
			in, _ := json.Marshal(map[string]string{"path": "/w/out.png"})
			call := fmt.Sprintf("read-%d", n)
			a.events <- &agent.ToolCall{Message: msg, CallID: call, Tool: "read", Input: in}
			a.events <- &agent.ToolCompleted{CallID: call, Files: []agent.PromptFile{{Mime: "image/png",
				URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(a.toolPNG)}}}
		}
		a.events <- &agent.TextFinal{Message: msg, Block: "0", Text: "seen"}
		a.events <- &agent.StepFinished{Message: msg, Finish: agent.FinishStop}
		a.events <- &agent.TurnEnded{TurnID: fmt.Sprint(n), Reason: agent.TurnCompleted}
	}()
	return nil
}
func (a *fileAgent) Decide(context.Context, string, agent.Verdict) error      { return nil }
func (a *fileAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *fileAgent) Interrupt(context.Context) error                          { return nil }
func (a *fileAgent) Close() error                                             { return nil }

func pngOf(t *testing.T, w, h int, c color.NRGBA) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestAttachmentsThroughTheRelay: device B attaches a PNG to a prompt; the
// running session's agent gets its bytes inline, the transcript
// references the blob (with size, pixels and thumbhash), the tool's image
// result is stored as a blob too, and both download intact.
func TestAttachmentsThroughTheRelay(t *testing.T) {
	envA, connA, connB := twoDevices(t)
	sent := pngOf(t, 6, 4, color.NRGBA{200, 30, 90, 255})
	ag := &fileAgent{events: make(chan agent.Event, 64), toolPNG: pngOf(t, 3, 3, color.NRGBA{1, 2, 3, 255})}
	sidc := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "fake", Dir: "/work", Prompt: "hello", ProviderID: "test",
			OnCreated: func(id string) { sidc <- id }})
		done <- err
	}()
	sid := <-sidc
	o, err := FindSession(ctx, connB, sid)
	if err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 1)

	dir := t.TempDir()
	path := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(path, sent, 0o600); err != nil {
		t.Fatal(err)
	}
	blob, err := UploadFile(ctx, connB, o, path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := media.Inspect(sent, "")
	wantSource := fmt.Sprintf(`{"type":"blob","size":%d,"sha256":"%s","width":6,"height":4,"thumbhash":"%s"}`, len(sent), mapper.BlobDigest(sent), info.Thumbhash)
	if blob.Mime != "image/png" || blob.Filename != "shot.png" || !relay.IsAttachmentRef(blob.URL) || string(blob.Source) != wantSource {
		t.Fatalf("blob %+v, want source %s", blob, wantSource)
	}
	if _, err := SendFiles(ctx, connB, o, "what is this?", []Blob{blob}, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 2)

	ag.mu.Lock()
	got := ag.prompts[len(ag.prompts)-1]
	ag.mu.Unlock()
	wantURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(sent)
	if got.Text != "what is this?" || len(got.Files) != 1 || got.Files[0].URL != wantURL || got.Files[0].Mime != "image/png" || got.Files[0].Filename != "shot.png" {
		t.Fatalf("agent got %q with %d files (%+v)", got.Text, len(got.Files), got.Files)
	}

	cancel()
	<-done
	rb, _, err := ReadTranscript(context.Background(), connB, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := rb.Transcript()
	var userFiles, toolFiles []mapper.FilePart
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case *mapper.FilePart:
				userFiles = append(userFiles, *p)
			case *mapper.ToolPart:
				toolFiles = append(toolFiles, p.State.Attachments...)
			}
		}
	}
	wantSrc, _ := mapper.ParseBlobSource(json.RawMessage(wantSource))
	if len(userFiles) != 1 {
		t.Fatalf("user file parts %+v; dropped %+v", userFiles, tr.Dropped)
	}
	if src, _ := mapper.ParseBlobSource(userFiles[0].Source); userFiles[0].URL != blob.URL || src != wantSrc {
		t.Fatalf("user file parts %+v; dropped %+v", userFiles, tr.Dropped)
	}
	if len(toolFiles) != 1 || !relay.IsAttachmentRef(toolFiles[0].URL) || toolFiles[0].Mime != "image/png" {
		t.Fatalf("tool attachments %+v; dropped %+v", toolFiles, tr.Dropped)
	}
	if src, ok := mapper.ParseBlobSource(toolFiles[0].Source); !ok || src.Width != 3 || src.Height != 3 || src.Size != int64(len(ag.toolPNG)) {
		t.Errorf("tool attachment source %s", toolFiles[0].Source)
	}
	for ref, want := range map[string][]byte{blob.URL: sent, toolFiles[0].URL: ag.toolPNG} {
		b, checked, err := GetAttachment(context.Background(), connB, o, ref)
		if err != nil || !checked || !bytes.Equal(b, want) {
			t.Errorf("GetAttachment(%s) = %d bytes, checked %v, %v; want the %d sent, checked", ref, len(b), checked, err, len(want))
		}
	}
	if len(tr.Dropped) != 0 {
		t.Errorf("dropped %+v", tr.Dropped)
	}

	// A message whose file part describes other bytes than the blob holds
	// (what a relay that put another blob of the session under this
	// reference causes) is refused, by GetAttachment and by the delivery to
	// the agent, with mapper.ErrBlobMismatch.
	other := pngOf(t, 6, 4, color.NRGBA{10, 30, 90, 255})
	swapped, err := UploadBlob(context.Background(), connB.API, o.Cipher, o.Info.ID, "shot.png", "", other)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := mapper.ParseBlobSource(swapped.Source)
	src.SHA256 = mapper.BlobDigest(sent)
	swapped.Source, _ = json.Marshal(src)
	if _, err := SendFiles(context.Background(), connB, o, "look", []Blob{swapped}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := GetAttachment(context.Background(), connB, o, swapped.URL); !errors.Is(err, mapper.ErrBlobMismatch) || !strings.Contains(err.Error(), "shot.png") {
		t.Errorf("GetAttachment of a swapped blob = %v, want ErrBlobMismatch naming shot.png", err)
	}
	bs := newBlobStore(connB.API, fixedSession{id: o.Info.ID, cipher: o.Cipher})
	if _, err := bs.Fetch(context.Background(), swapped); !errors.Is(err, mapper.ErrBlobMismatch) {
		t.Errorf("Fetch of a swapped blob = %v, want ErrBlobMismatch", err)
	}
	if got, err := bs.Fetch(context.Background(), blob); err != nil || got.Mime != "image/png" {
		t.Errorf("Fetch of the true blob = %+v, %v", got.Mime, err)
	}
}

// TestUploadFileRefuses: a type that lies, a truncated image, a file over
// the limit and a missing blob are clear errors.
func TestUploadFileRefuses(t *testing.T) {
	_, connA, _ := twoDevices(t)
	s, err := connA.API.CreateSession(context.Background(), relay.SessionCreate{Tag: "attach-refusals", Metadata: "bWV0YQ=="})
	if err != nil {
		t.Fatal(err)
	}
	o := Opened{Info: s, Cipher: crypto.NewDataKeyCipher([32]byte{3})}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := pngOf(t, 4, 4, color.NRGBA{9, 9, 9, 255})
	big := filepath.Join(dir, "big.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxAttachmentSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		path string
		want error
		text string
	}{
		{write("notes.png", []byte("plain text, not an image")), media.ErrMismatch, "claimed image/png, the bytes are text/plain"},
		{write("cut.png", good[:len(good)-10]), media.ErrBadImage, "the image does not decode"},
		{write("png.jpg", good), media.ErrMismatch, "claimed image/jpeg, the bytes are image/png"},
		{big, ErrAttachmentTooLarge, fmt.Sprintf("is %d bytes", MaxAttachmentSize+1)},
	} {
		_, err := UploadFile(context.Background(), connA, o, c.path)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("UploadFile(%s) = %v, want %v saying %q", filepath.Base(c.path), err, c.want, c.text)
		}
	}
	missing := "sessions/" + s.ID + "/attachments/00000000-0000-0000-0000-000000000000.enc"
	if _, _, err := GetAttachment(context.Background(), connA, o, missing); !errors.Is(err, relay.ErrAttachmentNotFound) {
		t.Errorf("GetAttachment(missing) = %v, want ErrAttachmentNotFound", err)
	}
	if _, _, err := GetAttachment(context.Background(), connA, o, "../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "not an attachment reference") {
		t.Errorf("GetAttachment(bad ref) = %v", err)
	}
}

func TestDecodeDataURL(t *testing.T) {
	for _, c := range []struct {
		in, mime, data string
		ok             bool
	}{
		{"data:image/png;base64,iVBO", "image/png", "\x89PNG"[:3], true},
		{"data:text/plain,a%20b%0A", "text/plain", "a b\n", true},
		{"data:text/plain;charset=utf-8,hi", "text/plain", "hi", true},
		{"data:image/png;base64,!!", "", "", false},
		{"data:nocomma", "", "", false},
		{"https://x/y.png", "", "", false},
	} {
		mime, data, err := decodeDataURL(c.in)
		if (err == nil) != c.ok || mime != c.mime || string(data) != c.data {
			t.Errorf("decodeDataURL(%q) = %q, %q, %v", c.in, mime, data, err)
		}
	}
}

func FuzzDecodeDataURL(f *testing.F) {
	f.Add("data:image/png;base64,iVBO")
	f.Add("data:text/plain,a%20b")
	f.Add("data:,")
	f.Fuzz(func(t *testing.T, s string) {
		mime, data, err := decodeDataURL(s)
		if err != nil && (mime != "" || data != nil) {
			t.Fatalf("error %v with values %q %q", err, mime, data)
		}
	})
}

// fixedSession is a blobSession of an existing relay session.
type fixedSession struct {
	id     string
	cipher crypto.Cipher
}

func (f fixedSession) WaitCreated(context.Context) (string, error) { return f.id, nil }
func (f fixedSession) Cipher() crypto.Cipher                       { return f.cipher }
