// Package local runs Claude Code in local (interactive) mode as a
// agent.Agent: Claude's own terminal UI runs in a PTY that happy proxies
// (package ptyproxy), so the person at the keyboard works exactly as
// without happy, while happy follows the session and lets another device
// answer its permission prompts.
//
// Where the events come from:
//   - the session transcript (~/.claude/projects/<slug>/<session>.jsonl, and
//     <session>/subagents/agent-<id>.jsonl for subagents), tailed from the
//     path the SessionStart hook gives (package tail) and decoded by package
//     claude — prompts typed in the TUI, messages, tool calls and results;
//   - Claude's hooks, posted by `happy hook <event>` to a loopback endpoint
//     (package hooks): a PermissionRequest blocks the tool and waits for
//     Decide (the first answer wins: the hook, or the person in Claude's
//     dialog), Stop marks the end of a turn, SubagentStart links a
//     subagent's transcript to the Agent call that started it.
//
// A PermissionRequest reaches the decoder as the can_use_tool control
// request SDK mode would have sent for the same call (tool, input,
// suggestions, tool_use_id matched from the PreToolUse hook), so a tool
// blocked in local mode is described exactly as in remote mode. Before a
// hook is handled the transcript is read up to its end, so events come in
// the order Claude produced them.
//
// Prompts from other devices are not typed into the TUI (a dialog may be
// open, and keys would answer it): Prompt returns ErrPromptInLocalMode, and
// the caller hands the session to remote mode instead — Handoff stops
// Claude cleanly and returns the session id that remote mode resumes with
// --resume; coming back, Start with Options.Resume resumes it here.
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/happy-dev/happy/adapters/claude"
	"github.com/happy-dev/happy/adapters/claude/hooks"
	"github.com/happy-dev/happy/adapters/claude/perm"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/ptyproxy"
	"github.com/happy-dev/happy/internal/queue"
	"github.com/happy-dev/happy/internal/tail"
)

// Errors callers branch on.
var (
	// ErrPromptInLocalMode: a prompt from another device cannot be typed
	// into Claude's terminal UI; hand the session to remote mode.
	ErrPromptInLocalMode = errors.New("claude runs in local mode: prompts come from its terminal")
	// ErrUnknownCall: Decide or AnswerQuestion named a call that is not
	// waiting on a hook (never was, or answered already).
	ErrUnknownCall = errors.New("claude is not waiting on that tool call")
)

// SettingsFile is the name of the hook settings file written in
// Options.StateDir.
const SettingsFile = "claude-hooks.settings.json"

// Options configure Start.
type Options struct {
	// Binary is the claude executable; "claude" (looked up in PATH) when
	// empty.
	Binary string
	// Args are passed to Claude after happy's own (--settings, and
	// --session-id or --resume).
	Args []string
	// Env is Claude's environment; nil means this process's. The hook
	// endpoint's two variables are added.
	Env []string
	// Dir is Claude's working folder; "" means this process's.
	Dir string
	// HookCommand is the argv that runs `happy hook` (happy's absolute
	// path, "hook"); the event name is appended. Required.
	HookCommand []string
	// StateDir is happy's own folder for this session, where the hook
	// settings file is written. Required. The user's settings and
	// ~/.claude.json are never touched.
	StateDir string
	// SessionID starts a new Claude session with this id (--session-id).
	SessionID string
	// Resume resumes this Claude session (--resume). What its transcript
	// already holds was reported before (by an earlier local run, or by
	// remote mode), so it is followed from ResumeOffset.
	Resume string
	// ResumeOffset is where reading the resumed transcript starts: its
	// size when the previous mode ended (Handoff.Offset, or the file's size
	// after remote mode). Zero means the end of the file as found when the
	// SessionStart hook arrives (Claude writes nothing before the first
	// prompt). Line numbers in Dropped records count from there.
	ResumeOffset int64
	// In and Out are happy's terminal (os.Stdin, os.Stdout).
	In  *os.File
	Out io.Writer
	// Grace is the SIGTERM→SIGKILL delay when Claude is stopped.
	Grace time.Duration
	// Poll is the transcript tailer's fallback poll interval.
	Poll time.Duration
	// HoldInput holds the terminal's keys back until Claude's terminal UI
	// reads them (ptyproxy.Options.HoldInput): for a Claude started again
	// while the person may already be typing.
	HoldInput bool
	// Typeahead are keys typed for Claude before it started, given to it
	// first (ptyproxy.Options.Typeahead).
	Typeahead []byte
}

