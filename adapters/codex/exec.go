package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// SourceExec is the drop source of ExecDecoder.
const SourceExec = "codex-exec"

// ExecDecoder maps the JSONL that `codex exec --json` prints (one-shot
// runs: no approvals, no control channel) to agent events:
//
//	thread.started        SessionInfo (thread id)
//	turn.started          TurnStarted (turn key "exec-turn-N")
//	turn.completed        TurnEnded completed (its usage is the turn's total, not a
//	                      step's, so it is not reported as a message's usage)
//	turn.failed           AgentError + TurnEnded failed
//	error                 AgentError
//	item.started / item.updated / item.completed:
//	  agent_message       TextFinal (block = item id)
//	  reasoning           ReasoningFinal
//	  command_execution   bash tool (output, exit code; failed / declined → error)
//	  file_change         edit tool (paths and kinds)
//	  mcp_tool_call       "<server>_<tool>" tool
//	  web_search          websearch tool
//	  todo_list           TodosUpdated
//	  error               known, ignored: a non-fatal notice (e.g. missing model metadata)
//	anything else         Dropped (unknown_type)
//
// Not safe for concurrent use.
type ExecDecoder struct {
	n     int64
	turns int
	open  bool
	turn  string
	calls map[string]*call
}

// NewExecDecoder returns a decoder with no state.
func NewExecDecoder() *ExecDecoder { return &ExecDecoder{calls: map[string]*call{}} }

type execItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Message   string          `json:"message"`
	Command   string          `json:"command"`
	Output    *string         `json:"aggregated_output"`
	ExitCode  *int64          `json:"exit_code"`
	Status    string          `json:"status"`
	Changes   []execChange    `json:"changes"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    *struct {
		Content []json.RawMessage `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string `json:"query"`
	Items []struct {
		Text      string `json:"text"`
		Completed bool   `json:"completed"`
	} `json:"items"`
}

type execChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// DecodeLine maps one line of output, seen at t (Unix ms, 0 unknown).
func (d *ExecDecoder) DecodeLine(line []byte, t int64) []agent.Event {
	d.n++
	o := &out{t: t}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	drop := func(kind string, reason agent.DropReason, detail string) {
		o.add(dropped(SourceExec, d.n, t, kind, reason, detail, line))
	}
	if line[0] != '{' {
		if json.Valid(line) {
			drop("", agent.DropNotAnObject, "line is JSON but not an object")
		} else {
			drop("", agent.DropUnparseableJSON, "line is not JSON")
		}
		return o.ev
	}
	var ev struct {
		Type     string    `json:"type"`
		ThreadID string    `json:"thread_id"`
		Item     *execItem `json:"item"`
		Message  string    `json:"message"`
		Error    *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		drop("", agent.DropUnparseableJSON, err.Error())
		return o.ev
	}
	switch ev.Type {
	case "thread.started":
		o.add(&agent.SessionInfo{ProviderSessionID: ev.ThreadID})
	case "turn.started":
		d.start(o)
	case "turn.completed":
		d.start(o)
		d.end(o, agent.TurnCompleted, "")
	case "turn.failed":
		d.start(o)
		msg := "turn failed"
		if ev.Error != nil {
			msg = ev.Error.Message
		}
		o.add(&agent.AgentError{Kind: agent.ErrorInternal, Text: msg})
		d.end(o, agent.TurnFailed, msg)
	case "error":
		o.add(&agent.AgentError{Kind: agent.ErrorInternal, Text: ev.Message})
	case "item.started", "item.updated", "item.completed":
		if ev.Item == nil || ev.Item.ID == "" {
			drop(ev.Type, agent.DropMissingID, "item without id")
			return o.ev
		}
		d.item(o, ev.Item, ev.Type == "item.completed", drop)
	default:
		drop(ev.Type, agent.DropUnknownType, "event type unknown to this version")
	}
	return o.ev
}

func (d *ExecDecoder) start(o *out) {
	if d.open {
		return
	}
	d.turns++
	d.open, d.turn = true, fmt.Sprintf("exec-turn-%d", d.turns)
	o.add(&agent.TurnStarted{TurnID: d.turn})
}

