package export

import (
	"io"
	"strings"

	"github.com/happy-dev/happy/mapper"
)

// Follower writes a transcript that is still growing in Text's layout
// (`happy log`'s), append-only: each call of Update writes only what is
// new. A prompt is written once a message follows it (or the session is
// over), as it is then; a part is written once it is settled (a text whose part or message
// ended, a tool call that completed or failed, with its permission line and
// output), in transcript order; what follows the first part still under
// way waits for it. A text or reasoning part that a later part of its
// message follows is settled, reported end or not (the model went on past
// it; text an agent adds to it afterwards is written on lines of its own).
// Two things are shown before they settle, because a reader watches for
// them: a streaming text grows on screen as it arrives (from stored
// versions, and from live text through Live), and a tool that waits for a
// person is announced with its "waiting for permission" (or question)
// line, then written whole once it ends.
// Subagent sessions are written under the tool that started them, when it
// ends. The zero value is not usable: use NewFollower.
type Follower struct {
	opts    TextOptions
	printed map[string]bool // part ids, "<call>#blocked" announcements, "<message>#end" footers
	growing string          // the text part shown as it grows ("" for none)
	shown   string          // its text on screen (line breaks at its end wait)
	growMsg string          // the growing part's message
	stored  string          // the growing part's text in the last stored version
	// early holds the text and reasoning parts written before their
	// message completed (the model went on past them): the text written,
	// so that text added to them later is written too.
	early map[string]string
}

// NewFollower returns a Follower with Text's options (OutputLines 3 when
// 0; the session header is the caller's to write).
func NewFollower(opts TextOptions) *Follower {
	if opts.OutputLines == 0 {
		opts.OutputLines = 3
	}
	return &Follower{opts: opts, printed: map[string]bool{}, early: map[string]string{}}
}

// Update writes to w what t has that earlier calls did not write. With
// final (the session is over) everything left is written, settled or not,
// its open parts as interrupted (TextOptions.Stopped). Errors: w's.
func (f *Follower) Update(w io.Writer, t mapper.Transcript, final bool) error {
	opts := f.opts
	opts.Stopped = opts.Stopped || final
	tw := &textWriter{w: w, opts: opts, children: map[string]*mapper.Transcript{}, shown: map[string]bool{}}
	tw.index(&t)
	for i, m := range t.Messages {
		switch info := m.Info.(type) {
		case *mapper.UserMessage:
			if f.printed[info.ID] {
				continue
			}
			// A prompt may still change (its text completed, found to be
			// written by the agent rather than typed): it is written once
			// something follows it, as happy log shows it then.
			if !final && i == len(t.Messages)-1 {
				return tw.err
			}
			f.endGrowing(tw)
			f.printed[info.ID] = true
			tw.userParts(m.Parts, 0)
			if r := ReceiptLine(info.Time); r != "" {
				tw.line(1, "%s", r)
			}
		case *mapper.AssistantMessage:
			complete := final || info.Time.Completed != nil
			for j, p := range m.Parts {
				id := p.Base().ID
				if f.printed[id] {
					f.grewAfter(tw, p)
					continue
				}
				if !complete && !partSettled(p) && !movedOn(m.Parts, j) {
					f.underWay(tw, p)
					return tw.err
				}
				f.printed[id] = true
				if !complete {
					f.noteEarly(p)
				}
				if id == f.growing {
					if pt, ok := p.(*mapper.TextPart); ok {
						trimmed := strings.TrimRight(pt.Text, "\n")
						if !strings.HasPrefix(trimmed, f.shown) {
							trimmed = f.shown // live text ran past this version: what is on screen was written
						}
						tw.write(trimmed[len(f.shown):] + "\n")
						if !complete {
							f.early[id] = trimmed
						}
						f.growing, f.shown, f.growMsg, f.stored = "", "", "", ""
						continue
					}
				}
				f.endGrowing(tw)
				tw.part(p, 0)
			}
			if !complete {
				return tw.err
			}
			for _, p := range m.Parts {
				delete(f.early, p.Base().ID)
			}
			if key := info.ID + "#end"; !f.printed[key] {
				f.printed[key] = true
				f.endGrowing(tw)
				tw.footer(info, 0)
			}
		}
	}
	return tw.err
}

