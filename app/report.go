package app

import (
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Run statuses of a Report, one per exit code of happy <agent> -p
// (docs/ARCHITECTURE.md, "Exit codes of happy <agent> -p").
const (
	RunCompleted   = "completed"   // exit 0
	RunFailed      = "failed"      // exit 1: the turn failed, or the agent exited before it ended
	RunRejected    = "rejected"    // exit 1: a permission was rejected (by a person, a rule or the timeout)
	RunRelay       = "relay"       // exit 3: the relay or the login was unusable
	RunUndelivered = "undelivered" // exit 4: completed, but the relay has not acknowledged the whole transcript
	RunInterrupted = "interrupted" // exit 130
)

// Report is what `happy <agent> -p --output json` prints at the end: one
// object a script can decide on without reading anything else.
type Report struct {
	SessionID   string       `json:"sessionId"` // relay session id ("" when the relay never answered)
	Title       string       `json:"title"`
	Status      string       `json:"status"` // a Run* constant
	ExitCode    int          `json:"exitCode"`
	Error       string       `json:"error,omitempty"` // what happy printed on stderr as the reason
	FinalText   string       `json:"finalText"`
	ToolCalls   []ReportTool `json:"toolCalls"`
	Tokens      agent.Tokens `json:"tokens"`         // sums over the assistant messages; absent counts were not reported
	Cost        *float64     `json:"cost,omitempty"` // USD, summed; nil when no message reported one
	DurationMs  int64        `json:"durationMs"`
	Dropped     int          `json:"dropped"`     // inputs refused while mapping (happy log --json lists them)
	Undelivered int          `json:"undelivered"` // versions still in the outbox for the relay
}

// ReportTool is one tool call of a Report, in transcript order (children
// after their parent's messages).
type ReportTool struct {
	CallID   string             `json:"callID"`
	Tool     string             `json:"tool"`
	Title    string             `json:"title,omitempty"`
	Status   mapper.ToolStatus  `json:"status"`             // its final state
	Decision agent.Decision     `json:"decision,omitempty"` // when it asked for permission
	Reason   string             `json:"reason,omitempty"`   // "rule", "timeout", … when nobody decided
	Rule     *agent.MatchedRule `json:"rule,omitempty"`     // the rule that decided it
	Error    string             `json:"error,omitempty"`
}

// NewReport builds the Report of a finished -p run from its result, the
// status and exit code the command chose, the error it printed ("" for
// none) and the run's wall time in milliseconds.
func NewReport(res SessionResult, status string, exitCode int, errText string, durationMs int64) Report {
	r := Report{SessionID: res.SessionID, Title: res.Transcript.Session.Title, Status: status, ExitCode: exitCode,
		Error: errText, FinalText: res.FinalText, ToolCalls: []ReportTool{}, DurationMs: durationMs, Undelivered: res.Undelivered}
	var walk func(t mapper.Transcript)
	walk = func(t mapper.Transcript) {
		r.Dropped += len(t.Dropped)
		for _, m := range t.Messages {
			if am, ok := m.Info.(*mapper.AssistantMessage); ok {
				addTokens(&r.Tokens, am.Tokens)
				if am.Cost != nil {
					c := *am.Cost
					if r.Cost != nil {
						c += *r.Cost
					}
					r.Cost = &c
				}
			}
			for _, p := range m.Parts {
				tp, ok := p.(*mapper.ToolPart)
				if !ok {
					continue
				}
				rt := ReportTool{CallID: tp.CallID, Tool: tp.Tool, Title: tp.State.Title, Status: tp.State.Status, Error: tp.State.Error}
				if b := tp.State.Block; b != nil {
					rt.Decision, rt.Reason = b.Decision, b.Reason
					if b.Rule != nil {
						rt.Rule = b.Rule.Matched()
					}
				}
				r.ToolCalls = append(r.ToolCalls, rt)
			}
		}
		for _, c := range t.Children {
			walk(c)
		}
	}
	walk(res.Transcript)
	return r
}

// addTokens adds the counts of t to sum; a count stays nil until some
// message reported it.
func addTokens(sum *agent.Tokens, t *agent.Tokens) {
	if t == nil {
		return
	}
	add := func(dst **int64, v *int64) {
		if v == nil {
			return
		}
		n := *v
		if *dst != nil {
			n += **dst
		}
		*dst = &n
	}
	add(&sum.Input, t.Input)
	add(&sum.Output, t.Output)
	add(&sum.Reasoning, t.Reasoning)
	add(&sum.Cache.Read, t.Cache.Read)
	add(&sum.Cache.Write, t.Cache.Write)
}
