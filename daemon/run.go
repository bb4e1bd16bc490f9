//go:build unix

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"sync"
	"time"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/relay"
)

// Options configure Run.
type Options struct {
	Env app.Env
	// Command builds the command that runs happy itself with args (the
	// daemon's own executable, os.Executable). Required.
	Command func(args []string) *exec.Cmd
	// SpawnTimeout bounds the wait for a started session to report its
	// relay session id (15 s when zero).
	SpawnTimeout time.Duration
	// StopGrace is how long a session gets between SIGTERM and SIGKILL
	// when it is stopped (10 s when zero).
	StopGrace time.Duration
	// Stop, when not nil, ends the daemon when it is closed (besides ctx).
	Stop <-chan struct{}
	// EventsListen is the loopback address of the daemon's local event
	// API, or EventsOff; "" takes the settings.json key EventsSetting,
	// else DefaultEventsListen (EventsAddr).
	EventsListen string
}

// Defaults of Options.
const (
	DefaultSpawnTimeout = 15 * time.Second
	DefaultStopGrace    = 10 * time.Second
)

// Machine RPC methods the daemon registers ("<machineId>:<name>"; the
// reference app's names for the first three).
const (
	MethodSpawn        = "spawn-happy-session"
	MethodStopSession  = "stop-session"
	MethodStopDaemon   = "stop-daemon"
	MethodListSessions = "list-sessions"
)

// daemon is one running daemon.
type daemon struct {
	opts Options
	env  app.Env

	mu       sync.Mutex
	state    State
	children map[int]*child // by pid

	machine  *relay.Machine
	kick     chan struct{} // daemon state changed: write it to the relay
	stopOnce sync.Once
	stopped  chan struct{} // closed when a stop is asked for
	wg       sync.WaitGroup

	// The local event API (nil when off): the hub every session's
	// events are republished into (events.go).
	hub    *localapi.Hub
	events *localapi.Server
	token  string
	http   *http.Client
}

// child is a session the daemon runs: one it started, or one a daemon
// that died had started and this one adopted.
type child struct {
	info Child
	p    sessionProc
}

// Run is `happy daemon run`: it takes the home's daemon lock (ErrRunning
// when another daemon holds it), adopts the sessions a killed predecessor
// left running (adoptLeftovers; the orphan settlement of the relay
// connection ends those that died), connects to the
// relay (retrying with the relay client's back-off), registers the machine
// with its metadata, keeps its daemon state, and serves the machine RPCs
// until ctx ends, Options.Stop closes or a stop-daemon RPC comes; then it
// writes status shutting-down, stops every session it runs, writes status
// offline (no sessions) to the relay and returns.
func Run(ctx context.Context, opts Options) error {
	if opts.Command == nil {
		return errors.New("daemon: no command to start happy with")
	}
	if opts.SpawnTimeout <= 0 {
		opts.SpawnTimeout = DefaultSpawnTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	env := opts.Env
	h := env.Home
	lk, err := tryLock(h)
	if err != nil {
		if errors.Is(err, ErrRunning) {
			if st, e := ReadState(h); e == nil {
				return fmt.Errorf("%w (pid %d, since %s)", ErrRunning, st.PID, time.UnixMilli(st.StartedAt).Format(time.RFC3339))
			}
		}
		return err
	}
	defer lk.release()
	d := &daemon{opts: opts, env: env, children: map[int]*child{}, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	d.state = State{PID: os.Getpid(), StartedAt: now(env).UnixMilli(), Status: StatusStarting, Version: buildinfo.Version, Log: LogPath(h), Sessions: []Child{}}
	if id, err := settings.EnsureMachineID(h.Settings()); err == nil {
		d.state.MachineID = id
	} else {
		return fmt.Errorf("daemon: machine id: %w", err)
	}
	st, err := settings.Load(h.Settings())
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	addr, err := EventsAddr(opts.EventsListen, st)
	if err != nil {
		return fmt.Errorf("daemon: local event API: %w", err)
	}
	if addr != EventsOff {
		if err := d.startEvents(addr); err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
	}
	var adopted []*child
	if prev, err := ReadState(h); err == nil {
		adopted = d.adoptLeftovers(prev)
	}
	d.saveLocked()
	defer os.Remove(StatePath(h))
	for _, c := range adopted {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.watch(c) }()
		if d.events != nil && c.info.Events != "" {
			d.wg.Add(1)
			go func() { defer d.wg.Done(); d.follow(c, c.info.Events) }()
		}
	}
	env.Log.Info().Int("pid", d.state.PID).Str("machine", d.state.MachineID).Msg("daemon starting")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-opts.Stop:
			d.requestStop("signal")
		case <-runCtx.Done():
		}
	}()
	go func() {
		select {
		case <-d.stopped:
			cancel()
		case <-runCtx.Done():
		}
	}()

	conn, err := connect(runCtx, env)
	if err != nil {
		return d.finish(ctx, err)
	}
	defer conn.Close()
	d.mu.Lock()
	d.state.Relay = conn.URL
	d.saveLocked()
	d.mu.Unlock()
	m, err := openMachine(runCtx, env, conn, d.state.MachineID, d.daemonStateJSON())
	if err != nil {
		return d.finish(ctx, err)
	}
	d.machine = m
	defer m.Close()
	d.registerRPCs(runCtx)
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.stateWriter(runCtx) }()
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.refreshMetadata(runCtx, conn) }()

	// Running once the machine's socket is up: until then the relay
	// refuses its RPCs at once (no socket of the machine is connected).
	wctx, wcancel := context.WithTimeout(runCtx, opts.SpawnTimeout)
	if err := m.WaitConnected(wctx); err != nil && runCtx.Err() == nil {
		env.Log.Warn().Err(err).Msg("the machine's socket is not connected yet; running anyway")
	}
	wcancel()
	// Logged first: daemon start returns once the state file says running.
	env.Log.Info().Str("relay", conn.URL).Msg("daemon running: machine registered")
	d.mu.Lock()
	d.state.Status = StatusRunning
	d.mu.Unlock()
	d.changed()

	<-runCtx.Done()
	return d.finish(ctx, nil)
}

