//go:build unix

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/relay"
)

// StartOptions configure Start.
type StartOptions struct {
	Home home.Dir
	// Command builds the command that runs happy with args.
	Command func(args []string) *exec.Cmd
	// Wait bounds the wait for the daemon to be running (15 s when zero).
	Wait time.Duration
	// EventsListen, when not "", is passed on as daemon run's
	// --events-listen (Options.EventsListen).
	EventsListen string
}

// Start starts `happy daemon run` in the background: a session and process
// group of its own (setsid; it survives the terminal closing), stdin
// /dev/null, stdout and stderr appended to LogPath. It returns the daemon's
// state once its state file says running, or an error with the end of the
// log when it exits or does not get there within Wait. A daemon already
// running is ErrRunning, with its pid and start time.
func Start(opts StartOptions) (State, error) {
	h := opts.Home
	if Running(h) {
		st, _ := ReadState(h)
		return st, fmt.Errorf("%w (pid %d, since %s; log %s)", ErrRunning, st.PID, time.UnixMilli(st.StartedAt).Format(time.RFC3339), LogPath(h))
	}
	if opts.Wait <= 0 {
		opts.Wait = 15 * time.Second
	}
	if err := private.Dir(h.Logs()); err != nil {
		return State{}, err
	}
	rotate(LogPath(h))
	out, err := private.OpenAppend(LogPath(h))
	if err != nil {
		return State{}, err
	}
	defer out.Close()
	args := []string{"daemon", "run"}
	if opts.EventsListen != "" {
		args = append(args, "--events-listen="+opts.EventsListen)
	}
	cmd := opts.Command(args)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return State{}, fmt.Errorf("start the daemon: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(opts.Wait)
	for {
		if st, err := ReadState(h); err == nil && st.PID == pid && st.Status == StatusRunning {
			return st, nil
		}
		select {
		case <-exited:
			return State{}, fmt.Errorf("the daemon exited at start: %s", tailLines(LogPath(h), 5))
		case <-time.After(50 * time.Millisecond): // another process's file: nothing to wait on
		}
		if time.Now().After(deadline) {
			st, _ := ReadState(h)
			return st, fmt.Errorf("the daemon (pid %d) is not running after %s (status %q); see %s", pid, opts.Wait, st.Status, LogPath(h))
		}
	}
}

// maxLog is the size past which Start moves the log aside (to .1).
const maxLog = 10 << 20

func rotate(path string) {
	if st, err := os.Stat(path); err == nil && st.Size() > maxLog {
		_ = os.Rename(path, path+".1")
	}
}

// ErrNotRunning says no daemon runs on the home.
var ErrNotRunning = errors.New("no daemon runs on this home")

// Stop asks the home's daemon to stop (SIGTERM) and waits up to wait for
// it to release its lock (it stops its sessions first). It returns the
// state the daemon had; ErrNotRunning when none runs; an error saying so
// when it is still running after wait.
func Stop(h home.Dir, wait time.Duration) (State, error) {
	st, err := ReadState(h)
	if !Running(h) {
		return st, ErrNotRunning
	}
	if err != nil {
		return st, fmt.Errorf("a daemon holds the lock but its state cannot be read: %w", err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return st, fmt.Errorf("signal the daemon (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(wait)
	for Running(h) {
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the daemon (pid %d) still runs after %s; see %s", st.PID, wait, LogPath(h))
		}
		time.Sleep(50 * time.Millisecond) // another process's lock: nothing to wait on
	}
	return st, nil
}

// tailLines is the last n lines of a file, joined by " | ".
func tailLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// Machine is one of the account's machines as happy machines shows it.
// Times are Unix ms.
type Machine struct {
	ID       string               `json:"id"`
	Host     string               `json:"host,omitempty"`
	Platform string               `json:"platform,omitempty"`
	Online   bool                 `json:"online"`
	LastSeen int64                `json:"lastSeen"`
	Version  string               `json:"version,omitempty"`
	HomeDir  string               `json:"happyHomeDir,omitempty"`
	Agents   []app.InstalledAgent `json:"agents,omitempty"`
	// Daemon is the daemon state ({status, pid, startedAt, sessions}) as
	// the machine last wrote it (absent when never written).
	Daemon *json.RawMessage `json:"daemon,omitempty"`
	// Error says why metadata or state could not be read.
	Error string `json:"error,omitempty"`
}

// OnlineWithin is how recent a machine's activeAt must be for it to be
// online (the heartbeat comes every 20 s); a machine whose daemon state
// says StatusOffline is offline at once.
const OnlineWithin = 90 * time.Second

// Machines lists the account's machines, newest activity first, with the
// metadata and daemon state decrypted with the account's machine key.
func Machines(ctx context.Context, conn *app.Conn, now time.Time) ([]Machine, error) {
	list, err := conn.API.ListMachines(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Machine, 0, len(list))
	for _, mi := range list {
		m := Machine{ID: mi.ID, LastSeen: mi.ActiveAt}
		m.Online = mi.Active && now.UnixMilli()-mi.ActiveAt <= OnlineWithin.Milliseconds()
		c, err := machineCipher(conn.Creds, mi)
		if err != nil {
			m.Error = "metadata: " + err.Error()
			out = append(out, m)
			continue
		}
		var md MachineMetadata
		if plain, err := open(c, mi.Metadata); err != nil {
			m.Error = "metadata: " + readHint(conn.Creds, err)
		} else if err := json.Unmarshal(plain, &md); err != nil {
			m.Error = "metadata: " + err.Error()
		}
		m.Host, m.Platform, m.Version, m.HomeDir, m.Agents = md.Host, md.Platform, md.HappyCliVersion, md.HappyHomeDir, md.Agents
		if mi.DaemonState != nil {
			if plain, err := open(c, *mi.DaemonState); err == nil && json.Valid(plain) {
				raw := json.RawMessage(plain)
				m.Daemon = &raw
			} else if err != nil && m.Error == "" {
				m.Error = "daemon state: " + err.Error()
			}
		}
		if m.Online && m.Daemon != nil && daemonStatus(*m.Daemon) == StatusOffline {
			m.Online = false // its daemon said so on the way out
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastSeen > out[j].LastSeen })
	return out, nil
}

// machineCipher is the cipher of machine mi's metadata, daemon state and
// RPCs, as the daemon that registered it chose (relay.Client.OpenMachine):
// with the account secret, the machine's own data key unwrapped from its
// dataEncryptionKey (a legacy machine, with none, is sealed under the
// secret); without it (a terminal paired with the dataKey variant) only
// this home's machine key, which opens this machine alone.
func machineCipher(creds *crypto.Credentials, mi relay.MachineInfo) (crypto.Cipher, error) {
	if creds.AccountSecret != nil {
		dek := ""
		if mi.DataEncryptionKey != nil {
			dek = *mi.DataEncryptionKey
		}
		return creds.OpenSession(dek)
	}
	enc, err := creds.MachineEncryption()
	if err != nil {
		return nil, err
	}
	return enc.Cipher, nil
}

// readHint explains a machine that cannot be opened on a home without the
// account secret.
func readHint(creds *crypto.Credentials, err error) string {
	if creds.AccountSecret == nil {
		return err.Error() + " (this machine was paired without the account secret and reads only its own machine: pair it with happy auth approve --legacy, or log in with the backup key)"
	}
	return err.Error()
}

func open(c crypto.Cipher, b64 string) ([]byte, error) {
	raw, err := crypto.DecodeBase64(b64)
	if err != nil {
		return nil, err
	}
	return c.Open(raw)
}

// ErrNoMachine says no machine of the account matches a reference.
var ErrNoMachine = errors.New("no such machine")

// FindMachine returns the machine ref names: its id, a unique id prefix,
// or its host name (when one machine has it).
func FindMachine(ms []Machine, ref string) (Machine, error) {
	var byPrefix, byHost []Machine
	for _, m := range ms {
		if m.ID == ref {
			return m, nil
		}
		if strings.HasPrefix(m.ID, ref) {
			byPrefix = append(byPrefix, m)
		}
		if strings.EqualFold(m.Host, ref) {
			byHost = append(byHost, m)
		}
	}
	for _, c := range [][]Machine{byPrefix, byHost} {
		switch len(c) {
		case 1:
			return c[0], nil
		case 0:
		default:
			return Machine{}, fmt.Errorf("%w: %q names %d machines; give the machine id (happy machines)", ErrNoMachine, ref, len(c))
		}
	}
	return Machine{}, fmt.Errorf("%w: %q (happy machines lists them)", ErrNoMachine, ref)
}

// Call calls the machine RPC "<machineID>:<method>", sealed with that
// machine's key (machineCipher: it needs the account secret unless the
// machine is this home's own), and decodes the result into out. A machine
// whose daemon is not connected to the relay is a *NotRunningError (the
// relay says so at once).
func Call(ctx context.Context, conn *app.Conn, machineID, method string, params, out any, timeout time.Duration) error {
	list, err := conn.API.ListMachines(ctx)
	if err != nil {
		return err
	}
	var c crypto.Cipher
	var lastSeen int64
	for _, mi := range list {
		if mi.ID == machineID {
			if c, err = machineCipher(conn.Creds, mi); err != nil {
				return fmt.Errorf("machine %s: %s", machineID, readHint(conn.Creds, err))
			}
			lastSeen = mi.ActiveAt
		}
	}
	if c == nil {
		return fmt.Errorf("%w: %q (happy machines lists them)", ErrNoMachine, machineID)
	}
	res, err := app.CallScopedRPC(ctx, conn, machineID, c, method, params, timeout)
	if errors.Is(err, app.ErrRPCNotAvailable) {
		return &NotRunningError{MachineID: machineID, LastSeen: lastSeen}
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res, out); err != nil {
		return fmt.Errorf("%w: %s: reply: %w", app.ErrRPC, method, err)
	}
	return nil
}

// SpawnOn asks machine machineID's daemon to start a session (its reply
// bounded by 40 s: the daemon answers within its spawn timeout).
func SpawnOn(ctx context.Context, conn *app.Conn, machineID string, req SpawnRequest) (SpawnReply, error) {
	if req.Type == "" {
		req.Type = "spawn-in-directory"
	}
	if req.Directory != "" && !filepath.IsAbs(req.Directory) && !strings.HasPrefix(req.Directory, "~") {
		return SpawnReply{}, fmt.Errorf("directory %q: give an absolute path (it is a folder on the machine)", req.Directory)
	}
	var rep SpawnReply
	err := Call(ctx, conn, machineID, MethodSpawn, req, &rep, 40*time.Second)
	return rep, err
}

// StopSession ends a running session: through the daemon that started it
// (stop-session on the machine in its metadata, when startedBy is daemon),
// else, or when that daemon does not run it, with the session's own
// killSession RPC. It returns what was done, in one line.
func StopSession(ctx context.Context, conn *app.Conn, o app.Opened) (string, error) {
	md := o.Metadata
	if md.StartedBy == "daemon" && md.MachineID != "" {
		var rep json.RawMessage
		msg, err := StopAnswer(rep, Call(ctx, conn, md.MachineID, MethodStopSession, map[string]string{"sessionId": o.Info.ID}, &rep, 40*time.Second))
		if err == nil {
			return "stopped by the daemon of machine " + md.MachineID + ": " + msg, nil
		}
		// Fall through: the session may run on after its daemon died.
		res, kerr := app.CallRPC(ctx, conn, o, app.MethodKillSession, map[string]any{}, 20*time.Second)
		kmsg, kerr := StopAnswer(res, kerr)
		if kerr != nil {
			return "", fmt.Errorf("the daemon: %v; killSession: %w", err, kerr)
		}
		return "the daemon did not stop it (" + err.Error() + "); the session ended itself: " + kmsg, nil
	}
	res, err := app.CallRPC(ctx, conn, o, app.MethodKillSession, map[string]any{}, 20*time.Second)
	msg, err := StopAnswer(res, err)
	if err != nil {
		return "", err
	}
	return "the session ended itself: " + msg, nil
}

// StopAnswer reads the outcome of a stop-session or killSession call (res
// and err as the call returned them) into the line happy shows. happy
// answers {success, message} bound to the call; success false is a
// refusal (an error with its message). The reference CLI answers unsealed
// (err is an *app.UnboundAnswerError): its killSession {success:true,
// message}, its daemon's stop-session {message} (a refusal of either is
// {error}, which is already err). Such an answer is taken as a stop, said
// to be unbound (a relay could replay an earlier one): it only reports,
// and acting on it does nothing. Any other unbound answer stays err.
func StopAnswer(res json.RawMessage, err error) (string, error) {
	var unbound *app.UnboundAnswerError
	if errors.As(err, &unbound) {
		var r struct {
			Success *bool   `json:"success"`
			Message *string `json:"message"`
			Error   *string `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(unbound.Plain))
		dec.DisallowUnknownFields()
		if dec.Decode(&r) != nil || r.Error != nil || r.Message == nil || *r.Message == "" || (r.Success != nil && !*r.Success) {
			return "", err
		}
		return *r.Message + " (an answer of the reference CLI, not bound to this request)", nil
	}
	if err != nil {
		return "", err
	}
	var r StopReply
	if json.Unmarshal(res, &r) != nil {
		return "", fmt.Errorf("%w: not a stop answer: %s", app.ErrRPC, res)
	}
	if !r.Success {
		msg := r.Message
		if msg == "" {
			msg = "refused without a reason"
		}
		return "", errors.New(msg)
	}
	return r.Message, nil
}

// daemonStatus is the status of a daemon state ("" when it has none).
func daemonStatus(raw json.RawMessage) string {
	var ds struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(raw, &ds)
	return ds.Status
}

// NotRunningError says the daemon of a machine is not connected to the
// relay, so its RPCs cannot be answered. LastSeen is the machine's last
// activity (Unix ms; 0 when never seen).
type NotRunningError struct {
	MachineID string
	LastSeen  int64
}

func (e *NotRunningError) Error() string {
	seen := "never seen"
	if e.LastSeen > 0 {
		seen = "last seen " + time.UnixMilli(e.LastSeen).Format(time.RFC3339)
	}
	return fmt.Sprintf("the daemon of machine %s is not running (%s)", e.MachineID, seen)
}

// Unwrap is app.ErrRPC: the call failed.
func (e *NotRunningError) Unwrap() error { return app.ErrRPC }