// Handoff is what a stopped local session hands to the next mode.
type Handoff struct {
	SessionID      string // Claude's session id (for --resume)
	TranscriptPath string // its transcript
	Offset         int64  // how far the transcript was read
}

// Agent is Claude Code in local mode.
type Agent struct {
	opts Options
	srv  *hooks.Server
	pty  *ptyproxy.Session
	q    *queue.Unbounded[agent.Event] // Events; closed once Claude has exited and the transcript was read

	mu         sync.Mutex // guards everything below, and the decoder
	dec        *claude.Decoder
	sessionID  string
	transcript string
	main       *follower
	subagents  map[string]*follower // agent id → its transcript's follower
	agentCalls []string             // Agent/Task calls of the main agent not yet linked to a subagent
	pending    map[string]*hooks.PermissionRequest
	result     ptyproxy.Result
	waitErr    error
}

var _ agent.Agent = (*Agent)(nil)

// follower tails one transcript file into the decoder.
type follower struct {
	t      *tail.Tailer
	cancel context.CancelFunc
	done   chan error
}

// Start writes the hook settings, starts the hook endpoint and Claude in a
// proxied PTY on the terminal, and begins following the session. Errors:
// missing HookCommand or StateDir, the settings file, the endpoint, or
// Claude cannot be started (the terminal is restored then).
func Start(ctx context.Context, opts Options) (*Agent, error) {
	if len(opts.HookCommand) == 0 || opts.StateDir == "" {
		return nil, errors.New("claude local mode: HookCommand and StateDir are required")
	}
	if opts.Out == nil {
		return nil, errors.New("claude local mode: no output")
	}
	if opts.Binary == "" {
		opts.Binary = "claude"
	}
	dec, err := claude.NewDecoder(claude.FormSessionJSONL, claude.Options{})
	if err != nil {
		return nil, err
	}
	if err := private.MkdirAll(opts.StateDir); err != nil {
		return nil, fmt.Errorf("claude local mode: state folder: %w", err)
	}
	settings := filepath.Join(opts.StateDir, SettingsFile)
	if err := hooks.WriteSettings(settings, hooks.SettingsOptions{Command: opts.HookCommand}); err != nil {
		return nil, fmt.Errorf("claude local mode: %w", err)
	}
	srv, err := hooks.NewServer(hooks.ServerOptions{})
	if err != nil {
		return nil, fmt.Errorf("claude local mode: %w", err)
	}
	args := []string{"--settings", settings}
	switch {
	case opts.Resume != "":
		args = append(args, "--resume", opts.Resume)
	case opts.SessionID != "":
		args = append(args, "--session-id", opts.SessionID)
	}
	cmd := exec.Command(opts.Binary, append(args, opts.Args...)...)
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clone(env), srv.Env()...)
	cmd.Dir = opts.Dir
	p, err := ptyproxy.Start(ctx, ptyproxy.Options{In: opts.In, Out: opts.Out, Cmd: cmd, Grace: opts.Grace,
		HoldInput: opts.HoldInput, Typeahead: opts.Typeahead})
	if err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("claude local mode: %w", err)
	}
	a := &Agent{
		opts:      opts,
		srv:       srv,
		pty:       p,
		dec:       dec,
		subagents: map[string]*follower{},
		pending:   map[string]*hooks.PermissionRequest{},
		q:         queue.New[agent.Event](),
	}
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		defer p.Guard()
		for ev := range srv.Events() {
			a.onHook(ev)
		}
	}()
	go a.finish(hooksDone)
	return a, nil
}