// finish writes shutting-down (locally and, bounded, to the relay), stops
// every session, writes offline to the relay and returns cause.
func (d *daemon) finish(parent context.Context, cause error) error {
	asked := d.stopAsked()
	d.requestStop("signal")
	d.mu.Lock()
	d.state.Status = StatusShuttingDown
	d.saveLocked()
	d.mu.Unlock()
	d.writeFinal(parent, "shutting-down")
	d.stopAll()
	d.wg.Wait()
	d.closeEvents()
	// The last word on the relay: no session, offline (Machines and the web
	// app show the machine offline at once rather than after OnlineWithin).
	d.mu.Lock()
	d.state.Status = StatusOffline
	d.mu.Unlock()
	d.writeFinal(parent, StatusOffline)
	d.env.Log.Info().Msg("daemon stopped")
	if cause != nil && parent.Err() == nil && !asked {
		return cause
	}
	return nil
}

// writeFinal writes the daemon state to the relay, bounded by 5 s, while
// the daemon ends (status names it in the log).
func (d *daemon) writeFinal(parent context.Context, status string) {
	if d.machine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
	defer cancel()
	if err := d.writeDaemonState(ctx); err != nil {
		d.env.Log.Warn().Err(err).Str("status", status).Msg("daemon state not written")
	}
}

func (d *daemon) stopAsked() bool {
	select {
	case <-d.stopped:
		return true
	default:
		return false
	}
}

// requestStop asks the daemon to stop (once; the first source is kept).
func (d *daemon) requestStop(source string) {
	d.stopOnce.Do(func() {
		d.mu.Lock()
		d.state.ShutdownRequestedAt = now(d.env).UnixMilli()
		d.state.ShutdownSource = source
		d.mu.Unlock()
		d.env.Log.Info().Str("source", source).Msg("daemon stop requested")
		close(d.stopped)
	})
}

// saveLocked writes the state file (d.mu held).
func (d *daemon) saveLocked() {
	d.state.Sessions = d.sessionsLocked()
	if err := writeState(d.env.Home, d.state); err != nil {
		d.env.Log.Warn().Err(err).Msg("daemon state file not written")
	}
}

func (d *daemon) sessionsLocked() []Child {
	out := make([]Child, 0, len(d.children))
	for _, c := range d.children {
		out = append(out, c.info)
	}
	sortChildren(out)
	return out
}

// changed saves the state file and has the relay's daemon state rewritten.
func (d *daemon) changed() {
	d.mu.Lock()
	d.saveLocked()
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// daemonState is the relay's daemonState ({status, pid, startedAt,
// sessions, shutdownRequestedAt?, shutdownSource?}: the reference's
// fields, plus the sessions).
type daemonState struct {
	Status              string         `json:"status"`
	PID                 int            `json:"pid"`
	StartedAt           int64          `json:"startedAt"`
	Version             string         `json:"version,omitempty"`
	Sessions            []stateSession `json:"sessions"`
	ShutdownRequestedAt int64          `json:"shutdownRequestedAt,omitempty"`
	ShutdownSource      string         `json:"shutdownSource,omitempty"`
}

// stateSession is one session in the relay's daemonState.
type stateSession struct {
	SessionID string `json:"sessionId,omitempty"`
	PID       int    `json:"pid"`
	Agent     string `json:"agent"`
	Directory string `json:"directory"`
	StartedAt int64  `json:"startedAt"`
}

func (d *daemon) daemonStateJSON() json.RawMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := daemonState{Status: d.state.Status, PID: d.state.PID, StartedAt: d.state.StartedAt, Version: d.state.Version,
		Sessions: []stateSession{}, ShutdownRequestedAt: d.state.ShutdownRequestedAt, ShutdownSource: d.state.ShutdownSource}
	if st.Status == StatusStarting {
		st.Status = StatusRunning
	}
	for _, c := range d.sessionsLocked() {
		st.Sessions = append(st.Sessions, stateSession{SessionID: c.SessionID, PID: c.PID, Agent: c.Agent, Directory: c.Directory, StartedAt: c.StartedAt})
	}
	b, _ := json.Marshal(st)
	return b
}

