// Package remote runs Claude Code in remote (SDK) mode as a agent.Agent:
// the CLI is driven over stream-json by package sdk, its stdout is decoded
// into agent events by package claude, and the runner's prompts, decisions,
// question answers and interrupts go back over the SDK control protocol.
//
// Package sdk owns the control protocol: the decoder maps the transcript
// lines only, and each permission request, withdrawal and refusal comes
// from the sdk client's events. A can_use_tool becomes the ToolBlocked the
// runner sees (package claude, Decoder.Asked, maps it); the call waits in
// one table here, by call id, until the runner answers or Claude withdraws
// the request (then the tool is resolved rejected, reason cancelled).
//
// Decisions travel as the decision table of docs/ARCHITECTURE.md says: once → allow, always → allow
// with the request's permission suggestions, reject → deny. A question
// (AskUserQuestion) is answered by allowing the tool with its input plus
// "answers": {question: "label, label"}, which is how Claude Code's
// AskUserQuestion tool receives a person's choice (Claude Code 2.1.x).
package remote

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/happy-dev/happy/adapters/claude"
	"github.com/happy-dev/happy/adapters/claude/sdk"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// Options configure Start. They are the sdk options plus the permission
// mode Claude starts in.
type Options struct {
	SDK sdk.Options
	// PermissionMode is passed as --permission-mode when not empty (one of
	// the sdk.Mode* names).
	PermissionMode string
}

// DefaultMaxLine bounds one stdout line of Claude (64 MiB) when the SDK
// options set no limit.
const DefaultMaxLine = 64 << 20

// ErrUnknownCall is returned by Decide and AnswerQuestion (wrapped, with
// agent.ErrStale) for a call that waits on no request: never asked,
// answered already, or withdrawn by Claude.
var ErrUnknownCall = errors.New("claude is not waiting on that tool call")

// Agent is Claude Code in SDK mode, as a agent.Agent.
type Agent struct {
	client *sdk.Client
	events chan agent.Event

	mu  sync.Mutex
	dec *claude.Decoder
	// waiting holds the can_use_tool request each blocked call waits on,
	// by call id: set from the client's PermissionRequest, removed by the
	// answer (Decide, AnswerQuestion), the request's withdrawal or the
	// CLI's exit. The request's input is Claude's own (a question's
	// answers are added to it).
	waiting map[string]*sdk.PermissionRequest
	done    chan struct{}
	// exitDetail is how the CLI ended, when it failed (ExitDetail).
	exitDetail string
}

var _ agent.Agent = (*Agent)(nil)

// Start launches Claude Code and begins decoding its output. The initialize
// request is sent at once; the CLI answers it when ready, and a prompt may
// follow immediately.
func Start(ctx context.Context, opts Options) (*Agent, error) {
	dec, err := claude.NewDecoder(claude.FormStreamJSON, claude.Options{ControlChannel: true})
	if err != nil {
		return nil, err
	}
	so := opts.SDK
	if so.MaxLine == 0 {
		// As the JSON-RPC adapters: a larger line is refused (a Dropped
		// record), never buffered whole.
		so.MaxLine = DefaultMaxLine
	}
	if opts.PermissionMode != "" {
		so.Args = append([]string{"--permission-mode", opts.PermissionMode}, so.Args...)
	}
	client, err := sdk.Start(ctx, so)
	if err != nil {
		return nil, err
	}
	// A CLI that exited already (before it read initialize) is reported
	// like one that exits later: Events closes after its exit, and the
	// session records the prompt nothing answered.
	if _, err := client.SendInitialize(ctx); err != nil && !errors.Is(err, sdk.ErrExited) {
		_, _ = client.Close()
		return nil, fmt.Errorf("claude: send initialize: %w", err)
	}
	a := &Agent{client: client, dec: dec, events: make(chan agent.Event, 256),
		waiting: map[string]*sdk.PermissionRequest{}, done: make(chan struct{})}
	go a.pump()
	return a, nil
}

// refuseTimeout bounds the deny a request nobody can be shown gets.
const refuseTimeout = 10 * time.Second

// pump maps the CLI's events until it exits, then closes Events: stdout
// lines through the decoder (the control lines are the client's: their
// events follow them), permission requests and withdrawals through the
// waiting table, refusals as Dropped records.
func (a *Agent) pump() {
	defer close(a.done)
	defer close(a.events)
	var control linereader.Line // the last control line: the events that follow are its
	for ev := range a.client.Events() {
		var out []agent.Event
		switch e := ev.(type) {
		case *sdk.Output:
			if e.Control {
				control = e.Line
				continue
			}
			a.mu.Lock()
			out = a.dec.DecodeLine(e.Line)
			a.mu.Unlock()
		case *sdk.PermissionRequest:
			out = a.asked(control, e)
		case *sdk.PermissionCancelled:
			out = a.withdrawn(e.RequestID)
		case *sdk.Refused:
			out = []agent.Event{refusedEvent(control, e)}
		case *sdk.Exited:
			end := claude.EndOfStream{Exited: true}
			if e.State != nil {
				if code := e.State.ExitCode(); code >= 0 {
					end.Code = &code
				}
			}
			a.mu.Lock()
			out = a.dec.Finish(end)
			clear(a.waiting)
			a.exitDetail = exitDetail(e)
			a.mu.Unlock()
		}
		for _, o := range out {
			a.events <- o
		}
	}
}