// Events implements agent.Agent: the session's events in order; closed
// when Claude has exited and its transcript was read to the end.
func (a *Agent) Events() <-chan agent.Event { return a.q.Out() }

// Done is closed when Claude has exited and every event was handed to
// Events (the last ones may still wait in its buffer), just before Events
// closes.
func (a *Agent) Done() <-chan struct{} { return a.q.Done() }

// SessionID is Claude's session id, once its SessionStart hook ran.
func (a *Agent) SessionID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessionID
}

// Result is how the PTY session ended (after Done).
func (a *Agent) Result() (ptyproxy.Result, error) {
	<-a.q.Done()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.result, a.waitErr
}

// Prompt implements agent.Agent: ErrPromptInLocalMode.
func (a *Agent) Prompt(context.Context, agent.Prompt) error { return ErrPromptInLocalMode }

// Decide implements agent.Agent: it answers the PermissionRequest hook of
// the call. agent.ErrStale (wrapped) when the hook is gone or answered.
func (a *Agent) Decide(ctx context.Context, callID string, d agent.Verdict) error {
	ans := perm.Answer{Decision: d.Decision}
	if d.Decision == agent.DecisionReject && d.Reason != "" {
		ans.Message = "The user rejected this tool use (" + d.Reason + ")."
	}
	return a.answer(callID, ans, &agent.ToolResolved{CallID: callID, Decision: d.Decision, Reason: d.Reason})
}

// AnswerQuestion implements agent.Agent: the AskUserQuestion call is
// allowed with its input plus "answers": {question: "label, label"}.
func (a *Agent) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	a.mu.Lock()
	p := a.pending[callID]
	a.mu.Unlock()
	if p == nil {
		return fmt.Errorf("answer %s: %w", callID, ErrUnknownCall)
	}
	in, err := questionInput(p.ToolInput, answers)
	if err != nil {
		return err
	}
	return a.answer(callID, perm.Answer{Decision: agent.DecisionOnce, UpdatedInput: in}, &agent.ToolResolved{CallID: callID, Answers: answers})
}

func (a *Agent) answer(callID string, ans perm.Answer, resolved *agent.ToolResolved) error {
	a.mu.Lock()
	p := a.pending[callID]
	a.mu.Unlock()
	if p == nil {
		return fmt.Errorf("answer %s: %w (%w)", callID, ErrUnknownCall, agent.ErrStale)
	}
	// The decoder lock is held from the answer until the decoder knows of
	// it, so the tool's result (Claude writes it only after reading the
	// answer) is never decoded in between and taken for an answer given in
	// Claude's own dialog. Answer never waits.
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := p.Answer(ans); err != nil {
		if errors.Is(err, hooks.ErrAnswered) || errors.Is(err, hooks.ErrHookGone) {
			return fmt.Errorf("answer %s: %w (%w)", callID, err, agent.ErrStale)
		}
		return err
	}
	delete(a.pending, callID)
	// The runner records the decision on the tool part itself; the decoder
	// only needs to know the tool is no longer waiting.
	a.dec.Observe(resolved)
	return nil
}

// Interrupt implements agent.Agent: a permission prompt still open is
// answered with an abort (deny and interrupt); otherwise Esc is typed,
// which stops Claude's running turn.
func (a *Agent) Interrupt(ctx context.Context) error {
	a.mu.Lock()
	var open []*hooks.PermissionRequest
	for id, p := range a.pending {
		open = append(open, p)
		delete(a.pending, id)
	}
	a.mu.Unlock()
	for _, p := range open {
		if p.Answer(perm.Answer{Abort: true}) == nil {
			return nil
		}
	}
	return a.pty.Type([]byte{0x1b})
}

