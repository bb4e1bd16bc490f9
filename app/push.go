package app

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
)

// EnvPushEvents names the environment variable that overrides the
// pushEvents setting (1/true/yes/on, 0/false/no/off).
const EnvPushEvents = "HAPPY_PUSH_EVENTS"

// pushTimeout bounds one push-event request; pushDrain bounds the wait, at
// the end of a session, for the pushes still queued.
const (
	pushTimeout = 15 * time.Second
	pushDrain   = 3 * time.Second
	pushQueue   = 16
)

// pusher sends the session's push events (POST /v1/sessions/:id/push-event)
// when a tool waits for a permission, a question is asked, and a turn ends
// with nothing queued (docs/ARCHITECTURE.md, "Push events"). What it sends
// in clear is what the relay and Expo may read: a fixed title per kind, the
// session folder's last name, the session id; never a prompt, a title, a
// tool or its input. Those go in the sealed part (relay.PushDetail, sealed
// with the session's cipher), which only the account's devices open.
// Sending never blocks the runner: a full queue drops the event (logged).
// A nil pusher sends nothing.
type pusher struct {
	env    Env
	api    *relay.API
	sess   *relay.Session
	body   string
	ch     chan relay.PushDetail
	done   chan struct{}
	cancel context.CancelFunc

	// The rest is the runner goroutine's: what the sealed detail says.
	rootID string
	title  string
	// tools are the blocked tools, by call id.
	tools map[string]pushTool
	// last is the root session's last assistant message: its status and
	// summary (the start of its text, or its error).
	status, answer string
	answerMsg      string
	answerAt       int64 // its creation time (Unix ms)
}

// pushTool is a blocked tool as a push names it.
type pushTool struct {
	block   mapper.BlockType
	tool    string
	summary string
}

// Bounds of the sealed detail's strings (runes); pushSealedMax is the
// relay's bound of the sealed part (base64 characters).
const (
	pushTitleMax   = 120
	pushSummaryMax = 240
	pushToolMax    = 64
	pushSealedMax  = 3000
)

// pushEnabled resolves the pushEvents setting: HAPPY_PUSH_EVENTS, then
// "pushEvents" in settings.json, then on.
func pushEnabled(env Env) bool {
	return switchOn(env, EnvPushEvents, "pushEvents", true)
}

// startPusher starts the sender of sess's push events, or returns nil when
// the pushEvents setting is off. rootID is the root session's id in the
// model, title its title so far (a resumed session's). stop ends it.
func startPusher(env Env, api *relay.API, sess *relay.Session, dir, rootID, title string) *pusher {
	if api == nil || !pushEnabled(env) {
		return nil
	}
	body := filepath.Base(filepath.Clean(dir))
	if body == "." || body == string(filepath.Separator) || body == "" {
		body = "Session"
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pusher{env: env, api: api, sess: sess, body: body, ch: make(chan relay.PushDetail, pushQueue), done: make(chan struct{}),
		cancel: cancel, rootID: rootID, title: title, tools: map[string]pushTool{}}
	go p.run(ctx)
	return p
}

// titles are the reference CLI's notification titles, per kind.
var pushTitles = map[string]string{
	relay.PushDone:       "It's ready!",
	relay.PushPermission: "Permission request",
	relay.PushQuestion:   "Clarification needed",
}

func (p *pusher) run(ctx context.Context) {
	defer close(p.done)
	for d := range p.ch {
		sid := p.sess.ID()
		if sid == "" {
			p.env.Log.Debug().Str("kind", d.Kind).Msg("push event skipped: the relay session does not exist yet")
			continue
		}
		d.SessionID = sid
		ev := relay.PushEvent{Kind: d.Kind, Title: pushTitles[d.Kind], Body: p.body,
			Data: map[string]any{"sessionId": sid, "kind": d.Kind, "url": "/session/" + sid}}
		sealed, err := sealPushDetail(p.sess.Cipher(), d)
		if err != nil {
			p.env.Log.Warn().Err(err).Str("kind", d.Kind).Msg("push event sent without its sealed detail")
		}
		ev.Sealed = sealed
		cctx, cancel := context.WithTimeout(ctx, pushTimeout)
		res, err := p.api.PushEvent(cctx, sid, ev)
		cancel()
		if err != nil {
			p.env.Log.Warn().Err(err).Str("kind", d.Kind).Msg("push event not sent")
			continue
		}
		p.env.Log.Debug().Str("kind", d.Kind).Str("result", res.Result).Int("delivered", res.Delivered).Str("reason", res.Reason).Msg("push event")
	}
}

// sealPushDetail seals d with the session's cipher (base64), its title
// and summary shortened until the result fits the relay's bound.
func sealPushDetail(ci crypto.Cipher, d relay.PushDetail) (string, error) {
	d.HappyPush = 1
	titleMax, summaryMax := pushTitleMax, pushSummaryMax
	for {
		d.Title, d.Summary = clip(d.Title, titleMax), clip(d.Summary, summaryMax)
		plain, err := json.Marshal(d)
		if err != nil {
			return "", fmt.Errorf("encode push detail: %w", err)
		}
		sealed, err := ci.Seal(plain)
		if err != nil {
			return "", fmt.Errorf("seal push detail: %w", err)
		}
		if out := crypto.EncodeBase64(sealed); len(out) <= pushSealedMax {
			return out, nil
		}
		if titleMax == 0 && summaryMax == 0 {
			return "", fmt.Errorf("push detail of %d bytes does not fit %d base64 characters", len(plain), pushSealedMax)
		}
		titleMax, summaryMax = titleMax/2, summaryMax/2
	}
}

// clip shortens s to at most n runes, "…" marking a cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n == 0 {
		return ""
	}
	return string(r[:n-1]) + "…"
}

