package codex

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// What the two live protocols (codex/appserver, codex/mcp) share: their
// options, the prompt, the permission modes, and the words of their
// answers to Codex's requests.

// Errors of the live protocols.
var (
	// ErrUnknownDecision: a decision other than once, always, reject.
	ErrUnknownDecision = errors.New("codex: unknown decision")
	// ErrUnknownMode: a permission mode name this adapter does not know.
	ErrUnknownMode = errors.New("codex: unknown permission mode")
)

// PermissionMode is happy's permission mode, translated to Codex's
// approval policy and sandbox as Codex's own presets do (Codex 0.171
// accepts the approval policies on-request and never; untrusted is
// refused):
//
//	default    on-request + workspace-write     (asks before leaving the workspace sandbox)
//	read-only  on-request + read-only           (asks before any write)
//	safe-yolo  never      + workspace-write     (never asks; stays in the workspace)
//	yolo       never      + danger-full-access  (never asks; no sandbox)
type PermissionMode string

// Permission modes.
const (
	ModeDefault  PermissionMode = "default"
	ModeReadOnly PermissionMode = "read-only"
	ModeSafeYolo PermissionMode = "safe-yolo"
	ModeYolo     PermissionMode = "yolo"
)

// ParsePermissionMode accepts the four mode names ("" means default).
// Errors: ErrUnknownMode.
func ParsePermissionMode(s string) (PermissionMode, error) {
	switch m := PermissionMode(s); m {
	case ModeDefault, ModeReadOnly, ModeSafeYolo, ModeYolo:
		return m, nil
	case "":
		return ModeDefault, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownMode, s)
}

// Policy returns Codex's approval policy and sandbox mode for m.
func (m PermissionMode) Policy() (approval, sandbox string) {
	switch m {
	case ModeReadOnly:
		return "on-request", "read-only"
	case ModeSafeYolo:
		return "never", "workspace-write"
	case ModeYolo:
		return "never", "danger-full-access"
	}
	return "on-request", "workspace-write"
}

// Defaults of Options.
const (
	DefaultTurnCheck      = 5 * time.Minute
	DefaultInterruptGrace = 30 * time.Second
)

// Options configure a live Codex session (either protocol).
type Options struct {
	// Settings are the options every JSON-RPC adapter takes: client name
	// and version, call timeout (every request but the turn itself), stop
	// grace, traffic log, logger (Codex's stderr included) and clock.
	rpcagent.Settings
	// Binary is the codex executable; "" means "codex" on PATH.
	Binary string
	// Args are extra arguments after the subcommand (app-server or mcp-server).
	Args []string
	// Env is added to this process's environment (CODEX_HOME passes
	// through from it unless CodexHome is set).
	Env []string
	// CodexHome, when set, is passed as CODEX_HOME.
	CodexHome string
	// Cwd is the working folder of Codex's thread (and of the process
	// unless ProcessDir is set).
	Cwd string
	// ProcessDir, when set, is the working folder of the codex process.
	ProcessDir string
	// Mode is the permission mode ("" = default).
	Mode PermissionMode
	// Model overrides the configured model when set.
	Model string
	// ResumeThreadID continues an existing thread instead of starting one.
	ResumeThreadID string
	// TurnCheck is how long a turn may stay silent (no notification of
	// its thread or its sub-agents; suspended while an approval is
	// pending) before app-server is asked (thread/read) whether the
	// turn's turn/completed was lost, and again after each further
	// silence as long as the turn is in progress; 0 means
	// DefaultTurnCheck. mcp-server cannot be asked: it has no check.
	// Neither protocol interrupts a silent turn on its own: the session
	// runner's idle watch does (session.Options.IdleTimeout).
	TurnCheck time.Duration
	// InterruptGrace is how long happy waits for a turn to end after it
	// interrupted it before giving it up; 0 means DefaultInterruptGrace.
	InterruptGrace time.Duration
}

// Defaults fills the zero fields of o with their defaults.
func (o *Options) Defaults() {
	o.Settings.Defaults()
	if o.Binary == "" {
		o.Binary = "codex"
	}
	if o.Mode == "" {
		o.Mode = ModeDefault
	}
	if o.TurnCheck <= 0 {
		o.TurnCheck = DefaultTurnCheck
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = DefaultInterruptGrace
	}
}

