//go:build unix

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
)

// The daemon's local event API (docs/ARCHITECTURE.md, section "Local event
// API", "The daemon's event API").
const (
	// DefaultEventsListen is where the daemon serves its event API when
	// neither Options.EventsListen nor the setting says: a port the
	// system picks, written to daemon.json (State.Events).
	DefaultEventsListen = "127.0.0.1:0"
	// EventsOff, as Options.EventsListen or the setting, serves none (and
	// the sessions it starts serve none either).
	EventsOff = "off"
	// EventsSetting is the settings.json key of the address: a string,
	// host:port on loopback or "off".
	EventsSetting = "daemonEventsListen"
	// sessionEventsListen is what every session the daemon starts serves
	// its own API on; it reports the port (app.SpawnReport.Events).
	sessionEventsListen = "127.0.0.1:0"
)

// Bounds of following a session's event API.
const (
	// followSeedWait bounds how long a spawn reply waits for the first
	// documents of the session to be in the daemon's hub.
	followSeedWait = 5 * time.Second
	// followDrain is how long the stream of a session whose process
	// ended may still be read (its last frames are in the socket).
	followDrain = 5 * time.Second
	// maxFollowFrame bounds one frame of a session's stream.
	maxFollowFrame = 8 << 20
	// maxDocument bounds one document read from a session's API.
	maxDocument = 64 << 20
	// loggedRefusals is how many refusals of one session are logged one
	// by one; later ones are only counted (the totals are logged when the
	// session ends).
	loggedRefusals = 20
)

// EventsAddr resolves the daemon's event API address: flag when not "",
// else the settings.json key EventsSetting, else DefaultEventsListen. It
// returns EventsOff when the API is off. A setting that is not a string, or
// an address that is not on loopback (localapi.CheckLoopback), is an error.
func EventsAddr(flag string, st settings.Settings) (string, error) {
	addr := flag
	if addr == "" {
		if raw, ok := st.Raw(EventsSetting); ok {
			if err := json.Unmarshal(raw, &addr); err != nil {
				return "", fmt.Errorf("%w: %s is not a string (host:port on loopback, or \"off\")", settings.ErrMalformed, EventsSetting)
			}
		}
	}
	if addr == "" {
		addr = DefaultEventsListen
	}
	if addr == EventsOff {
		return EventsOff, nil
	}
	if err := localapi.CheckLoopback(addr); err != nil {
		return "", err
	}
	return addr, nil
}

// startEvents starts the daemon's event API on addr (not EventsOff).
func (d *daemon) startEvents(addr string) error {
	tok, err := localapi.LoadOrCreateToken(d.env.Home.EventsToken())
	if err != nil {
		return fmt.Errorf("local event API: %w", err)
	}
	hub := localapi.NewHub(localapi.HubOptions{Log: d.env.Log})
	srv, err := localapi.Start(addr, localapi.ServerOptions{Hub: hub, Token: tok, Log: d.env.Log})
	if err != nil {
		return fmt.Errorf("local event API: %w", err)
	}
	d.hub, d.events, d.token = hub, srv, tok
	d.http = &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 4}}
	d.state.Events = srv.Addr()
	d.env.Log.Info().Str("addr", srv.Addr()).Str("token", d.env.Home.EventsToken()).Msg("local event API listening")
	return nil
}

// closeEvents stops the event API once every follower is done (what is
// queued, the sessions' ends included, is sent first).
func (d *daemon) closeEvents() {
	if d.events == nil {
		return
	}
	_ = d.events.Close()
	d.hub.Close()
	d.http.CloseIdleConnections()
	st := d.hub.Stats()
	d.env.Log.Info().Int64("published", st.Published).Int64("forgotten", st.Forgotten).Int64("droppedDeltas", st.DroppedDeltas).
		Int64("disconnected", st.Disconnected).Int64("unencodable", st.Unencodable).Msg("local event API stopped")
}

// partKey names one part.
type partKey struct{ session, message, part string }