// asked maps a permission request: the call it blocks waits in the table
// until it is answered. A request the transcript cannot show is denied at
// once (it is recorded as dropped), so Claude never waits for an answer
// nobody can give.
func (a *Agent) asked(line linereader.Line, r *sdk.PermissionRequest) []agent.Event {
	a.mu.Lock()
	callID, out := a.dec.Asked(line, claude.PermissionAsk{
		RequestID: r.RequestID, ToolName: r.ToolName, Input: r.Input, ToolUseID: r.ToolUseID,
		Description: r.Description, BlockedPath: r.BlockedPath, DecisionReason: r.DecisionReason,
		AgentID: r.AgentID, Suggestions: r.Suggestions,
	})
	if callID != "" {
		a.waiting[callID] = r
	}
	a.mu.Unlock()
	if callID == "" {
		ctx, cancel := context.WithTimeout(context.Background(), refuseTimeout)
		defer cancel()
		_ = a.client.Respond(ctx, r.RequestID, sdk.Answer{Decision: agent.DecisionReject,
			Message: "happy cannot show this permission request: its tool call already ended, waits for an answer already or was refused."})
	}
	return out
}

// withdrawn settles the call that waited on request rid, which Claude
// withdrew.
func (a *Agent) withdrawn(rid string) []agent.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	for callID, r := range a.waiting {
		if r.RequestID == rid {
			delete(a.waiting, callID)
			return a.dec.Withdrawn(callID)
		}
	}
	return nil
}

// refusedEvent records a control request the client refused (line is the
// line it came on) as a Dropped record.
func refusedEvent(line linereader.Line, r *sdk.Refused) agent.Event {
	kind := "control_request"
	if r.Subtype != "" {
		kind += "/" + r.Subtype
	}
	detail := r.Reason
	if r.RequestID != "" {
		detail += "; answered with an error"
	}
	drop := r.Drop
	if drop == "" {
		drop = agent.DropInvalidField
	}
	return &agent.DroppedInput{Dropped: agent.Dropped{Source: claude.SourceStreamJSON, Line: line.Number, Kind: kind,
		Reason: drop, Detail: detail, Raw: agent.CutUTF8(string(line.Data), agent.DroppedRawMax)}}
}

// ExitDetail implements agent.ExitExplainer: once the CLI exited with a
// failure, its exit status and what it said last on stderr.
func (a *Agent) ExitDetail() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exitDetail
}

// exitDetail says how a CLI that exited with a failure (a non-zero status
// or a signal) ended and what it said last on stderr, so the person reads
// Claude's own reason (an argument it refused, a login it needs) on the
// terminal, in the log and in the transcript. A clean exit gives "".
func exitDetail(e *sdk.Exited) string {
	if e.State == nil || e.State.Success() {
		return ""
	}
	how := e.State.String() // "exit status 1", "signal: killed"
	text := "claude " + how
	var tail []string
	for _, l := range e.Stderr {
		if l = strings.TrimSpace(l); l != "" {
			tail = append(tail, l)
		}
	}
	if len(tail) > 0 {
		text += ": " + strings.Join(tail, "\n")
	} else {
		text += " (it wrote nothing on stderr)"
	}
	return text
}

// Events implements agent.Agent.
func (a *Agent) Events() <-chan agent.Event { return a.events }

// Prompt implements agent.Agent: a text prompt, with its files (inline
// data: URLs; the runner downloads blobs first) as content blocks of the
// user message: images (PNG, JPEG, GIF, WebP) as base64 image blocks, PDF
// as a base64 document block, text files as text blocks
// "<filename>:\n<content>", in the order given, then the prompt's text.
// Any other file is refused with agent.ErrUnsupportedInput.
func (a *Agent) Prompt(ctx context.Context, p agent.Prompt) error {
	if len(p.Files) == 0 {
		return a.client.SendUser(ctx, p.Text)
	}
	content, err := PromptContent(p)
	if err != nil {
		return err
	}
	return a.client.SendUserContent(ctx, content)
}