// push queues one event.
func (p *pusher) push(d relay.PushDetail) {
	if p == nil {
		return
	}
	d.Time = p.env.now().UnixMilli()
	d.Tool = clip(d.Tool, pushToolMax)
	select {
	case p.ch <- d:
	default:
		p.env.Log.Warn().Str("kind", d.Kind).Msg("push event dropped: too many waiting")
	}
}

// observe follows, from the bus (runner goroutine), what the next push
// names: the root session's title, every blocked tool, the root's last
// answer.
func (p *pusher) observe(evs []mapper.BusEvent) {
	if p == nil {
		return
	}
	for _, ev := range evs {
		switch e := ev.(type) {
		case *mapper.SessionCreated:
			p.sessionInfo(e.Info)
		case *mapper.SessionUpdated:
			p.sessionInfo(e.Info)
		case *mapper.MessageUpdated:
			if u, ok := e.Info.(*mapper.UserMessage); ok && u.SessionID == p.rootID {
				// A new turn: what the last one said is no answer of it.
				p.status, p.answer, p.answerMsg = "", "", ""
				continue
			}
			m, ok := e.Info.(*mapper.AssistantMessage)
			if !ok || m.SessionID != p.rootID {
				continue
			}
			if m.ID != p.answerMsg {
				if m.Time.Created < p.answerAt {
					continue // an earlier message changed
				}
				p.answerMsg, p.answerAt, p.answer = m.ID, m.Time.Created, ""
			}
			switch {
			case m.Finish == agent.FinishAborted:
				p.status = "cancelled"
			case m.Error != nil:
				p.status, p.answer = "failed", m.Error.Data.Message
			case m.Finish == agent.FinishError:
				p.status = "failed"
			default:
				p.status = "completed"
			}
		case *mapper.MessagePartUpdated:
			switch pt := e.Part.(type) {
			case *mapper.TextPart:
				if pt.SessionID == p.rootID && pt.MessageID == p.answerMsg && !pt.Synthetic && strings.TrimSpace(pt.Text) != "" && p.status != "failed" {
					p.answer = pt.Text
				}
			case *mapper.ToolPart:
				if pt.State.Status == mapper.StatusBlocked && pt.State.Block != nil {
					p.tools[pt.CallID] = pushTool{block: pt.State.Block.Type, tool: pt.Tool, summary: blockSummary(pt)}
				} else {
					delete(p.tools, pt.CallID)
				}
			}
		}
	}
}

func (p *pusher) sessionInfo(info mapper.Session) {
	if info.ID == p.rootID && info.ParentID == "" && info.Title != "" {
		p.title = info.Title
	}
}

// blockSummary says what a blocked tool waits for: a question's first
// question (and how many more), else the tool's telling input.
func blockSummary(pt *mapper.ToolPart) string {
	b := pt.State.Block
	if b.Type == mapper.BlockQuestion && len(b.Questions) > 0 {
		s := b.Questions[0].Question
		if len(b.Questions) > 1 {
			s += fmt.Sprintf(" (+%d more)", len(b.Questions)-1)
		}
		return s
	}
	if s := export.ToolSummary(pt); s != "" {
		return s
	}
	return strings.Join(b.Patterns, " ")
}

// waiting is the runner's OnWaiting: a tool waits for a person.
func (p *pusher) waiting(callID string) {
	if p == nil {
		return
	}
	t := p.tools[callID]
	kind := relay.PushPermission
	if t.block == mapper.BlockQuestion {
		kind = relay.PushQuestion
	}
	p.push(relay.PushDetail{Kind: kind, Title: p.title, CallID: callID, Tool: t.tool, Summary: t.summary})
}

// turnDone is the runner going idle with nothing queued: the turn ended.
func (p *pusher) turnDone() {
	if p == nil {
		return
	}
	status := p.status
	if status == "" {
		status = "completed"
	}
	p.push(relay.PushDetail{Kind: relay.PushDone, Title: p.title, Status: status, Summary: firstLine(p.answer)})
}

// stop sends what is queued (within pushDrain) and ends the sender. It
// must be called once, after the runner stopped.
func (p *pusher) stop() {
	if p == nil {
		return
	}
	close(p.ch)
	t := time.NewTimer(pushDrain)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cancel()
		<-p.done
	}
	p.cancel()
}
