package app

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// FollowSessionEvents is FollowSession that also hands out the live text
// deltas the message stream carries (docs/ARCHITECTURE.md, section "Live
// text"), as RowEvents with Live set (LiveErr for one that does not
// decrypt or decode), in the order the stream carried them among the rows.
// A row waits until out takes it; a delta never waits: when out is full it
// is dropped (the next stored version brings its text), so out should have
// a buffer. Its results are FollowSession's.
func FollowSessionEvents(ctx context.Context, conn *Conn, o Opened, after int64, out chan<- RowEvent) error {
	return FollowSessionLive(ctx, conn, o, after, out, func(d session.LiveDelta, err error) {
		ev := RowEvent{LiveErr: err}
		if err == nil {
			ev.Live = &d
		}
		select {
		case out <- ev:
		default:
		}
	})
}

// FollowPrinterOptions configure a FollowPrinter.
type FollowPrinterOptions struct {
	// JSON writes the flat event stream as JSON lines (happy log --follow
	// --json or --events) instead of the readable layout.
	JSON bool
	// Text are the readable layout's options (export.NewFollower).
	Text export.TextOptions
	// OnPrint, when set, sees each transcript Print writes from (happy log
	// counts its dropped inputs there).
	OnPrint func(mapper.Transcript)
}

// FollowPrinter writes a followed session as it grows, what `happy log
// --follow` prints: each row read (Take) goes into a Readback, and what is
// new is written at once, in the readable layout (export.Follower) or as
// settled flat events, one JSON line each. Live text deltas extend, in
// the readable layout, the text shown as it grows (session.LiveText),
// without waiting for its next stored version. Not safe for concurrent
// use.
type FollowPrinter struct {
	w        io.Writer
	rb       *session.Readback
	opts     FollowPrinterOptions
	follower *export.Follower
	// live holds the text of the part growing on screen (key), from its
	// stored versions and the deltas since.
	live *session.LiveText
	key  [2]string
	// seen are the flat events written (JSON), with the text of each text
	// event: one an agent added to after it was written is written again.
	seen map[string]string
}

// NewFollowPrinter returns a printer writing to w what rb gains; rb holds
// what was read before (Print(false) writes it).
func NewFollowPrinter(w io.Writer, rb *session.Readback, opts FollowPrinterOptions) *FollowPrinter {
	return &FollowPrinter{w: w, rb: rb, opts: opts, follower: export.NewFollower(opts.Text), seen: map[string]string{}}
}

// Take takes one event of FollowSessionEvents: a row or a dropped record
// goes into the Readback and what is new is written (Print(false)); a live
// delta of the text growing on screen is written at once. A delta that
// does not fit (LiveText.Apply: a gap, a conflict), of another part, or
// that did not decrypt (LiveErr) writes nothing: the next stored version
// brings its text. Errors: the writer's.
func (p *FollowPrinter) Take(ev RowEvent) error {
	switch {
	case ev.LiveErr != nil:
		return nil
	case ev.Live != nil:
		d := *ev.Live
		if p.live == nil || p.opts.JSON || [2]string{d.MessageID, d.PartID} != p.key {
			return nil
		}
		if out, text := p.live.Apply(d); out == session.LiveApplied {
			return p.follower.Live(p.w, d.PartID, text)
		}
		return nil
	case ev.Dropped != nil:
		p.rb.Drop(*ev.Dropped)
	default:
		p.rb.Add(ev.Seq, ev.LocalID, ev.Plain)
	}
	return p.Print(false)
}

// Print writes what the transcript has that was not written yet: its
// settled parts (everything, open parts as interrupted, when final: the
// session is over). Errors: the writer's.
func (p *FollowPrinter) Print(final bool) error {
	tr := p.rb.Transcript()
	if p.opts.OnPrint != nil {
		p.opts.OnPrint(tr)
	}
	if p.opts.JSON {
		evs := export.Flat(tr)
		if !final {
			evs = export.FlatSettled(tr)
		}
		return p.writeEvents(evs)
	}
	if err := p.follower.Update(p.w, tr, final); err != nil {
		return err
	}
	mid, pid, stored, ok := p.follower.Growing()
	if !ok {
		p.live, p.key = nil, [2]string{}
		return nil
	}
	if k := [2]string{mid, pid}; k != p.key || p.live == nil {
		p.live, p.key = session.NewLiveText(), k
	}
	// Live text that already ran past this version stays on screen.
	return p.follower.Live(p.w, pid, p.live.Stored(mid, pid, stored))
}

// writeEvents writes the events not written yet, and again a text event
// whose text grew since it was written.
func (p *FollowPrinter) writeEvents(evs []export.FlatEvent) error {
	enc := json.NewEncoder(p.w)
	enc.SetEscapeHTML(false)
	for _, ev := range evs {
		if text, ok := p.seen[ev.ID]; ok && (ev.Type != export.TypeText || ev.Text == text || !strings.HasPrefix(ev.Text, text)) {
			continue
		}
		p.seen[ev.ID] = ev.Text
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	return nil
}
