package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// ReplayOptions configure Replay and ReplayFile.
type ReplayOptions struct {
	// Form of the input; FormUnknown detects it from the first lines
	// (DetectForm).
	Form Form
	// MaxLine is the largest line read (bytes); 0 means no limit. A longer
	// line becomes a Dropped record with reason oversize.
	MaxLine int
	// Decoder configures the decoder.
	Decoder Options
}

// ReplayStats describes a replayed input.
type ReplayStats struct {
	Form      Form
	Lines     int64    // lines read, subagent files included
	Dropped   int      // DroppedInput events emitted
	Subagents []string // subagent transcript files read, in the order read
}

// detectLines is how many leading lines DetectForm may look at.
const detectLines = 64

// ErrEmit wraps an error returned by the emit callback of Replay.
var ErrEmit = errors.New("claude: replay stopped by its consumer")

// ReplayFile replays a native Claude file: a session JSONL (with the
// subagent transcripts next to it, <session>/subagents/agent-<id>.jsonl,
// read where their Agent call appears), a stream-json capture, or an SDK
// traffic log. emit receives every agent event in order; the stream is
// finished (Decoder.Finish) at the end of the file. Errors: opening or
// reading a file (wrapped), ErrUnknownForm, ErrEmit, ctx's error.
func ReplayFile(ctx context.Context, path string, opts ReplayOptions, emit func(agent.Event) error) (ReplayStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return ReplayStats{}, fmt.Errorf("claude: replay %s: %w", path, err)
	}
	defer f.Close()
	rp := &replayer{ctx: ctx, opts: opts, emit: emit}
	err = rp.run(f, path)
	if err != nil {
		err = fmt.Errorf("claude: replay %s: %w", path, err)
	}
	return rp.stats, err
}

// Replay replays a native Claude stream read from r (no subagent files).
// See ReplayFile.
func Replay(ctx context.Context, r io.Reader, opts ReplayOptions, emit func(agent.Event) error) (ReplayStats, error) {
	rp := &replayer{ctx: ctx, opts: opts, emit: emit}
	err := rp.run(r, "")
	if err != nil {
		err = fmt.Errorf("claude: replay: %w", err)
	}
	return rp.stats, err
}

type replayer struct {
	ctx   context.Context
	opts  ReplayOptions
	emit  func(agent.Event) error
	dec   *Decoder
	stats ReplayStats
	subs  []*subagentFile
}

// subagentFile is a subagent transcript waiting for its Agent call.
type subagentFile struct {
	path      string
	agentID   string
	toolUseID string // from agent-<id>.meta.json
	prompt    string // its first prompt, to match the call when there is no meta file
	done      bool
}

func (rp *replayer) run(r io.Reader, path string) error {
	lr, err := linereader.New(r, linereader.Options{MaxLine: rp.opts.MaxLine})
	if err != nil {
		return err
	}
	form := rp.opts.Form
	var head []linereader.Line
	if form == FormUnknown {
		var sample [][]byte
		for len(head) < detectLines {
			l, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			l.Data = bytes.Clone(l.Data)
			head = append(head, l)
			if !l.Oversize {
				sample = append(sample, l.Data)
			}
			if f, err := DetectForm(sample); err == nil {
				form = f
				break
			}
		}
		if form == FormUnknown {
			if len(head) == 0 && len(lr.Pending()) > 0 {
				sample = append(sample, lr.Pending())
			}
			f, err := DetectForm(sample)
			if err != nil {
				return err
			}
			form = f
		}
	}
	rp.stats.Form = form
	rp.dec, err = NewDecoder(form, rp.opts.Decoder)
	if err != nil {
		return err
	}
	if form == FormSessionJSONL && path != "" {
		if err := rp.findSubagents(path); err != nil {
			return err
		}
	}
	for _, l := range head {
		if err := rp.line(l); err != nil {
			return err
		}
	}
	if err := rp.lines(lr); err != nil {
		return err
	}
	// Subagent files whose call never appeared still hold content.
	for _, s := range rp.subs {
		if !s.done {
			if err := rp.readSubagent(s); err != nil {
				return err
			}
		}
	}
	return rp.send(rp.dec.Finish(EndOfStream{}))
}

