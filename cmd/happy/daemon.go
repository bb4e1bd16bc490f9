//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/daemon"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/internal/logging"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/tail"
	"github.com/happy-dev/happy/localapi"
)

// selfExec builds the command that runs this happy binary with args (the
// daemon starts itself and its sessions with it). Tests replace it.
var selfExec = func(args []string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}

func newDaemonCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run this machine's daemon: sessions started and stopped from another device",
		Long: `The daemon registers this machine on the relay (host, platform, happy
version, installed agents), keeps it online, and starts and stops sessions when
another device asks (happy spawn, happy stop, the mobile app). One daemon runs
per happy home; it logs to <home>/logs/daemon.out.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newDaemonStartCmd(f), newDaemonRunCmd(f), newDaemonStopCmd(f), newDaemonStatusCmd(f),
		newDaemonLogsCmd(f), newDaemonInstallCmd(f, true), newDaemonInstallCmd(f, false))
	return cmd
}

// eventsListenUsage is the help of daemon start's and run's --events-listen.
const eventsListenUsage = "serve the local event API of every session the daemon runs on this loopback `ADDR` (\"off\": none); default: the settings.json key daemonEventsListen, else 127.0.0.1:0 (the address is in daemon status)"

// checkDaemonEvents refuses, as a usage error, an --events-listen that is
// neither off nor a loopback address.
func checkDaemonEvents(addr string) error {
	if addr == "" || addr == daemon.EventsOff {
		return nil
	}
	if err := localapi.CheckLoopback(addr); err != nil {
		return &usageError{err: fmt.Errorf("--events-listen: %w", err)}
	}
	return nil
}

func newDaemonStartCmd(f *factory) *cobra.Command {
	var wait time.Duration
	var eventsListen string
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background",
		Long: `Start the daemon in the background and wait until it runs. Sessions a
previous daemon started that still run (it was killed or crashed) are adopted:
listed, stoppable and followed as before; those that died are ended on the
relay. To have the daemon started at login and restarted after a crash, use
happy daemon install (a systemd user unit) instead.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDaemonEvents(eventsListen); err != nil {
				return err
			}
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			st, err := daemon.Start(daemon.StartOptions{Home: h, Command: selfExec, Wait: wait, EventsListen: eventsListen})
			if errors.Is(err, daemon.ErrRunning) {
				return &exitError{code: exitFailed, err: fmt.Errorf("%w; stop it with: happy daemon stop", err)}
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(f.stdout, "happy: daemon started (pid %d) on %s as machine %s; log: %s\n", st.PID, st.Relay, st.MachineID, st.Log)
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 15*time.Second, "how long to wait for the daemon to be running")
	cmd.Flags().StringVar(&eventsListen, "events-listen", "", eventsListenUsage)
	return cmd
}

func newDaemonRunCmd(f *factory) *cobra.Command {
	var eventsListen string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground (what daemon start and the systemd unit run)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDaemonEvents(eventsListen); err != nil {
				return err
			}
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if err := private.Dir(h.Logs()); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			lf, err := private.OpenAppend(daemon.LogPath(h))
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer lf.Close()
			lvl, _ := logging.ParseLevel(f.getenv("HAPPY_LOG_LEVEL"))
			if lvl == zerolog.NoLevel {
				lvl = zerolog.InfoLevel
			}
			log := zerolog.New(logging.ReportOnce(lf, "the daemon's log file", f.stderr)).Level(lvl).With().Timestamp().Str("cmd", "daemon").Logger()
			stop := make(chan struct{})
			ctx, _, stopSignals := signalContextOf(cmd.Context(), []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}, nil)
			defer stopSignals()
			go func() { <-ctx.Done(); close(stop) }()
			err = daemon.Run(cmd.Context(), daemon.Options{
				Env:     app.Env{Home: h, Getenv: f.getenv, Log: log, Now: f.now},
				Command: selfExec, Stop: stop, EventsListen: eventsListen,
			})
			if err != nil {
				log.Error().Err(err).Msg("daemon ended")
				code := exitFailed
				if app.IsRelayError(err) {
					code = exitRelay
				}
				return &exitError{code: code, err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&eventsListen, "events-listen", "", eventsListenUsage)
	return cmd
}

func newDaemonStopCmd(f *factory) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Ask the daemon to stop (it stops its sessions first) and wait for it",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			st, err := daemon.Stop(h, wait)
			if errors.Is(err, daemon.ErrNotRunning) {
				fmt.Fprintln(f.stdout, "happy: no daemon runs on this home")
				return nil
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(f.stdout, "happy: daemon stopped (pid %d, %d session(s) stopped with it)\n", st.PID, len(st.Sessions))
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 60*time.Second, "how long to wait for the daemon to end")
	return cmd
}

