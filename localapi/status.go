package localapi

import (
	"net/http"
	"slices"
	"sync"
)

// AgentStatus is what a running session is doing, as its runner sees it:
// GET /status serves one per session of the process (happy doctor SESSION
// prints it in one line; docs/ARCHITECTURE.md, section "Stalled agents").
// Times are Unix ms of the session's clock; 0 means never or not now.
type AgentStatus struct {
	// SessionID is the session's id in the documents (GET /session).
	SessionID string `json:"sessionID"`
	// RelaySessionID is the relay's id of the session ("" until the relay
	// answered).
	RelaySessionID string `json:"relaySessionID,omitempty"`
	// Agent is the agent's name (claude, codex, an ACP agent's command).
	Agent string `json:"agent,omitempty"`
	// AgentRunning is false once the agent's event stream ended.
	AgentRunning bool `json:"agentRunning"`
	// LastAgentEvent is when the agent last said anything.
	LastAgentEvent int64 `json:"lastAgentEvent,omitempty"`
	// TurnSince is when the running turn began.
	TurnSince int64 `json:"turnSince,omitempty"`
	// Tools are the tool calls running now, oldest first; Waiting the ones
	// waiting for a person, in arrival order.
	Tools   []ToolActivity `json:"tools"`
	Waiting []ToolActivity `json:"waiting"`
	// IdleTimeoutMs is the idle watch's timeout (0: off); IdleDeadline is
	// when it interrupts a silent turn (0: it does not run now);
	// IdleInterrupts counts the turns it interrupted.
	IdleTimeoutMs  int64 `json:"idleTimeoutMs"`
	IdleDeadline   int64 `json:"idleDeadline,omitempty"`
	IdleInterrupts int   `json:"idleInterrupts,omitempty"`
	// Now is the session's clock when it answered.
	Now int64 `json:"now"`
}

// ToolActivity is one tool call of an AgentStatus: its call id, canonical
// tool name, since when it is in its state (Unix ms), and for a waiting
// one whether it is a question (else a permission).
type ToolActivity struct {
	CallID   string `json:"callID"`
	Tool     string `json:"tool"`
	Since    int64  `json:"since"`
	Question bool   `json:"question,omitempty"`
}

// statuses are the status sources of the sessions a process runs.
type statuses struct {
	mu    sync.Mutex
	order []string
	src   map[string]func() AgentStatus
}

// SetStatus makes f the source of sessionID's AgentStatus (GET /status
// calls it on every request, from the request's goroutine: it must be safe
// for concurrent use); a nil f removes the session's source.
func (h *Hub) SetStatus(sessionID string, f func() AgentStatus) {
	s := &h.status
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = slices.DeleteFunc(s.order, func(id string) bool { return id == sessionID })
	if f == nil {
		delete(s.src, sessionID)
		return
	}
	if s.src == nil {
		s.src = map[string]func() AgentStatus{}
	}
	s.src[sessionID] = f
	s.order = append(s.order, sessionID)
}

// Statuses returns the AgentStatus of every session with a source, in the
// order their sources were set.
func (h *Hub) Statuses() []AgentStatus {
	s := &h.status
	s.mu.Lock()
	fs := make([]func() AgentStatus, 0, len(s.order))
	for _, id := range s.order {
		fs = append(fs, s.src[id])
	}
	s.mu.Unlock()
	out := make([]AgentStatus, 0, len(fs))
	for _, f := range fs {
		out = append(out, f())
	}
	return out
}

// statusList: GET /status.
func (h *Handler) statusList(w http.ResponseWriter, _ *http.Request) {
	b, err := marshal(h.opts.Hub.Statuses())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, b)
}
