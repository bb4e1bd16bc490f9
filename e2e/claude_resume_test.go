//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// resumeDoc is the part of `happy log --json` the resume test reads.
type resumeDoc struct {
	Session struct {
		Title string `json:"title"`
	} `json:"session"`
	Messages []struct {
		Info struct {
			Role   string `json:"role"`
			Finish string `json:"finish"`
		} `json:"info"`
		Parts []struct {
			Type      string `json:"type"`
			Text      string `json:"text"`
			Synthetic bool   `json:"synthetic"`
		} `json:"parts"`
	} `json:"messages"`
}

// texts lists "role: text" for every non-synthetic text part, in order.
func (d resumeDoc) texts() []string {
	var out []string
	for _, m := range d.Messages {
		for _, p := range m.Parts {
			if p.Type == "text" && !p.Synthetic && strings.TrimSpace(p.Text) != "" {
				out = append(out, m.Info.Role+": "+p.Text)
			}
		}
	}
	return out
}

// happy resume of an ended Claude session: the second turn runs with
// Claude's own --resume (the model's second request carries the first
// turn's conversation), its records land in the same relay session after
// the first turn's, and the session ends again.
func TestE2EClaudeResume(t *testing.T) {
	claudeBin := agentBinary(t, "CLAUDE")
	relay := startRelay(t)
	hs := homes(t, relay.URL, 2)
	work := t.TempDir()
	answers := map[string]string{"first prompt": "First answer.", "second prompt": "Second answer."}
	model, err := fakemodel.New(fakemodel.Script{Decide: func(r fakemodel.Request) fakemodel.Reply {
		if a, ok := answers[r.LastText]; ok && r.HasTools {
			return fakemodel.Reply{Text: a}
		}
		return fakemodel.Reply{Text: "Fake title"}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ch := claudeHome(t, work, "sk-e2e-dummy-key-0123456789")
	envA := claudeEnv(ch, hs[0], relay.URL, model.URL, claudeBin)
	envB := claudeEnv(ch, hs[1], relay.URL, model.URL, claudeBin)

	code, out, errOut := happyRun(t, envA, work, "claude", "-p", "first prompt", "--", "--model", "claude-sonnet-4-5")
	if code != 0 || out != "First answer.\n" {
		t.Fatalf("turn 1: exit %d stdout %q\nstderr: %s", code, out, errOut)
	}
	sid := strings.Fields(strings.TrimPrefix(errOut, "happy: session "))[0]

	// The resume runs from another folder: it goes back to the session's.
	code, out, errOut = happyRun(t, envA, t.TempDir(), "resume", sid, "-p", "second prompt", "--", "--model", "claude-sonnet-4-5")
	if code != 0 || out != "Second answer.\n" || !strings.HasPrefix(errOut, "happy: session "+sid+" ") {
		t.Fatalf("resume: exit %d stdout %q\nstderr: %s", code, out, errOut)
	}

	// (b) Claude resumed its own session: the model's request for the
	// second prompt carries the first turn.
	var second *fakemodel.Request
	for _, r := range model.Requests() {
		if r.HasTools && r.LastText == "second prompt" {
			r := r
			second = &r
		}
	}
	if second == nil {
		t.Fatal("the model never got the second prompt")
	}
	if body := string(second.Body); !strings.Contains(body, "first prompt") || !strings.Contains(body, "First answer.") {
		t.Fatalf("the second request lacks the first turn (Claude started fresh):\n%s", body)
	}

	// (a) Both turns in the one relay session, in order, exact texts; (c)
	// it ended again.
	var doc resumeDoc
	waitFor(t, 20*time.Second, "both turns on the relay", func() bool {
		code, raw, _ := happyRun(t, envB, work, "log", sid, "--json")
		doc = resumeDoc{}
		return code == 0 && json.Unmarshal([]byte(raw), &doc) == nil && len(doc.texts()) == 4
	})
	want := []string{"user: first prompt", "assistant: First answer.", "user: second prompt", "assistant: Second answer."}
	if got := doc.texts(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("transcript texts %q, want %q", got, want)
	}
	for _, m := range doc.Messages {
		if m.Info.Role == "assistant" && m.Info.Finish == "" {
			t.Fatalf("an assistant message has no finish: %+v", m)
		}
	}
	code, out, _ = happyRun(t, envB, work, "sessions", "--json")
	var list []struct{ ID, State, Title string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("happy sessions: exit %d %s", code, out)
	}
	if len(list) != 1 || list[0].ID != sid || list[0].State != "ended" || list[0].Title != "first prompt" {
		t.Fatalf("sessions after resume: %+v", list)
	}
}
