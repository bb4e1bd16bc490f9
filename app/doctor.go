package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/embedded"
	"github.com/happy-dev/happy/internal/proc"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/relay/outbox"
)

// Check statuses of happy doctor.
const (
	CheckOK   = "ok"
	CheckWarn = "warn" // works, but something needs a look
	CheckFail = "fail" // does not work
)

// Check is one finding of Doctor: what was checked, how it went, what was
// seen, and (when it is not ok) what to do about it.
type Check struct {
	Name   string `json:"name"`   // "agent claude", "relay", "account", "notifications", "clock", "outbox", "orphans", "logs", "platform"
	Status string `json:"status"` // CheckOK, CheckWarn or CheckFail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// AgentProbe is an agent executable for Doctor to look at, as the agent
// command would find it: Path is what it would start ("" when it was not
// found, with Missing saying why).
type AgentProbe struct {
	Name    string // "claude", "codex", …
	Path    string
	Missing string // why it was not found
	Fix     string // how to install it or point happy at it
}

// DoctorOptions tune Doctor.
type DoctorOptions struct {
	Agents []AgentProbe
	// Timeout bounds each probe (an agent's --version, a relay call); 5 s
	// when 0.
	Timeout time.Duration
	// MaxSkew is the clock difference with the relay past which the clock
	// check warns; 10 s when 0.
	MaxSkew time.Duration
	// LogWarnBytes is the log folder size past which the logs check
	// warns; 100 MiB when 0.
	LogWarnBytes int64
}

// Doctor checks what happy needs on this machine and home, in order:
// the agents, the relay (reachable, its version), the clock against the
// relay's, the account (logged in, accepted by the relay), the outbox
// backlog, orphaned sessions, the log folder and the platform's limits. It
// never changes anything: the outbox and the relay are only read.
func Doctor(ctx context.Context, env Env, opts DoctorOptions) []Check {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxSkew <= 0 {
		opts.MaxSkew = 10 * time.Second
	}
	if opts.LogWarnBytes <= 0 {
		opts.LogWarnBytes = 100 << 20
	}
	var out []Check
	for _, a := range opts.Agents {
		out = append(out, checkAgent(ctx, a, opts.Timeout))
	}
	home := checkHomeDir(env)
	out = append(out, home)
	if home.Status == CheckFail {
		// Nothing below can be read without the home folder.
		return append(out, platformCheck())
	}
	relayUp := false
	url, src, err := LookupURL(env)
	if err != nil {
		out = append(out, Check{Name: "relay", Status: CheckFail, Detail: err.Error(), Fix: "fix serverUrl in " + env.Home.Settings() + " or HAPPY_SERVER_URL"})
	} else {
		checks := checkRelay(ctx, env, url, string(src), opts)
		relayUp = checks[0].Status == CheckOK
		squatted := false
		if relayUp && src == settings.SourceDefault {
			// Nothing (the token included) goes to a program on the
			// built-in relay's address that is not this home's relay.
			if err := embedded.Verify(ctx, env.Home, url); err != nil {
				relayUp, squatted = false, true
				checks[0].Status, checks[0].Detail = CheckFail, err.Error()
				checks[0].Fix = "stop the program on " + url + " (or happy server stop, for a relay an older happy started), or set " + settings.EnvServerURL + " to a relay you run"
			}
		}
		if !relayUp && !squatted && src == settings.SourceDefault {
			// The built-in relay is started by the first command that
			// needs it; a check does not start it.
			checks[0].Status = CheckWarn
			checks[0].Detail = "the built-in relay at " + url + " is not running"
			checks[0].Fix = "nothing to do: the next agent run starts it (or start it yourself: happy server)"
		}
		out = append(out, checks...)
	}
	out = append(out, checkHome(ctx, env, url, relayUp, opts)...)
	out = append(out, checkLogs(env, opts.LogWarnBytes))
	return append(out, platformCheck())
}

// platformCheck names the guarantees this platform lacks (proc.Limits).
func platformCheck() Check {
	if limits := proc.Limits(); len(limits) > 0 {
		return Check{Name: "platform", Status: CheckWarn, Detail: strings.Join(limits, "; "),
			Fix: "nothing to do: these Linux guarantees do not exist here; end happy with Ctrl-C or SIGTERM rather than kill -9"}
	}
	return Check{Name: "platform", Status: CheckOK, Detail: "process groups, parent-death signal and child subreaper available"}
}

// checkHomeDir checks the happy home folder: a folder, or not there yet.
func checkHomeDir(env Env) Check {
	c := Check{Name: "home"}
	st, err := os.Stat(env.Home.Path())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Status, c.Detail = CheckOK, env.Home.Path()+" (not there yet: created on first use)"
	case err != nil:
		c.Status, c.Detail = CheckFail, err.Error()
		c.Fix = "point HAPPY_HOME_DIR at a folder you can read and write (default ~/.happy)"
	case !st.IsDir():
		c.Status, c.Detail = CheckFail, env.Home.Path()+" is not a folder"
		c.Fix = "point HAPPY_HOME_DIR at a folder (default ~/.happy)"
	default:
		c.Status, c.Detail = CheckOK, env.Home.Path()
	}
	return c
}

