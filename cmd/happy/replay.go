//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/adapters/acp"
	"github.com/happy-dev/happy/adapters/claude"
	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/openclaw"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
)

// replayOptions are the flags of `happy replay`.
type replayOptions struct {
	agent     string
	format    string
	sessionID string
	maxLine   int
}

// newReplayCmd builds `happy replay`: map a recorded native run to the
// canonical transcript, offline.
func newReplayCmd(f *factory) *cobra.Command {
	opts := replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay --agent claude FILE",
		Short: "Map a recorded agent run (session transcript, stream capture or traffic log) to the transcript",
		Long: `Read a recorded native run of an agent and print the transcript happy makes of it,
without running the agent or reaching a relay.

For --agent codex, FILE is a traffic log written by happy codex --record, or the
rollout Codex keeps of a session, CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl
(detected from the first line; a rollout carries no approvals).

For --agent openclaw, FILE is a traffic log written by happy openclaw --record
(both directions of the gateway WebSocket).

For --agent claude, FILE is one of (the form is detected):
  - Claude Code's session transcript, ~/.claude/projects/<folder>/<session>.jsonl
    (its subagent transcripts in <session>/subagents/ are read too)
  - the stdout of claude -p --output-format stream-json --verbose
  - a traffic log written by happy claude --record

  --format text   a readable rendering: prompts, answers, tool calls with their
                  status, permission decisions, subagents, todos (default)
  --format json   the transcript document {session, messages, children, todos, dropped}

Lines happy cannot use are kept in the document's dropped list and counted in a
warning: the transcript is then incomplete.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{err: fmt.Errorf("replay takes one FILE, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd, f, opts, args[0])
		},
	}
	cmd.Flags().StringVar(&opts.agent, "agent", "claude", "agent that recorded FILE: claude, codex, acp or openclaw")
	cmd.Flags().StringVar(&opts.format, "format", "text", "output: text or json")
	cmd.Flags().StringVar(&opts.sessionID, "session", "", "relay session id the canonical ids derive from (default: from the file name)")
	cmd.Flags().IntVar(&opts.maxLine, "max-line", 0, "largest line read, in bytes (0: no limit); longer lines are dropped")
	return cmd
}

func runReplay(cmd *cobra.Command, f *factory, opts replayOptions, path string) error {
	if opts.agent != "claude" && opts.agent != "codex" && opts.agent != "acp" && opts.agent != "openclaw" {
		return &usageError{err: fmt.Errorf("replay: agent %q is not supported (want claude, codex, acp or openclaw)", opts.agent)}
	}
	if opts.format != "text" && opts.format != "json" {
		return &usageError{err: fmt.Errorf("replay: format %q is not text or json", opts.format)}
	}
	if opts.maxLine < 0 {
		return &usageError{err: errors.New("replay: --max-line is negative")}
	}
	sid := opts.sessionID
	if sid == "" {
		sid = "replay-" + strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	ctx := cmd.Context()
	var tr mapper.Transcript
	header := ""
	switch opts.agent {
	case "acp":
		file, err := os.Open(path)
		if err != nil {
			return &usageError{err: fmt.Errorf("replay: %w", err)}
		}
		defer file.Close()
		evs, err := acp.Replay(file)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		tr = reduceEvents(mapper.Config{SessionID: sid, Source: "acp"}, evs)
		header = fmt.Sprintf("replay of %s (ACP traffic log)\n", path)
	case "openclaw":
		file, err := os.Open(path)
		if err != nil {
			return &usageError{err: fmt.Errorf("replay: %w", err)}
		}
		defer file.Close()
		evs, err := openclaw.Replay(file)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		tr = reduceEvents(mapper.Config{SessionID: sid, Source: "openclaw"}, evs)
		header = fmt.Sprintf("replay of %s (OpenClaw traffic log)\n", path)
	case "codex":
		file, err := os.Open(path)
		if err != nil {
			return &usageError{err: fmt.Errorf("replay: %w", err)}
		}
		defer file.Close()
		first, err := firstNonEmptyLine(file)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("replay: rewind %s: %w", path, err)
		}
		var evs []agent.Event
		if codex.IsRollout(first) {
			evs, err = codex.ReplayRollout(file)
			header = fmt.Sprintf("replay of %s (codex rollout)\n", path)
		} else {
			evs, err = codex.Replay(file, codex.ProtocolAuto)
			header = fmt.Sprintf("replay of %s (codex traffic log)\n", path)
		}
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		tr = reduceEvents(mapper.Config{SessionID: sid, Source: "codex"}, evs)
	default:
		red := mapper.NewReducer(mapper.Config{SessionID: sid, ProviderID: claude.ProviderID})
		stats, err := claude.ReplayFile(ctx, path, claude.ReplayOptions{MaxLine: opts.maxLine}, func(ev agent.Event) error {
			red.Apply(ev)
			return nil
		})
		if err != nil {
			return err
		}
		tr = red.Transcript()
		header = fmt.Sprintf("replay of %s (%s, %d lines", path, stats.Form, stats.Lines)
		if len(stats.Subagents) > 0 {
			header += fmt.Sprintf(", %d subagent transcript(s)", len(stats.Subagents))
		}
		header += ")\n"
	}
	if opts.format == "json" {
		doc, err := mapper.EncodeTranscript(tr)
		if err != nil {
			return fmt.Errorf("replay: encode transcript: %w", err)
		}
		var out bytes.Buffer
		if err := json.Indent(&out, doc, "", "  "); err != nil {
			return fmt.Errorf("replay: format transcript: %w", err)
		}
		out.WriteByte('\n')
		if _, err := f.stdout.Write(out.Bytes()); err != nil {
			return err
		}
		if n := droppedCount(tr); n > 0 {
			fmt.Fprintf(f.stderr, "happy: warning: %d input(s) of %s were dropped; the transcript is incomplete (see \"dropped\")\n", n, path)
		}
		return nil
	}
	fmt.Fprint(f.stdout, header)
	return export.Text(f.stdout, tr, export.TextOptions{})
}

// reduceEvents reduces the agent events of a replay to the transcript of
// relay session cfg.SessionID.
func reduceEvents(cfg mapper.Config, evs []agent.Event) mapper.Transcript {
	red := mapper.NewReducer(cfg)
	for _, e := range evs {
		red.Apply(e)
	}
	return red.Transcript()
}

// droppedCount counts the dropped inputs of a transcript and its children.
func droppedCount(t mapper.Transcript) int {
	n := len(t.Dropped)
	for _, c := range t.Children {
		n += droppedCount(c)
	}
	return n
}

// firstLineMax bounds how much of a file firstNonEmptyLine reads (a rollout's
// first line holds Codex's instructions, tens of KB).
const firstLineMax = 16 << 20

// firstNonEmptyLine returns the first line of r that is not blank (without
// its newline), reading at most firstLineMax bytes; nil for an empty file.
// Errors: a read error of r.
func firstNonEmptyLine(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(io.LimitReader(r, firstLineMax))
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			return bytes.TrimSpace(line), nil
		}
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read first line: %w", err)
		}
	}
}
