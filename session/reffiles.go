package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/media"
	"github.com/happy-dev/happy/mapper"
)

// The reference app sends a prompt with images as separate records: first
// one session-protocol envelope per file, then its ordinary user text
// (docs/ARCHITECTURE.md, section "Attachments"):
//
//	{"role":"session","content":{"type":"session","data":{"id":…,"time":…,"role":"user",
//	  "ev":{"t":"file","ref":"sessions/<sid>/attachments/<file>","name":…,"size":N,
//	        "image"?:{"width":W,"height":H,"thumbhash"?:…},"mimeType"?:…}}}}
//	{"role":"user","content":{"type":"text","text":…},"meta":{…}}
//
// The blob is NaCl secretbox under the session's blob key
// (crypto.BlobCipherOf), not under the record cipher.

// DroppedSourceReferenceFile is the Dropped.Source of a file event of the
// reference app that could not be handed to the agent.
const DroppedSourceReferenceFile = "reference-file"

// MaxPendingReferenceFiles bounds the reference app's file events that wait
// for their text; more are dropped (reason oversize).
const MaxPendingReferenceFiles = 16

// FileEventError is DecodeReferenceFile's refusal of a user file event:
// the Dropped reason (missing_id, invalid_field) and what is wrong.
type FileEventError struct {
	Reason agent.DropReason
	Detail string
}

// Error is "file event: <detail>".
func (e *FileEventError) Error() string { return "file event: " + e.Detail }

// Unwrap returns ErrBadControl, as for the other refused records.
func (e *FileEventError) Unwrap() error { return ErrBadControl }

// DecodeReferenceFile decodes a decrypted relay record that may be the
// reference app's user file event. It returns ok=false (and no error) for
// every other record, including the session envelopes of agents. A user
// file event with a missing or impossible field is a *FileEventError (f
// then has the event's name, when it has one). The
// file comes back as a blob file part: URL the ref, Filename the name, Mime
// the event's mimeType when given, else the type of the name's extension,
// else application/octet-stream (a claim the download checks), Source a mapper.BlobSource with Key
// mapper.BlobKeyReference.
func DecodeReferenceFile(raw []byte) (f agent.PromptFile, ok bool, err error) {
	var rec struct {
		Role    string `json:"role"`
		Content struct {
			Type string `json:"type"`
			Data struct {
				Role string          `json:"role"`
				Ev   json.RawMessage `json:"ev"`
			} `json:"data"`
		} `json:"content"`
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &rec) != nil {
		return f, false, nil
	}
	if rec.Role != "session" || rec.Content.Type != "session" || rec.Content.Data.Role != "user" {
		return f, false, nil
	}
	var head struct {
		T string `json:"t"`
	}
	if json.Unmarshal(rec.Content.Data.Ev, &head) != nil || head.T != "file" {
		return f, false, nil
	}
	var ev struct {
		Ref      *string  `json:"ref"`
		Name     *string  `json:"name"`
		Size     *float64 `json:"size"`
		MimeType string   `json:"mimeType"`
		Image    *struct {
			Width     float64 `json:"width"`
			Height    float64 `json:"height"`
			Thumbhash string  `json:"thumbhash"`
		} `json:"image"`
	}
	if err := json.Unmarshal(rec.Content.Data.Ev, &ev); err != nil {
		return f, true, &FileEventError{agent.DropInvalidField, err.Error()}
	}
	if ev.Name != nil {
		f.Filename = *ev.Name // named in the refusal too
	}
	switch {
	case ev.Ref == nil || *ev.Ref == "":
		return f, true, &FileEventError{agent.DropMissingID, "no ref"}
	case !isBlobRef(*ev.Ref):
		return f, true, &FileEventError{agent.DropInvalidField, fmt.Sprintf("ref %q is not sessions/<id>/attachments/<file>", agent.CutUTF8(*ev.Ref, 120))}
	case ev.Size == nil || *ev.Size < 0 || *ev.Size != math.Trunc(*ev.Size) || *ev.Size > 1<<53:
		return f, true, &FileEventError{agent.DropInvalidField, "size is not a non-negative whole number"}
	}
	name := f.Filename
	src := mapper.BlobSource{Type: "blob", Size: int64(*ev.Size), Key: mapper.BlobKeyReference}
	if im := ev.Image; im != nil && im.Width >= 1 && im.Height >= 1 && im.Width <= 1<<20 && im.Height <= 1<<20 {
		src.Width, src.Height, src.Thumbhash = int(im.Width), int(im.Height), im.Thumbhash
	}
	b, _ := json.Marshal(src)
	mime := ev.MimeType
	if mime == "" {
		mime = media.TypeByName(name)
	}
	if mime == "" {
		mime = "application/octet-stream"
	}
	return agent.PromptFile{Mime: mime, Filename: name, URL: *ev.Ref, Source: b}, true, nil
}

