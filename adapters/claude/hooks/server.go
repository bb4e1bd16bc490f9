package hooks

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/claude/perm"
	"github.com/happy-dev/happy/internal/queue"
)

// Environment variables that carry the endpoint to `happy hook`.
const (
	EnvURL    = "HAPPY_HOOK_URL"    // http://127.0.0.1:<port>
	EnvSecret = "HAPPY_HOOK_SECRET" // hex, 32 random bytes
)

// DefaultMaxBody bounds a hook payload (a PostToolUse carries the tool's
// output) when ServerOptions.MaxBody is zero.
const DefaultMaxBody = 64 << 20

// Errors of PermissionRequest.Answer.
var (
	// ErrAnswered: someone answered first (the first answer wins).
	ErrAnswered = errors.New("permission request already answered")
	// ErrHookGone: the hook went away before an answer: the person
	// answered in Claude's own dialog, or the turn ended.
	ErrHookGone = errors.New("permission hook no longer waiting")
)

// Outcome says how a PermissionRequest was settled.
type Outcome string

// Outcomes.
const (
	OutcomeAnswered   Outcome = "answered"    // our answer reached the hook
	OutcomeAnswerLost Outcome = "answer-lost" // we answered, but the hook was gone before it could be written
	OutcomeHookGone   Outcome = "hook-gone"   // Claude cancelled the hook first (answered in its dialog, or the turn ended)
	OutcomeClosed     Outcome = "closed"      // the server closed; the hook got no decision (Claude's dialog decides)
)

// PermissionRequest: Claude is about to show its permission dialog for a
// tool. The runner answers with Answer; the hook waits for it.
type PermissionRequest struct {
	Common
	ToolName    string          `json:"tool_name"`
	ToolInput   json.RawMessage `json:"tool_input"`
	Suggestions json.RawMessage `json:"permission_suggestions"`
	// ToolUseID is the id of the PreToolUse this request was matched to
	// (same tool, input and agent; FIFO among identical ones); "" when none
	// matched.
	ToolUseID string `json:"-"`
	// ID is the server's own id for the request ("perm-<n>").
	ID string `json:"-"`

	mu       sync.Mutex
	answer   chan perm.Verdict // buffered 1; receives the first answer
	answered bool              // Answer succeeded once
	state    Outcome           // "" while open
	done     chan struct{}
	settled  func(*PermissionRequest)
}

