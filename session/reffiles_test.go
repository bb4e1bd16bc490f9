package session

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

const refOK = "sessions/s1/attachments/0b6c.enc"

// fileEvent is a file event as the reference app writes it (sync.ts).
func fileEvent(ev string) string {
	return `{"role":"session","content":{"type":"session","data":{"id":"e1","time":5,"role":"user","ev":` + ev + `}}}`
}

func TestDecodeReferenceFile(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     string
		ok     bool
		want   agent.PromptFile
		reason agent.DropReason // of the error, "" for none
		text   string
	}{
		{name: "image", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"IMG_1.png","size":120,"image":{"width":5,"height":3,"thumbhash":"3OcRJYB4"}}`), ok: true,
			want: agent.PromptFile{Mime: "image/png", Filename: "IMG_1.png", URL: refOK, Source: json.RawMessage(`{"type":"blob","size":120,"width":5,"height":3,"thumbhash":"3OcRJYB4","key":"blob"}`)}},
		{name: "file with a mime type", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"notes","size":0,"mimeType":"text/plain"}`), ok: true,
			want: agent.PromptFile{Mime: "text/plain", Filename: "notes", URL: refOK, Source: json.RawMessage(`{"type":"blob","size":0,"key":"blob"}`)}},
		{name: "no extension, no type", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"blob","size":7}`), ok: true,
			want: agent.PromptFile{Mime: "application/octet-stream", Filename: "blob", URL: refOK, Source: json.RawMessage(`{"type":"blob","size":7,"key":"blob"}`)}},
		{name: "impossible image size is left out", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"a.gif","size":7,"image":{"width":-1,"height":3}}`), ok: true,
			want: agent.PromptFile{Mime: "image/gif", Filename: "a.gif", URL: refOK, Source: json.RawMessage(`{"type":"blob","size":7,"key":"blob"}`)}},
		{name: "no ref", in: fileEvent(`{"t":"file","name":"a.png","size":1}`), ok: true, reason: agent.DropMissingID, text: "file event: no ref"},
		{name: "foreign ref", in: fileEvent(`{"t":"file","ref":"https://evil.example/x","name":"a.png","size":1}`), ok: true, reason: agent.DropInvalidField, text: "is not sessions/<id>/attachments/<file>"},
		{name: "negative size", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"a.png","size":-1}`), ok: true, reason: agent.DropInvalidField, text: "size is not a non-negative whole number"},
		{name: "fractional size", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"a.png","size":1.5}`), ok: true, reason: agent.DropInvalidField, text: "size is not"},
		{name: "no size", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":"a.png"}`), ok: true, reason: agent.DropInvalidField, text: "size is not"},
		{name: "name of the wrong type", in: fileEvent(`{"t":"file","ref":"` + refOK + `","name":5,"size":1}`), ok: true, reason: agent.DropInvalidField, text: "file event: json"},
		{name: "agent file event", in: `{"role":"session","content":{"type":"session","data":{"role":"agent","ev":{"t":"file","ref":"` + refOK + `"}}}}`},
		{name: "user text event", in: fileEvent(`{"t":"text","text":"hi"}`)},
		{name: "legacy prompt", in: `{"role":"user","content":{"type":"text","text":"hi"}}`},
		{name: "canonical", in: `{"kind":"message","version":1,"info":{"role":"user"},"parts":[]}`},
		{name: "not JSON", in: `{"role":"session"`},
		{name: "array", in: `[1]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, ok, err := DecodeReferenceFile([]byte(c.in))
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v (err %v)", ok, c.ok, err)
			}
			if c.reason != "" {
				var fe *FileEventError
				if !errors.As(err, &fe) || fe.Reason != c.reason || !strings.Contains(err.Error(), c.text) || !errors.Is(err, ErrBadControl) {
					t.Fatalf("err %v, want %s saying %q", err, c.reason, c.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Mime != c.want.Mime || f.Filename != c.want.Filename || f.URL != c.want.URL || string(f.Source) != string(c.want.Source) {
				t.Errorf("got %+v (source %s), want %+v (source %s)", f, f.Source, c.want, c.want.Source)
			}
		})
	}
}

// PromptReader holds file events for the reference app's next text, even
// an empty one; bad events and those over the size limit become Dropped
// records that travel with that prompt; canonical prompts pass as they
// are and leave waiting files alone.
func TestPromptReader(t *testing.T) {
	r := PromptReader{MaxSize: 100}
	read := func(in string) (ControlPrompt, bool) {
		t.Helper()
		c, ok, err := r.Read([]byte(in))
		if err != nil {
			t.Fatalf("Read(%s): %v", in, err)
		}
		return c, ok
	}
	if _, ok := read(fileEvent(`{"t":"file","ref":"` + refOK + `","name":"a.png","size":10}`)); ok {
		t.Fatal("a file event is a prompt")
	}
	read(fileEvent(`{"t":"file","ref":"` + refOK + `","name":"big.png","size":101}`))
	read(fileEvent(`{"t":"file","name":"noref.png","size":1}`))
	if r.Pending() != 3 {
		t.Fatalf("pending %d, want 3", r.Pending())
	}
	c, ok := read(`{"kind":"message","version":1,"info":{"id":"msg_1","role":"user"},"parts":[{"type":"text","text":"from happy send"}]}`)
	if !ok || c.Prompt.Text != "from happy send" || len(c.Prompt.Files) != 0 || len(c.Dropped) != 0 || r.Pending() != 3 {
		t.Fatalf("canonical prompt %+v, pending %d", c, r.Pending())
	}
	c, ok = read(`{"role":"user","content":{"type":"text","text":""},"meta":{"sentFrom":"ios"}}`)
	if !ok || c.Prompt.Text != "" || len(c.Prompt.Files) != 1 || c.Prompt.Files[0].Filename != "a.png" || r.Pending() != 0 {
		t.Fatalf("prompt %+v, pending %d", c, r.Pending())
	}
	want := []agent.Dropped{
		{Source: DroppedSourceReferenceFile, Kind: "file", Reason: agent.DropOversize, Detail: `"big.png" (` + refOK + `): 101 bytes, over the limit of 100`},
		{Source: DroppedSourceReferenceFile, Kind: "file", Reason: agent.DropMissingID, Detail: `"noref.png": file event: no ref`},
	}
	if len(c.Dropped) != 2 || c.Dropped[0] != want[0] || c.Dropped[1] != want[1] {
		t.Errorf("dropped %+v\nwant %+v", c.Dropped, want)
	}
	// Without waiting files an empty legacy prompt is refused as before.
	if _, ok, err := r.Read([]byte(`{"role":"user","content":{"type":"text","text":" "}}`)); ok || !errors.Is(err, ErrBadControl) {
		t.Errorf("empty prompt: ok %v, err %v", ok, err)
	}
	// More than MaxPendingReferenceFiles wait: the rest are dropped.
	for range MaxPendingReferenceFiles + 2 {
		read(fileEvent(`{"t":"file","ref":"` + refOK + `","name":"x.png","size":1}`))
	}
	c, _ = read(`{"role":"user","content":{"type":"text","text":"many"}}`)
	if len(c.Prompt.Files) != MaxPendingReferenceFiles || len(c.Dropped) != 2 || c.Dropped[0].Reason != agent.DropOversize {
		t.Errorf("%d files, dropped %+v", len(c.Prompt.Files), c.Dropped)
	}
	if !referenceFile(c.Prompt.Files[0]) || referenceFile(agent.PromptFile{Source: json.RawMessage(`{"type":"blob","size":1}`)}) {
		t.Error("referenceFile does not tell the reference app's blobs from happy's")
	}
	if src, ok := mapper.ParseBlobSource(c.Prompt.Files[0].Source); !ok || src.Key != mapper.BlobKeyReference {
		t.Errorf("source %s", c.Prompt.Files[0].Source)
	}
}

// FuzzDecodeReferenceFile: any record decodes without a panic; an
// accepted file has a blob reference and a source that parses as a blob.
func FuzzDecodeReferenceFile(f *testing.F) {
	for _, s := range []string{
		fileEvent(`{"t":"file","ref":"` + refOK + `","name":"IMG_1.png","size":120,"image":{"width":5,"height":3,"thumbhash":"3OcRJYB4"}}`),
		fileEvent(`{"t":"file","ref":"` + refOK + `","name":"a","size":1e300}`),
		fileEvent(`{"t":"file"}`),
		`{"role":"user","content":{"type":"text","text":"hi"}}`,
		`{"role":"session","content":{"type":"session","data":null}}`,
		`null`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok, err := DecodeReferenceFile(raw)
		if !ok && err != nil {
			t.Fatalf("not a file event, yet an error: %v", err)
		}
		if ok && err == nil {
			src, isBlob := mapper.ParseBlobSource(got.Source)
			if !isBlobRef(got.URL) || !isBlob || src.Key != mapper.BlobKeyReference || src.Size < 0 || got.Mime == "" {
				t.Fatalf("accepted %+v (source %s)", got, got.Source)
			}
		}
		var r PromptReader
		_, _, _ = r.Read(raw)
	})
}
