package export

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// TextOptions tune Text.
type TextOptions struct {
	// OutputLines is how many lines of a tool's output are shown (3 when 0;
	// negative shows all).
	OutputLines int
	// SessionID and Title, when set, replace the root session's id and
	// title in the header line (a reader shows the relay's session id and
	// the metadata title, as happy sessions does).
	SessionID, Title string
	// Stopped says that nothing runs the session any more (ended, or stale:
	// its happy stopped or cannot reach the relay): a tool still pending,
	// running or blocked is shown as InterruptedTool, and an assistant
	// message that never finished gets the line InterruptedMessage. The
	// transcript itself is not changed.
	Stopped bool
	// Status, when set, is one more header line (indented) saying the
	// session's state, e.g. how long a stale session's heartbeat is missing.
	Status string
}

// What a reader shows of a session's open parts when nothing runs it any
// more (TextOptions.Stopped): the web app shows the same words.
const (
	InterruptedTool    = "interrupted (its happy stopped)"
	InterruptedMessage = "(interrupted: its happy stopped before this message finished)"
)

// Text writes a readable rendering of a transcript: prompts, answers,
// thinking, tool calls with their status, input summary, permission
// decisions (a rule's with the rule) and output, child sessions indented
// under the tool that started them (one no tool names after the messages of
// its parent session), user text the agent wrote itself (a compaction's
// summary, a terminal command's record) on one "(synthetic)" line, the todo
// list, and a warning listing dropped inputs when the transcript is
// incomplete. The format is for people, not for parsing (use
// the JSON document for that).
func Text(w io.Writer, t mapper.Transcript, opts TextOptions) error {
	if opts.OutputLines == 0 {
		opts.OutputLines = 3
	}
	// Lines are gathered in a buffer and reach w in large writes, not one
	// write (a system call on a terminal or file) per line.
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := &textWriter{w: bw, opts: opts, children: map[string]*mapper.Transcript{}, shown: map[string]bool{}}
	tw.index(&t)
	tw.header(t.Session)
	tw.session(&t, 0)
	if len(t.Todos) > 0 {
		tw.line(0, "todos:")
		for _, td := range t.Todos {
			tw.line(1, "%s %s", todoMark(td.Status), td.Content)
		}
	}
	var dropped, refused []agent.Dropped
	for _, d := range collectDropped(&t) {
		if d.Source == agent.SourceControl {
			refused = append(refused, d)
		} else {
			dropped = append(dropped, d)
		}
	}
	if len(dropped) > 0 {
		tw.line(0, "warning: %d input(s) were dropped; this transcript is incomplete:", len(dropped))
		tw.dropped(dropped)
	}
	if len(refused) > 0 {
		tw.line(0, "warning: %d control input(s) were refused and not acted on (replayed, for another target, too old or unsealed):", len(refused))
		tw.dropped(refused)
	}
	if tw.err == nil {
		tw.err = bw.Flush()
	}
	return tw.err
}

// Header writes the first lines of Text: "session ID — TITLE" (opts'
// SessionID and Title when set, "(untitled)" without a title) and, when the
// session has a folder, "  in FOLDER". Followers (Follower) write it once
// before their first Update. Errors: w's.
func Header(w io.Writer, s mapper.Session, opts TextOptions) error {
	tw := &textWriter{w: w, opts: opts}
	tw.header(s)
	return tw.err
}

func (tw *textWriter) header(s mapper.Session) {
	title := s.Title
	if tw.opts.Title != "" {
		title = tw.opts.Title
	}
	if title == "" {
		title = "(untitled)"
	}
	id := s.ID
	if tw.opts.SessionID != "" {
		id = tw.opts.SessionID
	}
	tw.line(0, "session %s — %s", id, title)
	if s.Directory != "" {
		tw.line(0, "  in %s", s.Directory)
	}
	if tw.opts.Status != "" {
		tw.line(0, "  %s", tw.opts.Status)
	}
}

type textWriter struct {
	w        io.Writer
	opts     TextOptions
	children map[string]*mapper.Transcript
	shown    map[string]bool // child sessions already written under their tool
	err      error
}

func (tw *textWriter) index(t *mapper.Transcript) {
	for i := range t.Children {
		c := &t.Children[i]
		tw.children[c.Session.ID] = c
		tw.index(c)
	}
}

func (tw *textWriter) line(indent int, format string, a ...any) {
	if tw.err != nil {
		return
	}
	_, tw.err = fmt.Fprintf(tw.w, "%s%s\n", strings.Repeat("  ", indent), terminalSafe(fmt.Sprintf(format, a...)))
}

