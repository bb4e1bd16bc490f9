package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/happy-dev/happy/agent"
)

// ErrNotResumable: the session cannot be continued (why is in the error).
var ErrNotResumable = errors.New("the session cannot be resumed")

// ProviderSessionField is the metadata field that holds the agent's own
// session id for a flavor: claudeSessionId and codexThreadId (the reference
// apps' names), acpSessionId for ACP agents.
func ProviderSessionField(flavor string) string {
	switch flavor {
	case "claude":
		return "claudeSessionId"
	case "codex":
		return "codexThreadId"
	}
	return "acpSessionId"
}

// providerSessions follows the agent's own session id (what it resumes
// with) and writes it to the metadata each time the root session's
// changes.
type providerSessions struct {
	field, last string
	w           *metaWriter
}

// providerSessionWatcher returns the watcher of flavor's session id; its
// observe is the runner's OnEvent (on the runner goroutine, which also
// reads last).
func providerSessionWatcher(flavor string, w *metaWriter) *providerSessions {
	return &providerSessions{field: ProviderSessionField(flavor), w: w}
}

func (p *providerSessions) observe(ev agent.Event) {
	si, ok := ev.(*agent.SessionInfo)
	if !ok || si.Session != "" || si.ProviderSessionID == "" || si.ProviderSessionID == p.last {
		return
	}
	p.last = si.ProviderSessionID
	b, _ := json.Marshal(si.ProviderSessionID)
	p.w.set(map[string]json.RawMessage{p.field: b})
}

// restartAgent is the runner's Recover: it closes the hung agent old (the
// agent itself when the caller of RunSession closes it otherwise: closing
// twice is harmless) and starts a new one with start, resuming id; the new
// agent is added to started, for the run's end to close. Errors: no id
// known yet, or start's.
func restartAgent(ctx context.Context, env Env, old agent.Agent, id string, start func(context.Context, string) (agent.Agent, error), started *[]agent.Agent) (agent.Agent, error) {
	if cc, ok := old.(callerCloses); ok {
		old = cc.Agent
	}
	if err := old.Close(); err != nil {
		env.Log.Warn().Err(err).Msg("close the hung agent")
	}
	if id == "" {
		return nil, errors.New("the agent never reported its session id, so it cannot be resumed")
	}
	env.Log.Warn().Str("providerSessionId", id).Msg("restarting the hung agent in its own session")
	ag, err := start(ctx, id)
	if err != nil {
		return nil, err
	}
	*started = append(*started, ag)
	return ag, nil
}

// Resume is what a run needs to continue a session in place (SessionOptions
// Resume): its tag in this home's outbox, the root title to keep, and the
// id position new ids start at.
type Resume struct {
	Tag           string
	Title         string
	FirstPosition uint64
	// ProviderSessionID is the agent's own session id the run resumes.
	ProviderSessionID string
}

// ResumeTarget is an ended session happy can continue.
type ResumeTarget struct {
	Opened Opened
	// Flavor is the agent ("claude", "codex", …); Dir the session's folder.
	Flavor, Dir string
	// ProviderSessionID is the agent's own session id (Claude's session
	// id, the Codex thread id, the ACP session id).
	ProviderSessionID string
	Resume            Resume
}

// PrepareResume finds the session ref and checks it can be continued from
// this home: it is not running (ended, archived or stale; a stale orphan of
// this home is settled first by SettleOrphans, which the caller runs), this
// home's outbox knows it (its key and record versions are here, and so is
// the agent's own state), and the agent reported its session id. It reads
// the session back for the title and the first free id position. Errors
// wrap ErrNoSession, ErrAmbiguousSession, ErrRunning or ErrNotResumable.
func PrepareResume(ctx context.Context, conn *Conn, ref string, now time.Time) (ResumeTarget, error) {
	o, err := FindSession(ctx, conn, ref)
	if err != nil {
		return ResumeTarget{}, err
	}
	t := ResumeTarget{Opened: o, Flavor: o.Metadata.Flavor, Dir: o.Metadata.Path}
	if o.RawMetadata == nil {
		return t, fmt.Errorf("%s: its metadata cannot be read: %w", o.Info.ID, ErrNotResumable)
	}
	if o.State(now) == LifecycleRunning {
		return t, fmt.Errorf("%s: %w", o.Info.ID, ErrRunning)
	}
	tag, ok, err := conn.Client.Outbox().SessionByRelayID(ctx, o.Info.ID)
	if err != nil {
		return t, err
	}
	if !ok {
		return t, fmt.Errorf("%s was not started from this happy home (%s); resume it on the machine that ran it: %w",
			o.Info.ID, o.Metadata.HappyHomeDir, ErrNotResumable)
	}
	var md map[string]json.RawMessage
	_ = json.Unmarshal(o.RawMetadata, &md)
	field := ProviderSessionField(t.Flavor)
	_ = json.Unmarshal(md[field], &t.ProviderSessionID)
	if t.ProviderSessionID == "" {
		return t, fmt.Errorf("%s: the agent never reported its session id (metadata %s): %w", o.Info.ID, field, ErrNotResumable)
	}
	rb, _, err := ReadTranscript(ctx, conn, o, ReadOptions{})
	if err != nil {
		return t, err
	}
	title := rb.Transcript().Session.Title
	if o.Metadata.Summary != nil && o.Metadata.Summary.Text != "" {
		title = o.Metadata.Summary.Text
	}
	t.Resume = Resume{Tag: tag, Title: title, FirstPosition: rb.NextPosition(), ProviderSessionID: t.ProviderSessionID}
	return t, nil
}