// PromptContent is the content array of the stream-json user message for
// a prompt with files (see Prompt).
func PromptContent(p agent.Prompt) (json.RawMessage, error) {
	blocks := []map[string]any{}
	for _, f := range p.Files {
		mime, data, ok := parseDataURL(f.URL)
		if !ok {
			return nil, fmt.Errorf("%w: claude: attachment %q: only inline data: URLs are sent", agent.ErrUnsupportedInput, f.Filename)
		}
		switch {
		case mime == "image/png" || mime == "image/jpeg" || mime == "image/gif" || mime == "image/webp":
			blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": mime, "data": data}})
		case mime == "application/pdf":
			blocks = append(blocks, map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": mime, "data": data}})
		case strings.HasPrefix(mime, "text/") || mime == "application/json":
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil || !utf8.Valid(b) {
				return nil, fmt.Errorf("%w: claude: attachment %q is not UTF-8 text", agent.ErrUnsupportedInput, f.Filename)
			}
			name := f.Filename
			if name == "" {
				name = "attachment"
			}
			blocks = append(blocks, map[string]any{"type": "text", "text": name + ":\n" + string(b)})
		default:
			return nil, fmt.Errorf("%w: claude takes images, PDF and text files, not %q (%s)", agent.ErrUnsupportedInput, f.Filename, mime)
		}
	}
	if p.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
	}
	return json.Marshal(blocks)
}

// parseDataURL splits data:<mime>;base64,<data>.
func parseDataURL(u string) (mime, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	head, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mime, isB64 := strings.CutSuffix(head, ";base64")
	return mime, data, isB64
}

// take removes the request callID waits on from the table and returns it;
// ErrUnknownCall when the call waits on none.
func (a *Agent) take(callID string) (*sdk.PermissionRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.waiting[callID]
	if !ok {
		return nil, fmt.Errorf("%w: %s (%w)", ErrUnknownCall, callID, agent.ErrStale)
	}
	delete(a.waiting, callID)
	return r, nil
}

// Decide implements agent.Agent. The runner records the decision on the
// tool part itself; the decoder is told the tool no longer waits before the
// answer is written, so the tool's result, which Claude can only send after
// reading it, is not taken for an answer given inside Claude.
func (a *Agent) Decide(ctx context.Context, callID string, d agent.Verdict) error {
	r, err := a.take(callID)
	if err != nil {
		return err
	}
	ans := sdk.Answer{Decision: d.Decision}
	if d.Decision == agent.DecisionReject && d.Reason != "" {
		ans.Message = "The user rejected this tool use (" + d.Reason + ")."
	}
	a.observe(&agent.ToolResolved{CallID: callID, Decision: d.Decision, Reason: d.Reason})
	return respondErr(a.client.Respond(ctx, r.RequestID, ans))
}

// observe tells the decoder about an answer happy gives Claude.
func (a *Agent) observe(ev agent.Event) {
	a.mu.Lock()
	a.dec.Observe(ev)
	a.mu.Unlock()
}

// AnswerQuestion implements agent.Agent.
func (a *Agent) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	a.mu.Lock()
	r := a.waiting[callID]
	a.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%w: %s (%w)", ErrUnknownCall, callID, agent.ErrStale)
	}
	updated, err := questionInput(r.Input, answers)
	if err != nil {
		return err
	}
	if r, err = a.take(callID); err != nil {
		return err // answered meanwhile: the first answer wins
	}
	a.observe(&agent.ToolResolved{CallID: callID, Answers: answers})
	return respondErr(a.client.Respond(ctx, r.RequestID, sdk.Answer{Decision: agent.DecisionOnce, UpdatedInput: updated}))
}

// respondErr marks an answer Claude no longer takes (the request was
// withdrawn or answered between the table and the wire) as agent.ErrStale.
func respondErr(err error) error {
	if errors.Is(err, sdk.ErrCancelled) || errors.Is(err, sdk.ErrAnswered) {
		return fmt.Errorf("%w (%w)", err, agent.ErrStale)
	}
	return err
}

// questionInput adds "answers": {question: "a, b"} to an AskUserQuestion input.
func questionInput(input json.RawMessage, answers [][]string) (json.RawMessage, error) {
	var in map[string]any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, fmt.Errorf("claude: question input: %w", err)
		}
	}
	if in == nil {
		in = map[string]any{}
	}
	var qs []struct {
		Question string `json:"question"`
	}
	if raw, ok := in["questions"]; ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &qs)
	}
	out := map[string]string{}
	for i, q := range qs {
		if i < len(answers) {
			out[q.Question] = strings.Join(answers[i], ", ")
		}
	}
	in["answers"] = out
	return json.Marshal(in)
}

// Interrupt implements agent.Agent.
func (a *Agent) Interrupt(ctx context.Context) error { return a.client.Interrupt(ctx) }

// Close implements agent.Agent: it ends the CLI and waits until the
// event pump has finished.
func (a *Agent) Close() error {
	go func() { // nobody may be reading Events any more
		for range a.events {
		}
	}()
	_, err := a.client.Close()
	<-a.done
	return err
}

// Pid is the CLI's process id.
func (a *Agent) Pid() int { return a.client.Pid() }