// terminalSafe makes one output line safe to print on a terminal whatever
// the transcript holds (names, prompts and outputs come from other devices
// and agents): terminal control sequences are removed, a line break inside
// the line is shown as " ⏎ " (so data cannot forge a line of its own), and
// other C0 and C1 control characters but tab are removed.
func terminalSafe(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	s = ansiCSI.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, s)
}

// isControl reports a C0 or C1 control character other than tab, or DEL.
func isControl(r rune) bool {
	return (r < 0x20 && r != '\t') || (r >= 0x7f && r < 0xa0)
}

func (tw *textWriter) session(t *mapper.Transcript, indent int) {
	for _, m := range t.Messages {
		switch info := m.Info.(type) {
		case *mapper.UserMessage:
			tw.userParts(m.Parts, indent)
			if r := ReceiptLine(info.Time); r != "" {
				tw.line(indent+1, "%s", r)
			}
		case *mapper.AssistantMessage:
			tw.assistant(info, m.Parts, indent)
		}
	}
	// Child sessions no tool call names (a subagent whose link to its call
	// was lost) come after the session's own messages.
	for i := range t.Children {
		c := &t.Children[i]
		if tw.shown[c.Session.ID] {
			continue
		}
		tw.shown[c.Session.ID] = true
		title := c.Session.Title
		if title == "" {
			title = "(untitled)"
		}
		tw.line(indent, "subagent %s — %s (not linked to a tool call)", c.Session.ID, title)
		tw.session(c, indent+1)
	}
}

// ReceiptLine is the compact line of a prompt's receipts, "" for a prompt
// without any (typed where the agent runs, or not yet taken up by the
// session): "✓ stored · received", then "· handed" once the agent took it,
// or "· started 1.2s later" once it started; times are from when the
// session received it (one clock), and a wait for the running turn of a
// second or more shows as "· handed 30.0s later".
func ReceiptLine(t mapper.UserTime) string {
	if t.Received == nil {
		return ""
	}
	b := strings.Builder{}
	b.WriteString("✓ stored · received")
	later := func(at int64) string {
		d := max(time.Duration(at-*t.Received)*time.Millisecond, 0)
		if d < time.Minute {
			return fmt.Sprintf("%.1fs later", d.Seconds())
		}
		return d.Round(time.Second).String() + " later"
	}
	if t.Handed == nil {
		return b.String()
	}
	if *t.Handed-*t.Received >= 1000 {
		b.WriteString(" · handed " + later(*t.Handed))
	} else if t.Started == nil {
		b.WriteString(" · handed")
	}
	if t.Started != nil {
		b.WriteString(" · started " + later(*t.Started))
	}
	return b.String()
}

// userParts writes a user message's parts: typed text after "> ", text the
// agent wrote itself on one "(synthetic)" line, files.
func (tw *textWriter) userParts(parts []mapper.Part, indent int) {
	for _, p := range parts {
		switch pt := p.(type) {
		case *mapper.TextPart:
			if pt.Synthetic {
				// Written by the agent, not typed: a compaction's
				// summary, a terminal command's record or output.
				tw.line(indent, "(synthetic) %s", oneLine(strings.Join(strings.Fields(plain(pt.Text)), " "), 120))
				continue
			}
			tw.block(indent, "> ", pt.Text)
		case *mapper.FilePart:
			tw.line(indent, "> %s", FileLabel(pt))
		}
	}
}

func (tw *textWriter) assistant(info *mapper.AssistantMessage, parts []mapper.Part, indent int) {
	for _, p := range parts {
		tw.part(p, indent)
	}
	tw.footer(info, indent)
}

// part writes one part of an assistant message.
func (tw *textWriter) part(p mapper.Part, indent int) {
	{
		switch pt := p.(type) {
		case *mapper.TextPart:
			tw.block(indent, "", pt.Text)
		case *mapper.ReasoningPart:
			tw.block(indent, "(thinking) ", pt.Text)
		case *mapper.ToolPart:
			tw.tool(pt, indent)
		case *mapper.CompactionPart:
			if pt.Auto {
				tw.line(indent, "(context compacted automatically)")
			} else {
				tw.line(indent, "(context compacted)")
			}
		case *mapper.RetryPart:
			tw.line(indent, "(retry %d: %s)", pt.Attempt, pt.Error.Data.Message)
		case *mapper.FilePart:
			tw.line(indent, "%s", FileLabel(pt))
		case *mapper.PatchPart:
			tw.line(indent, "(changed %s)", strings.Join(pt.Files, ", "))
		case *mapper.UnknownPart:
			tw.line(indent, "(part of unknown type %q)", pt.Type)
		}
	}
}