// follower follows one session's event API into the daemon's hub: GET
// /event, then the documents (GET /session, /session/{id}/message and
// /todo) published as changes, then every frame of the stream, decoded
// (localapi.DecodeChange) and republished. A frame that does not decode
// is refused: counted, logged, and the stream goes on. A stream that ends
// while the session's process lives is followed again (with back-off, the
// documents read again); once the process has ended and its stream is
// read to the end, the hub forgets the session's sessions.
type follower struct {
	d         *daemon
	addr      string
	sid       string // relay session id, for the log
	pid       int
	childDone <-chan struct{}
	seeded    chan struct{}
	seedOnce  sync.Once

	sessions map[string]bool  // hub session ids this session published
	order    []string         // the same, in order of first appearance
	skip     map[partKey]bool // parts read from a document: their deltas wait for the next update

	// frames counts the data frames read, refused what was not a
	// change, skipped the deltas of document parts not republished,
	// reconnects the streams followed again while the session ran.
	frames, refused, skipped, reconnects int64
}

// followResult are a follower's totals, for the log and tests.
type followResult struct {
	Frames, Refused, Skipped, Reconnects int64
	Sessions                             []string
}

func (f *follower) markSeeded() { f.seedOnce.Do(func() { close(f.seeded) }) }

// run follows until the session's process has ended and its stream is
// read (or followDrain has passed since it ended), then forgets its
// sessions.
func (f *follower) run() followResult {
	defer f.markSeeded()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.childDone:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(followDrain)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := f.d.env.Log.With().Str("session", f.sid).Int("pid", f.pid).Str("events", f.addr).Logger()
	bo := relay.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for again := false; ; again = true {
		err := f.follow(ctx, again)
		if f.ended() || ctx.Err() != nil {
			break
		}
		// A process that ends closes its stream before the daemon has
		// reaped it: only a session still running after the back-off is
		// followed again (and counted).
		wait := bo.Next()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-f.childDone:
		}
		t.Stop()
		if f.ended() {
			break
		}
		log.Warn().AnErr("error", err).Dur("after", wait).Msg("the session's event stream ended while it runs; following it again")
	}
	for _, id := range f.order {
		f.d.hub.Forget(id)
	}
	res := followResult{Frames: f.frames, Refused: f.refused, Skipped: f.skipped, Reconnects: f.reconnects, Sessions: f.order}
	log.Info().Int64("frames", f.frames).Int64("refused", f.refused).Int64("skippedDeltas", f.skipped).
		Int64("reconnects", f.reconnects).Strs("forgotten", f.order).Msg("the session's events are no longer followed")
	return res
}

func (f *follower) ended() bool {
	select {
	case <-f.childDone:
		return true
	default:
		return false
	}
}

// get is GET path on the session's API with the token.
func (f *follower) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+f.d.token)
	resp, err := f.d.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return resp, nil
}

// document reads a JSON array document into raw elements.
func (f *follower) document(ctx context.Context, path string) ([]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := f.get(ctx, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(b) > maxDocument {
		return nil, fmt.Errorf("GET %s: more than %d bytes", path, maxDocument)
	}
	var out []json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("GET %s: not a JSON array: %w", path, err)
	}
	return out, nil
}

// follow is one connection: subscribe, read the documents, then the
// stream until it ends. again counts a reconnection once it is made.
func (f *follower) follow(ctx context.Context, again bool) error {
	resp, err := f.get(ctx, "/event")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if again {
		f.reconnects++
	}
	// The response's headers come after the subscription: from here on
	// nothing is missed, and the documents hold everything before.
	if err := f.seed(ctx); err != nil {
		return err
	}
	f.markSeeded()
	rd, err := sse.NewReader(resp.Body, sse.Options{MaxFrame: maxFollowFrame})
	if err != nil {
		return err
	}
	for {
		fr, ref, err := rd.Next()
		if err != nil {
			return err
		}
		if ref != nil {
			f.refuse("", ref)
			continue
		}
		if !fr.HasData {
			continue // retry and id-only frames
		}
		f.frames++
		c, err := localapi.DecodeChange(fr.Event, []byte(fr.Data))
		if err != nil {
			f.refuse(fr.Event, err)
			continue
		}
		f.publish(c)
	}
}

// publish hands a change of the stream to the hub, keeping track of the
// session's sessions and of the parts whose deltas wait.
func (f *follower) publish(c localapi.Change) {
	switch e := c.Event.(type) {
	case *mapper.SessionCreated:
		f.saw(e.Info.ID)
	case *mapper.SessionUpdated:
		f.saw(e.Info.ID)
	case *mapper.MessagePartUpdated:
		b := e.Part.Base()
		f.saw(b.SessionID)
		delete(f.skip, partKey{b.SessionID, b.MessageID, b.ID})
	case *mapper.MessagePartDelta:
		if f.skip[partKey{e.SessionID, e.MessageID, e.PartID}] {
			// The document may already hold this delta: the part's
			// next update carries the text either way.
			f.skipped++
			return
		}
	}
	f.d.hub.PublishChange(c)
}