// checkAgent runs the agent's --version (in its own process group, killed
// with the group at the timeout).
func checkAgent(ctx context.Context, a AgentProbe, timeout time.Duration) Check {
	c := Check{Name: "agent " + a.Name}
	if a.Path == "" {
		c.Status, c.Detail, c.Fix = CheckWarn, a.Missing, a.Fix
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.Path, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	b, err := cmd.Output()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever it left in its group
	}
	version := firstLine(string(b))
	switch {
	case ctx.Err() != nil:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("%s --version did not answer within %s", a.Path, timeout)
		c.Fix = "run " + a.Path + " --version yourself: it may wait for a login or an update"
	case err != nil:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("%s --version: %v", a.Path, err)
		c.Fix = "reinstall it, or " + a.Fix
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s (%s)", version, a.Path)
	}
	return c
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// checkRelay calls GET /health: reachable, the relay's version, and the
// clock skew measured against the midpoint of the call.
func checkRelay(ctx context.Context, env Env, url, source string, opts DoctorOptions) []Check {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	relayCheck := Check{Name: "relay"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/health", nil)
	if err != nil {
		relayCheck.Status, relayCheck.Detail = CheckFail, err.Error()
		return []Check{relayCheck}
	}
	before := env.now()
	resp, err := http.DefaultClient.Do(req)
	after := env.now()
	if err != nil {
		relayCheck.Status, relayCheck.Detail = CheckFail, fmt.Sprintf("%s (from %s) does not answer: %v", url, source, err)
		relayCheck.Fix = "start it (happy server), check the network, or set HAPPY_SERVER_URL to the right relay"
		return []Check{relayCheck}
	}
	defer resp.Body.Close()
	var h struct {
		Status    string          `json:"status"`
		Timestamp json.RawMessage `json:"timestamp"`
		Service   string          `json:"service"`
		Version   string          `json:"version"`
	}
	var relayTime time.Time
	if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Status == "ok" {
		relayTime, err = healthTime(h.Timestamp)
	}
	if resp.StatusCode != http.StatusOK || h.Status != "ok" || err != nil {
		relayCheck.Status, relayCheck.Detail = CheckFail, fmt.Sprintf("%s (from %s): GET /health answered %s, not a relay's health", url, source, resp.Status)
		relayCheck.Fix = "HAPPY_SERVER_URL (or serverUrl in settings) must name a happy relay"
		return []Check{relayCheck}
	}
	who := h.Service
	if h.Version != "" {
		who += " " + h.Version
	}
	relayCheck.Status, relayCheck.Detail = CheckOK, fmt.Sprintf("%s (from %s): %s", url, source, who)
	clock := Check{Name: "clock"}
	if relayTime.IsZero() {
		clock.Status, clock.Detail = CheckWarn, "the relay gave no time: skew not measured"
		return []Check{relayCheck, clock}
	}
	mid := before.Add(after.Sub(before) / 2)
	skew := relayTime.Sub(mid).Round(time.Millisecond)
	// The relay's time has millisecond resolution and the round trip blurs
	// it further: a skew of a second or more is shown to a tenth of a second.
	shown := absDuration(skew)
	if shown >= time.Second {
		shown = shown.Round(100 * time.Millisecond)
	}
	clock.Detail = fmt.Sprintf("this machine is %s %s the relay (measured within %s)", shown, aheadBehind(skew), after.Sub(before).Round(time.Millisecond))
	if skew == 0 {
		clock.Detail = fmt.Sprintf("the same as the relay's (measured within %s)", after.Sub(before).Round(time.Millisecond))
	}
	clock.Status = CheckOK
	if absDuration(skew) > opts.MaxSkew {
		clock.Status = CheckWarn
		clock.Fix = "sync the clock (timedatectl set-ntp true, or the system settings): session times and heartbeats are judged by it"
	}
	return []Check{relayCheck, clock}
}

// healthTime reads the timestamp of a relay's /health answer: our relay
// gives Unix milliseconds (a JSON number), the reference relay an ISO-8601
// string. An absent, null or non-positive time is the zero time (no time
// given); any other shape is an error.
func healthTime(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		if ms <= 0 {
			return time.Time{}, nil
		}
		return time.UnixMilli(ms), nil
	}
	var iso string
	if err := json.Unmarshal(raw, &iso); err != nil {
		return time.Time{}, fmt.Errorf("timestamp %s is neither milliseconds nor an ISO-8601 time", raw)
	}
	t, err := time.Parse(time.RFC3339Nano, iso)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q is not an ISO-8601 time: %w", iso, err)
	}
	return t, nil
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func aheadBehind(skew time.Duration) string {
	if skew > 0 {
		return "behind"
	}
	return "ahead of"
}

// checkHome looks at the account, the outbox backlog and the orphaned
// sessions of this home.
func checkHome(ctx context.Context, env Env, url string, relayUp bool, opts DoctorOptions) []Check {
	account := Check{Name: "account"}
	_, err := crypto.LoadCredentials(env.Home.AccessKey())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		account.Status, account.Detail = CheckFail, "not logged in (no "+env.Home.AccessKey()+")"
		account.Fix = "happy auth login (pair with your phone), or happy auth login --new-account"
		return []Check{account, checkOutboxOnly(ctx, env)}
	case err != nil:
		account.Status, account.Detail = CheckFail, err.Error()
		account.Fix = "happy auth logout, then happy auth login"
		return []Check{account, checkOutboxOnly(ctx, env)}
	}
	if !relayUp {
		account.Status, account.Detail = CheckWarn, "logged in on this machine; not checked with the relay, which does not answer"
		return []Check{account, checkOutboxOnly(ctx, env)}
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	conn, err := Connect(cctx, env, ConnectOptions{NoResume: true})
	if err != nil {
		account.Status, account.Detail = CheckFail, err.Error()
		account.Fix = "happy auth status says more; happy auth logout then happy auth login if the relay refuses the account"
		return []Check{account, checkOutboxOnly(ctx, env)}
	}
	defer conn.Close()
	list, err := ListSessions(cctx, conn, env.now())
	if err != nil {
		account.Status, account.Detail = CheckFail, fmt.Sprintf("account %s: the relay refused to list its sessions: %v", relay.AccountID(conn.Creds), err)
		account.Fix = "if the relay lost the account (a new relay database), happy auth logout then happy auth login --backup-key KEY"
	} else {
		account.Status, account.Detail = CheckOK, fmt.Sprintf("account %s on %s: %d session(s)", relay.AccountID(conn.Creds), url, len(list))
	}
	out := []Check{account, checkNotifications(cctx, env, conn), outboxCheck(ctx, conn.Client.Outbox())}
	orphans := Check{Name: "orphans"}
	orphs, err := conn.Client.Orphans(ctx)
	switch {
	case err != nil:
		orphans.Status, orphans.Detail = CheckWarn, "cannot list: "+err.Error()
	case len(orphs) == 0:
		orphans.Status, orphans.Detail = CheckOK, "no session left running by a happy that died"
	default:
		ids := make([]string, 0, len(orphs))
		for _, o := range orphs {
			id := o.RelayID
			if id == "" {
				id = "(never reached the relay) " + o.Tag
			}
			ids = append(ids, id)
		}
		orphans.Status = CheckWarn
		orphans.Detail = fmt.Sprintf("%d session(s) whose happy died before ending them: %s", len(orphs), strings.Join(ids, ", "))
		orphans.Fix = "the next happy agent run on this home ends them (happy claude -p …, happy codex -p …)"
	}
	return append(out, orphans)
}

// checkOutboxOnly opens the outbox without a relay client, for a home
// that is not logged in.
func checkOutboxOnly(ctx context.Context, env Env) Check {
	if _, err := os.Stat(env.Home.Outbox()); errors.Is(err, fs.ErrNotExist) {
		return Check{Name: "outbox", Status: CheckOK, Detail: "empty (no outbox yet)"}
	}
	st, err := openOutbox(ctx, env.Home.Outbox())
	if err != nil {
		return Check{Name: "outbox", Status: CheckFail, Detail: err.Error(), Fix: "check the permissions of " + env.Home.Outbox()}
	}
	defer st.Close()
	return outboxCheck(ctx, st)
}

// outboxCheck counts the versions waiting for the relay, per session, and
// the localId conflicts the relay client noted (rows the relay held under
// this outbox's localIds that were not its own: docs/ARCHITECTURE.md,
// "Relay envelope and versions").
func outboxCheck(ctx context.Context, st outboxReader) Check {
	c := Check{Name: "outbox"}
	sessions, err := st.Sessions(ctx)
	if err != nil {
		c.Status, c.Detail = CheckFail, err.Error()
		return c
	}
	total := 0
	for _, s := range sessions {
		n, err := st.Count(ctx, s)
		if err != nil {
			c.Status, c.Detail = CheckFail, err.Error()
			return c
		}
		total += n
	}
	conflicts, err := st.Conflicts(ctx, "")
	if err != nil {
		c.Status, c.Detail = CheckFail, err.Error()
		return c
	}
	if total == 0 && len(conflicts) == 0 {
		c.Status, c.Detail = CheckOK, "nothing waits for the relay"
		return c
	}
	c.Status = CheckWarn
	var details, fixes []string
	if total > 0 {
		details = append(details, fmt.Sprintf("%d version(s) of %d session(s) wait for the relay", total, len(sessions)))
		fixes = append(fixes, "they are sent by the next happy that runs on this home while the relay answers; check the relay line above; happy outbox lists them, happy outbox discard gives up those of a relay that is gone")
	}
	if n := len(conflicts); n > 0 {
		last := conflicts[n-1]
		details = append(details, fmt.Sprintf("%d localId conflict(s) since %s: the relay held rows under this machine's record ids that were not its own (last: %s of session %s, %s); the versions were written again",
			n, conflicts[0].At.UTC().Format(time.RFC3339), last.LocalID, last.Session, last.Detail))
		fixes = append(fixes, "someone holding the account's token, or the relay, wrote them: run happy auth logout --revoke on a device you trust, then log the others in again")
	}
	c.Detail, c.Fix = strings.Join(details, "; "), strings.Join(fixes, "; ")
	return c
}

// checkLogs measures the log folder.
func checkLogs(env Env, warn int64) Check {
	c := Check{Name: "logs"}
	var size int64
	files := 0
	err := filepath.WalkDir(env.Home.Logs(), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil {
			size += info.Size()
			files++
		}
		return nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Status, c.Detail = CheckOK, "no logs yet ("+env.Home.Logs()+")"
	case err != nil:
		c.Status, c.Detail = CheckWarn, err.Error()
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%d file(s), %s in %s", files, humanBytes(size), env.Home.Logs())
		if size > warn {
			c.Status = CheckWarn
			c.Fix = "lower HAPPY_LOG_KEEP_DAYS or HAPPY_LOG_KEEP_FILES (pruned at every start), or remove old files"
		}
	}
	return c
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// outboxReader is what the outbox check reads of an outbox.
type outboxReader interface {
	Sessions(ctx context.Context) ([]string, error)
	Count(ctx context.Context, session string) (int, error)
	Conflicts(ctx context.Context, session string) ([]outbox.Conflict, error)
}

// openOutbox opens the outbox of a home for reading.
func openOutbox(ctx context.Context, dir string) (*outbox.Store, error) {
	return outbox.Open(ctx, dir, outbox.Options{})
}

// checkNotifications says which ways a session tells a person it needs
// them: push events at all (the pushEvents setting), desktop notifications
// of the daemon's sessions (notify-send), and what the relay sends on to
// phones (GET /v1/push/status: Expo for the reference app, Web Push
// subscriptions of the web app). It only reads.
func checkNotifications(ctx context.Context, env Env, conn *Conn) Check {
	c := Check{Name: "notifications", Status: CheckOK}
	var parts []string
	if !pushEnabled(env) {
		parts = append(parts, "push events off (pushEvents setting or "+EnvPushEvents+")")
	}
	_, lookErr := exec.LookPath(NotifyCommand)
	switch {
	case !NotificationsOn(env):
		parts = append(parts, "desktop: off (notifications setting)")
	case lookErr != nil:
		parts = append(parts, "desktop: none ("+NotifyCommand+" not installed)")
	default:
		parts = append(parts, "desktop: daemon sessions ("+NotifyCommand+")")
	}
	st, err := conn.API.PushStatus(ctx)
	var he *relay.StatusError
	switch {
	case errors.As(err, &he) && he.Status == http.StatusNotFound:
		parts = append(parts, "the relay does not say which device pushes it sends")
	case err != nil:
		c.Status = CheckWarn
		parts = append(parts, "relay's push status unreadable: "+err.Error())
	default:
		expo := "Expo: off on the relay"
		if st.Expo.Configured {
			expo = fmt.Sprintf("Expo: %d app token(s)", st.Expo.Tokens)
		}
		parts = append(parts, expo, fmt.Sprintf("Web Push: %d browser(s)", st.WebPush.Subscriptions))
		if st.WebPush.Subscriptions == 0 && (!st.Expo.Configured || st.Expo.Tokens == 0) {
			c.Fix = "to get notifications on a phone, open the web app (happy web), install it to the home screen and turn notifications on in Devices"
		}
	}
	c.Detail = strings.Join(parts, "; ")
	return c
}
