// Package compat writes what the reference mobile app reads next to happy's
// canonical records (docs/ARCHITECTURE.md, section "The reference app"): the
// legacy message envelopes (seed 000's flat events as the app spells them)
// and the session's agentState (pending and answered permission requests and
// questions). It is fed by the reducer's changes, like session.Sink, and
// never changes the canonical transcript.
//
// One legacy record is written per event, never per record version: a user
// prompt, a finished text or reasoning part, a tool call's start and its one
// result, a turn's start and end. Each has a stable id derived from the
// canonical ids, and its outbox record is "legacy:<id>" with version 1, so a
// version re-sent after a crash has the same localId (the relay keeps one
// row per localId) and the same envelope id (the app keeps the first message
// per id).
package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session/refimport"
)

// RecordPrefix starts the outbox record id of every legacy record:
// "legacy:<envelope id>".
const RecordPrefix = "legacy:"

// MaxOutputBytes is the largest tool output (or error) a legacy tool result
// carries; longer ones are cut on a UTF-8 boundary (the canonical part keeps
// its own copy, see session.MaxPartBytes).
const MaxOutputBytes = 256 << 10

// Store persists legacy records; *relay.Session implements it. Enqueue is
// session.RecordStore's; LastVersion is the last version ever enqueued for a
// record (0 when none, kept across restarts), so a record already written
// is not written again.
type Store interface {
	Enqueue(ctx context.Context, record string, build func(version int64) ([]byte, error)) (int64, error)
	LastVersion(record string) int64
}

// Updater computes the agentState to write from the one the relay holds
// (plaintext JSON, nil when null); relay.Updater has this shape.
type Updater = func(current json.RawMessage) (json.RawMessage, error)

// Options configure a Writer.
type Options struct {
	// Store receives the legacy records. Required.
	Store Store
	// RootID is the canonical root session id: only its messages become
	// legacy envelopes (a subagent's are not shown; its blocked tools are
	// still in the agentState).
	RootID string
	// Flavor is the agent ("claude", "codex", "gemini", "opencode",
	// "claude-acp", …); it picks the provider of the ACP tool results.
	Flavor string
	// UpdateState writes the agentState with the relay's compare-and-set
	// (relay.Session.UpdateAgentState, which retries fn on the relay's
	// newer value). Nil writes no agentState.
	UpdateState func(ctx context.Context, fn Updater) error
	// Now is the clock (time.Now when nil): the time of turn envelopes and
	// of a request's createdAt.
	Now func() time.Time
	// Log receives diagnostics.
	Log zerolog.Logger
	// RetryAfter is the wait before a failed agentState write is tried
	// again (2 s when 0).
	RetryAfter time.Duration
}

// Writer turns bus events into legacy records and agentState. Observe,
// Pending and Flush run on the runner goroutine (the sink calls them, see
// session.Sink.SetCompanion); ExpectEcho may be called from any goroutine.
// The agentState is written by a background goroutine, coalesced, so the
// runner never waits for the relay; Close writes its last value.
type Writer struct {
	opts     Options
	provider string

	queue   []record
	emitted map[string]bool // envelope ids queued or written

	users    map[string]int64 // root user message id → created
	lastUser string           // the last root user message id
	pendUser *mapper.TextPart // a user text waiting to be final (turn start, next event)
	turn     string           // the open turn's id, "" when none
	turns    map[string]bool  // turn ids used
	busy     bool
	outcome  string // turn-end status of the turn so far
	started  map[string]bool
	ended    map[string]bool

	echoMu sync.Mutex
	echoes map[string]int // prompt texts the app wrote itself, not to echo

	state *stateWriter
}

// record is one legacy record waiting to be enqueued.
type record struct {
	id   string // envelope id
	body []byte
}

