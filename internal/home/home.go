// Package home resolves happy's home folder and the files kept in it.
//
// The home folder is $HAPPY_HOME_DIR when set, else ~/.happy. Its layout:
//
//	access.key      credentials (crypto.Credentials, JSON, mode 0600)
//	settings.json   user settings (serverUrl, machineId, …)
//	logs/           zerolog files, one per process start
//	server/         data of the embedded relay (happy server)
//	outbox/         durable outbox of the relay client
//	events.token    bearer token of the local event API (mode 0600)
//	daemon.lock     held by the running daemon (flock)
//	daemon.json     the daemon's state: pid, start, status, its sessions
package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/happy-dev/happy/internal/private"
)

// EnvHomeDir names the environment variable that overrides the home folder.
const EnvHomeDir = "HAPPY_HOME_DIR"

// Dir is a resolved happy home folder. The zero value is not usable; build one
// with Resolve or New.
type Dir struct {
	path string
}

// New returns a Dir rooted at path (made absolute). It does not touch the disk.
func New(path string) (Dir, error) {
	if path == "" {
		return Dir{}, errors.New("home: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Dir{}, fmt.Errorf("home: resolve %q: %w", path, err)
	}
	return Dir{path: abs}, nil
}

// Resolve returns the home folder from getenv (usually os.Getenv): the value
// of HAPPY_HOME_DIR, else ~/.happy. A leading "~/" in HAPPY_HOME_DIR is
// expanded. It fails only when neither is available.
func Resolve(getenv func(string) string) (Dir, error) {
	if v := getenv(EnvHomeDir); v != "" {
		if len(v) >= 2 && v[:2] == "~/" {
			uh, err := os.UserHomeDir()
			if err != nil {
				return Dir{}, fmt.Errorf("home: expand %s: %w", EnvHomeDir, err)
			}
			v = filepath.Join(uh, v[2:])
		}
		return New(v)
	}
	uh := getenv("HOME")
	if uh == "" {
		var err error
		if uh, err = os.UserHomeDir(); err != nil {
			return Dir{}, fmt.Errorf("home: no %s and no user home: %w", EnvHomeDir, err)
		}
	}
	return New(filepath.Join(uh, ".happy"))
}

// Path is the absolute path of the home folder.
func (d Dir) Path() string { return d.path }

// Join returns a path inside the home folder.
func (d Dir) Join(elem ...string) string {
	return filepath.Join(append([]string{d.path}, elem...)...)
}

// Logs is the folder of log files.
func (d Dir) Logs() string { return d.Join("logs") }

// Server is the default data folder of the embedded relay.
func (d Dir) Server() string { return d.Join("server") }

// Outbox is the folder of the relay client's durable outbox.
func (d Dir) Outbox() string { return d.Join("outbox") }

// AccessKey is the path of the credential file.
func (d Dir) AccessKey() string { return d.Join("access.key") }

// EventsToken is the path of the local event API's bearer token file.
func (d Dir) EventsToken() string { return d.Join("events.token") }

// Settings is the path of settings.json.
func (d Dir) Settings() string { return d.Join("settings.json") }

// Ensure creates the home folder (mode 0700) if it is missing, and makes
// an existing one 0700 (an older happy may have left it readable by other
// users).
func (d Dir) Ensure() error {
	if err := private.Dir(d.path); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	return nil
}
