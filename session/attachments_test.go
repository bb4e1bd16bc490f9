package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// memBlobs is an in-memory Attachments: blobs by reference.
type memBlobs struct {
	mu     sync.Mutex
	blobs  map[string]string // ref → data: URL
	stores int
	fail   error // Store fails with it when set
}

func (m *memBlobs) Fetch(_ context.Context, f agent.PromptFile) (agent.PromptFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.blobs[f.URL]
	if !ok {
		return f, fmt.Errorf("blob %s: not found", f.URL)
	}
	f.URL = u
	return f, nil
}

func (m *memBlobs) Store(_ context.Context, f agent.PromptFile) (agent.PromptFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return f, m.fail
	}
	m.stores++
	ref := fmt.Sprintf("sessions/relay1/attachments/%d.enc", m.stores)
	m.blobs[ref] = f.URL
	f.URL, f.Source = ref, json.RawMessage(`{"type":"blob","size":4}`)
	return f, nil
}

func fileParts(tr mapper.Transcript) []mapper.FilePart {
	var out []mapper.FilePart
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case *mapper.FilePart:
				out = append(out, *p)
			case *mapper.ToolPart:
				out = append(out, p.State.Attachments...)
			}
		}
	}
	return out
}

// TestRunnerPromptFetchesBlobs: the agent gets the blob's bytes inline,
// the transcript keeps the reference.
func TestRunnerPromptFetchesBlobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := &memBlobs{blobs: map[string]string{"sessions/relay1/attachments/a.enc": "data:image/png;base64,iVBO"}}
		h := newHarness(t, Options{OneShot: true, Attachments: blobs})
		var got agent.Prompt
		h.agent.onPrompt = func(p agent.Prompt) {
			got = p
			go h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		}
		src := json.RawMessage(`{"type":"blob","size":4,"width":1,"height":1}`)
		ref := agent.PromptFile{Mime: "image/png", Filename: "a.png", URL: "sessions/relay1/attachments/a.enc", Source: src}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "look", Files: []agent.PromptFile{ref}}}); err != nil {
			t.Fatal(err)
		}
		h.wait()
		want := agent.PromptFile{Mime: "image/png", Filename: "a.png", URL: "data:image/png;base64,iVBO", Source: src}
		if len(got.Files) != 1 || got.Files[0].URL != want.URL || got.Files[0].Filename != want.Filename || !bytes.Equal(got.Files[0].Source, src) {
			t.Fatalf("agent got %+v, want %+v", got.Files, want)
		}
		fps := fileParts(h.red.Transcript())
		if len(fps) != 1 || fps[0].URL != ref.URL || fps[0].Mime != "image/png" || string(fps[0].Source) != string(src) {
			t.Fatalf("transcript file parts %+v, want the reference", fps)
		}
	})
}

// TestRunnerPromptRefused: a blob that cannot be fetched, or a file the
// agent does not take, is recorded with the prompt and an error message;
// the agent is not left waiting and goes on.
func TestRunnerPromptRefused(t *testing.T) {
	for _, c := range []struct {
		name      string
		agentErr  error
		url       string
		wantErr   error
		wantError string
	}{
		{"missing blob", nil, "sessions/relay1/attachments/missing.enc", ErrAttachmentUnavailable, "cannot hand the attachment to the agent: attachment \"x.png\": blob sessions/relay1/attachments/missing.enc: not found"},
		{"agent refuses", fmt.Errorf("%w: no images here", agent.ErrUnsupportedInput), "sessions/relay1/attachments/a.enc", agent.ErrUnsupportedInput, "the agent does not take this input: no images here"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				blobs := &memBlobs{blobs: map[string]string{"sessions/relay1/attachments/a.enc": "data:image/png;base64,iVBO"}}
				h := newHarnessWrapped(t, Options{Attachments: blobs}, func(fa *fakeAgent) agent.Agent {
					return &inputRefuser{fakeAgent: fa, err: c.agentErr}
				})
				err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "look", Files: []agent.PromptFile{{Mime: "image/png", Filename: "x.png", URL: c.url}}}})
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("prompt: %v, want %v", err, c.wantErr)
				}
				synctest.Wait()
				tr := h.red.Transcript()
				if len(tr.Messages) != 2 {
					t.Fatalf("%d messages, want the prompt and the refusal", len(tr.Messages))
				}
				if u, ok := tr.Messages[0].Info.(*mapper.UserMessage); !ok || u == nil {
					t.Fatalf("first message %T", tr.Messages[0].Info)
				}
				a, ok := tr.Messages[1].Info.(*mapper.AssistantMessage)
				if !ok || a.Error == nil || a.Finish != agent.FinishError {
					t.Fatalf("second message %+v", tr.Messages[1].Info)
				}
				if !strings.Contains(fmt.Sprint(a.Error), c.wantError) {
					t.Errorf("error %+v, want %q", a.Error, c.wantError)
				}
				h.agent.emit(&agent.TurnStarted{TurnID: "t9"}) // the agent is still there
				_ = h.control(ControlEnd{})
				close(h.agent.events)
				h.wait()
			})
		})
	}
}

