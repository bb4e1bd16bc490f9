//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// happyRunSlow is happyRun for an agent that may take minutes to start on
// a busy machine (OpenCode): it waits 4 minutes instead of one.
func happyRunSlow(t *testing.T, env []string, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, happyBin, args...)
	cmd.Env, cmd.Dir = env, dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("happy %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// resumeModel answers "first prompt" and "second prompt" (matched at the
// end of the last user text: Gemini CLI puts context of its own before
// the prompt), side requests with a title or "{}".
func resumeModel(t *testing.T) *fakemodel.Server {
	t.Helper()
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
	return model
}

// checkACPResume runs `happy <sub> -p "first prompt"`, then (after
// between, when set) `happy resume SID -p "second prompt"` from another
// folder, and checks: the agent continued its session with method
// (session/load after a history-known note, or session/resume); the
// model's request for the second prompt carries the first turn; `happy log
// --json` of the one relay session has each prompt and answer exactly
// once, in order, and nothing dropped (a replay streamed after the load's
// answer is left out too, not dropped as stray output); the session ended
// again.
func checkACPResume(t *testing.T, r *acpRun, model *fakemodel.Server, sub, method string, between func()) {
	t.Helper()
	code, out, errOut := happyRunSlow(t, r.envA, r.work, sub, "-p", "first prompt", "--record", r.record)
	if code != 0 || out != "First answer.\n" {
		t.Fatalf("turn 1: exit %d stdout %q\nstderr: %s", code, out, errOut)
	}
	sid := strings.Fields(strings.TrimPrefix(errOut, "happy: session "))[0]
	if between != nil {
		between()
	}

	// The resume runs from another folder: it goes back to the session's.
	record2 := filepath.Join(t.TempDir(), "resume.jsonl")
	code, out, errOut = happyRunSlow(t, r.envA, t.TempDir(), "resume", sid, "-p", "second prompt", "--record", record2)
	traffic, _ := os.ReadFile(record2)
	if code != 0 || out != "Second answer.\n" || !strings.HasPrefix(errOut, "happy: session "+sid+" ") {
		t.Fatalf("resume: exit %d stdout %q\nstderr: %s\ntraffic:\n%s", code, out, errOut, traffic)
	}
	loads := strings.Count(string(traffic), `"method":"session/load"`)
	resumes := strings.Count(string(traffic), `"method":"session/resume"`)
	notes := strings.Count(string(traffic), `{"happy":"history-known"}`)
	switch {
	case method == "session/load" && (loads != 1 || resumes != 0 || notes != 1):
		t.Fatalf("the resume did not load the session after a history-known note:\n%s", traffic)
	case method == "session/resume" && (loads != 0 || resumes != 1 || notes != 0):
		t.Fatalf("the resume did not use session/resume alone:\n%s", traffic)
	}

	// The agent continued its own session: the model's request for the
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
		t.Fatalf("the second request lacks the first turn (the agent started fresh):\n%s", body)
	}

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

// happy resume of an ended Gemini CLI 0.61 session: Gemini CLI offers
// session/load (not session/resume) and replays the first turn, mostly
// after it answered the load; happy leaves that replay out.
func TestE2EACPGeminiResume(t *testing.T) {
	gemini := agentBinary(t, "GEMINI")
	model := resumeModel(t)
	gh := geminiHome(t)
	r := newACPRun(t, []string{"HOME=" + gh, "HAPPY_GEMINI_PATH=" + gemini,
		"GEMINI_API_KEY=e2e-dummy-key", "GOOGLE_GEMINI_BASE_URL=" + model.URL})
	checkACPResume(t, r, model, "gemini", "session/load", func() {
		// Gemini CLI names its chat file by the minute the session
		// starts (session-YYYY-MM-DDTHH-MM-<id prefix>.jsonl), and
		// session/load opens a recording under that name again: within
		// the same minute it appends a fresh header that hides the
		// conversation ("No previous sessions found"). The file gets an
		// older minute, as if the resume came later.
		chats, _ := filepath.Glob(filepath.Join(gh, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
		if len(chats) == 0 {
			t.Fatal("Gemini CLI recorded no chat file")
		}
		minute := regexp.MustCompile(`^session-\d{4}-\d\d-\d\dT\d\d-\d\d-`)
		for _, c := range chats {
			renamed := filepath.Join(filepath.Dir(c), minute.ReplaceAllString(filepath.Base(c), "session-2000-01-01T00-00-"))
			if err := os.Rename(c, renamed); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// happy resume of an ended OpenCode 1.18 session: OpenCode offers
// session/resume as well as session/load, and happy takes session/resume
// (nothing replayed).
func TestE2EACPOpenCodeResume(t *testing.T) {
	bin := agentBinary(t, "OPENCODE")
	model := resumeModel(t)
	r := newACPRun(t, openCodeEnv(t, model.URL, bin))
	checkACPResume(t, r, model, "opencode", "session/resume", nil)
}