func newDaemonStatusCmd(f *factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say whether the daemon runs, since when, and the sessions it runs",
		Long: `Say whether the daemon runs (pid, since, relay, machine id) and the sessions
it runs. --json prints {running, state?, stateError?, log}; state is the
daemon's state file ({pid, startedAt (Unix ms), status, version, machineId,
relay, log, events?, sessions: [{sessionId, pid, agent, directory, startedAt,
events?}]}); events is the address of the daemon's local event API (and of
each session's own, which the daemon follows).
The exit status is 0 when it runs, 1 when not.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			s := daemon.ReadStatus(h)
			if asJSON {
				b, _ := json.MarshalIndent(s, "", "  ")
				fmt.Fprintln(f.stdout, string(b))
			} else if !s.Running {
				fmt.Fprintf(f.stdout, "not running (start it with: happy daemon start; log: %s)\n", s.LogPath)
			} else if s.State == nil {
				fmt.Fprintf(f.stdout, "running, state unknown: %s\n", s.StateError)
			} else {
				st := s.State
				fmt.Fprintf(f.stdout, "%s: pid %d since %s, relay %s, machine %s\n", st.Status, st.PID,
					time.UnixMilli(st.StartedAt).Format(time.RFC3339), st.Relay, st.MachineID)
				for _, c := range st.Sessions {
					fmt.Fprintf(f.stdout, "  session %s  %s  %s  pid %d\n", orDash(c.SessionID), c.Agent, c.Directory, c.PID)
				}
				if st.Events != "" {
					fmt.Fprintf(f.stdout, "events: http://%s/event (bearer token in %s)\n", st.Events, h.EventsToken())
				}
				fmt.Fprintf(f.stdout, "log: %s\n", st.Log)
			}
			if !s.Running {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newDaemonLogsCmd(f *factory) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Print the daemon's log (-f follows it)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			path := daemon.LogPath(h)
			if !follow {
				lf, err := os.Open(path)
				if err != nil {
					return &exitError{code: exitFailed, err: fmt.Errorf("no daemon log yet: %w", err)}
				}
				defer lf.Close()
				_, err = io.Copy(f.stdout, lf)
				return err
			}
			ctx, _, stop := signalContext(cmd.Context())
			defer stop()
			t, err := tail.New(path, tail.Options{})
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			err = t.Run(ctx, func(l linereader.Line) error {
				_, err := fmt.Fprintf(f.stdout, "%s\n", l.Data)
				return err
			})
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the daemon logs")
	return cmd
}

func newDaemonInstallCmd(f *factory, install bool) *cobra.Command {
	var dry bool
	use, short := "install", "Write, enable and start a systemd user unit that runs the daemon"
	if !install {
		use, short = "uninstall", "Stop, disable and remove the daemon's systemd user unit"
	}
	long := `Write the systemd user unit that runs this home's daemon in the foreground
(happy daemon run), restarted 5 s after a crash, and the optional environment
file <home>/daemon.env it reads at every start (KEY=value lines: put an agent's
API key there, e.g. ANTHROPIC_API_KEY; an existing file is kept), then enable
and start it with systemctl --user. Without systemctl nothing is run: the
commands to run are printed.`
	if !install {
		long = short + "; the environment file <home>/daemon.env is kept."
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			exe, err := os.Executable()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			u, err := daemon.NewUnit(daemon.UnitOptions{Home: h, Executable: exe, Getenv: f.getenv})
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if dry {
				if install {
					fmt.Fprintf(f.stdout, "# %s\n%s", u.Path, u.Text)
					fmt.Fprintf(f.stdout, "# then: systemctl --user daemon-reload && systemctl --user enable --now %s\n", u.Name)
				} else {
					fmt.Fprintf(f.stdout, "would run: systemctl --user disable --now %s\nwould remove: %s\nwould run: systemctl --user daemon-reload\n", u.Name, u.Path)
				}
				return nil
			}
			steps := daemon.Install(u)
			if !install {
				steps = daemon.Uninstall(u)
			}
			var failed error
			for _, s := range steps {
				if s.Err != nil {
					fmt.Fprintf(f.stdout, "happy: %s: failed: %v\n", s.What, s.Err)
					failed = s.Err
					continue
				}
				fmt.Fprintf(f.stdout, "happy: %s\n", s.What)
			}
			if failed != nil {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print the unit (install) or what would be removed (uninstall), change nothing")
	return cmd
}

func newMachinesCmd(f *factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "machines",
		Short: "List the account's machines: online, last seen, agents, daemon",
		Long: `List the account's machines, most recently seen first: host, whether its
daemon is online (a heartbeat within 90 s, and its daemon did not say it
stopped), when it was last seen, its agents
and the sessions its daemon runs. --json prints an array of {id, host,
platform, online, lastSeen (Unix ms), version, happyHomeDir, agents: [{name,
installed, path?, version?}], daemon?: {status, pid, startedAt, sessions}}.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			conn, _, err := connect(ctx, f, "machines")
			if err != nil {
				return err
			}
			defer conn.Close()
			ms, err := daemon.Machines(ctx, conn, f.now())
			if err != nil {
				return &exitError{code: exitRelay, err: err}
			}
			if asJSON {
				if ms == nil {
					ms = []daemon.Machine{}
				}
				b, _ := json.MarshalIndent(ms, "", "  ")
				fmt.Fprintln(f.stdout, string(b))
				return nil
			}
			if len(ms) == 0 {
				fmt.Fprintln(f.stdout, "no machines (start a daemon on one with: happy daemon start)")
				return nil
			}
			tw := tabwriter.NewWriter(f.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MACHINE\tHOST\tSTATE\tLAST SEEN\tAGENTS\tSESSIONS")
			for _, m := range ms {
				state := "offline"
				if m.Online {
					state = "online"
				}
				var agents []string
				for _, a := range m.Agents {
					if a.Installed {
						agents = append(agents, a.Name)
					}
				}
				sessions := "-"
				if m.Daemon != nil {
					var ds struct {
						Status   string            `json:"status"`
						Sessions []json.RawMessage `json:"sessions"`
					}
					if json.Unmarshal(*m.Daemon, &ds) == nil {
						sessions = fmt.Sprint(len(ds.Sessions))
						if ds.Status != "running" && m.Online {
							state = ds.Status
						}
					}
				}
				seen := "never"
				if m.LastSeen > 0 {
					seen = f.now().Sub(time.UnixMilli(m.LastSeen)).Round(time.Second).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, orDash(m.Host), state, seen, orDash(strings.Join(agents, ",")), sessions)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the machines as JSON")
	return cmd
}

func newSpawnCmd(f *factory) *cobra.Command {
	var req daemon.SpawnRequest
	var machine string
	cmd := &cobra.Command{
		Use:   "spawn --machine M --dir D [--agent claude] [\"first prompt\"]",
		Short: "Start a session on a machine through its daemon; prints the session id",
		Long: `Start a session on machine M (its id, an id prefix or its host name; see
happy machines) in folder D there, through the machine's daemon. The agent is
one happy knows (` + strings.Join(daemon.Agents(), ", ") + `). The optional argument is the
session's first prompt. A folder that does not exist is created only with
--create-dir. --resume SESSION continues an ended Claude session the machine
ran, in place (happy resume there). The session id is printed on stdout; follow the session with
happy log ID --follow, and end it with happy stop ID. When the machine's daemon
is not running the spawn fails at once, saying when the machine was last seen.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if machine == "" || req.Directory == "" && req.ResumeSessionID == "" {
				return &usageError{err: errors.New("spawn needs --machine and --dir (or --resume)")}
			}
			if d := req.Directory; d != "" && !filepath.IsAbs(d) && !strings.HasPrefix(d, "~") {
				return &usageError{err: fmt.Errorf("--dir %q: give an absolute path (or ~/…): it names a folder on the other machine", d)}
			}
			if len(args) == 1 {
				req.Prompt = args[0]
			}
			ctx := cmd.Context()
			conn, _, err := connect(ctx, f, "spawn")
			if err != nil {
				return err
			}
			defer conn.Close()
			ms, err := daemon.Machines(ctx, conn, f.now())
			if err != nil {
				return &exitError{code: exitRelay, err: err}
			}
			m, err := daemon.FindMachine(ms, machine)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			rep, err := daemon.SpawnOn(ctx, conn, m.ID, req)
			if err != nil {
				return controlErr(err)
			}
			switch rep.Type {
			case daemon.SpawnSuccess:
				fmt.Fprintln(f.stdout, rep.SessionID)
				fmt.Fprintf(f.stderr, "happy: session %s started on %s (pid %d) — follow it with: happy log %s --follow\n", rep.SessionID, orDash(m.Host), rep.PID, rep.SessionID)
				return nil
			case daemon.SpawnApproveDirectory:
				return &exitError{code: exitFailed, err: fmt.Errorf("the folder %s does not exist on %s; add --create-dir to create it", rep.Directory, orDash(m.Host))}
			default:
				return &exitError{code: exitFailed, err: fmt.Errorf("spawn on %s: %s", orDash(m.Host), rep.ErrorMessage)}
			}
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the machine (id, id prefix or host name)")
	cmd.Flags().StringVar(&req.Directory, "dir", "", "the session's folder on the machine (absolute, or ~/…)")
	cmd.Flags().StringVar(&req.Agent, "agent", "claude", "the agent: "+strings.Join(daemon.Agents(), ", "))
	cmd.Flags().StringVar(&req.PermissionMode, "permission-mode", "", "the agent's permission mode (see happy claude --help, happy codex --help)")
	cmd.Flags().BoolVar(&req.ApprovedNewDirectoryCreation, "create-dir", false, "create the folder when it does not exist")
	cmd.Flags().StringVar(&req.ResumeSessionID, "resume", "", "continue this ended Claude `SESSION` of the machine in place (in its own folder; --dir is not needed)")
	return cmd
}

func newStopCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:               "stop SESSION",
		Short:             "End a running session (through the daemon that runs it, or the session itself)",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: completeSessions(f, true, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withLiveSession(cmd, f, "stop", args[0], func(conn *app.Conn, o app.Opened) error {
				msg, err := daemon.StopSession(cmd.Context(), conn, o)
				if err != nil {
					return err
				}
				fmt.Fprintf(f.stdout, "happy: session %s: %s\n", o.Info.ID, msg)
				return nil
			})
		},
	}
}