// New returns a writer; with opts.UpdateState set it starts the agentState
// writer, which Close stops.
func New(opts Options) *Writer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 2 * time.Second
	}
	w := &Writer{opts: opts, provider: Provider(opts.Flavor), emitted: map[string]bool{},
		users: map[string]int64{}, turns: map[string]bool{}, started: map[string]bool{}, ended: map[string]bool{},
		echoes: map[string]int{}, outcome: TurnCompleted}
	if opts.UpdateState != nil {
		w.state = startStateWriter(opts)
	}
	return w
}

// Provider is the ACP provider the reference app accepts for a flavor:
// "claude", "codex", "gemini" or "opencode" (the app's enum); an agent it
// does not know is shown as "claude".
func Provider(flavor string) string {
	f := strings.ToLower(flavor)
	for _, p := range []string{"codex", "gemini", "opencode", "claude"} {
		if strings.Contains(f, p) {
			return p
		}
	}
	return "claude"
}

// ExpectEcho tells the writer that a prompt with this text came from the
// reference app as a legacy record: the app shows it already, so the user
// message the runner records for it is not echoed. Safe for concurrent use.
func (w *Writer) ExpectEcho(text string) {
	w.echoMu.Lock()
	w.echoes[text]++
	w.echoMu.Unlock()
}

func (w *Writer) isEcho(text string) bool {
	w.echoMu.Lock()
	defer w.echoMu.Unlock()
	if w.echoes[text] > 0 {
		w.echoes[text]--
		if w.echoes[text] == 0 {
			delete(w.echoes, text)
		}
		return true
	}
	return false
}

// Turn-end statuses (the app's enum).
const (
	TurnCompleted = "completed"
	TurnFailed    = "failed"
	TurnCancelled = "cancelled"
)

// Observe takes the changes of one reducer step.
func (w *Writer) Observe(events []mapper.BusEvent) {
	for _, ev := range events {
		switch e := ev.(type) {
		case *mapper.MessageUpdated:
			w.message(e.Info)
		case *mapper.MessagePartUpdated:
			w.part(e.Part)
		case *mapper.SessionStatus:
			if e.SessionID != w.opts.RootID {
				continue
			}
			switch e.Status.Type {
			case mapper.SessionBusy:
				w.busy = true
				if w.pendUser != nil {
					w.ensureTurn("")
				}
			case mapper.SessionIdle:
				if w.busy && w.turn == "" {
					w.ensureTurn("") // a turn with nothing to show still starts and ends
				}
				w.busy = false
				w.flushUser()
				if w.turn != "" {
					w.closeTurn()
				}
			}
		}
	}
	if w.state != nil {
		w.state.observe(events, w.opts.Now())
	}
}

func (w *Writer) message(info mapper.Message) {
	switch m := info.(type) {
	case *mapper.UserMessage:
		if m.SessionID != w.opts.RootID {
			return
		}
		if _, seen := w.users[m.ID]; !seen {
			w.flushUser()
			w.users[m.ID] = m.Time.Created
			w.lastUser = m.ID
		}
	case *mapper.AssistantMessage:
		if m.SessionID != w.opts.RootID || m.Time.Completed == nil {
			return
		}
		switch {
		case m.Finish == agent.FinishAborted:
			w.outcome = TurnCancelled
		case m.Error != nil || m.Finish == agent.FinishError:
			w.outcome = TurnFailed
		default:
			w.outcome = TurnCompleted
		}
	}
}

