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
// way waits for it. Two things are shown before they settle, because a
// reader watches for them: a streaming text grows on screen as it arrives,
// and a tool that waits for a person is announced with its "waiting for
// permission" (or question) line, then written whole once it ends.
// Subagent sessions are written under the tool that started them, when it
// ends. The zero value is not usable: use NewFollower.
type Follower struct {
	opts    TextOptions
	printed map[string]bool // part ids, "<call>#blocked" announcements, "<message>#end" footers
	growing string          // the text part shown as it grows ("" for none)
	shown   int             // bytes of it on screen
}

// NewFollower returns a Follower with Text's options (OutputLines 3 when
// 0; the session header is the caller's to write).
func NewFollower(opts TextOptions) *Follower {
	if opts.OutputLines == 0 {
		opts.OutputLines = 3
	}
	return &Follower{opts: opts, printed: map[string]bool{}}
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
			for _, p := range m.Parts {
				id := p.Base().ID
				if f.printed[id] {
					continue
				}
				if !complete && !partSettled(p) {
					f.underWay(tw, p)
					return tw.err
				}
				f.printed[id] = true
				if id == f.growing {
					if pt, ok := p.(*mapper.TextPart); ok {
						trimmed := strings.TrimRight(pt.Text, "\n")
						tw.write(trimmed[min(f.shown, len(trimmed)):] + "\n")
						f.growing = ""
						continue
					}
				}
				f.endGrowing(tw)
				tw.part(p, 0)
			}
			if !complete {
				return tw.err
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
			f.growing, f.shown = pt.ID, 0
		}
		// Trailing line breaks wait: the settled text ends its line once.
		if trimmed := strings.TrimRight(pt.Text, "\n"); len(trimmed) > f.shown {
			tw.write(trimmed[f.shown:])
			f.shown = len(trimmed)
		}
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

// endGrowing ends the line of a text shown as it grew, when another line
// comes before it settled.
func (f *Follower) endGrowing(tw *textWriter) {
	if f.growing != "" && f.shown > 0 {
		tw.write("\n")
	}
	f.growing, f.shown = "", 0
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