// Answer answers the request: the verdict is written as the hook's output.
// The first answer wins. Errors: ErrAnswered, ErrHookGone, or the
// validation errors of perm.Answer.Verdict (nothing is sent then).
func (p *PermissionRequest) Answer(a perm.Answer) error {
	v, err := a.Verdict()
	if err != nil {
		return fmt.Errorf("answer permission request %s: %w", p.ID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.answer == nil:
		return fmt.Errorf("answer permission request %s: not from a server", p.ID)
	case p.answered:
		return fmt.Errorf("answer permission request %s: %w", p.ID, ErrAnswered)
	case p.state != "":
		return fmt.Errorf("answer permission request %s: %w", p.ID, ErrHookGone)
	}
	p.answered = true
	p.answer <- v
	return nil
}

// Done is closed once the request is settled (see Outcome).
func (p *PermissionRequest) Done() <-chan struct{} { return p.done }

// Outcome is how the request was settled; "" while it is open.
func (p *PermissionRequest) Outcome() Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

func (p *PermissionRequest) settle(o Outcome) { p.settleAs(o, false) }

// settleUnanswered settles a request the hook can no longer take an answer
// for; an answer given at that same moment is reported lost.
func (p *PermissionRequest) settleUnanswered(o Outcome) { p.settleAs(o, true) }

func (p *PermissionRequest) settleAs(o Outcome, unanswered bool) {
	p.mu.Lock()
	if p.state != "" {
		p.mu.Unlock()
		return
	}
	if unanswered && p.answered {
		o = OutcomeAnswerLost
	}
	p.state = o
	p.mu.Unlock()
	close(p.done)
	if p.settled != nil {
		p.settled(p)
	}
}

// PermissionSettled is delivered by the Server after a PermissionRequest
// settled, with how.
type PermissionSettled struct {
	Request *PermissionRequest
	Outcome Outcome
}

// Invalid is delivered by the Server for a hook call it refused (the hook
// got HTTP 400): the event name as called, why, and the start of the body.
type Invalid struct {
	Event  string
	Reason string
	Prefix []byte
}

// Base implements Event (no payload fields).
func (*PermissionSettled) Base() *Common { return &Common{} }

// Base implements Event (no payload fields).
func (*Invalid) Base() *Common { return &Common{} }

func (*PermissionSettled) isEvent() {}
func (*Invalid) isEvent()           {}

// ServerOptions configure NewServer.
type ServerOptions struct {
	// Addr is the listen address; "127.0.0.1:0" when empty. It must be a
	// loopback address.
	Addr string
	// MaxBody bounds a payload in bytes; DefaultMaxBody when zero.
	MaxBody int64
}

// Server is the loopback endpoint the hook commands post to.
type Server struct {
	ln      net.Listener
	srv     *http.Server
	secret  string
	maxBody int64

	mu         sync.Mutex
	sessionID  string
	transcript string
	pending    []pendingTool // PreToolUse calls not yet matched or finished, in arrival order
	nextPerm   int
	open       map[*PermissionRequest]struct{}
	closed     bool
	rejected   int // calls refused for a wrong secret

	q       *queue.Unbounded[Event] // Events: never blocks a hook's handler
	closing chan struct{}
	served  chan struct{}
}

type pendingTool struct {
	id, key string
}

// NewServer listens on a loopback port with a fresh random secret and
// starts serving. Errors: the address is not loopback, or it cannot listen.
func NewServer(opts ServerOptions) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("hook server address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("hook server address %q: not a loopback address", addr)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("hook server secret: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hook server listen on %s: %w", addr, err)
	}
	s := &Server{
		ln:      ln,
		secret:  hex.EncodeToString(key[:]),
		maxBody: opts.MaxBody,
		open:    map[*PermissionRequest]struct{}{},
		q:       queue.New[Event](),
		closing: make(chan struct{}),
		served:  make(chan struct{}),
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{event}", s.handle)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the endpoint's base URL (http://127.0.0.1:<port>).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Secret is the per-session secret the hook command must present.
func (s *Server) Secret() string { return s.secret }

// Env returns the two variables to add to Claude's environment so that its
// hook commands reach this server.
func (s *Server) Env() []string {
	return []string{EnvURL + "=" + s.URL(), EnvSecret + "=" + s.secret}
}

// Session returns what the SessionStart hook said: Claude's session id and
// the path of its transcript JSONL ("" before it fired).
func (s *Server) Session() (id, transcriptPath string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID, s.transcript
}

// Rejected is the number of calls refused for a missing or wrong secret.
func (s *Server) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// Events delivers the hook calls in the order they arrived; after Close it
// delivers what was still queued (the settlements of the permission
// requests Close ended included) and is closed. Events are queued without
// bound, so hooks are never held up by a slow reader; read until the
// channel closes.
func (s *Server) Events() <-chan Event { return s.q.Out() }

// Close stops the server. Permission requests still waiting get no
// decision (Claude's own dialog decides) and settle as OutcomeClosed.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	open := make([]*PermissionRequest, 0, len(s.open))
	for p := range s.open {
		open = append(open, p)
	}
	s.mu.Unlock()
	close(s.closing)
	for _, p := range open {
		<-p.Done()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.served
	s.q.Close() // no handler runs any more: nothing else is pushed
	if err != nil {
		return fmt.Errorf("close hook server: %w", err)
	}
	return nil
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	name := r.PathValue("event")
	body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
	if err != nil {
		s.refuse(w, name, "read payload: "+err.Error(), body)
		return
	}
	if int64(len(body)) > s.maxBody {
		s.refuse(w, name, "payload larger than "+strconv.FormatInt(s.maxBody, 10)+" bytes", body)
		return
	}
	ev, err := Parse(name, body)
	if err != nil {
		s.refuse(w, name, err.Error(), body)
		return
	}
	if p, ok := ev.(*PermissionRequest); ok {
		s.permission(w, r, p)
		return
	}
	s.track(ev)
	s.push(ev)
	w.WriteHeader(http.StatusOK) // no decision: Claude carries on as it would
}

func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.secret)) == 1
}

func (s *Server) refuse(w http.ResponseWriter, name, reason string, body []byte) {
	prefix := body
	if len(prefix) > 256 {
		prefix = prefix[:256]
	}
	s.push(&Invalid{Event: name, Reason: reason, Prefix: append([]byte(nil), prefix...)})
	http.Error(w, reason, http.StatusBadRequest)
}

