//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// TestE2EClaudeAttachment: `happy send --file img.png` from a second home
// reaches real Claude (remote mode) as an image block the model sees with
// the file's bytes; the transcript references the encrypted blob, which
// `happy attachment get` downloads intact, and `happy log --events` lists
// it as a photo.
func TestE2EClaudeAttachment(t *testing.T) {
	r := startSwitchRun(t, func(q fakemodel.Request) fakemodel.Reply {
		switch {
		case !q.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case len(q.Images) > 0:
			return fakemodel.Reply{Text: "I see an image."}
		}
		return fakemodel.Reply{Text: "No image."}
	})
	img := image.NewNRGBA(image.Rect(0, 0, 6, 4))
	for y := range 4 {
		for x := range 6 {
			img.Set(x, y, color.NRGBA{uint8(40 * x), uint8(60 * y), 200, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "img.png")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	r.waitTurns(30*time.Second, "the session on the relay", "")
	if code, out, errOut := happyRun(t, r.envB, r.work, "send", r.sid, "--file", file, "Describe the image"); code != 0 {
		t.Fatalf("happy send --file: %d\n%s%s", code, out, errOut)
	}
	r.waitTurns(90*time.Second, "the answer", "user: Describe the image|assistant: I see an image.")

	var seen *fakemodel.Image
	for _, q := range r.model.Requests() {
		if q.LastText == "Describe the image" && len(q.Images) > 0 {
			seen = &q.Images[0]
		}
	}
	if seen == nil || seen.MediaType != "image/png" || !bytes.Equal(seen.Data, buf.Bytes()) {
		t.Fatalf("the model did not see the PNG (seen %+v)", seen)
	}

	code, out, errOut := happyRun(t, r.envB, r.work, "log", r.sid, "--events")
	if code != 0 {
		t.Fatalf("happy log --events: %d %s", code, errOut)
	}
	var photo struct {
		Type, Ref, Thumbhash, MimeType string
		Width, Height                  int
		Size                           int64
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["type"] == "photo" {
			_ = json.Unmarshal([]byte(line), &photo)
		}
	}
	if photo.Type != "photo" || photo.Width != 6 || photo.Height != 4 || photo.MimeType != "image/png" || photo.Size != int64(buf.Len()) || photo.Thumbhash == "" {
		t.Fatalf("photo event %+v in\n%s", photo, out)
	}
	got := filepath.Join(t.TempDir(), "got.png")
	if code, _, errOut := happyRun(t, r.envB, r.work, "attachment", "get", r.sid, photo.Ref, "-o", got); code != 0 {
		t.Fatalf("happy attachment get: %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, buf.Bytes()) {
		t.Fatalf("downloaded %d bytes, want the %d sent", len(b), buf.Len())
	}
	r.finish()
}