// isBlobRef is relay.IsAttachmentRef (session does not import relay).
func isBlobRef(u string) bool {
	rest, ok := strings.CutPrefix(u, "sessions/")
	if !ok {
		return false
	}
	sid, file, ok := strings.Cut(rest, "/attachments/")
	return ok && sid != "" && file != "" && !strings.Contains(sid, "/") && !strings.Contains(file, "/")
}

// PromptReader turns the records other devices write into prompts for the
// runner: DecodePrompt's shapes, and the reference app's file events, which
// wait (at most MaxPendingReferenceFiles) and travel with its next user
// text. A file event that cannot be read, or one past MaxSize bytes, is not
// lost silently: it becomes a Dropped record and a note the agent reads
// with the prompt (ControlPrompt.Dropped). Not safe for concurrent use.
type PromptReader struct {
	// MaxSize is the largest file a file event may announce, in bytes
	// (0: no limit here; the download still has one).
	MaxSize int64
	files   []agent.PromptFile
	dropped []agent.Dropped
}

// Read decodes one decrypted record. ok is true when c carries a prompt
// (Key and Reply left for the caller); a file event is kept for the next
// prompt (ok false, no error). err is DecodePrompt's refusal of a user
// record that is no prompt.
func (r *PromptReader) Read(raw []byte) (c ControlPrompt, ok bool, err error) {
	f, isFile, ferr := DecodeReferenceFile(raw)
	if isFile {
		switch {
		case ferr != nil:
			reason := agent.DropInvalidField
			var fe *FileEventError
			if errors.As(ferr, &fe) {
				reason = fe.Reason
			}
			r.drop(f, reason, ferr.Error())
		case len(r.files) >= MaxPendingReferenceFiles:
			r.drop(f, agent.DropOversize, fmt.Sprintf("more than %d files wait for one prompt", MaxPendingReferenceFiles))
		case r.MaxSize > 0 && blobSize(f) > r.MaxSize:
			r.drop(f, agent.DropOversize, fmt.Sprintf("%d bytes, over the limit of %d", blobSize(f), r.MaxSize))
		default:
			r.files = append(r.files, f)
		}
		return ControlPrompt{}, false, nil
	}
	p, ok, err := DecodePrompt(raw)
	if (len(r.files) > 0 || len(r.dropped) > 0) && legacyUser(raw) {
		// The reference app's text after its files; it may be empty.
		var rec struct {
			Content struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(raw, &rec) == nil && rec.Content.Type == "text" {
			p, ok, err = agent.Prompt{Text: rec.Content.Text}, true, nil
		}
		if ok {
			p.Files = append(r.files, p.Files...)
			c.Dropped = r.dropped
			r.files, r.dropped = nil, nil
		}
	}
	c.Prompt = p
	return c, ok, err
}

// Pending is the number of file events waiting for a prompt.
func (r *PromptReader) Pending() int { return len(r.files) + len(r.dropped) }

func (r *PromptReader) drop(f agent.PromptFile, reason agent.DropReason, detail string) {
	what := fileName(f)
	if f.URL != "" {
		what += " (" + f.URL + ")"
	}
	r.dropped = append(r.dropped, agent.Dropped{Source: DroppedSourceReferenceFile, Kind: "file", Reason: reason,
		Detail: agent.CutUTF8(what+": "+detail, agent.DroppedRawMax)})
}

func blobSize(f agent.PromptFile) int64 {
	b, _ := mapper.ParseBlobSource(f.Source)
	return b.Size
}

// legacyUser reports whether raw is a reference-app user record
// ({"role":"user","content":…} without a kind).
func legacyUser(raw []byte) bool {
	var head struct {
		Kind string `json:"kind"`
		Role string `json:"role"`
	}
	return json.Unmarshal(raw, &head) == nil && head.Kind == "" && head.Role == "user"
}

// referenceFile reports whether f is sealed the reference app's way (its
// fetch failing does not refuse the prompt: the prompt goes with a note).
func referenceFile(f agent.PromptFile) bool {
	b, ok := mapper.ParseBlobSource(f.Source)
	return ok && b.Key == mapper.BlobKeyReference
}

// fileNote is the line the agent reads in place of a file it could not be
// given.
func fileNote(d agent.Dropped) string {
	return "[an attachment could not be read and is left out: " + d.Detail + "]"
}
