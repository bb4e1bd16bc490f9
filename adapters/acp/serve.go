package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/happy-dev/happy/adapters/jsonrpc"
)

func (c *Client) checkSession(raw json.RawMessage) error {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(raw, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.SessionID != c.sessionID {
		return fmt.Errorf("unknown session %q", p.SessionID)
	}
	return nil
}

// fail answers a request with the error code that fits err.
func fail(ctx context.Context, in *jsonrpc.Incoming, err error) {
	code := jsonrpc.CodeInternalError
	switch {
	case errors.Is(err, ErrOutsideFolder), errors.Is(err, ErrUnknownTerminal), errors.Is(err, errBadParams):
		code = jsonrpc.CodeInvalidParams
	case errors.Is(err, os.ErrNotExist):
		code = codeResourceNotFound
	}
	_ = in.Fail(ctx, code, "happy: "+err.Error())
}

var errBadParams = errors.New("bad params")

func (c *Client) serveFS(ctx context.Context, in *jsonrpc.Incoming) {
	if err := c.checkSession(in.Params); err != nil {
		fail(ctx, in, fmt.Errorf("%w: %w", errBadParams, err))
		return
	}
	var p struct {
		Path    string  `json:"path"`
		Line    *int64  `json:"line"`
		Limit   *int64  `json:"limit"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(in.Params, &p); err != nil || p.Path == "" {
		fail(ctx, in, fmt.Errorf("%w: %s needs a path", errBadParams, in.Method))
		return
	}
	if in.Method == "fs/read_text_file" {
		var line, limit int64
		if p.Line != nil {
			line = *p.Line
		}
		if p.Limit != nil {
			limit = *p.Limit
		}
		text, err := c.dir.read(p.Path, line, limit)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, map[string]string{"content": text})
		return
	}
	if p.Content == nil {
		fail(ctx, in, fmt.Errorf("%w: fs/write_text_file needs content", errBadParams))
		return
	}
	before, err := c.dir.write(p.Path, *p.Content)
	if err != nil {
		fail(ctx, in, err)
		return
	}
	id, _ := json.Marshal(in.ID)
	n := happyNote{Happy: noteFSWrite, Request: id, Path: p.Path, Existed: before != nil}
	if before != nil {
		if len(*before) <= maxNoteBefore {
			n.Before = *before
		} else {
			n.BeforeOmitted = int64(len(*before))
		}
	}
	c.s.Note(n)
	_ = in.Reply(ctx, struct{}{})
}

// maxNoteBefore bounds the previous content a fs-write note carries
// (bytes); a larger file's diff is recorded without it.
const maxNoteBefore = 256 << 10

func (c *Client) serveTerminal(ctx context.Context, in *jsonrpc.Incoming) {
	if err := c.checkSession(in.Params); err != nil {
		fail(ctx, in, fmt.Errorf("%w: %w", errBadParams, err))
		return
	}
	var p struct {
		TerminalID string `json:"terminalId"`
	}
	_ = json.Unmarshal(in.Params, &p)
	switch in.Method {
	case "terminal/create":
		var cp createTerminal
		if err := json.Unmarshal(in.Params, &cp); err != nil {
			fail(ctx, in, fmt.Errorf("%w: %w", errBadParams, err))
			return
		}
		id, err := c.term.create(cp)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, map[string]string{"terminalId": id})
	case "terminal/output":
		out, err := c.term.output(p.TerminalID)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, out)
	case "terminal/wait_for_exit":
		st, err := c.term.wait(ctx, p.TerminalID)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, st)
	case "terminal/kill":
		if err := c.term.kill(p.TerminalID); err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, struct{}{})
	case "terminal/release":
		if err := c.term.release(p.TerminalID); err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, struct{}{})
	}
}
