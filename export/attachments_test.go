package export

import (
	"encoding/json"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

func TestFileEventAndLabel(t *testing.T) {
	img := &mapper.FilePart{PartBase: mapper.PartBase{ID: "prt_1"}, Mime: "image/png", Filename: "shot.png",
		URL: "sessions/s1/attachments/u.enc", Source: json.RawMessage(`{"type":"blob","size":1300,"width":800,"height":600,"thumbhash":"3OcRJYB4"}`)}
	pdf := &mapper.FilePart{PartBase: mapper.PartBase{ID: "prt_2"}, Mime: "application/pdf", Filename: "a.pdf",
		URL: "sessions/s1/attachments/v.enc", Source: json.RawMessage(`{"type":"blob","size":3145728}`)}
	inline := &mapper.FilePart{PartBase: mapper.PartBase{ID: "prt_3"}, Mime: "image/png", URL: "data:image/png;base64,iVBO"}
	for _, c := range []struct {
		f     *mapper.FilePart
		event string
		label string
	}{
		{img, `{"id":"prt_1","time":5,"role":"user","type":"photo","ref":"sessions/s1/attachments/u.enc","name":"shot.png","mimeType":"image/png","size":1300,"width":800,"height":600,"thumbhash":"3OcRJYB4"}`,
			"[file shot.png, image/png, 1.3 KiB, 800x600] sessions/s1/attachments/u.enc"},
		{pdf, `{"id":"prt_2","time":5,"role":"user","type":"file","ref":"sessions/s1/attachments/v.enc","name":"a.pdf","mimeType":"application/pdf","size":3145728}`,
			"[file a.pdf, application/pdf, 3.0 MiB] sessions/s1/attachments/v.enc"},
		{inline, `{"id":"prt_3","time":5,"role":"user","type":"file","ref":"data:image/png;base64,iVBO","mimeType":"image/png"}`,
			"[file (unnamed), image/png, inline]"},
	} {
		b, _ := json.Marshal(fileEvent(FlatEvent{ID: c.f.ID, Time: 5, Role: "user"}, c.f))
		if string(b) != c.event {
			t.Errorf("%s event:\n got %s\nwant %s", c.f.ID, b, c.event)
		}
		if got := FileLabel(c.f); got != c.label {
			t.Errorf("%s label %q, want %q", c.f.ID, got, c.label)
		}
	}
}
