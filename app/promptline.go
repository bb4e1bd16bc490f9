package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/mapper"
)

// promptMax is the longest prompt line read (bytes); a longer one is not
// sent, and a notice says so.
const promptMax = 4 << 20

// PromptLine is the terminal of an interactive session whose agent has no
// terminal UI of its own (happy codex without -p). Every line read from In
// is a prompt (blank lines are skipped), queued behind the running turn
// like a prompt from the relay; the end of In (Ctrl-D at a terminal) ends
// the session once no turn runs and no prompt waits (SessionOptions.Local).
// What the session says goes to the terminal as it happens, from the bus
// events the runner publishes (OnBus): the text of every assistant message
// of the root session once the message is complete, and prompts that came
// from other devices, on Out; notices on Err: a tool waiting for a
// permission or a question with the commands that answer it, and Marker
// whenever the session is idle and waits for a prompt.
//
// Use it for one session: pass Prompts to SessionOptions.Local, OnBus to
// SessionOptions.OnBus and call SetSession from SessionOptions.OnCreated.
// Its methods are safe for concurrent use.
type PromptLine struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Agent names the agent in notices ("codex").
	Agent string
	// Marker is written to Err whenever the session waits for a prompt
	// ("" writes none; a terminal gets e.g. "codex> ").
	Marker string

	mu      sync.Mutex
	sid     string                 // relay session id, once known
	root    string                 // root session id of the transcript
	roles   map[string]mapper.Role // message id → role
	parts   map[string][]string    // assistant message id → its text part ids in order
	texts   map[string]string      // text part id → text
	printed map[string]bool        // assistant messages and user parts already shown
	typed   []string               // prompts typed here, not yet seen in the transcript
	noticed map[string]bool        // tool calls whose block was announced
	busy    bool
	marked  bool // the marker is the last thing on the terminal
}

// Prompts starts reading In and delivers each prompt typed; the channel
// closes at the end of In (or when ctx ends). A read error other than the
// end is written to Err and ends the input too.
func (p *PromptLine) Prompts(ctx context.Context) <-chan agent.Prompt {
	ch := make(chan agent.Prompt)
	go func() {
		defer close(ch)
		lr, err := linereader.New(p.In, linereader.Options{MaxLine: promptMax})
		if err != nil {
			p.Notice("happy: %v", err)
			return
		}
		send := func(line []byte) bool {
			text := strings.TrimSpace(string(line))
			p.mu.Lock()
			p.marked = false // the typed line ended it
			p.mu.Unlock()
			if text == "" {
				p.showMarker()
				return true
			}
			p.mu.Lock()
			p.typed = append(p.typed, text)
			p.mu.Unlock()
			select {
			case ch <- agent.Prompt{Text: text}:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			l, err := lr.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					p.Notice("happy: reading the prompt line: %v", err)
				} else if rest := lr.Pending(); len(rest) > 0 {
					send(rest) // a last line without its newline
				}
				return
			}
			if l.Oversize {
				p.Notice("happy: a prompt of %d bytes is longer than %d and was not sent", l.Size, promptMax)
				continue
			}
			if !send(l.Data) {
				return
			}
		}
	}()
	return ch
}

// SetSession records the relay session's id (for the commands the notices
// name) and shows the marker when the session waits for a prompt.
func (p *PromptLine) SetSession(id string) {
	p.mu.Lock()
	p.sid = id
	busy := p.busy
	p.mu.Unlock()
	if !busy {
		p.showMarker()
	}
}

// OnBus renders the session's changes on the terminal (see PromptLine).
func (p *PromptLine) OnBus(evs []mapper.BusEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.roles == nil {
		p.roles, p.parts, p.texts = map[string]mapper.Role{}, map[string][]string{}, map[string]string{}
		p.printed, p.noticed = map[string]bool{}, map[string]bool{}
	}
	// A tool's last state in the batch is the one shown: a request and
	// the rule's answer to it come together, and only the answer counts.
	last := map[string]int{}
	for i, ev := range evs {
		if e, ok := ev.(*mapper.MessagePartUpdated); ok {
			if tp, ok := e.Part.(*mapper.ToolPart); ok {
				last[tp.ID] = i
			}
		}
	}
	for i, ev := range evs {
		switch e := ev.(type) {
		case *mapper.SessionCreated:
			if e.Info.ParentID == "" && p.root == "" {
				p.root = e.Info.ID
			}
		case *mapper.SessionStatus:
			if e.SessionID != p.root {
				continue
			}
			wasBusy := p.busy
			p.busy = e.Status.Type != mapper.SessionIdle
			if wasBusy && !p.busy {
				p.markLocked()
			}
		case *mapper.MessageUpdated:
			p.message(e.Info)
		case *mapper.MessagePartUpdated:
			if tp, ok := e.Part.(*mapper.ToolPart); ok && last[tp.ID] != i {
				continue
			}
			p.part(e.Part)
		}
	}
}

