//go:build unix

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/proc"
	"github.com/happy-dev/happy/relay"
)

// SpawnRequest is the params of spawn-happy-session (the reference app's
// {type: "spawn-in-directory", directory, approvedNewDirectoryCreation,
// agent, permissionMode?}, plus prompt: the session's first prompt).
// Members the daemon does not use (token, modelMode, …) are ignored.
type SpawnRequest struct {
	Type                         string `json:"type,omitempty"`
	Directory                    string `json:"directory"`
	ApprovedNewDirectoryCreation bool   `json:"approvedNewDirectoryCreation,omitempty"`
	Agent                        string `json:"agent"`
	PermissionMode               string `json:"permissionMode,omitempty"`
	Prompt                       string `json:"prompt,omitempty"`
	// ResumeSessionID continues an ended Claude session of this machine's
	// home in place (happy resume ID --remote, in the session's own
	// folder); Directory is then not used.
	ResumeSessionID string `json:"resumeSessionId,omitempty"`
}

// Spawn reply types (SpawnReply.Type), the reference app's names.
const (
	SpawnSuccess          = "success"
	SpawnApproveDirectory = "requestToApproveDirectoryCreation"
	SpawnError            = "error"
)

// SpawnReply is the result of spawn-happy-session: {type: "success",
// sessionId, pid} | {type: "requestToApproveDirectoryCreation", directory}
// | {type: "error", errorMessage}.
type SpawnReply struct {
	Type         string `json:"type"`
	SessionID    string `json:"sessionId,omitempty"`
	PID          int    `json:"pid,omitempty"`
	Directory    string `json:"directory,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// StopReply is the result of stop-session and stop-daemon: {success,
// message} (the reference's killSession reply).
type StopReply struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// SessionsReply is the result of list-sessions: the sessions the daemon
// runs.
type SessionsReply struct {
	Sessions []Child `json:"sessions"`
}

// agentArgs are the happy command lines the daemon may start, by agent
// name: nothing else is ever started, whatever a request says.
var agentArgs = map[string][]string{
	"claude":   {"claude", "--remote"},
	"codex":    {"codex"},
	"gemini":   {"gemini"},
	"opencode": {"opencode"},
	"openclaw": {"openclaw"},
}

// permissionModes are the --permission-mode values each agent command
// takes; a request naming another is refused.
var permissionModes = map[string][]string{
	"claude": {"default", "acceptEdits", "plan", "bypassPermissions"},
	"codex":  {"default", "read-only", "safe-yolo", "yolo"},
}

// Agents returns the agent names a spawn may ask for, sorted.
func Agents() []string {
	out := make([]string, 0, len(agentArgs))
	for a := range agentArgs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// maxPrompt bounds a spawn's first prompt.
const maxPrompt = app.MaxInitialPrompt

// spawnArgs checks a request and returns the happy arguments for it, or
// the reason it is refused. The first prompt is not among them: start
// hands it over on a pipe (--initial-prompt-fd), never on the command
// line, which every local user can read.
func spawnArgs(req SpawnRequest) ([]string, error) {
	base, ok := agentArgs[req.Agent]
	if !ok {
		return nil, fmt.Errorf("unknown agent %q (this daemon starts %s)", req.Agent, strings.Join(Agents(), ", "))
	}
	args := append(slices.Clone(base), "--started-by", "daemon")
	if id := req.ResumeSessionID; id != "" {
		if req.Agent != "claude" {
			return nil, fmt.Errorf("resuming a %s session through the daemon is not supported (Claude sessions only)", req.Agent)
		}
		if !validID(id) {
			return nil, fmt.Errorf("session id %q is not a session id", id)
		}
		if m := req.PermissionMode; m != "" && m != "default" {
			return nil, fmt.Errorf("permission mode %q: a resumed session keeps its own", m)
		}
		args = []string{"resume", id, "--remote", "--started-by", "daemon"}
	}
	if m := req.PermissionMode; m != "" && req.ResumeSessionID == "" {
		if !slices.Contains(permissionModes[req.Agent], m) {
			if m != "default" {
				return nil, fmt.Errorf("permission mode %q is not one of %s's (%s)", m, req.Agent, strings.Join(permissionModes[req.Agent], ", "))
			}
		} else {
			args = append(args, "--permission-mode="+m)
		}
	}
	if req.Prompt != "" {
		if len(req.Prompt) > maxPrompt || strings.ContainsRune(req.Prompt, 0) {
			return nil, fmt.Errorf("the first prompt is over %d bytes or holds a NUL byte", maxPrompt)
		}
	}
	return args, nil
}

// validID reports whether id can be a relay session id (letters, digits,
// '-' and '_', not starting with '-', at most 100 bytes).
func validID(id string) bool {
	if id == "" || len(id) > 100 || id[0] == '-' {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// resolveDir makes a request's directory absolute ("~" and "~/…" are the
// user's home folder); a relative path is refused.
func resolveDir(dir string) (string, error) {
	if dir == "~" || strings.HasPrefix(dir, "~/") {
		uh, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(uh, strings.TrimPrefix(dir, "~"))
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("directory %q is not an absolute path", dir)
	}
	return filepath.Clean(dir), nil
}

// spawn serves spawn-happy-session. Every outcome is a reply; nothing is
// returned as an error.
func (d *daemon) spawn(ctx context.Context, params json.RawMessage) SpawnReply {
	fail := func(format string, a ...any) SpawnReply {
		msg := fmt.Sprintf(format, a...)
		d.env.Log.Warn().Str("error", msg).RawJSON("request", redactPrompt(params)).Msg("spawn refused")
		return SpawnReply{Type: SpawnError, ErrorMessage: msg}
	}
	var req SpawnRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return fail("spawn request: %v", err)
	}
	if req.Type != "" && req.Type != "spawn-in-directory" {
		return fail("spawn type %q is not supported (only spawn-in-directory)", req.Type)
	}
	if d.stopAsked() {
		return fail("the daemon is shutting down")
	}
	args, err := spawnArgs(req)
	if err != nil {
		return fail("%v", err)
	}
	if d.events != nil {
		// The session serves its own event API; the daemon follows it
		// into its own (events.go).
		args = append(args, "--events-listen="+sessionEventsListen)
	}
	if req.ResumeSessionID != "" && req.Directory == "" {
		// happy resume goes to the session's own folder; it starts in
		// the user's home folder.
		req.Directory = "~"
	}
	dir, err := resolveDir(req.Directory)
	if err != nil {
		return fail("%v", err)
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist) && !req.ApprovedNewDirectoryCreation:
		d.env.Log.Info().Str("directory", dir).Msg("spawn: the directory does not exist; asking for approval")
		return SpawnReply{Type: SpawnApproveDirectory, Directory: dir}
	case errors.Is(err, os.ErrNotExist):
		if err := private.MkdirAll(dir); err != nil {
			return fail("create directory: %v", err)
		}
		d.env.Log.Info().Str("directory", dir).Msg("spawn: created the directory (approved in the request)")
	case err != nil:
		return fail("directory: %v", err)
	case !st.IsDir():
		return fail("%s is not a directory", dir)
	}
	return d.start(ctx, req.Agent, dir, args, req.Prompt)
}

// redactPrompt returns the request with its prompt replaced by its length,
// for the log.
func redactPrompt(params json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(params, &m) != nil {
		return json.RawMessage(`{}`)
	}
	if p, ok := m["prompt"].(string); ok {
		m["prompt"] = fmt.Sprintf("(%d bytes)", len(p))
	}
	delete(m, "token")
	b, _ := json.Marshal(m)
	return b
}

// promptFD is the descriptor a spawned session reads its first prompt
// from (after the report pipe, 3).
const promptFD = 4

// start runs `happy <args>` in dir as a session of its own (new session
// and process group, stdin /dev/null, stdout and stderr to a log file under
// the home's logs) and waits up to SpawnTimeout for the line it writes to
// the report pipe (app.SpawnReportEnv) once its relay session exists. A
// first prompt goes to the session on a second pipe, descriptor 4, named
// by --initial-prompt-fd (app.ReadInitialPrompt), so that it is not on the
// command line.
func (d *daemon) start(ctx context.Context, agentName, dir string, args []string, prompt string) SpawnReply {
	fail := func(format string, a ...any) SpawnReply {
		msg := fmt.Sprintf(format, a...)
		d.env.Log.Warn().Str("agent", agentName).Str("directory", dir).Str("error", msg).Msg("spawn failed")
		return SpawnReply{Type: SpawnError, ErrorMessage: msg}
	}
	if err := private.Dir(d.env.Home.Logs()); err != nil {
		return fail("logs: %v", err)
	}
	started := now(d.env)
	logPath := filepath.Join(d.env.Home.Logs(), fmt.Sprintf("%s-daemon-%s.out", started.UTC().Format("20060102T150405.000Z"), agentName))
	out, err := private.OpenAppend(logPath)
	if err != nil {
		return fail("session log: %v", err)
	}
	defer out.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail("report pipe: %v", err)
	}
	defer pr.Close()
	var promptR, promptW *os.File
	if prompt != "" {
		if promptR, promptW, err = os.Pipe(); err != nil {
			pw.Close()
			return fail("prompt pipe: %v", err)
		}
		// Closed here on every path that does not hand it to the writer.
		defer func() {
			if promptW != nil {
				promptW.Close()
			}
		}()
		args = append(slices.Clone(args), "--initial-prompt-fd="+strconv.Itoa(promptFD))
	}
	cmd := d.opts.Command(args)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{pw}
	if promptR != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, promptR)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, app.SpawnReportEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The session is not tied to the daemon's life: a daemon killed with
	// kill -9 leaves it running, and the next daemon adopts it (Run).
	p, err := proc.Start(context.Background(), cmd, proc.Options{Grace: d.opts.StopGrace, NoParentDeathSignal: true})
	pw.Close()
	if promptR != nil {
		promptR.Close()
	}
	if err != nil {
		return fail("start happy %s: %v", agentName, err)
	}
	if promptW != nil {
		// Written alongside the wait for the report: a prompt larger than
		// the pipe's buffer is read as the session starts. A session that
		// exits first makes the write fail (its end is closed).
		w := promptW
		promptW = nil
		go func() {
			if _, err := io.WriteString(w, prompt); err != nil {
				d.env.Log.Warn().Err(err).Str("agent", agentName).Msg("spawn: the session did not take its first prompt")
			}
			_ = w.Close()
		}()
	}
	ticks, _ := proc.StartTicks(p.Pid())
	c := &child{p: p, info: Child{PID: p.Pid(), StartTicks: ticks, Agent: agentName, Directory: dir, StartedAt: started.UnixMilli(), Log: logPath}}
	d.mu.Lock()
	d.children[c.info.PID] = c
	d.mu.Unlock()
	d.changed()
	d.env.Log.Info().Int("pid", c.info.PID).Str("agent", agentName).Str("directory", dir).Str("log", logPath).Msg("spawn: session started")
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.watch(c) }()

	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(pr).ReadString('\n')
		lines <- l
	}()
	t := time.NewTimer(d.opts.SpawnTimeout)
	defer t.Stop()
	var line string
	select {
	case line = <-lines:
	case <-t.C:
		_ = p.Stop()
		return fail("the session did not report its id within %s; stopped it (its output: %s)", d.opts.SpawnTimeout, tail(logPath))
	case <-ctx.Done():
		_ = p.Stop()
		return fail("the call ended before the session reported its id; stopped it")
	}
	var rep app.SpawnReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil || rep.SessionID == "" {
		<-p.Done()
		return fail("happy %s ended before its session existed: %s", agentName, tail(logPath))
	}
	d.mu.Lock()
	c.info.SessionID = rep.SessionID
	c.info.Events = rep.Events
	d.mu.Unlock()
	d.changed()
	d.env.Log.Info().Int("pid", c.info.PID).Str("session", rep.SessionID).Str("events", rep.Events).Msg("spawn: session reported its id")
	if d.events != nil && rep.Events != "" {
		d.follow(c, rep.Events)
	}
	return SpawnReply{Type: SpawnSuccess, SessionID: rep.SessionID, PID: c.info.PID}
}

// watch waits for a session's process group to end and forgets it.
func (d *daemon) watch(c *child) {
	<-c.p.Done()
	code, err := exitCode(c.p)
	d.mu.Lock()
	delete(d.children, c.info.PID)
	d.mu.Unlock()
	d.changed()
	d.env.Log.Info().Int("pid", c.info.PID).Str("session", c.info.SessionID).Int("exit", code).AnErr("wait", err).Msg("session ended")
}

// find returns the child running relay session sid.
func (d *daemon) find(sid string) *child {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.children {
		if c.info.SessionID == sid {
			return c
		}
	}
	return nil
}

// stopSession serves stop-session {sessionId}: SIGTERM to the session's
// process group, SIGKILL after StopGrace; the reply comes once the group
// is gone.
func (d *daemon) stopSession(ctx context.Context, params json.RawMessage) StopReply {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(params, &req); err != nil || req.SessionID == "" {
		return StopReply{Message: "stop-session needs {sessionId}"}
	}
	c := d.find(req.SessionID)
	if c == nil {
		d.env.Log.Info().Str("session", req.SessionID).Msg("stop-session: not a session of this daemon")
		return StopReply{Message: fmt.Sprintf("session %s is not run by this daemon", req.SessionID)}
	}
	d.env.Log.Info().Str("session", req.SessionID).Int("pid", c.info.PID).Msg("stop-session: stopping")
	done := make(chan error, 1)
	go func() { done <- c.p.Stop() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			return StopReply{Message: fmt.Sprintf("session %s: %v", req.SessionID, err)}
		}
	case <-ctx.Done():
		return StopReply{Message: fmt.Sprintf("session %s (pid %d) is still stopping", req.SessionID, c.info.PID)}
	}
	<-c.p.Done()
	return StopReply{Success: true, Message: fmt.Sprintf("session %s stopped (pid %d)", req.SessionID, c.info.PID)}
}

// stopAll stops every session (in parallel) and waits for their groups.
func (d *daemon) stopAll() {
	d.mu.Lock()
	cs := make([]*child, 0, len(d.children))
	for _, c := range d.children {
		cs = append(cs, c)
	}
	d.mu.Unlock()
	for _, c := range cs {
		d.env.Log.Info().Int("pid", c.info.PID).Str("session", c.info.SessionID).Msg("daemon stopping: stopping session")
		go func() { _ = c.p.Stop() }()
	}
	for _, c := range cs {
		<-c.p.Done()
	}
}

// AppShapes are the params the reference app sends, without an envelope,
// for the machine methods it calls (docs/ARCHITECTURE.md, "Trust"): with
// the appCompat setting they are accepted in that shape only, each
// ciphertext once. stop-daemon (params {}) takes sealed envelopes only.
var AppShapes = map[string]control.Shape{
	MethodSpawn: {Required: []string{"type", "directory"}, Optional: []string{"approvedNewDirectoryCreation", "token", "agent",
		"permissionMode", "modelMode", "effortLevel", "resumeSessionId", "prompt"}},
	MethodStopSession: {Required: []string{"sessionId"}},
}

// registerRPCs registers the machine RPCs: sealed control envelopes only,
// and with the appCompat setting also the reference app's dialect, in its
// exact shape (AppShapes), for spawn and stop-session. A refused call is
// logged.
func (d *daemon) registerRPCs(ctx context.Context) {
	compat := app.AppCompatEnabled(d.env)
	reg := func(name string, h relay.RPCHandler) {
		if shape, ok := AppShapes[name]; ok && compat {
			d.machine.RegisterDialectRPC(name, shape, h)
			return
		}
		d.machine.RegisterRPC(name, h)
	}
	d.machine.OnRefused(func(r relay.Refused) {
		d.env.Log.Warn().Str("method", r.Method).Str("reason", string(r.Reason)).Str("detail", r.Detail).Msg("machine rpc refused")
	})
	reg(MethodSpawn, func(cctx context.Context, p json.RawMessage) (any, error) {
		return d.spawn(cctx, p), nil
	})
	reg(MethodStopSession, func(cctx context.Context, p json.RawMessage) (any, error) {
		return d.stopSession(cctx, p), nil
	})
	d.machine.RegisterRPC(MethodListSessions, func(context.Context, json.RawMessage) (any, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		list := d.sessionsLocked()
		for i := range list {
			list[i].Events = "" // a loopback port of this machine: nothing for other devices
		}
		return SessionsReply{Sessions: list}, nil
	})
	reg(MethodStopDaemon, func(context.Context, json.RawMessage) (any, error) {
		d.env.Log.Info().Msg("stop-daemon: asked over the relay")
		// The reply goes out before the shutdown closes the socket.
		time.AfterFunc(200*time.Millisecond, func() { d.requestStop("rpc") })
		return StopReply{Success: true, Message: "the daemon is stopping (pid " + strconv.Itoa(os.Getpid()) + ")"}, nil
	})
}

func sortChildren(cs []Child) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].StartedAt != cs[j].StartedAt {
			return cs[i].StartedAt < cs[j].StartedAt
		}
		return cs[i].PID < cs[j].PID
	})
}

// tail is the end of a log file (at most 2 KiB, on one line).
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\n", " | "))
	if s == "" {
		return "(no output)"
	}
	return s
}