func (d *ExecDecoder) end(o *out, reason, msg string) {
	if !d.open {
		return
	}
	d.open = false
	clear(d.calls)
	o.add(&agent.TurnEnded{TurnID: d.turn, Reason: reason, Error: msg})
}

func (d *ExecDecoder) item(o *out, it *execItem, completed bool, drop func(string, agent.DropReason, string)) {
	tool := func(name, title string, input json.RawMessage) *call {
		c := d.calls[it.ID]
		if c == nil {
			c = &call{id: it.ID, tool: name}
			d.calls[it.ID] = c
		}
		if !c.shown {
			c.shown = true
			o.add(&agent.ToolCall{CallID: c.id, Tool: name, Title: title, Input: input})
		}
		if !c.running {
			c.running = true
			o.add(&agent.ToolRunning{CallID: c.id})
		}
		return c
	}
	finish := func(c *call, ok bool, output, errText string, meta agent.Object) {
		if !completed || c.done {
			return
		}
		c.done = true
		if len(meta) == 0 {
			meta = nil
		}
		if ok {
			o.add(&agent.ToolCompleted{CallID: c.id, Output: output, Metadata: meta})
		} else {
			o.add(&agent.ToolFailed{CallID: c.id, Error: errText, Metadata: meta})
		}
	}
	switch it.Type {
	case "agent_message":
		if it.Text != "" {
			o.add(&agent.TextFinal{Block: it.ID, Text: it.Text})
		}
	case "reasoning":
		if it.Text != "" {
			o.add(&agent.ReasoningFinal{Block: it.ID, Text: it.Text})
		}
	case "command_execution":
		c := tool("bash", it.Command, mustObject(map[string]string{"command": it.Command}))
		output := ""
		if it.Output != nil {
			output = *it.Output
		}
		meta := agent.Object{}
		if it.ExitCode != nil {
			meta["exitCode"] = *it.ExitCode
		}
		errText := output
		if strings.TrimSpace(errText) == "" {
			errText = "command " + it.Status
		}
		finish(c, it.Status == "completed", output, errText, meta)
	case "file_change":
		paths := make([]string, 0, len(it.Changes))
		for _, ch := range it.Changes {
			paths = append(paths, ch.Path)
		}
		c := tool("edit", strings.Join(paths, ", "), mustObject(map[string]any{"changes": it.Changes}))
		finish(c, it.Status == "completed", "", "patch "+it.Status, nil)
	case "mcp_tool_call":
		c := tool(it.Server+"_"+it.Tool, it.Tool, objectOr(it.Arguments))
		text, errText := "", "tool call "+it.Status
		if it.Result != nil {
			text = contentText(it.Result.Content)
		}
		if it.Error != nil && it.Error.Message != "" {
			errText = it.Error.Message
		}
		finish(c, it.Status == "completed" && it.Error == nil, text, errText, nil)
	case "web_search":
		c := tool("websearch", it.Query, mustObject(map[string]string{"query": it.Query}))
		finish(c, true, "", "", nil)
	case "todo_list":
		todos := make([]agent.Todo, 0, len(it.Items))
		for _, x := range it.Items {
			st := agent.TodoPending
			if x.Completed {
				st = agent.TodoCompleted
			}
			todos = append(todos, agent.Todo{Content: x.Text, Status: st, Priority: agent.PriorityMedium})
		}
		o.add(&agent.TodosUpdated{Todos: todos})
	case "error":
		// A non-fatal notice; fatal errors come as turn.failed or error events.
	default:
		drop("item:"+it.Type, agent.DropUnknownType, "item type unknown to this version")
	}
}

// ReplayExec decodes the whole output of `codex exec --json` (lines of any
// length). Only a read error of r is returned as an error.
func ReplayExec(r io.Reader) ([]agent.Event, error) {
	lr, _ := linereader.New(r, linereader.Options{})
	d := NewExecDecoder()
	var evs []agent.Event
	for {
		line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			if rest := lr.Pending(); len(bytes.TrimSpace(rest)) > 0 {
				evs = append(evs, d.DecodeLine(rest, 0)...)
			}
			return evs, nil
		}
		if err != nil {
			return evs, fmt.Errorf("codex: read exec output: %w", err)
		}
		evs = append(evs, d.DecodeLine(line.Data, 0)...)
	}
}