func (w *Writer) part(p mapper.Part) {
	base := p.Base()
	if base.SessionID != w.opts.RootID {
		return
	}
	if _, user := w.users[base.MessageID]; user {
		if tp, ok := p.(*mapper.TextPart); ok && !tp.Synthetic && strings.TrimSpace(tp.Text) != "" && !w.emitted[tp.ID] {
			if w.pendUser != nil && w.pendUser.ID != tp.ID {
				w.flushUser()
			}
			w.pendUser = tp
		}
		return
	}
	switch pt := p.(type) {
	case *mapper.TextPart:
		if pt.Synthetic || pt.Time == nil || pt.Time.End == nil || strings.TrimSpace(pt.Text) == "" || w.emitted[pt.ID] {
			return
		}
		turn := w.ensureTurn(pt.MessageID)
		w.session(pt.ID, w.at(*pt.Time.End), "agent", turn, map[string]any{"t": "text", "text": pt.Text})
	case *mapper.ReasoningPart:
		if pt.Time.End == nil || strings.TrimSpace(pt.Text) == "" || w.emitted[pt.ID] {
			return
		}
		turn := w.ensureTurn(pt.MessageID)
		w.session(pt.ID, w.at(*pt.Time.End), "agent", turn, map[string]any{"t": "text", "text": pt.Text, "thinking": true})
	case *mapper.ToolPart:
		w.tool(pt)
	}
}

// tool writes a tool call's start once it left pending (its input is
// known then), and its one result once it ended.
func (w *Writer) tool(tp *mapper.ToolPart) {
	st := tp.State
	if st.Status == mapper.StatusPending {
		return
	}
	if !w.started[tp.ID] {
		w.started[tp.ID] = true
		turn := w.ensureTurn(tp.MessageID)
		name, args := NativeTool(tp, w.opts.Flavor)
		title := st.Title
		if title == "" {
			title = name
		}
		desc, _ := tp.State.Input["description"].(string)
		w.session(tp.ID, w.at(st.Time.Start), "agent", turn, map[string]any{"t": "tool-call-start", "call": tp.CallID, "name": name,
			"title": title, "description": desc, "args": args})
	}
	if st.Status.Open() || w.ended[tp.ID] {
		return
	}
	w.ended[tp.ID] = true
	w.flushUser()
	out, isErr := st.Output, false
	if st.Status == mapper.StatusError {
		out, isErr = st.Error, true
	}
	id := tp.ID + ":result"
	w.add(id, map[string]any{"role": "agent", "content": map[string]any{"type": "acp", "provider": w.provider,
		"data": map[string]any{"type": "tool-result", "callId": tp.CallID, "output": agent.CutUTF8(out, MaxOutputBytes), "id": id, "isError": isErr}}})
}

// NativeTool is the tool name and arguments the reference app's renderers
// know, which are Claude's (Bash, Read, Edit, …): for a Claude agent its own
// name (metadata.providerTool) and input (metadata.providerInput when the
// canonical input is not Claude's); for every other agent the Claude tool of
// the canonical name, with the canonical input spelled as Claude's
// (refimport.ClaudeTools); an MCP tool as mcp__<server>__<tool>; anything else under
// the agent's own name and input. Arguments are always an object.
func NativeTool(tp *mapper.ToolPart, flavor string) (string, map[string]any) {
	in := map[string]any(tp.State.Input)
	if in == nil {
		in = map[string]any{}
	}
	ptool, _ := tp.Metadata[agent.MetaProviderTool].(string)
	pin, _ := tp.Metadata[agent.MetaProviderInput].(agent.Object)
	if raw, ok := tp.Metadata[agent.MetaProviderInput].(json.RawMessage); ok {
		// An adapter may keep the agent's input as its JSON text (the ACP
		// decoder does: docs/ARCHITECTURE.md, "Mapping and
		// delivery"); the transcript encodes it the same either way.
		pin, _ = jsonlex.DecodeObject(raw)
	}
	if strings.Contains(strings.ToLower(flavor), "claude") && ptool != "" {
		if pin != nil {
			return ptool, pin
		}
		return ptool, in
	}
	if ct, ok := refimport.ClaudeTools[tp.Tool]; ok {
		out := map[string]any{}
		for k, v := range in {
			if ck, ok := ct.Keys[k]; ok {
				k = ck
			}
			out[k] = v
		}
		return ct.Name, out
	}
	if server, tool, ok := strings.Cut(strings.TrimPrefix(tp.Tool, "mcp:"), "/"); ok && strings.HasPrefix(tp.Tool, "mcp:") {
		return "mcp__" + server + "__" + tool, in
	}
	name := tp.Tool
	if ptool != "" {
		name = ptool
	}
	if pin != nil {
		return name, pin
	}
	return name, in
}

