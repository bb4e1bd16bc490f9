package codex

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
)

func TestPromptOf(t *testing.T) {
	log := zerolog.Nop()
	for _, c := range []struct {
		name string
		p    agent.Prompt
		want Prompt
		err  bool
	}{
		{"image and text file", agent.Prompt{Text: "look", Files: []agent.PromptFile{
			{Mime: "image/png", URL: "data:image/png;base64,iVBO"},
			{Mime: "image/jpeg", URL: "file:///w/a.jpg"},
			{Mime: "text/markdown", Filename: "README.md", URL: "data:text/markdown;base64,IyBoaQ=="},
		}}, Prompt{Text: "look", Images: []Image{{URL: "data:image/png;base64,iVBO"}, {Path: "/w/a.jpg"}}, Texts: []string{"README.md:\n# hi"}}, false},
		{"pdf", agent.Prompt{Files: []agent.PromptFile{{Mime: "application/pdf", Filename: "a.pdf", URL: "data:application/pdf;base64,JVBE"}}}, Prompt{}, true},
		{"text as a link", agent.Prompt{Files: []agent.PromptFile{{Mime: "text/plain", URL: "https://example.org/a.txt"}}}, Prompt{}, true},
	} {
		got, err := PromptOf(c.p, &log)
		if c.err {
			if !errors.Is(err, agent.ErrUnsupportedInput) {
				t.Errorf("%s: err %v, want agent.ErrUnsupportedInput", c.name, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: PromptOf = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}