// footer writes how an assistant message ended when that was not well.
func (tw *textWriter) footer(info *mapper.AssistantMessage, indent int) {
	if tw.opts.Stopped && Unfinished(info) {
		tw.line(indent, "%s", InterruptedMessage)
		return
	}
	if info.Error != nil {
		tw.line(indent, "error (%s): %s", info.Error.Data.Kind, oneLine(info.Error.Data.Message, 200))
	} else if info.Finish == agent.FinishAborted {
		tw.line(indent, "(turn aborted)")
	}
}

// Unfinished reports whether an assistant message is still being written:
// no completion time or no finish reason.
func Unfinished(info *mapper.AssistantMessage) bool {
	return info.Time.Completed == nil || info.Finish == ""
}

// Open reports whether a tool has not settled: pending, running or blocked.
func Open(st mapper.ToolStatus) bool {
	return st == mapper.StatusPending || st == mapper.StatusRunning || st == mapper.StatusBlocked
}

func (tw *textWriter) tool(pt *mapper.ToolPart, indent int) {
	st := &pt.State
	status := string(st.Status)
	stopped := tw.opts.Stopped && Open(st.Status)
	if stopped {
		status = InterruptedTool
	}
	tw.line(indent, "● %s — %s  [%s]", ToolHead(pt), status, pt.CallID)
	if b := st.Block; b != nil {
		switch {
		case b.Type == mapper.BlockPermission && !b.Resolved() && stopped:
			tw.line(indent+1, "was waiting for permission: %s %s", b.Permission, strings.Join(b.Patterns, " "))
		case b.Type == mapper.BlockPermission && !b.Resolved():
			tw.line(indent+1, "waiting for permission: %s %s", b.Permission, strings.Join(b.Patterns, " "))
		case b.Type == mapper.BlockPermission && b.Rule != nil:
			verb := "allowed"
			if b.Decision == agent.DecisionReject {
				verb = "denied"
			}
			tw.line(indent+1, "permission %s %s: %s, %s by rule %s", b.Permission, strings.Join(b.Patterns, " "), b.Decision, verb, b.Rule)
		case b.Type == mapper.BlockPermission:
			reason := ""
			if b.Reason != "" {
				reason = " (" + b.Reason + ")"
			}
			tw.line(indent+1, "permission %s %s: %s%s", b.Permission, strings.Join(b.Patterns, " "), b.Decision, reason)
		case b.Type == mapper.BlockQuestion:
			for i, q := range b.Questions {
				ans := "(waiting)"
				if b.Resolved() {
					ans = "(not answered: " + b.Reason + ")"
					if i < len(b.Answers) {
						ans = strings.Join(b.Answers[i], ", ")
					}
				}
				tw.line(indent+1, "question: %s → %s", q.Question, ans)
			}
		}
	}
	if id, _ := st.Metadata["sessionId"].(string); id != "" {
		if c := tw.children[id]; c != nil && !tw.shown[id] {
			tw.shown[id] = true
			// A child session with nothing in it gets no header: a line
			// naming a subagent that says nothing only puzzles.
			if len(c.Messages) > 0 {
				head := "subagent " + c.Session.ID
				if c.Session.Title != "" {
					head += " — " + c.Session.Title
				}
				tw.line(indent+1, "%s", head)
				tw.session(c, indent+2)
			}
		}
	}
	for i := range st.Attachments {
		tw.line(indent+1, "%s", FileLabel(&st.Attachments[i]))
	}
	switch st.Status {
	case mapper.StatusCompleted:
		tw.output(indent+1, st.Output)
	case mapper.StatusError:
		tw.line(indent+1, "error: %s", oneLine(st.Error, 200))
	}
}

// FileLabel is how happy log shows a file part: name, type, size (and
// pixels for an image) from its blob source, and the blob reference that
// happy attachment get takes; an inline file shows its size instead of its
// data: URL. E.g. "[file shot.png, image/png, 1.2 KiB, 800x600]
// sessions/s1/attachments/u.enc".
func FileLabel(f *mapper.FilePart) string {
	name := f.Filename
	if name == "" {
		name = "(unnamed)"
	}
	fields := []string{name, f.Mime}
	if src, ok := mapper.ParseBlobSource(f.Source); ok {
		fields = append(fields, byteSize(src.Size))
		if src.Width > 0 {
			fields = append(fields, fmt.Sprintf("%dx%d", src.Width, src.Height))
		}
	} else if strings.HasPrefix(f.URL, "data:") {
		fields = append(fields, "inline")
	}
	label := "[file " + strings.Join(fields, ", ") + "]"
	if f.URL != "" && !strings.HasPrefix(f.URL, "data:") {
		label += " " + f.URL
	}
	return label
}

