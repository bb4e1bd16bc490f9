package app

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
)

// TurnView shows on a terminal that is not the agent's (happy claude while
// Claude runs in remote mode) the turn the session runs, from the bus events
// the runner publishes (OnBus): the prompt ("> text", as PromptLine shows a
// prompt from another device), the assistant's text as it streams, and one
// line per state a tool of the root session reaches ("● bash echo hi —
// running", `happy log`'s tool head). Lines end with "\r\n": the terminal
// is in raw mode meanwhile.
//
// It writes only while active (SetActive): the agent's own terminal UI owns
// the terminal otherwise. What the running turn showed before it became
// active (the prompt that made Claude leave its terminal UI, say) is shown
// when it does; a turn's record is forgotten once the session is idle.
// Notices written through Notices start on a line of their own. Its methods
// are safe for concurrent use.
type TurnView struct {
	// Out receives the turn (the terminal).
	Out io.Writer

	mu      sync.Mutex
	active  bool
	root    string                 // root session id of the transcript
	roles   map[string]mapper.Role // message id → role
	items   []*viewItem            // the running turn, in order
	byID    map[string]*viewItem   // part id → item
	last    *viewItem              // the item written last
	midLine bool                   // the terminal's cursor is not at a line start
}

// viewItem is one thing of the running turn: a prompt, an assistant text
// or a tool.
type viewItem struct {
	kind   string // "prompt", "text", "tool"
	text   string // prompt or text so far; a tool's head
	shown  int    // bytes of text shown (prompt: 1 once shown)
	status string // a tool's state
	seen   string // the tool's state shown last
}

// SetActive starts (true) or stops (false) writing. Starting shows what
// the running turn showed so far; stopping ends a line left open, and
// nothing is written after it returns until the next start.
func (v *TurnView) SetActive(on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if on == v.active {
		return
	}
	if !on {
		v.endLine()
		v.active = false
		return
	}
	v.active = true
	v.render()
}

// Notices returns a writer for notices on w (the terminal's error output):
// each write starts on a line of its own, in order with the turn.
func (v *TurnView) Notices(w io.Writer) io.Writer { return noticeWriter{v: v, w: w} }

type noticeWriter struct {
	v *TurnView
	w io.Writer
}

func (n noticeWriter) Write(p []byte) (int, error) {
	n.v.mu.Lock()
	defer n.v.mu.Unlock()
	n.v.endLine()
	n.v.last = nil
	return n.w.Write(p)
}

// OnBus follows the session's changes (see TurnView).
func (v *TurnView) OnBus(evs []mapper.BusEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.roles == nil {
		v.roles, v.byID = map[string]mapper.Role{}, map[string]*viewItem{}
	}
	for _, ev := range evs {
		switch e := ev.(type) {
		case *mapper.SessionCreated:
			if e.Info.ParentID == "" && v.root == "" {
				v.root = e.Info.ID
			}
		case *mapper.SessionStatus:
			if e.SessionID == v.root && e.Status.Type == mapper.SessionIdle {
				v.render()
				v.endLine()
				v.items, v.byID, v.roles, v.last = nil, map[string]*viewItem{}, map[string]mapper.Role{}, nil
			}
		case *mapper.MessageUpdated:
			v.roles[e.Info.MessageID()] = e.Info.MessageRole()
		case *mapper.MessagePartUpdated:
			v.part(e.Part)
		case *mapper.MessagePartDelta:
			if it := v.byID[e.PartID]; it != nil && it.kind == "text" && e.Field == "text" {
				it.text += e.Delta
			}
		}
		v.render() // every state a tool passes through gets its line
	}
}

// part records a prompt, an assistant text or a tool state of the root
// session.
func (v *TurnView) part(part mapper.Part) {
	base := part.Base()
	if base.SessionID != v.root {
		return
	}
	switch pt := part.(type) {
	case *mapper.TextPart:
		if pt.Synthetic {
			return
		}
		kind := "text"
		switch v.roles[pt.MessageID] {
		case mapper.RoleUser:
			kind = "prompt"
		case mapper.RoleAssistant:
		default:
			return
		}
		it := v.item(pt.ID, kind)
		if kind == "prompt" || len(pt.Text) >= len(it.text) {
			it.text = pt.Text
		}
	case *mapper.ToolPart:
		if pt.State.Status == mapper.StatusPending {
			return // its input still streams in
		}
		it := v.item(pt.ID, "tool")
		it.text, it.status = export.ToolHead(pt), toolWord(pt)
	}
}

// toolWord names a tool's state on its line.
func toolWord(pt *mapper.ToolPart) string {
	switch pt.State.Status {
	case mapper.StatusBlocked:
		if b := pt.State.Block; b != nil && b.Type == mapper.BlockQuestion {
			return "waiting for an answer"
		}
		return "waiting for permission"
	case mapper.StatusError:
		if e := firstLine(pt.State.Error); e != "" {
			return "error: " + e
		}
	}
	return string(pt.State.Status)
}

func (v *TurnView) item(id, kind string) *viewItem {
	it := v.byID[id]
	if it == nil {
		it = &viewItem{kind: kind}
		v.byID[id] = it
		v.items = append(v.items, it)
	}
	return it
}

// render writes, while active, what the items hold and the terminal does
// not show yet (v.mu held).
func (v *TurnView) render() {
	if !v.active {
		return
	}
	for _, it := range v.items {
		switch it.kind {
		case "prompt":
			if it.shown == 0 && strings.TrimSpace(it.text) != "" {
				it.shown = 1
				v.line(it, "> "+strings.TrimSpace(it.text))
			}
		case "tool":
			if it.status != it.seen {
				it.seen = it.status
				v.line(it, "● "+it.text+" — "+it.status)
			}
		case "text":
			if len(it.text) <= it.shown {
				continue
			}
			if v.last != it {
				v.endLine()
			}
			add := it.text[it.shown:]
			if it.shown == 0 {
				add = strings.TrimLeft(add, "\n")
			}
			it.shown = len(it.text)
			if add == "" {
				continue
			}
			fmt.Fprint(v.Out, crlf(add))
			v.last, v.midLine = it, !strings.HasSuffix(add, "\n")
		}
	}
}

// line writes one whole line for it (v.mu held).
func (v *TurnView) line(it *viewItem, s string) {
	v.endLine()
	fmt.Fprint(v.Out, crlf(s)+"\r\n")
	v.last = it
}

// endLine ends a line left open by streamed text (v.mu held).
func (v *TurnView) endLine() {
	if v.midLine {
		fmt.Fprint(v.Out, "\r\n")
		v.midLine = false
	}
}

// crlf gives every line end of s a carriage return (raw terminal).
func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}