func (f *follower) saw(id string) {
	if id != "" && !f.sessions[id] {
		f.sessions[id] = true
		f.order = append(f.order, id)
	}
}

// seed publishes the session's documents as changes: each session
// (session.created when the hub does not know it, else session.updated),
// its messages and parts, its todos.
func (f *follower) seed(ctx context.Context) error {
	raws, err := f.document(ctx, "/session")
	if err != nil {
		return err
	}
	var evs []mapper.BusEvent
	for i, raw := range raws {
		var s mapper.Session
		if err := json.Unmarshal(raw, &s); err != nil || s.ID == "" {
			f.refuse("GET /session", fmt.Errorf("session %d: not a session with an id (%v)", i, err))
			continue
		}
		if f.d.hub.Known(s.ID) {
			evs = append(evs, &mapper.SessionUpdated{Info: s})
		} else {
			evs = append(evs, &mapper.SessionCreated{Info: s})
		}
		f.saw(s.ID)
		msgs, err := f.document(ctx, "/session/"+url.PathEscape(s.ID)+"/message")
		if err != nil {
			return err
		}
		for j, mraw := range msgs {
			m, rep, err := mapper.DecodeMessageWithParts(mraw)
			if err != nil {
				f.refuse("GET /session/{id}/message", fmt.Errorf("message %d: %w", j, err))
				continue
			}
			for _, r := range rep.Refused {
				f.refuse("GET /session/{id}/message", fmt.Errorf("message %d: %v", j, r))
			}
			evs = append(evs, &mapper.MessageUpdated{Info: m.Info})
			for _, p := range m.Parts {
				b := p.Base()
				f.skip[partKey{b.SessionID, b.MessageID, b.ID}] = true
				evs = append(evs, &mapper.MessagePartUpdated{Part: p})
			}
		}
		todos, err := f.document(ctx, "/session/"+url.PathEscape(s.ID)+"/todo")
		if err != nil {
			return err
		}
		if len(todos) > 0 {
			var ts []agent.Todo
			for _, tr := range todos {
				var td agent.Todo
				if err := json.Unmarshal(tr, &td); err != nil {
					f.refuse("GET /session/{id}/todo", err)
					continue
				}
				ts = append(ts, td)
			}
			evs = append(evs, &mapper.TodoUpdated{SessionID: s.ID, Todos: ts})
		}
	}
	f.d.hub.Publish(evs)
	return nil
}

// refuse counts and logs what the session's API sent that is not a
// change (a Dropped-style record: where, why).
func (f *follower) refuse(what string, err error) {
	f.refused++
	if f.refused > loggedRefusals {
		return
	}
	ev := f.d.env.Log.Warn().Str("session", f.sid).Int("pid", f.pid).Str("reason", err.Error())
	var ref *sse.Refusal
	if errors.As(err, &ref) {
		ev = ev.Str("sse", string(ref.Reason)).Int64("offset", ref.Offset).Int64("size", ref.Size)
	}
	if what != "" {
		ev = ev.Str("event", what)
	}
	if f.refused == loggedRefusals {
		ev = ev.Bool("moreNotLogged", true)
	}
	ev.Msg("event from a session refused")
}

// follow starts following c's event API (at addr, from its spawn report)
// and waits, at most followSeedWait, for its documents to be in the hub.
// An address that is not on loopback is refused, not followed.
func (d *daemon) follow(c *child, addr string) {
	if err := localapi.CheckLoopback(addr); err != nil {
		d.env.Log.Warn().Int("pid", c.info.PID).Str("session", c.info.SessionID).Str("reason", err.Error()).
			Msg("event from a session refused: its event API address")
		return
	}
	f := &follower{d: d, addr: addr, sid: c.info.SessionID, pid: c.info.PID, childDone: c.p.Done(),
		seeded: make(chan struct{}), sessions: map[string]bool{}, skip: map[partKey]bool{}}
	d.wg.Add(1)
	go func() { defer d.wg.Done(); f.run() }()
	t := time.NewTimer(followSeedWait)
	defer t.Stop()
	select {
	case <-f.seeded:
	case <-t.C:
		d.env.Log.Warn().Int("pid", c.info.PID).Str("session", c.info.SessionID).Msg("the session's event API did not answer in time; still trying")
	}
}