// Close implements agent.Agent: it stops Claude (SIGTERM to its group,
// SIGKILL after the grace period) and waits until everything was reported.
// Events are discarded if nobody reads them any more.
func (a *Agent) Close() error {
	go func() {
		for range a.q.Out() {
		}
	}()
	_, err := a.Handoff(context.Background())
	return err
}

// Handoff stops Claude cleanly, reads its transcript to the end, and
// returns what the next mode needs to resume the same Claude session.
func (a *Agent) Handoff(ctx context.Context) (Handoff, error) {
	if err := a.pty.Stop(); err != nil {
		return Handoff{}, fmt.Errorf("stop claude: %w", err)
	}
	select {
	case <-a.q.Done():
	case <-ctx.Done():
		return Handoff{}, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h := Handoff{SessionID: a.sessionID, TranscriptPath: a.transcript}
	if a.main != nil {
		h.Offset, _ = a.main.t.Offset()
	}
	return h, a.waitErr
}

// onHook handles one hook call.
func (a *Agent) onHook(ev hooks.Event) {
	// Read what Claude wrote before it ran the hook.
	a.syncTranscripts(ev.Base().AgentID)
	switch e := ev.(type) {
	case *hooks.SessionStart:
		a.sessionStarted(e)
	case *hooks.PreToolUse:
		if e.AgentID == "" && (e.ToolName == "Agent" || e.ToolName == "Task") && e.ToolUseID != "" {
			a.mu.Lock()
			a.agentCalls = append(a.agentCalls, e.ToolUseID)
			a.mu.Unlock()
		}
	case *hooks.PermissionRequest:
		a.permissionRequest(e)
	case *hooks.PermissionSettled:
		a.mu.Lock()
		// Answered in Claude's dialog (or the turn ended): the transcript
		// tells what happened; the decoder settles the tool from it.
		if id := e.Request.ToolUseID; id != "" && a.pending[id] == e.Request {
			delete(a.pending, id)
		}
		a.mu.Unlock()
	case *hooks.Stop:
		a.mu.Lock()
		a.emit(a.dec.Idle()...)
		a.mu.Unlock()
	case *hooks.SubagentStart:
		a.subagentStarted(e)
	case *hooks.SubagentStop:
		a.mu.Lock()
		f := a.subagents[e.AgentID]
		delete(a.subagents, e.AgentID)
		a.mu.Unlock()
		if f != nil {
			a.stopAndReport(f)
		}
	case *hooks.Invalid:
		a.mu.Lock()
		a.emit(&agent.DroppedInput{Dropped: agent.Dropped{Source: "claude-hooks", Kind: e.Event,
			Reason: agent.DropInvalidField, Detail: e.Reason, Raw: string(linereader.Prefix(e.Prefix, linereader.PrefixSize))}})
		a.mu.Unlock()
	}
}

func (a *Agent) sessionStarted(e *hooks.SessionStart) {
	a.mu.Lock()
	a.sessionID = e.SessionID
	same := e.TranscriptPath == a.transcript
	old := a.main
	a.mu.Unlock()
	if same || e.TranscriptPath == "" {
		return
	}
	if old != nil {
		a.stopAndReport(old) // /clear: a new transcript follows
	}
	offset := int64(0)
	if a.opts.Resume != "" && old == nil {
		// Resumed: what the file holds was reported before.
		offset = a.opts.ResumeOffset
		if offset == 0 {
			offset = completeLinesEnd(e.TranscriptPath)
		}
	}
	f, err := a.follow(e.TranscriptPath, offset, 0)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.transcript = e.TranscriptPath
	if err != nil {
		a.emit(&agent.DroppedInput{Dropped: agent.Dropped{Source: claude.SourceSessionJSONL, Kind: "transcript",
			Reason: agent.DropInvalidField, Detail: err.Error()}})
		return
	}
	a.main = f
	a.emit(&agent.SessionInfo{ProviderSessionID: e.SessionID, ProviderID: claude.ProviderID, ModelID: e.Model, Cwd: e.Cwd})
}

func (a *Agent) subagentStarted(e *hooks.SubagentStart) {
	a.mu.Lock()
	transcript := a.transcript
	a.mu.Unlock()
	if transcript == "" || e.AgentID == "" {
		return
	}
	dir := filepath.Join(strings.TrimSuffix(transcript, ".jsonl"), "subagents")
	callID := toolUseIDFromMeta(filepath.Join(dir, "agent-"+e.AgentID+".meta.json"))
	a.mu.Lock()
	if callID == "" && len(a.agentCalls) > 0 {
		callID = a.agentCalls[0]
	}
	if i := slices.Index(a.agentCalls, callID); i >= 0 {
		a.agentCalls = slices.Delete(a.agentCalls, i, i+1)
	}
	if callID != "" {
		a.dec.AttachSubagent(e.AgentID, callID)
	}
	a.mu.Unlock()
	f, err := a.follow(filepath.Join(dir, "agent-"+e.AgentID+".jsonl"), 0, 0)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.subagents[e.AgentID] = f
	a.mu.Unlock()
}

// permissionRequest blocks the matched call through the decoder, as the
// can_use_tool request of SDK mode would.
// callWait bounds how long a PermissionRequest hook waits for Claude's
// transcript to show the call it names.
const callWait = 3 * time.Second

func (a *Agent) permissionRequest(p *hooks.PermissionRequest) {
	// Claude writes its transcript in batches: the hook may come before the
	// prompt and the call's tool_use are on disk. Decoding the request
	// first would open the call in a turn of its own, which the prompt's
	// line then ends as aborted. Claude waits for the hook's answer, and
	// writes the lines meanwhile: read them first.
	if p.ToolUseID != "" {
		deadline := time.Now().Add(callWait)
		for {
			a.mu.Lock()
			known := a.dec.Knows(p.ToolUseID)
			a.mu.Unlock()
			if known || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
			a.syncTranscripts(p.AgentID)
		}
	}
	type canUseTool struct {
		Subtype     string          `json:"subtype"`
		ToolName    string          `json:"tool_name"`
		Input       json.RawMessage `json:"input"`
		Suggestions json.RawMessage `json:"permission_suggestions,omitempty"`
		ToolUseID   string          `json:"tool_use_id,omitempty"`
		AgentID     string          `json:"agent_id,omitempty"`
	}
	rec, err := json.Marshal(struct {
		Type      string     `json:"type"`
		RequestID string     `json:"request_id"`
		Request   canUseTool `json:"request"`
	}{"control_request", "hook-" + p.ID, canUseTool{"can_use_tool", p.ToolName, p.ToolInput, nullToNil(p.Suggestions), p.ToolUseID, p.AgentID}})
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	evs := a.dec.Decode(rec, 0)
	callID := p.ToolUseID
	for _, ev := range evs {
		if b, ok := ev.(*agent.ToolBlocked); ok {
			callID = b.CallID
		}
	}
	// No call: the decoder reported why (a Dropped record), and the dialog
	// in Claude's UI decides.
	if callID != "" {
		a.pending[callID] = p
	}
	a.emit(evs...)
}

// follow starts tailing a transcript into the decoder.
func (a *Agent) follow(path string, offset, lineNo int64) (*follower, error) {
	onReset := func(r tail.Reset) {
		// The file was replaced or cut mid-record: that record is lost.
		if r.PendingSize > 0 {
			a.mu.Lock()
			a.emit(a.dec.Incomplete(r.Pending, r.PendingSize, r.LineNo+1)...)
			a.mu.Unlock()
		}
	}
	t, err := tail.New(path, tail.Options{Offset: offset, LineNo: lineNo, Poll: a.opts.Poll, OnReset: onReset})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{t: t, cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer a.pty.Guard()
		f.done <- t.Run(ctx, func(l linereader.Line) error {
			a.mu.Lock()
			a.emit(a.dec.DecodeLine(l)...)
			a.mu.Unlock()
			return nil
		})
	}()
	return f, nil
}

// stop reads the file to its end and stops following it. It returns the
// start of a last line that never got its newline, and its length.
func (f *follower) stop() ([]byte, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f.t.Sync(ctx)
	f.cancel()
	<-f.done
	return f.t.Leftover()
}

// stopAndReport stops a follower and reports a record cut short (Claude
// stopped in the middle of writing it).
func (a *Agent) stopAndReport(f *follower) {
	b, n := f.stop()
	if n > 0 {
		_, lineNo := f.t.Offset()
		a.mu.Lock()
		a.emit(a.dec.Incomplete(b, n, lineNo+1)...)
		a.mu.Unlock()
	}
}

// syncTranscripts reads the transcripts written so far (the main one, and
// the subagent's when a subagent ran the hook).
func (a *Agent) syncTranscripts(agentID string) {
	a.mu.Lock()
	fs := []*follower{a.main}
	if agentID != "" {
		fs = append(fs, a.subagents[agentID])
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, f := range fs {
		if f != nil {
			_ = f.t.Sync(ctx)
		}
	}
}

// finish waits for Claude to exit, then reads the transcripts to the end,
// ends the decoder's stream and closes Events.
func (a *Agent) finish(hooksDone chan struct{}) {
	res, err := a.pty.Wait()
	_ = a.srv.Close()
	<-hooksDone
	a.mu.Lock()
	fs := []*follower{a.main}
	for _, f := range a.subagents {
		fs = append(fs, f)
	}
	a.subagents = map[string]*follower{}
	a.mu.Unlock()
	for _, f := range fs {
		if f != nil {
			a.stopAndReport(f)
		}
	}
	end := claude.EndOfStream{Exited: true}
	if res.State != nil {
		if ws, ok := res.State.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			end.Signal = ws.Signal().String()
		} else {
			code := res.State.ExitCode()
			end.Code = &code
		}
	}
	a.mu.Lock()
	a.emit(a.dec.Finish(end)...)
	a.result, a.waitErr = res, err
	a.pending = map[string]*hooks.PermissionRequest{}
	a.q.Close()
	a.mu.Unlock()
}

// emit queues events (after finish, nothing more: they are dropped); the
// caller holds a.mu, so events are queued in the order the decoder made
// them.
func (a *Agent) emit(evs ...agent.Event) { a.q.Push(evs...) }

// completeLinesEnd returns the size of path up to its last complete line (0
// when it does not exist), reading only its last bytes.
func completeLinesEnd(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	buf := make([]byte, 64<<10)
	for end := fi.Size(); end > 0; {
		start := max(0, end-int64(len(buf)))
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && n < int(end-start) {
			return 0
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1
		}
		end = start
	}
	return 0
}

// toolUseIDFromMeta reads the Agent call id from a subagent's
// agent-<id>.meta.json ({"toolUseId": …}); "" when unavailable.
func toolUseIDFromMeta(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var m struct {
		ToolUseID string `json:"toolUseId"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.ToolUseID
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return raw
}

// questionInput adds "answers": {question: "a, b"} to an AskUserQuestion
// input, the form Claude Code's AskUserQuestion tool reads a choice in.
func questionInput(input json.RawMessage, answers [][]string) (json.RawMessage, error) {
	var in map[string]any
	if err := json.Unmarshal(input, &in); err != nil || in == nil {
		return nil, fmt.Errorf("question input is not a JSON object: %w", err)
	}
	var qs struct {
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(input, &qs); err != nil {
		return nil, fmt.Errorf("question input: %w", err)
	}
	if len(answers) != len(qs.Questions) {
		return nil, fmt.Errorf("%d answers for %d questions", len(answers), len(qs.Questions))
	}
	out := map[string]string{}
	for i, q := range qs.Questions {
		out[q.Question] = strings.Join(answers[i], ", ")
	}
	in["answers"] = out
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("question input: %w", err)
	}
	return b, nil
}
