// Package remotefs answers the file and shell RPCs the reference mobile app
// calls on a session (bash, readFile, writeFile, listDirectory,
// getDirectoryTree, ripgrep), confined to the session's folder by
// internal/confine (docs/ARCHITECTURE.md, "Remote file and shell access").
// It knows nothing of the relay: Handlers returns plain functions that
// whoever holds a session's (or, later, a machine's) RPC channel registers.
//
// Params and replies are the shapes of the reference CLI
// (happy-cli src/modules/common/registerCommonHandlers.ts). Every answer is
// a reply object: a refusal or a failure is {"success": false, "error"},
// never an RPC error, a hang or a panic.
package remotefs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/confine"
)

// Method names, as the reference app calls them ("<sessionId>:<name>").
const (
	MethodBash             = "bash"
	MethodReadFile         = "readFile"
	MethodWriteFile        = "writeFile"
	MethodListDirectory    = "listDirectory"
	MethodGetDirectoryTree = "getDirectoryTree"
	MethodRipgrep          = "ripgrep"
)

// Methods lists every method Handlers answers, in a fixed order.
var Methods = []string{MethodBash, MethodReadFile, MethodWriteFile, MethodListDirectory, MethodGetDirectoryTree, MethodRipgrep}

// ShellMethods are the methods the remoteShell setting turns on: those that
// run programs or change files (ripgrep is one: its arguments name any
// path and --pre runs any program).
var ShellMethods = []string{MethodBash, MethodWriteFile, MethodRipgrep}

// ErrShellOff is the refusal of a shell method while remote shell access is
// off.
var ErrShellOff = errors.New("remote shell access is off on this machine (set \"remoteShell\": true in happy's settings.json or HAPPY_REMOTE_SHELL=1)")

// Options configure Handlers.
type Options struct {
	// Root is the session folder every path is resolved in.
	Root *confine.Root
	// Shell turns on bash, writeFile and ripgrep.
	Shell bool
	// Log receives one record per call: method, path or command, result,
	// duration; never file contents or output.
	Log zerolog.Logger
	// LookPath finds programs (exec.LookPath when nil); tests replace it.
	LookPath func(string) (string, error)
}

// Handler answers one call: params is the decrypted JSON the caller sent;
// the result is the reply object to encrypt and send back.
type Handler func(ctx context.Context, params json.RawMessage) any

// Reply is the common reply: Success, and Error when it is false.
type Reply struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
}

