package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
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

// A tool's attachments are photo or file events just before its
// tool-call-end, and happy log lists them under the tool.
func TestToolAttachments(t *testing.T) {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-att", Directory: "/w"})
	in := json.RawMessage(`{"path":"/w/shot.png"}`)
	src := json.RawMessage(`{"type":"blob","size":81,"width":6,"height":4,"thumbhash":"TH"}`)
	for _, ev := range []agent.Event{
		&agent.UserPrompt{PromptID: "p", Text: "Look"},
		&agent.TurnStarted{TurnID: "t"},
		&agent.ToolCall{Message: "m", CallID: "c1", Tool: "read", Input: in},
		&agent.ToolCompleted{CallID: "c1", Files: []agent.PromptFile{{Mime: "image/png", Filename: "shot.png", URL: "sessions/s/attachments/a.enc", Source: src}}},
		&agent.TurnEnded{TurnID: "t", Reason: agent.TurnCompleted},
	} {
		red.Apply(ev)
	}
	tr := red.Transcript()
	var types []string
	var photo FlatEvent
	for _, e := range Flat(tr) {
		types = append(types, e.Type)
		if e.Type == TypePhoto {
			photo = e
		}
	}
	if got := strings.Join(types, ","); !strings.Contains(got, "tool-call-start,photo,tool-call-end") {
		t.Fatalf("flat types %s", got)
	}
	if photo.Ref != "sessions/s/attachments/a.enc" || photo.Width != 6 || photo.Height != 4 || photo.Size != 81 || photo.Thumbhash != "TH" || photo.Role != "agent" {
		t.Fatalf("photo %+v", photo)
	}
	var buf bytes.Buffer
	if err := Text(&buf, tr, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "[file shot.png, image/png, 81 B, 6x4] sessions/s/attachments/a.enc"; !strings.Contains(buf.String(), want) {
		t.Fatalf("happy log:\n%s\nwant a line %q", buf.String(), want)
	}
}

// Names, prompts and outputs come from other devices and agents: nothing in
// them reaches the reader's terminal as a control sequence, and a line
// break inside a name cannot forge a transcript line of its own.
func TestTextIsTerminalSafe(t *testing.T) {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-esc", Directory: "/w"})
	for _, ev := range []agent.Event{
		&agent.UserPrompt{PromptID: "p", Text: "look \x1b[31mred\x1b[0m\x07 here", Files: []agent.PromptFile{
			{Mime: "image/png", Filename: "x\x1b[31mred.png", URL: "sessions/s/attachments/a.enc", Source: json.RawMessage(`{"type":"blob","size":5}`)},
			{Mime: "text/markdown", Filename: "évil\n> forged line.md", URL: "sessions/s/attachments/b.enc", Source: json.RawMessage(`{"type":"blob","size":5}`)},
			{Mime: "text/plain", Filename: "c1\u009b31m.txt", URL: "sessions/s/attachments/c.enc", Source: json.RawMessage(`{"type":"blob","size":5}`)},
		}},
		&agent.TurnStarted{TurnID: "t"},
		&agent.TurnEnded{TurnID: "t", Reason: agent.TurnCompleted},
	} {
		red.Apply(ev)
	}
	var buf bytes.Buffer
	if err := Text(&buf, red.Transcript(), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, bad := range []string{"\x1b", "\x07", "\u009b", "\n> forged"} {
		if strings.Contains(got, bad) {
			t.Errorf("happy log holds %q:\n%s", bad, got)
		}
	}
	for _, want := range []string{
		"> look red here\n",
		"> [file xred.png, image/png, 5 B] sessions/s/attachments/a.enc\n",
		"> [file évil ⏎ > forged line.md, text/markdown, 5 B] sessions/s/attachments/b.enc\n",
		"> [file c131m.txt, text/plain, 5 B] sessions/s/attachments/c.enc\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("happy log:\n%s\nwant the line %q", got, want)
		}
	}
}