// track keeps the state the events imply: the session, and the PreToolUse
// calls a PermissionRequest can match.
func (s *Server) track(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e := ev.(type) {
	case *SessionStart:
		s.sessionID, s.transcript = e.SessionID, e.TranscriptPath
	case *PreToolUse:
		if key, err := toolKey(e.AgentID, e.ToolName, e.ToolInput); err == nil {
			s.pending = append(s.pending, pendingTool{id: e.ToolUseID, key: key})
		}
	case *PostToolUse:
		s.forget(e.ToolUseID)
	case *PostToolUseFailure:
		s.forget(e.ToolUseID)
	case *Stop:
		s.forgetAgent(e.AgentID)
	case *SubagentStop:
		s.forgetAgent(e.AgentID)
	case *SessionEnd:
		s.pending = nil
	}
}

func (s *Server) forget(id string) {
	for i, p := range s.pending {
		if p.id == id {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return
		}
	}
}

// forgetAgent drops the pending calls of one agent ("" is the main one): its
// turn is over.
func (s *Server) forgetAgent(agent string) {
	prefix := agent + "\x00"
	kept := s.pending[:0]
	for _, p := range s.pending {
		if !strings.HasPrefix(p.key, prefix) {
			kept = append(kept, p)
		}
	}
	s.pending = kept
}

// toolKey identifies a call by agent, tool and canonical input.
func toolKey(agent, tool string, input json.RawMessage) (string, error) {
	in, err := canonicalJSON(input)
	if err != nil {
		return "", err
	}
	return agent + "\x00" + tool + "\x00" + in, nil
}

// permission matches, delivers and waits for the answer to a
// PermissionRequest.
func (s *Server) permission(w http.ResponseWriter, r *http.Request, p *PermissionRequest) {
	p.answer = make(chan perm.Verdict, 1)
	p.done = make(chan struct{})
	p.settled = func(p *PermissionRequest) {
		s.mu.Lock()
		delete(s.open, p)
		s.mu.Unlock()
		s.push(&PermissionSettled{Request: p, Outcome: p.state})
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.nextPerm++
	p.ID = "perm-" + strconv.Itoa(s.nextPerm)
	if key, err := toolKey(p.AgentID, p.ToolName, p.ToolInput); err == nil {
		for i, c := range s.pending {
			if c.key == key {
				p.ToolUseID = c.id
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
				break
			}
		}
	}
	s.open[p] = struct{}{}
	s.mu.Unlock()
	s.push(p)

	select {
	case v := <-p.answer:
		out, err := json.Marshal(hookDecision(v, p.Suggestions))
		if err == nil {
			w.Header().Set("Content-Type", "application/json")
			_, err = w.Write(out)
		}
		if err == nil && r.Context().Err() == nil {
			p.settle(OutcomeAnswered)
		} else {
			p.settle(OutcomeAnswerLost)
		}
	case <-r.Context().Done():
		p.settleUnanswered(OutcomeHookGone)
	case <-s.closing:
		p.settleUnanswered(OutcomeClosed)
		w.WriteHeader(http.StatusOK)
	}
}

// hookOutput is a PermissionRequest hook's answer on stdout.
type hookOutput struct {
	HookSpecificOutput struct {
		HookEventName string       `json:"hookEventName"`
		Decision      decisionWire `json:"decision"`
	} `json:"hookSpecificOutput"`
}

type decisionWire struct {
	Behavior           string          `json:"behavior"`
	UpdatedInput       json.RawMessage `json:"updatedInput,omitempty"`
	UpdatedPermissions json.RawMessage `json:"updatedPermissions,omitempty"`
	Message            string          `json:"message,omitempty"`
	Interrupt          bool            `json:"interrupt,omitempty"`
}

// hookDecision translates a verdict (the decision table of docs/ARCHITECTURE.md, hook column).
func hookDecision(v perm.Verdict, suggestions json.RawMessage) hookOutput {
	var o hookOutput
	o.HookSpecificOutput.HookEventName = EventPermissionRequest
	d := decisionWire{Behavior: "deny", Message: v.Message, Interrupt: v.Interrupt}
	if v.Allow {
		d = decisionWire{Behavior: "allow", UpdatedInput: v.UpdatedInput}
		if v.Always && perm.HasSuggestions(suggestions) {
			d.UpdatedPermissions = suggestions
		}
	}
	o.HookSpecificOutput.Decision = d
	return o
}

func (s *Server) push(ev Event) { s.q.Push(ev) }