// BashReply is bash's reply: {success, stdout, stderr, exitCode, error?}.
// ExitCode is -1 when the command was killed or did not start.
type BashReply struct {
	Success  bool   `json:"success"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
}

// ReadFileReply is readFile's reply: content is the file, base64.
type ReadFileReply struct {
	Success bool   `json:"success"`
	Content string `json:"content,omitempty"`
	Error   string `json:"error,omitempty"`
}

// WriteFileReply is writeFile's reply: hash is confine.Hash of what was
// written (SHA-256, hex).
type WriteFileReply struct {
	Success bool   `json:"success"`
	Hash    string `json:"hash,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ListDirectoryReply is listDirectory's reply.
type ListDirectoryReply struct {
	Success bool            `json:"success"`
	Entries []confine.Entry `json:"entries,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// TreeReply is getDirectoryTree's reply.
type TreeReply struct {
	Success bool          `json:"success"`
	Tree    *confine.Node `json:"tree,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// RipgrepReply is ripgrep's reply; ExitCode is rg's (1: no match).
type RipgrepReply struct {
	Success  bool   `json:"success"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Handlers returns the handler of every method in Methods.
func Handlers(o Options) map[string]Handler {
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	h := &handlers{o: o}
	return map[string]Handler{
		MethodBash:             h.logged(MethodBash, h.bash),
		MethodReadFile:         h.logged(MethodReadFile, h.readFile),
		MethodWriteFile:        h.logged(MethodWriteFile, h.writeFile),
		MethodListDirectory:    h.logged(MethodListDirectory, h.listDirectory),
		MethodGetDirectoryTree: h.logged(MethodGetDirectoryTree, h.tree),
		MethodRipgrep:          h.logged(MethodRipgrep, h.ripgrep),
	}
}

type handlers struct{ o Options }

// call is what one handler did, for the log.
type call struct {
	target string // path or command
	err    error
}

func (h *handlers) logged(method string, f func(context.Context, json.RawMessage, *call) any) Handler {
	return func(ctx context.Context, params json.RawMessage) (reply any) {
		start := time.Now()
		c := &call{}
		defer func() {
			if p := recover(); p != nil {
				c.err = fmt.Errorf("internal error: %v", p)
				reply = Reply{Error: c.err.Error()}
			}
			ev := h.o.Log.Info()
			if c.err != nil {
				ev = h.o.Log.Warn().Str("error", c.err.Error())
			}
			ev.Str("method", method).Str("target", c.target).Bool("ok", c.err == nil).
				Dur("took", time.Since(start)).Msg("remote file/shell call")
		}()
		return f(ctx, params, c)
	}
}

func (h *handlers) shellOff(c *call) bool {
	if h.o.Shell {
		return false
	}
	c.err = ErrShellOff
	return true
}

func (h *handlers) bash(ctx context.Context, raw json.RawMessage, c *call) any {
	p, err := DecodeBash(raw)
	if err != nil {
		c.err = err
		return BashReply{ExitCode: -1, Error: err.Error()}
	}
	c.target = p.Command
	if h.shellOff(c) {
		return BashReply{ExitCode: -1, Error: c.err.Error()}
	}
	sh, err := h.o.LookPath("sh")
	if err != nil {
		c.err = err
		return BashReply{ExitCode: -1, Error: "no shell: " + err.Error()}
	}
	cwd := p.Cwd
	if cwd == "/" { // the reference's "the shell's default": the session folder here
		cwd = ""
	}
	res, err := h.o.Root.Run(ctx, confine.Command{Path: sh, Args: []string{"-c", p.Command}, Dir: cwd, Timeout: p.Timeout})
	out := BashReply{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode}
	switch {
	case errors.Is(err, confine.ErrTimeout):
		out.Error = "Command timed out"
	case err != nil:
		out.Error = err.Error()
	case res.ExitCode != 0:
		out.Error = fmt.Sprintf("Command failed with exit code %d", res.ExitCode)
	default:
		out.Success = true
	}
	if !out.Success {
		c.err = errors.New(out.Error)
	}
	return out
}

func (h *handlers) readFile(_ context.Context, raw json.RawMessage, c *call) any {
	p, err := DecodePath(raw)
	c.target = p.Path
	if err != nil {
		c.err = err
		return ReadFileReply{Error: err.Error()}
	}
	b, err := h.o.Root.ReadFile(p.Path)
	if err != nil {
		c.err = err
		return ReadFileReply{Error: err.Error()}
	}
	return ReadFileReply{Success: true, Content: base64.StdEncoding.EncodeToString(b)}
}

func (h *handlers) writeFile(_ context.Context, raw json.RawMessage, c *call) any {
	p, err := DecodeWriteFile(raw)
	c.target = p.Path
	if err != nil {
		c.err = err
		return WriteFileReply{Error: err.Error()}
	}
	if h.shellOff(c) {
		return WriteFileReply{Error: c.err.Error()}
	}
	hash, err := h.o.Root.WriteFile(p.Path, p.Content, p.ExpectedHash)
	if err != nil {
		c.err = err
		return WriteFileReply{Error: err.Error()}
	}
	return WriteFileReply{Success: true, Hash: hash}
}

func (h *handlers) listDirectory(_ context.Context, raw json.RawMessage, c *call) any {
	p, err := DecodePath(raw)
	c.target = p.Path
	if err != nil {
		c.err = err
		return ListDirectoryReply{Error: err.Error()}
	}
	entries, truncated, err := h.o.Root.List(p.Path)
	if err != nil {
		c.err = err
		return ListDirectoryReply{Error: err.Error()}
	}
	if truncated {
		h.o.Log.Warn().Str("path", p.Path).Int("kept", len(entries)).Msg("folder listing truncated")
	}
	return ListDirectoryReply{Success: true, Entries: entries}
}

func (h *handlers) tree(_ context.Context, raw json.RawMessage, c *call) any {
	p, err := DecodeTree(raw)
	c.target = p.Path
	if err != nil {
		c.err = err
		return TreeReply{Error: err.Error()}
	}
	t, truncated, err := h.o.Root.Tree(p.Path, p.MaxDepth)
	if err != nil {
		c.err = err
		return TreeReply{Error: err.Error()}
	}
	if truncated {
		h.o.Log.Warn().Str("path", p.Path).Msg("folder tree truncated")
	}
	return TreeReply{Success: true, Tree: t}
}

func (h *handlers) ripgrep(ctx context.Context, raw json.RawMessage, c *call) any {
	p, err := DecodeRipgrep(raw)
	if err != nil {
		c.err = err
		return RipgrepReply{Error: err.Error()}
	}
	c.target = fmt.Sprintf("rg %q", p.Args)
	if h.shellOff(c) {
		return RipgrepReply{Error: c.err.Error()}
	}
	rg, err := h.o.LookPath("rg")
	if err != nil {
		c.err = err
		return RipgrepReply{Error: "ripgrep (rg) is not installed on this machine"}
	}
	res, err := h.o.Root.Run(ctx, confine.Command{Path: rg, Args: p.Args, Dir: p.Cwd})
	if err != nil && !errors.Is(err, confine.ErrTimeout) {
		c.err = err
		return RipgrepReply{Error: err.Error()}
	}
	code := res.ExitCode
	out := RipgrepReply{ExitCode: &code, Stdout: res.Stdout, Stderr: res.Stderr}
	switch {
	case res.TimedOut:
		out.Error = "ripgrep timed out"
	case code == 0 || code == 1: // 1: nothing matched
		out.Success = true
	default:
		out.Error = fmt.Sprintf("ripgrep failed with exit code %d", code)
	}
	if !out.Success {
		c.err = errors.New(out.Error)
	}
	return out
}

// BashParams are bash's params {command, cwd?, timeout?}; Timeout comes in
// milliseconds and is clamped by confine.ClampTimeout. The handler's ctx
// bounds it too: a session's RPC handler gets 25 s (relay.RPCHandler).
type BashParams struct {
	Command string
	Cwd     string
	Timeout time.Duration
}

// PathParams are {path}.
type PathParams struct{ Path string }

// WriteFileParams are {path, content (base64), expectedHash?}; a nil
// ExpectedHash (absent or null) means the file must be new.
type WriteFileParams struct {
	Path         string
	Content      []byte
	ExpectedHash *string
}

// TreeParams are {path, maxDepth}.
type TreeParams struct {
	Path     string
	MaxDepth int
}

// RipgrepParams are {args: [string], cwd?}.
type RipgrepParams struct {
	Args []string
	Cwd  string
}

// ErrBadParams is wrapped by every refusal of params.
var ErrBadParams = errors.New("bad params")

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadParams, fmt.Sprintf(format, a...))
}

// decode unmarshals a JSON object into v; anything else is refused.
func decode(raw []byte, v any) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return bad("params must be a JSON object")
	}
	if err := json.Unmarshal(t, v); err != nil {
		return bad("%v", err)
	}
	return nil
}

// DecodeBash decodes bash's params. Errors (ErrBadParams): not an object,
// a missing or empty command, a non-string cwd, a negative or non-numeric
// timeout.
func DecodeBash(raw []byte) (BashParams, error) {
	var p struct {
		Command *string  `json:"command"`
		Cwd     *string  `json:"cwd"`
		Timeout *float64 `json:"timeout"`
	}
	if err := decode(raw, &p); err != nil {
		return BashParams{}, err
	}
	if p.Command == nil || *p.Command == "" {
		return BashParams{}, bad("missing command")
	}
	out := BashParams{Command: *p.Command}
	if p.Cwd != nil {
		out.Cwd = *p.Cwd
	}
	if p.Timeout != nil {
		if *p.Timeout < 0 {
			return BashParams{}, bad("timeout must not be negative")
		}
		ms := min(*p.Timeout, float64(confine.MaxTimeout/time.Millisecond))
		out.Timeout = time.Duration(ms) * time.Millisecond
	}
	return out, nil
}

// DecodePath decodes {path}. Errors (ErrBadParams): not an object, a
// missing or empty path.
func DecodePath(raw []byte) (PathParams, error) {
	var p struct {
		Path *string `json:"path"`
	}
	if err := decode(raw, &p); err != nil {
		return PathParams{}, err
	}
	if p.Path == nil || *p.Path == "" {
		return PathParams{}, bad("missing path")
	}
	return PathParams{Path: *p.Path}, nil
}

// DecodeWriteFile decodes writeFile's params. Errors (ErrBadParams): a
// missing path or content, content that is not standard base64.
func DecodeWriteFile(raw []byte) (WriteFileParams, error) {
	var p struct {
		Path         *string `json:"path"`
		Content      *string `json:"content"`
		ExpectedHash *string `json:"expectedHash"`
	}
	if err := decode(raw, &p); err != nil {
		return WriteFileParams{}, err
	}
	if p.Path == nil || *p.Path == "" {
		return WriteFileParams{}, bad("missing path")
	}
	if p.Content == nil {
		return WriteFileParams{Path: *p.Path}, bad("missing content")
	}
	b, err := base64.StdEncoding.DecodeString(*p.Content)
	if err != nil {
		return WriteFileParams{Path: *p.Path}, bad("content is not base64: %v", err)
	}
	return WriteFileParams{Path: *p.Path, Content: b, ExpectedHash: p.ExpectedHash}, nil
}

// DecodeTree decodes getDirectoryTree's params. Errors (ErrBadParams): a
// missing path, a missing, fractional or negative maxDepth.
func DecodeTree(raw []byte) (TreeParams, error) {
	var p struct {
		Path     *string  `json:"path"`
		MaxDepth *float64 `json:"maxDepth"`
	}
	if err := decode(raw, &p); err != nil {
		return TreeParams{}, err
	}
	if p.Path == nil || *p.Path == "" {
		return TreeParams{}, bad("missing path")
	}
	if p.MaxDepth == nil {
		return TreeParams{Path: *p.Path}, bad("missing maxDepth")
	}
	d := *p.MaxDepth
	if d < 0 || d != float64(int64(d)) {
		return TreeParams{Path: *p.Path}, bad("maxDepth must be a non-negative integer")
	}
	return TreeParams{Path: *p.Path, MaxDepth: int(min(d, 1<<20))}, nil
}

// DecodeRipgrep decodes ripgrep's params. Errors (ErrBadParams): args
// missing or not an array of strings, a non-string cwd.
func DecodeRipgrep(raw []byte) (RipgrepParams, error) {
	var p struct {
		Args *[]string `json:"args"`
		Cwd  *string   `json:"cwd"`
	}
	if err := decode(raw, &p); err != nil {
		return RipgrepParams{}, err
	}
	if p.Args == nil {
		return RipgrepParams{}, bad("missing args")
	}
	out := RipgrepParams{Args: *p.Args}
	if p.Cwd != nil {
		out.Cwd = *p.Cwd
	}
	return out, nil
}
