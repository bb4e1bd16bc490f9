package app

import (
	"context"
	"path/filepath"
	"time"

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
// is what the relay may read: a fixed title per kind, the session folder's
// last name, the session id. Never a prompt, a title, a tool or its input.
// Sending never blocks the runner: a full queue drops the event (logged).
// A nil pusher sends nothing.
type pusher struct {
	env    Env
	api    *relay.API
	sess   *relay.Session
	body   string
	ch     chan string
	done   chan struct{}
	cancel context.CancelFunc
	// kinds is the block type of each blocked tool, from the bus (runner
	// goroutine only).
	kinds map[string]mapper.BlockType
}

// pushEnabled resolves the pushEvents setting: HAPPY_PUSH_EVENTS, then
// "pushEvents" in settings.json, then on.
func pushEnabled(env Env) bool {
	return switchOn(env, EnvPushEvents, "pushEvents", true)
}

// startPusher starts the sender of sess's push events, or returns nil when
// the pushEvents setting is off. stop ends it.
func startPusher(env Env, api *relay.API, sess *relay.Session, dir string) *pusher {
	if api == nil || !pushEnabled(env) {
		return nil
	}
	body := filepath.Base(filepath.Clean(dir))
	if body == "." || body == string(filepath.Separator) || body == "" {
		body = "Session"
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pusher{env: env, api: api, sess: sess, body: body, ch: make(chan string, pushQueue), done: make(chan struct{}),
		cancel: cancel, kinds: map[string]mapper.BlockType{}}
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
	for kind := range p.ch {
		sid := p.sess.ID()
		if sid == "" {
			p.env.Log.Debug().Str("kind", kind).Msg("push event skipped: the relay session does not exist yet")
			continue
		}
		ev := relay.PushEvent{Kind: kind, Title: pushTitles[kind], Body: p.body,
			Data: map[string]any{"sessionId": sid, "kind": kind, "url": "/session/" + sid}}
		cctx, cancel := context.WithTimeout(ctx, pushTimeout)
		res, err := p.api.PushEvent(cctx, sid, ev)
		cancel()
		if err != nil {
			p.env.Log.Warn().Err(err).Str("kind", kind).Msg("push event not sent")
			continue
		}
		p.env.Log.Debug().Str("kind", kind).Str("result", res.Result).Str("reason", res.Reason).Msg("push event")
	}
}

// push queues one event of kind.
func (p *pusher) push(kind string) {
	if p == nil {
		return
	}
	select {
	case p.ch <- kind:
	default:
		p.env.Log.Warn().Str("kind", kind).Msg("push event dropped: too many waiting")
	}
}

// observe records the block type of every blocked tool (runner goroutine).
func (p *pusher) observe(evs []mapper.BusEvent) {
	if p == nil {
		return
	}
	for _, ev := range evs {
		pu, ok := ev.(*mapper.MessagePartUpdated)
		if !ok {
			continue
		}
		tp, ok := pu.Part.(*mapper.ToolPart)
		if !ok {
			continue
		}
		if tp.State.Status == mapper.StatusBlocked && tp.State.Block != nil {
			p.kinds[tp.CallID] = tp.State.Block.Type
		} else {
			delete(p.kinds, tp.CallID)
		}
	}
}

// waiting is the runner's OnWaiting: a tool waits for a person.
func (p *pusher) waiting(callID string) {
	if p == nil {
		return
	}
	if p.kinds[callID] == mapper.BlockQuestion {
		p.push(relay.PushQuestion)
		return
	}
	p.push(relay.PushPermission)
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
