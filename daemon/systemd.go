//go:build unix

package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/private"
)

// Unit describes the systemd user unit that runs a home's daemon.
type Unit struct {
	Name string // file name: happy-daemon.service, or happy-daemon-<hash>.service for a home other than ~/.happy
	Path string // where it is written: $XDG_CONFIG_HOME/systemd/user (else ~/.config/systemd/user)
	Text string // the unit file
	// EnvFile is the unit's EnvironmentFile, <home>/daemon.env: KEY=value
	// lines the user fills (an agent's API key), read at every start.
	EnvFile string
}

// envFileName is the daemon's environment file in the happy home.
const envFileName = "daemon.env"

// envFileText is what Install writes to a new environment file.
const envFileText = `# Environment of the happy daemon and the sessions it starts, read by its
# systemd user unit at every start (KEY=value lines; # starts a comment).
# ANTHROPIC_API_KEY=
# OPENAI_API_KEY=
`

// UnitOptions are what the unit is made of.
type UnitOptions struct {
	Home       home.Dir
	Executable string // the happy binary (os.Executable)
	Getenv     func(string) string
}

// NewUnit builds the systemd user unit of the home's daemon: `happy daemon
// run` in the foreground (Type=simple), HAPPY_HOME_DIR, and PATH and
// HAPPY_SERVER_URL as they are now (a user unit does not inherit the login
// shell's environment), the optional EnvironmentFile <home>/daemon.env for
// what the user adds (an agent's API key), restarted on failure; SIGTERM goes to the daemon
// alone, which stops its sessions (KillMode=mixed, 30 s before SIGKILL).
func NewUnit(o UnitOptions) (Unit, error) {
	cfg := o.Getenv("XDG_CONFIG_HOME")
	if cfg == "" {
		uh, err := os.UserHomeDir()
		if err != nil {
			return Unit{}, fmt.Errorf("systemd unit: %w", err)
		}
		cfg = filepath.Join(uh, ".config")
	}
	name := "happy-daemon.service"
	if uh, err := os.UserHomeDir(); err != nil || o.Home.Path() != filepath.Join(uh, ".happy") {
		sum := sha256.Sum256([]byte(o.Home.Path()))
		name = "happy-daemon-" + hex.EncodeToString(sum[:4]) + ".service"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[Unit]\nDescription=happy daemon for %s\nAfter=network-online.target\nWants=network-online.target\n\n", unitEscape(o.Home.Path()))
	fmt.Fprintf(&b, "[Service]\nType=simple\nExecStart=%s daemon run\n", execQuote(o.Executable))
	fmt.Fprintf(&b, "Environment=%s\n", envQuote(home.EnvHomeDir+"="+o.Home.Path()))
	for _, k := range []string{"PATH", "HAPPY_SERVER_URL"} {
		if v := o.Getenv(k); v != "" {
			fmt.Fprintf(&b, "Environment=%s\n", envQuote(k+"="+v))
		}
	}
	env := o.Home.Join(envFileName)
	fmt.Fprintf(&b, "EnvironmentFile=-%s\n", unitEscape(env))
	b.WriteString("Restart=on-failure\nRestartSec=5\nKillMode=mixed\nTimeoutStopSec=30\n\n[Install]\nWantedBy=default.target\n")
	return Unit{Name: name, Path: filepath.Join(cfg, "systemd", "user", name), Text: b.String(), EnvFile: env}, nil
}

// unitEscape doubles % (systemd's specifier character).
func unitEscape(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// execQuote quotes an executable path for ExecStart.
func execQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$").Replace(s) + `"`
}

// envQuote quotes one KEY=value assignment for Environment=.
func envQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s) + `"`
}

// Step is one thing Install or Uninstall did (or, dry, would do).
type Step struct {
	What string // one line: "wrote …", "ran systemctl --user …"
	Err  error
}

// systemctl runs `systemctl --user args…` (bounded by 30 s).
func systemctl(args ...string) Step {
	full := append([]string{"--user"}, args...)
	what := "ran systemctl " + strings.Join(full, " ")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := exec.LookPath("systemctl"); err != nil {
		return Step{What: what, Err: fmt.Errorf("systemctl not found: %w", err)}
	}
	out, err := exec.CommandContext(ctx, "systemctl", full...).CombinedOutput()
	if err != nil {
		return Step{What: what, Err: fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))}
	}
	return Step{What: what}
}

// Install writes the unit and, when there is none, its environment file
// (commented examples), reloads systemd's user manager and enables and
// starts the unit; it stops at the first failed step. Where systemctl is
// not found it runs nothing and its last step says the commands to run.
func Install(u Unit) []Step {
	if err := private.MkdirAll(filepath.Dir(u.Path)); err != nil {
		return []Step{{What: "create " + filepath.Dir(u.Path), Err: err}}
	}
	if err := private.WriteFile(u.Path, []byte(u.Text)); err != nil {
		return []Step{{What: "write " + u.Path, Err: err}}
	}
	steps := []Step{{What: "wrote " + u.Path}}
	if u.EnvFile != "" {
		if _, err := os.Stat(u.EnvFile); err == nil {
			steps = append(steps, Step{What: "kept " + u.EnvFile + " (the daemon's environment)"})
		} else if err := private.WriteFile(u.EnvFile, []byte(envFileText)); err != nil {
			return append(steps, Step{What: "write " + u.EnvFile, Err: err})
		} else {
			steps = append(steps, Step{What: "wrote " + u.EnvFile + " (the daemon's environment: add an agent's API key there)"})
		}
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return append(steps, Step{What: "systemctl not found; to start the daemon with systemd run: systemctl --user daemon-reload && systemctl --user enable --now " + u.Name})
	}
	for _, args := range [][]string{{"daemon-reload"}, {"enable", "--now", u.Name}} {
		s := systemctl(args...)
		steps = append(steps, s)
		if s.Err != nil {
			break
		}
	}
	return steps
}

// Uninstall disables and stops the unit, removes its file and reloads
// systemd's user manager. A unit that is not there is not an error.
func Uninstall(u Unit) []Step {
	var steps []Step
	if _, err := os.Stat(u.Path); err != nil {
		return []Step{{What: "no unit at " + u.Path + "; nothing to remove"}}
	}
	steps = append(steps, systemctl("disable", "--now", u.Name))
	if err := os.Remove(u.Path); err != nil {
		return append(steps, Step{What: "remove " + u.Path, Err: err})
	}
	steps = append(steps, Step{What: "removed " + u.Path})
	return append(steps, systemctl("daemon-reload"))
}