// message notes a message's role and shows a completed assistant message
// of the root session.
func (p *PromptLine) message(info mapper.Message) {
	id := info.MessageID()
	p.roles[id] = info.MessageRole()
	a, ok := info.(*mapper.AssistantMessage)
	if !ok || a.SessionID != p.root || a.Time.Completed == nil || p.printed[id] {
		return
	}
	p.printed[id] = true
	var texts []string
	for _, pid := range p.parts[id] {
		if t := strings.TrimSpace(p.texts[pid]); t != "" {
			texts = append(texts, t)
		}
		delete(p.texts, pid)
	}
	delete(p.parts, id)
	if len(texts) > 0 {
		p.leaveMarker()
		fmt.Fprintln(p.Out, strings.Join(texts, "\n"))
	}
}

// part keeps assistant text for when its message completes, shows prompts
// from other devices, and announces tools waiting for a person.
func (p *PromptLine) part(part mapper.Part) {
	switch pt := part.(type) {
	case *mapper.TextPart:
		if pt.Synthetic || pt.SessionID != p.root {
			return
		}
		switch p.roles[pt.MessageID] {
		case mapper.RoleAssistant:
			if !slices.Contains(p.parts[pt.MessageID], pt.ID) {
				p.parts[pt.MessageID] = append(p.parts[pt.MessageID], pt.ID)
			}
			p.texts[pt.ID] = pt.Text
		case mapper.RoleUser:
			if p.printed[pt.ID] {
				return
			}
			p.printed[pt.ID] = true
			text := strings.TrimSpace(pt.Text)
			if i := slices.Index(p.typed, text); i >= 0 {
				p.typed = slices.Delete(p.typed, i, i+1) // typed here: already on screen
				return
			}
			p.leaveMarker()
			fmt.Fprintf(p.Out, "> %s\n", text)
		}
	case *mapper.ToolPart:
		b := pt.State.Block
		if pt.State.Status != mapper.StatusBlocked || b == nil || b.Resolved() || p.noticed[pt.CallID] {
			return
		}
		p.noticed[pt.CallID] = true
		sid := p.sid
		if sid == "" {
			sid = "SESSION"
		}
		p.leaveMarker()
		if b.Type == mapper.BlockQuestion {
			var qs []string
			for _, q := range b.Questions {
				qs = append(qs, q.Question)
			}
			fmt.Fprintf(p.Err, "happy: %s asks: %s — answer with: happy answer %s %s LABEL…\n", p.Agent, strings.Join(qs, " / "), sid, pt.CallID)
			return
		}
		fmt.Fprintf(p.Err, "happy: %s asks to use %s %s — happy approve %s %s (or happy deny %s %s)\n",
			p.Agent, b.Permission, strings.Join(b.Patterns, " "), sid, pt.CallID, sid, pt.CallID)
	}
}

func (p *PromptLine) showMarker() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.markLocked()
}

// markLocked writes the marker (p.mu held).
func (p *PromptLine) markLocked() {
	if p.Marker != "" && !p.marked {
		fmt.Fprint(p.Err, p.Marker)
		p.marked = true
	}
}

// leaveMarker ends the marker's line before something else is written
// (p.mu held).
func (p *PromptLine) leaveMarker() {
	if p.marked {
		fmt.Fprintln(p.Err)
		p.marked = false
	}
}

// Notice writes one line to Err, in order with everything else the
// prompt line writes (the caller's own notices go through it, so no two
// writers share the terminal).
func (p *PromptLine) Notice(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaveMarker()
	fmt.Fprintf(p.Err, format+"\n", a...)
}