func (d *daemon) writeDaemonState(ctx context.Context) error {
	v := d.daemonStateJSON()
	return d.machine.UpdateDaemonState(ctx, func(json.RawMessage) (json.RawMessage, error) { return v, nil })
}

// stateWriter writes the daemon state to the relay after every change; a
// failed write is retried with the relay client's back-off.
func (d *daemon) stateWriter(ctx context.Context) {
	var bo relay.Backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		}
		for {
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err := d.writeDaemonState(wctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				bo.Reset()
				break
			}
			d.env.Log.Warn().Err(err).Msg("daemon state not written yet; retrying")
			if !sleepCtx(ctx, bo.Next()) {
				return
			}
		}
	}
}

// connect connects to the relay, retrying with back-off until ctx ends.
func connect(ctx context.Context, env app.Env) (*app.Conn, error) {
	var bo relay.Backoff
	for {
		conn, err := app.Connect(ctx, env, app.ConnectOptions{AllowCreate: true})
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, app.ErrLoggedOut) {
			return nil, err
		}
		env.Log.Warn().Err(err).Msg("relay not usable yet; retrying")
		if !sleepCtx(ctx, bo.Next()) {
			return nil, ctx.Err()
		}
	}
}

// openMachine registers the machine, retrying with back-off until ctx ends.
func openMachine(ctx context.Context, env app.Env, conn *app.Conn, id string, ds json.RawMessage) (*relay.Machine, error) {
	md, err := json.Marshal(machineMetadata(ctx, env, nil))
	if err != nil {
		return nil, err
	}
	var bo relay.Backoff
	for {
		m, err := conn.Client.OpenMachine(ctx, relay.MachineOptions{ID: id, Metadata: md, DaemonState: ds})
		if err == nil {
			return m, nil
		}
		if errors.Is(err, relay.ErrUnauthorized) {
			return nil, err
		}
		env.Log.Warn().Err(err).Msg("machine not registered yet; retrying")
		if !sleepCtx(ctx, bo.Next()) {
			return nil, ctx.Err()
		}
	}
}

// refreshMetadata writes the machine metadata again with what is installed
// now (the relay keeps the metadata a machine was first created with).
func (d *daemon) refreshMetadata(ctx context.Context, conn *app.Conn) {
	agents := app.DetectAgents(ctx, d.env.Getenv)
	b, err := json.Marshal(machineMetadata(ctx, d.env, agents))
	if err != nil {
		return
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(b, &fields)
	var bo relay.Backoff
	for ctx.Err() == nil {
		err := d.machine.UpdateMetadata(ctx, func(cur json.RawMessage) (json.RawMessage, error) {
			m := map[string]json.RawMessage{}
			if len(cur) > 0 {
				if json.Unmarshal(cur, &m) != nil || m == nil {
					m = map[string]json.RawMessage{}
				}
			}
			for k, v := range fields {
				m[k] = v
			}
			return json.Marshal(m)
		})
		if err == nil {
			d.env.Log.Info().RawJSON("metadata", b).Msg("machine metadata written")
			return
		}
		d.env.Log.Warn().Err(err).Msg("machine metadata not written yet; retrying")
		if !sleepCtx(ctx, bo.Next()) {
			return
		}
	}
}

// MachineMetadata is the encrypted machine metadata (the reference app's
// MachineMetadataSchema names: host, platform, happyCliVersion,
// happyHomeDir, homeDir, username, arch, cliAvailability), plus agents:
// every known agent with its path and version.
type MachineMetadata struct {
	Host            string               `json:"host"`
	Platform        string               `json:"platform"`
	HappyCliVersion string               `json:"happyCliVersion"`
	HappyHomeDir    string               `json:"happyHomeDir"`
	HomeDir         string               `json:"homeDir"`
	Username        string               `json:"username,omitempty"`
	Arch            string               `json:"arch"`
	CLIAvailability map[string]any       `json:"cliAvailability,omitempty"`
	Agents          []app.InstalledAgent `json:"agents,omitempty"`
}

// machineMetadata describes this machine; agents nil leaves the agent
// fields out (they are written once detected).
func machineMetadata(_ context.Context, env app.Env, agents []app.InstalledAgent) MachineMetadata {
	host, _ := os.Hostname()
	uh, _ := os.UserHomeDir()
	md := MachineMetadata{Host: host, Platform: runtime.GOOS, HappyCliVersion: buildinfo.Version,
		HappyHomeDir: env.Home.Path(), HomeDir: uh, Arch: runtime.GOARCH}
	if u, err := user.Current(); err == nil {
		md.Username = u.Username
	}
	if agents != nil {
		md.Agents = agents
		md.CLIAvailability = map[string]any{"detectedAt": now(env).UnixMilli()}
		for _, a := range agents {
			md.CLIAvailability[a.Name] = a.Installed
		}
	}
	return md
}

func now(env app.Env) time.Time {
	if env.Now != nil {
		return env.Now()
	}
	return time.Now()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
