package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/session"
)

// agentStatus is the local event API's view of a runner's Status (GET
// /status): times in Unix ms, lists never null.
func agentStatus(st session.Status, root, relayID, agentName string, now time.Time) localapi.AgentStatus {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	tools := func(in []session.ToolActivity) []localapi.ToolActivity {
		out := make([]localapi.ToolActivity, 0, len(in))
		for _, a := range in {
			out = append(out, localapi.ToolActivity{CallID: a.CallID, Tool: a.Tool, Since: ms(a.Since), Question: a.Question})
		}
		return out
	}
	return localapi.AgentStatus{SessionID: root, RelaySessionID: relayID, Agent: agentName, AgentRunning: st.AgentRunning,
		LastAgentEvent: ms(st.LastAgentEvent), TurnSince: ms(st.TurnSince), Tools: tools(st.Tools), Waiting: tools(st.Waiting),
		IdleTimeoutMs: st.IdleTimeout.Milliseconds(), IdleDeadline: ms(st.IdleDeadline), IdleInterrupts: st.IdleInterrupts, Now: now.UnixMilli()}
}

// DescribeStatus says in one line what a running session is doing (happy
// doctor SESSION): whether its agent runs, its turn, the agent's last
// event, the tools running, what waits for a person and the idle watch.
// Durations are measured on the session's own clock (st.Now), to the
// second. E.g.
//
//	session cm1 (codex): agent running; turn running for 5m0s; last agent event 3m0s ago; tool bash running for 2m0s (call c1); nobody asked; idle watch interrupts in 7m0s
func DescribeStatus(st localapi.AgentStatus) string {
	ago := func(ms int64) string {
		return (time.Duration(st.Now-ms) * time.Millisecond).Round(time.Second).String()
	}
	id := st.RelaySessionID
	if id == "" {
		id = st.SessionID
	}
	head := "session " + id
	if st.Agent != "" {
		head += " (" + st.Agent + ")"
	}
	parts := []string{"agent exited"}
	if st.AgentRunning {
		parts[0] = "agent running"
	}
	if st.TurnSince != 0 {
		parts = append(parts, "turn running for "+ago(st.TurnSince))
	} else {
		parts = append(parts, "no turn running")
	}
	if st.LastAgentEvent != 0 {
		parts = append(parts, "last agent event "+ago(st.LastAgentEvent)+" ago")
	} else {
		parts = append(parts, "no agent event yet")
	}
	if len(st.Tools) == 0 {
		parts = append(parts, "no tool running")
	}
	for _, t := range st.Tools {
		parts = append(parts, fmt.Sprintf("tool %s running for %s (call %s)", t.Tool, ago(t.Since), t.CallID))
	}
	if len(st.Waiting) == 0 {
		parts = append(parts, "nobody asked")
	}
	for _, w := range st.Waiting {
		what := "permission " + w.Tool
		if w.Question {
			what = "question"
		}
		parts = append(parts, fmt.Sprintf("%s waiting for a person for %s (call %s)", what, ago(w.Since), w.CallID))
	}
	switch {
	case st.IdleTimeoutMs == 0:
		parts = append(parts, "idle watch off")
	case st.IdleDeadline != 0:
		parts = append(parts, "idle watch interrupts in "+(time.Duration(st.IdleDeadline-st.Now)*time.Millisecond).Round(time.Second).String())
	case st.TurnSince != 0:
		parts = append(parts, "idle watch paused")
	default:
		parts = append(parts, "idle watch waits for a turn")
	}
	if st.IdleInterrupts > 0 {
		parts = append(parts, fmt.Sprintf("%d turn(s) interrupted for silence", st.IdleInterrupts))
	}
	return head + ": " + strings.Join(parts, "; ")
}

// ErrNoStatus: no local event API asked serves the session's status.
var ErrNoStatus = errors.New("no running happy on this machine serves the session's status")

// statusTimeout bounds one GET /status.
const statusTimeout = 5 * time.Second

// SessionStatus asks the local event APIs at addrs (loopback addresses:
// the daemon's sessions', an --events-listen address) for the status of
// session: its relay id, a unique prefix of it, or its id in the
// documents. The bearer token is the home's events.token. Errors:
// ErrNoStatus (wrapped, with what each address answered) when none serves
// it; an unreadable token file.
func SessionStatus(ctx context.Context, env Env, session string, addrs []string) (localapi.AgentStatus, error) {
	b, err := os.ReadFile(env.Home.EventsToken())
	if err != nil {
		return localapi.AgentStatus{}, fmt.Errorf("%w (the local event API's token: %w)", ErrNoStatus, err)
	}
	tok, err := localapi.ParseToken(b)
	if err != nil {
		return localapi.AgentStatus{}, fmt.Errorf("local event API token %s: %w", env.Home.EventsToken(), err)
	}
	var notes []string
	for _, addr := range addrs {
		list, err := fetchStatus(ctx, addr, tok)
		if err != nil {
			notes = append(notes, err.Error())
			continue
		}
		for _, st := range list {
			if st.RelaySessionID == session || st.SessionID == session || (st.RelaySessionID != "" && strings.HasPrefix(st.RelaySessionID, session)) {
				return st, nil
			}
		}
	}
	if len(notes) > 0 {
		return localapi.AgentStatus{}, fmt.Errorf("%w (%s)", ErrNoStatus, strings.Join(notes, "; "))
	}
	return localapi.AgentStatus{}, ErrNoStatus
}

// fetchStatus is GET http://addr/status.
func fetchStatus(ctx context.Context, addr, tok string) ([]localapi.AgentStatus, error) {
	if err := localapi.CheckLoopback(addr); err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	var list []localapi.AgentStatus
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("%s: GET /status: %w", addr, err)
	}
	return list, nil
}