// newHarnessWrapped is newHarness with the fake agent wrapped by wrap.
func newHarnessWrapped(t *testing.T, opts Options, wrap func(*fakeAgent) agent.Agent) *harness {
	h := &harness{t: t, agent: newFakeAgent(), red: mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"}), store: &memStore{last: map[string]int64{}}, done: make(chan struct{})}
	opts.Agent, opts.Reducer = wrap(h.agent), h.red
	opts.Sink = NewSink(h.store, h.red)
	h.runner = NewRunner(opts)
	go func() {
		defer close(h.done)
		h.res, h.err = h.runner.Run(context.Background())
	}()
	return h
}

// inputRefuser refuses every prompt with err (when set).
type inputRefuser struct {
	*fakeAgent
	err error
}

func (a *inputRefuser) Prompt(ctx context.Context, p agent.Prompt) error {
	if a.err != nil {
		return a.err
	}
	return a.fakeAgent.Prompt(ctx, p)
}

// TestRunnerStoresToolFiles: a tool result's inline image is stored as a
// blob, and no record holds its bytes; a file that cannot be stored is
// left out and recorded as Dropped.
func TestRunnerStoresToolFiles(t *testing.T) {
	for _, c := range []struct {
		name    string
		fail    error
		wantURL string
		dropped agent.DropReason
	}{
		{"stored", nil, "sessions/relay1/attachments/1.enc", ""},
		{"too large", fmt.Errorf("big: %w", ErrAttachmentOversize), "", agent.DropOversize},
		{"lying type", errors.New("media: the file's type does not match its bytes"), "", agent.DropInvalidField},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				blobs := &memBlobs{blobs: map[string]string{}, fail: c.fail}
				h := newHarness(t, Options{OneShot: true, Attachments: blobs})
				h.agent.onPrompt = func(agent.Prompt) {
					in, _ := json.Marshal(map[string]string{"path": "/w/shot.png"})
					go h.agent.emit(
						&agent.TurnStarted{TurnID: "t1"},
						&agent.MessageStarted{Message: "m1"},
						&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "read", Input: in},
						&agent.ToolCompleted{CallID: "c1", Output: "", Files: []agent.PromptFile{{Mime: "image/png", URL: "data:image/png;base64,SECRETBYTES"}}},
						&agent.ToolCompleted{CallID: "c1", Output: "", Files: []agent.PromptFile{{Mime: "image/png", URL: "data:image/png;base64,SECRETBYTES"}}},
						&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
				}
				if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "read it"}}); err != nil {
					t.Fatal(err)
				}
				h.wait()
				tr := h.red.Transcript()
				st := toolState(t, tr, "c1")
				if c.wantURL != "" {
					if len(st.Attachments) != 1 || st.Attachments[0].URL != c.wantURL || string(st.Attachments[0].Source) != `{"type":"blob","size":4}` {
						t.Fatalf("attachments %+v, want %s", st.Attachments, c.wantURL)
					}
				} else if len(st.Attachments) != 0 {
					t.Fatalf("attachments %+v, want none", st.Attachments)
				}
				var reasons []agent.DropReason
				for _, d := range tr.Dropped {
					reasons = append(reasons, d.Reason)
				}
				switch {
				case c.dropped == "" && len(reasons) != 0:
					t.Errorf("dropped %v, want none", reasons)
				case c.dropped != "" && (len(reasons) == 0 || reasons[0] != c.dropped || tr.Dropped[0].Source != DroppedSourceAttachment):
					t.Errorf("dropped %+v, want %s from %s", tr.Dropped, c.dropped, DroppedSourceAttachment)
				}
				for _, put := range h.store.puts {
					for _, rv := range put {
						if bytes.Contains(rv.Plaintext, []byte("SECRETBYTES")) {
							t.Fatalf("record %s holds the file's bytes: %s", rv.Record, rv.Plaintext)
						}
					}
				}
			})
		})
	}
}
