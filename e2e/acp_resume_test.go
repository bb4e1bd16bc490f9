//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// happy resume of an ended Gemini CLI session: Gemini CLI offers
// session/load (not session/resume), so it replays the first turn before
// it answers the load; happy leaves that replay out. The second prompt
// reaches the model with the first turn in its history, and `happy log
// --json` of the one relay session has each prompt and each answer exactly
// once, in order, and the session ended again.
func TestE2EACPGeminiResume(t *testing.T) {
	gemini := agentBinary(t, "GEMINI")
	// Gemini CLI puts context of its own before the prompt in the user
	// message: the prompt is matched at its end.
	model, err := fakemodel.New(fakemodel.Script{Decide: func(r fakemodel.Request) fakemodel.Reply {
		switch {
		case !r.HasTools && r.JSON:
			return fakemodel.Reply{Text: "{}"}
		case !r.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case strings.HasSuffix(strings.TrimSpace(r.LastText), "second prompt"):
			return fakemodel.Reply{Text: "Second answer."}
		case strings.HasSuffix(strings.TrimSpace(r.LastText), "first prompt"):
			return fakemodel.Reply{Text: "First answer."}
		}
		return fakemodel.Reply{Text: "Unexpected request."}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	gh := geminiHome(t)
	r := newACPRun(t, []string{"HOME=" + gh, "HAPPY_GEMINI_PATH=" + gemini,
		"GEMINI_API_KEY=e2e-dummy-key", "GOOGLE_GEMINI_BASE_URL=" + model.URL})

	code, out, errOut := happyRun(t, r.envA, r.work, "gemini", "-p", "first prompt", "--record", r.record)
	if code != 0 || out != "First answer.\n" {
		t.Fatalf("turn 1: exit %d stdout %q\nstderr: %s", code, out, errOut)
	}
	sid := strings.Fields(strings.TrimPrefix(errOut, "happy: session "))[0]
	// Gemini CLI names its chat file by the minute the session starts
	// (session-YYYY-MM-DDTHH-MM-<id prefix>.jsonl), and session/load opens
	// a recording under that name again: within the same minute it
	// appends a fresh header that hides the conversation ("No previous
	// sessions found"). The file gets an older minute, as if the resume
	// came later.
	chats, _ := filepath.Glob(filepath.Join(gh, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	if len(chats) == 0 {
		t.Fatal("Gemini CLI recorded no chat file")
	}
	for _, c := range chats {
		old := regexp.MustCompile(`^session-\d{4}-\d\d-\d\dT\d\d-\d\d-`)
		renamed := filepath.Join(filepath.Dir(c), old.ReplaceAllString(filepath.Base(c), "session-2000-01-01T00-00-"))
		if err := os.Rename(c, renamed); err != nil {
			t.Fatal(err)
		}
	}

	// The resume runs from another folder: it goes back to the session's.
	record2 := filepath.Join(t.TempDir(), "resume.jsonl")
	code, out, errOut = happyRun(t, r.envA, t.TempDir(), "resume", sid, "-p", "second prompt", "--record", record2)
	if code != 0 || out != "Second answer.\n" || !strings.HasPrefix(errOut, "happy: session "+sid+" ") {
		b, _ := os.ReadFile(record2)
		t.Fatalf("resume: exit %d stdout %q\nstderr: %s\ntraffic:\n%s", code, out, errOut, b)
	}
	traffic, err := os.ReadFile(record2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(traffic), `"method":"session/load"`) || !strings.Contains(string(traffic), `{"happy":"history-known"}`) {
		t.Fatalf("the resume did not load the session:\n%s", traffic)
	}
	// Gemini CLI did replay the first turn during the load.
	if !strings.Contains(string(traffic), `"text":"First answer."`) {
		t.Fatalf("no replay of the first turn in the load:\n%s", traffic)
	}

	// Gemini continued its own session: the model's request for the
	// second prompt carries the first turn.
	var second *fakemodel.Request
	for _, q := range model.Requests() {
		if q.HasTools && strings.HasSuffix(strings.TrimSpace(q.LastText), "second prompt") {
			q := q
			second = &q
		}
	}
	if second == nil {
		t.Fatal("the model never got the second prompt")
	}
	if body := string(second.Body); !strings.Contains(body, "first prompt") || !strings.Contains(body, "First answer.") {
		t.Fatalf("the second request lacks the first turn (Gemini started fresh):\n%s", body)
	}

	// Gemini CLI answers the load before most of its replay: what comes
	// after the answer is left out too, not dropped as stray output.
	var doc resumeDoc
	var dropped struct {
		Dropped []json.RawMessage `json:"dropped"`
	}
	waitFor(t, 20*time.Second, "both turns on the relay", func() bool {
		code, raw, _ := happyRun(t, r.envB, r.work, "log", sid, "--json")
		doc = resumeDoc{}
		return code == 0 && json.Unmarshal([]byte(raw), &doc) == nil && json.Unmarshal([]byte(raw), &dropped) == nil && len(doc.texts()) >= 4
	})
	want := []string{"user: first prompt", "assistant: First answer.", "user: second prompt", "assistant: Second answer."}
	if got := doc.texts(); strings.Join(got, "|") != strings.Join(want, "|") || len(dropped.Dropped) != 0 {
		t.Fatalf("transcript texts %q dropped %s, want %q and nothing dropped", got, dropped.Dropped, want)
	}
	code, out, _ = happyRun(t, r.envB, r.work, "sessions", "--json")
	var list []struct{ ID, State, Title string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("happy sessions: exit %d %s", code, out)
	}
	if len(list) != 1 || list[0].ID != sid || list[0].State != "ended" {
		t.Fatalf("sessions after resume: %+v", list)
	}
}