// ensureTurn opens a turn when none is open and returns its id: the prompt
// that started it, or (an agent that speaks without a prompt) the id of the
// message that needs it.
func (w *Writer) ensureTurn(fallback string) string {
	if w.turn != "" {
		w.flushUser()
		return w.turn
	}
	id := ""
	if w.lastUser != "" && !w.turns[w.lastUser] {
		id = w.lastUser
	} else if fallback != "" && !w.turns[fallback] {
		id = fallback
	} else {
		id = fmt.Sprintf("turn-%d", len(w.turns)+1)
	}
	w.flushUser()
	w.turns[id], w.turn, w.outcome = true, id, TurnCompleted
	w.session(id+":turn-start", w.opts.Now().UnixMilli(), "agent", id, map[string]any{"t": "turn-start"})
	return id
}

func (w *Writer) closeTurn() {
	id := w.turn
	w.turn = ""
	w.session(id+":turn-end", w.opts.Now().UnixMilli(), "agent", id, map[string]any{"t": "turn-end", "status": w.outcome})
}

// flushUser writes the user text waiting, unless the app wrote it itself.
func (w *Writer) flushUser() {
	tp := w.pendUser
	if tp == nil {
		return
	}
	w.pendUser = nil
	if w.isEcho(tp.Text) {
		w.emitted[tp.ID] = true
		return
	}
	w.session(tp.ID, w.at(w.users[tp.MessageID]), "user", "", map[string]any{"t": "text", "text": tp.Text})
}

// at is t (Unix ms), or now when the agent gave no time.
func (w *Writer) at(t int64) int64 {
	if t > 0 {
		return t
	}
	return w.opts.Now().UnixMilli()
}

// session queues a session-protocol envelope:
// {"role":"session","content":{"id","time","role","turn"?,"ev"}}.
func (w *Writer) session(id string, at int64, role, turn string, ev map[string]any) {
	env := map[string]any{"id": id, "time": at, "role": role, "ev": ev}
	if turn != "" {
		env["turn"] = turn
	}
	w.add(id, map[string]any{"role": "session", "content": env})
}

func (w *Writer) add(id string, v any) {
	if w.emitted[id] {
		return
	}
	w.emitted[id] = true
	b, err := json.Marshal(v)
	if err != nil { // only maps of JSON values: cannot fail
		w.opts.Log.Warn().Err(err).Str("id", id).Msg("legacy record not encoded")
		return
	}
	w.queue = append(w.queue, record{id: id, body: b})
}

// Pending reports whether legacy records wait to be written.
func (w *Writer) Pending() bool { return len(w.queue) > 0 }

// Flush enqueues the legacy records waiting, in order; one the store has
// already (a version re-sent after a restart) is skipped. On error the
// record that failed and those after it stay queued.
func (w *Writer) Flush(ctx context.Context) error {
	for i, r := range w.queue {
		rec := RecordPrefix + r.id
		if w.opts.Store.LastVersion(rec) > 0 {
			continue
		}
		body := r.body
		if _, err := w.opts.Store.Enqueue(ctx, rec, func(int64) ([]byte, error) { return body, nil }); err != nil {
			w.queue = w.queue[i:]
			return fmt.Errorf("compat: write %s: %w", rec, err)
		}
	}
	w.queue = w.queue[:0]
	return nil
}

// Close ends the open turn's bookkeeping, stops the agentState writer and
// writes its last value, bounded by ctx. Records still queued are the
// sink's to flush (call Flush after Close).
func (w *Writer) Close(ctx context.Context) error {
	w.flushUser()
	if w.state == nil {
		return nil
	}
	return w.state.close(ctx)
}