// byteSize is n bytes in B, KiB or MiB with one decimal.
func byteSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func (tw *textWriter) output(indent int, out string) {
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return
	}
	lines := strings.Split(out, "\n")
	n := len(lines)
	if tw.opts.OutputLines > 0 && n > tw.opts.OutputLines {
		lines = lines[:tw.opts.OutputLines]
	}
	for _, l := range lines {
		tw.line(indent, "│ %s", l)
	}
	if len(lines) < n {
		tw.line(indent, "│ … %d more lines", n-len(lines))
	}
}

func (tw *textWriter) block(indent int, prefix, text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	for i, l := range strings.Split(text, "\n") {
		if i == 0 {
			tw.line(indent, "%s%s", prefix, l)
		} else {
			tw.line(indent, "%s%s", strings.Repeat(" ", len([]rune(prefix))), l)
		}
	}
}

// toolSummary is what a tool line says after the tool's name: the
// telling member of its canonical input (agent.ToolBash's command, the
// path of read, write and edit, a glob or grep pattern and where, the URL,
// the query, the subagent's description, the number of todos, the first
// question, the plan's first line), else its title (unless that is the
// tool's name), else the names of its input's members.
func toolSummary(tool string, in map[string]any, title string) string {
	get := func(k string) string { s, _ := in[k].(string); return s }
	where := func(what string) string {
		if p := get("path"); p != "" && what != "" {
			return what + " in " + p
		}
		return what
	}
	var sum string
	switch tool {
	case agent.ToolBash:
		sum = get("command")
	case agent.ToolRead, agent.ToolWrite, agent.ToolEdit:
		sum = get("path")
	case agent.ToolGlob, agent.ToolGrep:
		sum = where(get("pattern"))
	case agent.ToolFetch:
		sum = get("url")
	case agent.ToolSearch:
		sum = get("query")
	case agent.ToolTask:
		if sum = get("description"); sum == "" {
			sum = get("agent")
		}
	case agent.ToolTodo:
		if todos, ok := in["todos"].([]any); ok {
			sum = fmt.Sprintf("%d todos", len(todos))
		}
	case agent.ToolQuestion:
		if qs, ok := in["questions"].([]any); ok && len(qs) > 0 {
			q, _ := qs[0].(map[string]any)
			sum, _ = q["question"].(string)
			if len(qs) > 1 {
				sum += fmt.Sprintf(" (+%d more)", len(qs)-1)
			}
		}
	case agent.ToolPlan:
		sum = get("plan")
	}
	if sum == "" && title != tool {
		sum = title
	}
	if sum != "" {
		return oneLine(firstLineOf(sum), 80)
	}
	if len(in) == 0 {
		return ""
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "(" + strings.Join(keys, ", ") + ")"
}

// ansiCSI matches a terminal control sequence (colour, dim, …).
var ansiCSI = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// plain drops terminal control sequences and other control characters but
// newlines and tabs, so agent-written text cannot drive the reader's terminal.
func plain(s string) string {
	s = ansiCSI.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// firstLineOf is s up to its first line break.
func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func oneLine(s string, max int) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ⏎ ")
	r := []rune(s)
	if len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

func todoMark(s agent.TodoStatus) string {
	switch s {
	case agent.TodoCompleted:
		return "[x]"
	case agent.TodoInProgress:
		return "[~]"
	case agent.TodoCancelled:
		return "[-]"
	}
	return "[ ]"
}

// dropped lists refused inputs, one line each: where, why, the detail.
func (tw *textWriter) dropped(ds []agent.Dropped) {
	for _, d := range ds {
		where := d.Source
		if d.Line > 0 {
			where += fmt.Sprintf(" line %d", d.Line)
		}
		if d.Kind != "" {
			where += " (" + d.Kind + ")"
		}
		tw.line(1, "- %s: %s %s", where, d.Reason, oneLine(d.Detail, 120))
	}
}

func collectDropped(t *mapper.Transcript) []agent.Dropped {
	out := append([]agent.Dropped(nil), t.Dropped...)
	for i := range t.Children {
		out = append(out, collectDropped(&t.Children[i])...)
	}
	return out
}
