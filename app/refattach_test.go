package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// sendAsReferenceApp writes a prompt the way the reference app does: each
// file's bytes sealed with the session's blob key (secretbox) and uploaded,
// one session-protocol file event per file, then the user text record.
// upload false announces a ref nobody uploaded; size < 0 announces the
// real size.
func sendAsReferenceApp(t *testing.T, conn *Conn, o Opened, text string, files []refFile) {
	t.Helper()
	ctx := context.Background()
	blobCipher, err := crypto.BlobCipherOf(o.Cipher)
	if err != nil {
		t.Fatal(err)
	}
	send := func(rec map[string]any) {
		plain, _ := json.Marshal(rec)
		sealed, err := o.Cipher.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.API.SendMessages(ctx, o.Info.ID, []relay.OutgoingMessage{{Content: crypto.EncodeBase64(sealed), LocalID: uuid.NewString()}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		ref := "sessions/" + o.Info.ID + "/attachments/" + uuid.NewString() + ".enc"
		if f.upload {
			if ref, err = conn.API.UploadAttachment(ctx, blobCipher, o.Info.ID, f.name, f.data); err != nil {
				t.Fatal(err)
			}
		}
		size := int64(len(f.data))
		if f.size > 0 {
			size = f.size
		}
		ev := map[string]any{"t": "file", "ref": ref, "name": f.name, "size": size}
		if f.w > 0 {
			ev["image"] = map[string]any{"width": f.w, "height": f.h}
		}
		send(map[string]any{"role": "session", "content": map[string]any{"type": "session",
			"data": map[string]any{"id": uuid.NewString(), "time": 1, "role": "user", "ev": ev}}})
	}
	send(map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": text}, "meta": map[string]any{"sentFrom": "ios"}})
}

type refFile struct {
	name   string
	data   []byte
	w, h   int
	upload bool
	size   int64 // announced size when > 0
}

// TestReferenceAppAttachments: files the reference app sends reach the
// agent decrypted and checked (a good image inline as a data: URL); a file
// whose bytes lie about their type, a truncated image, a missing blob and
// one announced over the limit are left out, and the prompt still goes,
// with a note for each and a Dropped record naming the file.
func TestReferenceAppAttachments(t *testing.T) {
	envA, connA, connB := twoDevices(t)
	envA.Log = zerolog.New(zerolog.NewTestWriter(t))
	img := pngOf(t, 5, 3, color.NRGBA{10, 200, 30, 255})
	ag := &fileAgent{events: make(chan agent.Event, 64), toolPNG: pngOf(t, 2, 2, color.NRGBA{1, 2, 3, 255})}
	sidc := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "fake", Dir: "/home/u/project", Prompt: "hello", ProviderID: "test",
			OnCreated: func(id string) { sidc <- id }})
		done <- err
	}()
	sid := <-sidc
	o, err := FindSession(ctx, connB, sid)
	if err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 1)

	cases := []struct {
		name      string
		text      string
		files     []refFile
		wantFiles int
		wantText  string // the agent's text
		dropped   []string
	}{
		{name: "good image", text: "what is this?", files: []refFile{{name: "IMG_1.png", data: img, w: 5, h: 3, upload: true}},
			wantFiles: 1, wantText: "what is this?"},
		{name: "image without text", text: "", files: []refFile{{name: "IMG_2.png", data: img, w: 5, h: 3, upload: true}},
			wantFiles: 1, wantText: ""},
		{name: "lying type", text: "look", files: []refFile{{name: "IMG_3.jpg", data: img, w: 5, h: 3, upload: true}},
			wantText: "look\n\n[an attachment could not be read and is left out: \"IMG_3.jpg\"",
			dropped:  []string{"invalid_field", "claimed image/jpeg, the bytes are image/png"}},
		{name: "truncated", text: "cut", files: []refFile{{name: "IMG_4.png", data: img[:len(img)-12], w: 5, h: 3, upload: true}},
			wantText: "cut\n\n[an attachment could not be read and is left out: \"IMG_4.png\"",
			dropped:  []string{"invalid_field", "the image does not decode"}},
		{name: "missing blob", text: "gone", files: []refFile{{name: "IMG_5.png", data: img, w: 5, h: 3}},
			wantText: "gone\n\n[an attachment could not be read and is left out: \"IMG_5.png\"",
			dropped:  []string{"invalid_field", "attachment not found"}},
		{name: "over the limit", text: "huge", files: []refFile{{name: "IMG_6.png", data: img, upload: true, size: MaxAttachmentSize + 1}},
			wantText: "huge\n\n[an attachment could not be read and is left out: \"IMG_6.png\"",
			dropped:  []string{"oversize", fmt.Sprintf("%d bytes, over the limit of %d", MaxAttachmentSize+1, MaxAttachmentSize)}},
	}
	turns := 1
	droppedBefore := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sendAsReferenceApp(t, connB, o, c.text, c.files)
			turns++
			waitTurns(t, connB, o, turns)
			ag.mu.Lock()
			got := ag.prompts[len(ag.prompts)-1]
			ag.mu.Unlock()
			if len(got.Files) != c.wantFiles || !strings.HasPrefix(got.Text, c.wantText) || (c.dropped == nil && got.Text != c.wantText) {
				t.Fatalf("agent got %q with %d files, want %q with %d", got.Text, len(got.Files), c.wantText, c.wantFiles)
			}
			if c.wantFiles == 1 {
				want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
				if f := got.Files[0]; f.URL != want || f.Mime != "image/png" || f.Filename != c.files[0].name {
					t.Errorf("file %s %s %.40s…, want image/png inline", f.Filename, f.Mime, f.URL)
				}
			}
			// The dropped list is its own record, written after the turn's
			// messages at times: wait for it.
			want := droppedBefore
			if c.dropped != nil {
				want++
			}
			var tr mapper.Transcript
			var dropped []agent.Dropped
			// The checks below say what is missing if it never comes.
			_ = waitfor.Poll{Within: 10 * time.Second}.True(func() bool {
				rb, _, err := ReadTranscript(context.Background(), connB, o, ReadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				tr, dropped = rb.Transcript(), nil
				for _, d := range tr.Dropped {
					if d.Source == session.DroppedSourceReferenceFile {
						dropped = append(dropped, d)
					}
				}
				return len(dropped) >= want
			})
			newDropped := dropped[droppedBefore:]
			droppedBefore = len(dropped)
			if c.dropped == nil {
				if len(newDropped) != 0 {
					t.Errorf("dropped %+v", newDropped)
				}
			} else if len(newDropped) != 1 || string(newDropped[0].Reason) != c.dropped[0] ||
				!strings.Contains(newDropped[0].Detail, c.files[0].name) || !strings.Contains(newDropped[0].Detail, c.dropped[1]) ||
				!strings.Contains(got.Text, c.dropped[1]) {
				t.Errorf("dropped %+v, want one %s saying %q (agent read %q)", newDropped, c.dropped[0], c.dropped[1], got.Text)
			}
			// The transcript's user message keeps the text as sent and the
			// file as a blob part sealed the reference app's way.
			last := tr.Messages[len(tr.Messages)-2]
			um, ok := last.Info.(*mapper.UserMessage)
			if !ok {
				t.Fatalf("message before the answer is %T", last.Info)
			}
			var fp *mapper.FilePart
			for _, p := range last.Parts {
				if f, ok := p.(*mapper.FilePart); ok {
					fp = f
				}
			}
			if c.dropped == nil || c.dropped[0] != "oversize" {
				src, _ := mapper.ParseBlobSource(fp.Source)
				if fp == nil || !relay.IsAttachmentRef(fp.URL) || src.Key != mapper.BlobKeyReference || fp.Filename != c.files[0].name {
					t.Errorf("user message %s file part %+v", um.ID, fp)
				}
			}
		})
	}
	// The good image's blob is still only ciphertext under the blob key:
	// the session's record cipher does not open it.
	rb, _, _ := ReadTranscript(context.Background(), connB, o, ReadOptions{})
	for _, m := range rb.Transcript().Messages {
		for _, p := range m.Parts {
			if f, ok := p.(*mapper.FilePart); ok && f.Filename == "IMG_1.png" {
				if _, err := connB.API.DownloadAttachment(context.Background(), o.Cipher, o.Info.ID, f.URL); err == nil {
					t.Error("the reference app's blob opened with the record cipher")
				}
				if b, checked, err := GetAttachment(context.Background(), connB, o, f.URL); err != nil || !checked || !bytes.Equal(b, img) {
					t.Errorf("GetAttachment of the reference app's blob: %d bytes, checked %v, %v", len(b), checked, err)
				}
				bc, _ := crypto.BlobCipherOf(o.Cipher)
				if b, err := connB.API.DownloadAttachment(context.Background(), bc, o.Info.ID, f.URL); err != nil || !bytes.Equal(b, img) {
					t.Errorf("blob under the blob key: %d bytes, %v", len(b), err)
				}
			}
		}
	}
	cancel()
	<-done
}
