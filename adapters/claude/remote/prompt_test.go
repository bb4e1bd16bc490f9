package remote

import (
	"errors"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// TestPromptContent pins the stream-json user content of a prompt with
// files: images and PDF as base64 blocks, text files as text blocks, then
// the prompt's text; anything else is refused.
func TestPromptContent(t *testing.T) {
	png := agent.PromptFile{Mime: "image/png", Filename: "shot.png", URL: "data:image/png;base64,iVBO"}
	pdf := agent.PromptFile{Mime: "application/pdf", Filename: "a.pdf", URL: "data:application/pdf;base64,JVBE"}
	txt := agent.PromptFile{Mime: "text/plain", Filename: "notes.txt", URL: "data:text/plain;base64,aGkK"}
	for _, c := range []struct {
		name string
		p    agent.Prompt
		want string
		err  bool
	}{
		{"image and text", agent.Prompt{Text: "what is this?", Files: []agent.PromptFile{png}},
			`[{"source":{"data":"iVBO","media_type":"image/png","type":"base64"},"type":"image"},{"text":"what is this?","type":"text"}]`, false},
		{"pdf", agent.Prompt{Files: []agent.PromptFile{pdf}},
			`[{"source":{"data":"JVBE","media_type":"application/pdf","type":"base64"},"type":"document"}]`, false},
		{"text file", agent.Prompt{Text: "sum up", Files: []agent.PromptFile{txt}},
			`[{"text":"notes.txt:\nhi\n","type":"text"},{"text":"sum up","type":"text"}]`, false},
		{"zip", agent.Prompt{Files: []agent.PromptFile{{Mime: "application/zip", Filename: "a.zip", URL: "data:application/zip;base64,UEsD"}}}, "", true},
		{"a blob reference", agent.Prompt{Files: []agent.PromptFile{{Mime: "image/png", URL: "sessions/s/attachments/x.enc"}}}, "", true},
		{"not UTF-8", agent.Prompt{Files: []agent.PromptFile{{Mime: "text/plain", URL: "data:text/plain;base64,/w=="}}}, "", true},
	} {
		got, err := PromptContent(c.p)
		if c.err {
			if !errors.Is(err, agent.ErrUnsupportedInput) {
				t.Errorf("%s: err %v, want agent.ErrUnsupportedInput", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