// Command is the codex process of subcommand sub ("app-server" or
// "mcp-server"): Args after it, in ProcessDir (else Cwd), with Env and
// CODEX_HOME added to this process's environment.
func (o Options) Command(sub string) *exec.Cmd {
	cmd := exec.Command(o.Binary, append([]string{sub}, o.Args...)...)
	cmd.Dir = o.Cwd
	if o.ProcessDir != "" {
		cmd.Dir = o.ProcessDir
	}
	cmd.Env = append(os.Environ(), o.Env...)
	if o.CodexHome != "" {
		cmd.Env = append(cmd.Env, "CODEX_HOME="+o.CodexHome)
	}
	return cmd
}

// Image is an image input of a prompt: a URL (data: or http(s):) or a
// local file path. Exactly one is set.
type Image struct {
	URL  string
	Path string
}

// Prompt is one user prompt.
type Prompt struct {
	Text   string
	Images []Image
	// Texts are text attachments, each "<filename>:\n<content>", sent as
	// text inputs after Text (Codex has no file input).
	Texts []string
}

// PromptOf is the prompt a runner's agent.Prompt becomes: the text, image
// files as image inputs (a data: or http(s) URL as is, a file:// URL as a
// local path), and text files (inline data: URLs of a text type) as text
// inputs. Any other attachment is refused with agent.ErrUnsupportedInput:
// Codex takes images and text only.
func PromptOf(p agent.Prompt, log *zerolog.Logger) (Prompt, error) {
	cp := Prompt{Text: p.Text}
	for _, f := range p.Files {
		switch {
		case strings.HasPrefix(f.Mime, "image/") && strings.HasPrefix(f.URL, "file://"):
			cp.Images = append(cp.Images, Image{Path: strings.TrimPrefix(f.URL, "file://")})
		case strings.HasPrefix(f.Mime, "image/"):
			cp.Images = append(cp.Images, Image{URL: f.URL})
		default:
			text, ok := inlineText(f)
			if !ok {
				log.Warn().Str("mime", f.Mime).Str("file", f.Filename).Msg("codex takes images and text only; attachment refused")
				return Prompt{}, fmt.Errorf("%w: codex takes images and text files only, not %q (%s)", agent.ErrUnsupportedInput, f.Filename, f.Mime)
			}
			name := f.Filename
			if name == "" {
				name = "attachment"
			}
			cp.Texts = append(cp.Texts, name+":\n"+text)
		}
	}
	return cp, nil
}

// inlineText is the text of a base64 data: URL of a text type.
func inlineText(f agent.PromptFile) (string, bool) {
	rest, ok := strings.CutPrefix(f.URL, "data:")
	if !ok {
		return "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	mime, isB64 := strings.CutSuffix(head, ";base64")
	if !ok || !isB64 || !(strings.HasPrefix(mime, "text/") || mime == "application/json") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// Echo reports the events a session runner records itself: every user
// prompt (Codex reports happy's prompt back) and the resolutions read back
// from happy's own answers. Resolutions Codex reports by itself
// (serverRequest/resolved) stay.
func Echo(ev agent.Event, dir trafficlog.Dir) bool {
	switch ev.(type) {
	case *agent.UserPrompt:
		return true
	case *agent.ToolResolved:
		return dir == trafficlog.C2A
	}
	return false
}

// Abandoned is the note a live client records when it gives up a turn
// Codex never ended (see noteAbandoned): the decoders end the turn of
// thread threadID whose id (app-server) or request key (mcp-server,
// "tools/call#<id>") is turn.
func Abandoned(threadID, turn, reason string) any {
	return happyNote{Happy: noteAbandoned, ThreadID: threadID, TurnID: turn, Reason: reason}
}

// RequestKey is the key the mcp-server decoder gives the turn of a
// tools/call request id ("tools/call#<id>").
func RequestKey(id jsonrpc.ID) string {
	b, _ := id.MarshalJSON()
	return requestKey(b)
}
