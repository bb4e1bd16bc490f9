package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
)

// Attachments moves the files of prompts and tool results between the
// relay's encrypted blobs and the agent (docs/ARCHITECTURE.md, section
// "Attachments"). The runner calls it on its own goroutine, each call
// bounded by AttachmentTimeout.
type Attachments interface {
	// Fetch returns a prompt's file as the agent takes it: a blob
	// reference downloaded, decrypted and checked, as a data: URL of the
	// type its bytes have; any other URL as it is. Errors name the file
	// (a missing blob, bytes that lie about their type, a truncated image).
	Fetch(ctx context.Context, f agent.PromptFile) (agent.PromptFile, error)
	// Store uploads an inline (data:) file as a blob and returns it as a
	// blob reference with its source (size, and for an image its width,
	// height and thumbhash); any other URL as it is. The same bytes stored
	// twice give the same reference, so a replayed event changes nothing.
	Store(ctx context.Context, f agent.PromptFile) (agent.PromptFile, error)
}

// ErrAttachmentUnavailable is returned (wrapped, naming the file and the
// cause) for a prompt whose blob could not be fetched or checked; the
// prompt is recorded with the refusal, as for agent.ErrUnsupportedInput.
var ErrAttachmentUnavailable = errors.New("cannot hand the attachment to the agent")

// AttachmentTimeout bounds one Fetch or Store call of the runner.
const AttachmentTimeout = 30 * time.Second

// DroppedSourceAttachment is the Dropped.Source of a file the runner could
// not store as a blob (it is left out of the record; never kept inline).
const DroppedSourceAttachment = "attachment"

// fetchFiles resolves a prompt's files for the agent. A file of happy's
// own that cannot be fetched refuses the prompt (the sender is told); one
// the reference app sent is left out and returned as Dropped instead (its
// app shows no refusal, so the prompt goes with a note).
func (r *Runner) fetchFiles(ctx context.Context, files []agent.PromptFile) ([]agent.PromptFile, []agent.Dropped, error) {
	out := make([]agent.PromptFile, 0, len(files))
	var dropped []agent.Dropped
	for _, f := range files {
		cctx, cancel := context.WithTimeout(ctx, AttachmentTimeout)
		got, err := r.opts.Attachments.Fetch(cctx, f)
		cancel()
		if err != nil {
			if referenceFile(f) {
				dropped = append(dropped, agent.Dropped{Source: DroppedSourceReferenceFile, Kind: "file", Reason: dropReason(err),
					Detail: agent.CutUTF8(fmt.Sprintf("%s (%s): %v", fileName(f), f.URL, err), agent.DroppedRawMax)})
				continue
			}
			return nil, nil, fmt.Errorf("%w: attachment %s: %w", ErrAttachmentUnavailable, fileName(f), err)
		}
		out = append(out, got)
	}
	return out, dropped, nil
}

// storeFiles replaces the inline files of an agent's event (a tool result,
// a prompt typed in the agent's terminal) with blob references; a file it
// cannot store is left out and recorded as Dropped.
func (r *Runner) storeFiles(ctx context.Context, files []agent.PromptFile) []agent.PromptFile {
	var out []agent.PromptFile
	for _, f := range files {
		if !strings.HasPrefix(f.URL, "data:") {
			out = append(out, f)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, AttachmentTimeout)
		got, err := r.opts.Attachments.Store(cctx, f)
		cancel()
		if err != nil {
			r.opts.Log.Warn().Err(err).Str("file", fileName(f)).Msg("store attachment")
			r.apply(&agent.DroppedInput{EventBase: agent.EventBase{Time: r.opts.Now().UnixMilli()}, Dropped: agent.Dropped{
				Source: DroppedSourceAttachment, Kind: f.Mime, Reason: dropReason(err),
				Detail: agent.CutUTF8(fmt.Sprintf("%s: %v", fileName(f), err), agent.DroppedRawMax)}})
			continue
		}
		out = append(out, got)
	}
	return out
}

// ErrAttachmentOversize marks an attachment error as too large (Dropped
// reason oversize); Attachments implementations wrap size errors with it.
var ErrAttachmentOversize = errors.New("attachment too large")

func dropReason(err error) agent.DropReason {
	if errors.Is(err, ErrAttachmentOversize) {
		return agent.DropOversize
	}
	return agent.DropInvalidField
}

func fileName(f agent.PromptFile) string {
	if f.Filename != "" {
		return fmt.Sprintf("%q", f.Filename)
	}
	if f.Mime != "" {
		return "(" + f.Mime + ")"
	}
	return "(unnamed)"
}

// storedEvent returns ev with its inline files stored as blobs (a copy: the
// adapter's event is not changed), or ev itself when nothing is inline.
func (r *Runner) storedEvent(ctx context.Context, ev agent.Event) agent.Event {
	if r.opts.Attachments == nil {
		return ev
	}
	inline := func(fs []agent.PromptFile) bool {
		for _, f := range fs {
			if strings.HasPrefix(f.URL, "data:") {
				return true
			}
		}
		return false
	}
	switch e := ev.(type) {
	case *agent.ToolCompleted:
		if inline(e.Files) {
			c := *e
			c.Files = r.storeFiles(ctx, e.Files)
			return &c
		}
	case *agent.UserPrompt:
		if inline(e.Files) {
			c := *e
			c.Files = r.storeFiles(ctx, e.Files)
			return &c
		}
	}
	return ev
}

// refusePrompt records a prompt the agent could not be given (an
// attachment it does not take, or one that could not be fetched) and an
// assistant message with the refusal, so the transcript says why nothing
// answers; the agent goes on with the next prompt.
func (r *Runner) refusePrompt(c ControlPrompt, err error) {
	r.recordPrompt(c, 0)
	now := agent.EventBase{Time: r.opts.Now().UnixMilli()}
	text := err.Error()
	r.apply(&agent.AgentError{EventBase: now, Text: text, Kind: agent.ErrorInternal})
	r.apply(&agent.TurnEnded{EventBase: now, Reason: agent.TurnFailed, Error: text})
}