// underWay shows the part that is not settled yet: a streaming text as it
// grows, a tool waiting for a person once.
func (f *Follower) underWay(tw *textWriter, p mapper.Part) {
	switch pt := p.(type) {
	case *mapper.TextPart:
		if pt.ID != f.growing {
			f.endGrowing(tw)
			f.growing, f.shown, f.growMsg = pt.ID, "", pt.MessageID
		}
		f.stored = pt.Text
		f.grow(tw, pt.Text)
	case *mapper.ToolPart:
		key := pt.CallID + "#blocked"
		if pt.State.Status != mapper.StatusBlocked || pt.State.Block == nil || f.printed[key] {
			return
		}
		f.printed[key] = true
		f.endGrowing(tw)
		tw.tool(pt, 0)
	}
}

// grow writes what text has beyond the text on screen. Trailing line
// breaks wait: the settled text ends its line once. Text that does not
// begin with what is on screen (a stored version older than the live text
// shown) writes nothing.
func (f *Follower) grow(tw *textWriter, text string) {
	trimmed := strings.TrimRight(text, "\n")
	if len(trimmed) > len(f.shown) && strings.HasPrefix(trimmed, f.shown) {
		tw.write(trimmed[len(f.shown):])
		f.shown = trimmed
	}
}

// Live writes the text a part has now when it is the text being shown as
// it grows (the part still under way): text is the part's whole text,
// from its stored versions and the live deltas since
// (session.LiveText). A part that is not the one growing on screen
// writes nothing; its stored versions bring it. Errors: w's.
func (f *Follower) Live(w io.Writer, partID, text string) error {
	if partID == "" || partID != f.growing {
		return nil
	}
	tw := &textWriter{w: w, opts: f.opts}
	f.grow(tw, text)
	return tw.err
}

// Growing returns the text part shown as it grows: its message and part
// ids and its text in the last stored version Update saw (for
// session.LiveText.Stored); ok false when none is.
func (f *Follower) Growing() (messageID, partID, stored string, ok bool) {
	if f.growing == "" {
		return "", "", "", false
	}
	return f.growMsg, f.growing, f.stored, true
}

// endGrowing ends the line of a text shown as it grew, when another line
// comes before it settled.
func (f *Follower) endGrowing(tw *textWriter) {
	if f.growing != "" && f.shown != "" {
		tw.write("\n")
	}
	f.growing, f.shown, f.growMsg, f.stored = "", "", "", ""
}

// movedOn reports whether parts[i] is a text or reasoning part that
// another part follows: the model went on past it, so it is written
// although no end was reported (ACP never reports one), and what follows
// it is not held back until its message completes.
func movedOn(parts []mapper.Part, i int) bool {
	switch parts[i].(type) {
	case *mapper.TextPart, *mapper.ReasoningPart:
		return i < len(parts)-1
	}
	return false
}

// noteEarly remembers a text or reasoning part written before its message
// completed, with the text written.
func (f *Follower) noteEarly(p mapper.Part) {
	switch pt := p.(type) {
	case *mapper.TextPart:
		f.early[pt.ID] = strings.TrimRight(pt.Text, "\n")
	case *mapper.ReasoningPart:
		f.early[pt.ID] = strings.TrimRight(pt.Text, "\n")
	}
}

// grewAfter writes, on lines of its own, text an agent added to a part
// written early (its message went on past it, then the agent wrote more
// into it): nothing it says is left out, though happy log shows it in
// place.
func (f *Follower) grewAfter(tw *textWriter, p mapper.Part) {
	written, ok := f.early[p.Base().ID]
	if !ok {
		return
	}
	var text, prefix string
	switch pt := p.(type) {
	case *mapper.TextPart:
		text = pt.Text
	case *mapper.ReasoningPart:
		text, prefix = pt.Text, "(thinking) "
	}
	trimmed := strings.TrimRight(text, "\n")
	if len(trimmed) <= len(written) || !strings.HasPrefix(trimmed, written) {
		return // unchanged, or rewritten whole (happy log shows the final text)
	}
	f.early[p.Base().ID] = trimmed
	f.endGrowing(tw)
	tw.block(0, prefix, trimmed[len(written):])
}

// partSettled reports whether a part will not change any more.
func partSettled(p mapper.Part) bool {
	switch pt := p.(type) {
	case *mapper.TextPart:
		return pt.Time != nil && pt.Time.End != nil
	case *mapper.ReasoningPart:
		return pt.Time.End != nil
	case *mapper.ToolPart:
		return pt.State.Status == mapper.StatusCompleted || pt.State.Status == mapper.StatusError
	}
	return true
}

// write writes s as it is (no indent, no newline added).
func (tw *textWriter) write(s string) {
	if tw.err != nil || s == "" {
		return
	}
	_, tw.err = io.WriteString(tw.w, s)
}