// lines decodes every line of lr, then reports an incomplete last line.
func (rp *replayer) lines(lr *linereader.Reader) error {
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := rp.line(l); err != nil {
			return err
		}
	}
	if rest, ok := lr.Rest(); ok {
		if rest.Oversize {
			return rp.send(rp.dec.DecodeLine(rest))
		}
		if len(bytes.TrimSpace(rest.Data)) > 0 {
			return rp.send(rp.dec.Incomplete(rest.Data, rest.Size, rest.Number))
		}
	}
	return nil
}

func (rp *replayer) line(l linereader.Line) error {
	rp.stats.Lines++
	if rp.stats.Lines%256 == 0 {
		if err := rp.ctx.Err(); err != nil {
			return err
		}
	}
	return rp.send(rp.dec.DecodeLine(l))
}

// send emits events, then reads the transcript of any subagent whose
// Agent call they announced.
func (rp *replayer) send(evs []agent.Event) error {
	for _, ev := range evs {
		if _, ok := ev.(*agent.DroppedInput); ok {
			rp.stats.Dropped++
		}
		if err := rp.emit(ev); err != nil {
			return fmt.Errorf("%w: %w", ErrEmit, err)
		}
	}
	for _, ev := range evs {
		ss, ok := ev.(*agent.SubagentStarted)
		if !ok || ss.CallID == "" {
			continue
		}
		for _, s := range rp.subs {
			if s.done || !(s.toolUseID == ss.CallID || (s.toolUseID == "" && s.prompt != "" && s.prompt == ss.Prompt)) {
				continue
			}
			rp.dec.AttachSubagent(s.agentID, ss.CallID)
			if err := rp.readSubagent(s); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// readSubagent decodes one subagent transcript file.
func (rp *replayer) readSubagent(s *subagentFile) error {
	s.done = true
	if s.toolUseID != "" {
		rp.dec.AttachSubagent(s.agentID, s.toolUseID)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("open subagent transcript: %w", err)
	}
	defer f.Close()
	rp.stats.Subagents = append(rp.stats.Subagents, s.path)
	lr, err := linereader.New(f, linereader.Options{MaxLine: rp.opts.MaxLine})
	if err != nil {
		return err
	}
	return rp.lines(lr)
}

// findSubagents lists <session>/subagents/agent-*.jsonl next to a session
// JSONL, with the Agent call id of each (its .meta.json) or, without one,
// its first prompt.
func (rp *replayer) findSubagents(path string) error {
	dir := filepath.Join(strings.TrimSuffix(path, filepath.Ext(path)), "subagents")
	matches, err := filepath.Glob(filepath.Join(dir, "agent-*.jsonl"))
	if err != nil {
		return fmt.Errorf("list subagent transcripts: %w", err)
	}
	slices.Sort(matches)
	for _, m := range matches {
		base := strings.TrimSuffix(filepath.Base(m), ".jsonl")
		s := &subagentFile{path: m, agentID: strings.TrimPrefix(base, "agent-")}
		if meta, err := os.ReadFile(filepath.Join(dir, base+".meta.json")); err == nil {
			var mj struct {
				ToolUseID string `json:"toolUseId"`
			}
			if json.Unmarshal(meta, &mj) == nil {
				s.toolUseID = mj.ToolUseID
			}
		}
		if s.toolUseID == "" {
			s.prompt = firstPrompt(m)
		}
		rp.subs = append(rp.subs, s)
	}
	return nil
}

// firstPrompt returns the text of the first user record of a subagent
// transcript ("" when unreadable).
func firstPrompt(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	lr, err := linereader.New(f, linereader.Options{MaxLine: 16 << 20})
	if err != nil {
		return ""
	}
	for range 16 {
		l, err := lr.Next()
		if err != nil {
			return ""
		}
		var r record
		if l.Oversize || json.Unmarshal(l.Data, &r) != nil || r.Type != "user" || r.Message == nil {
			continue
		}
		blocks, _ := r.Message.blocks()
		var texts []string
		for _, b := range blocks {
			if b.Type == "text" {
				texts = append(texts, deref(b.Text))
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}
