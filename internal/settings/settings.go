// Package settings reads and writes happy's settings.json in the home folder
// and resolves which relay a command talks to.
//
// The file is a JSON object. happy reads and writes two keys:
//
//	serverUrl  string  the relay base URL (http or https, no path)
//	machineId  string  this machine's id on the relay (a UUID, created once)
//
// and reads three more, which only the person edits (Bool, RemoteShell,
// TrustedWebRelay):
//
//	remoteShell      bool    other devices may run commands and write files in a session's folder (default false)
//	pushEvents       bool    sessions send push events to the relay (default true)
//	trustedWebRelay  string  a relay URL whose own web app happy web may hand the pairing link to
//
// Every other key (the reference CLI keeps e.g. onboardingCompleted there) is
// kept byte-for-byte when the file is rewritten. Writes are atomic: a temporary
// file in the same folder is written, fsync'd, renamed over settings.json, and
// the folder is fsync'd, so a crash leaves either the old or the new file.
package settings

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/happy-dev/happy/internal/private"
)

// EnvServerURL names the environment variable that overrides the relay URL.
const EnvServerURL = "HAPPY_SERVER_URL"

// DefaultServerURL is the relay used when neither HAPPY_SERVER_URL nor
// serverUrl is set: the embedded local relay on loopback (docs/ARCHITECTURE.md, "Relay
// default").
const DefaultServerURL = "http://127.0.0.1:3005"

// EnvEmbeddedURL names the environment variable that moves the embedded
// relay off DefaultServerURL (a loopback http URL), e.g. when something
// else uses port 3005.
const EnvEmbeddedURL = "HAPPY_EMBEDDED_URL"

// ErrMalformed is wrapped by errors about a settings.json that is not a JSON
// object or holds a known key with the wrong type.
var ErrMalformed = errors.New("malformed settings")

// ErrBadServerURL is wrapped by errors about a relay URL that is not an
// absolute http(s) URL.
var ErrBadServerURL = errors.New("bad relay URL")

// Settings is the content of settings.json. The zero value is an empty file.
type Settings struct {
	// ServerURL is the "serverUrl" key ("" when absent).
	ServerURL string
	// MachineID is the "machineId" key ("" when absent).
	MachineID string

	// other holds every key this package does not interpret, as raw JSON.
	other map[string]json.RawMessage
}

// Load reads settings.json at path. A missing file yields zero Settings and no
// error. A file that is not a JSON object, or whose serverUrl / machineId is not
// a string, is an error wrapping ErrMalformed.
func Load(path string) (Settings, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Settings{}, nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("settings: read %s: %w", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: %s: %w", path, err)
	}
	return s, nil
}

// Parse decodes the bytes of a settings.json file. Empty or whitespace-only
// input is an empty file. Errors wrap ErrMalformed.
func Parse(b []byte) (Settings, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Settings{}, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Settings{}, fmt.Errorf("%w: not a JSON object: %v", ErrMalformed, err)
	}
	if raw == nil { // the literal null
		return Settings{}, fmt.Errorf("%w: not a JSON object: null", ErrMalformed)
	}
	var s Settings
	for key, dst := range map[string]*string{"serverUrl": &s.ServerURL, "machineId": &s.MachineID} {
		v, ok := raw[key]
		if !ok {
			continue
		}
		delete(raw, key)
		if string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return Settings{}, fmt.Errorf("%w: %s is not a string", ErrMalformed, key)
		}
	}
	if len(raw) > 0 {
		s.other = raw
	}
	return s, nil
}

// Marshal encodes s as an indented JSON object: the keys this package knows
// (when set) and every other key kept from the file it was loaded from, in
// sorted key order.
func (s Settings) Marshal() ([]byte, error) {
	out := make(map[string]json.RawMessage, len(s.other)+2)
	for k, v := range s.other {
		out[k] = v
	}
	for key, v := range map[string]string{"serverUrl": s.ServerURL, "machineId": s.MachineID} {
		if v == "" {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("settings: encode %s: %w", key, err)
		}
		out[key] = b
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("settings: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// Save writes s to path atomically (temporary file, fsync, rename, fsync of
// the folder) with mode 0600, creating the folder (0700) when missing.
func (s Settings) Save(path string) error {
	b, err := s.Marshal()
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b, 0o600)
}

// WriteFileAtomic replaces path with data: it writes a temporary file in the
// same folder, fsyncs it, renames it over path and fsyncs the folder, so a
// reader or a crash sees either the old content or the new, never a mix.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := private.MkdirAll(dir); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("settings: write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("settings: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("settings: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("settings: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("settings: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("settings: replace %s: %w", path, err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: some file systems refuse to sync a folder
		_ = d.Close()
	}
	return nil
}

// Update loads path, applies fn and saves the result atomically. It is the
// read-modify-write every writer of settings.json should use.
func Update(path string, fn func(*Settings) error) error {
	s, err := Load(path)
	if err != nil {
		return err
	}
	if err := fn(&s); err != nil {
		return err
	}
	return s.Save(path)
}

// EnsureMachineID returns the machineId stored at path, creating a random
// UUID (version 4) and saving it first when there is none.
func EnsureMachineID(path string) (string, error) {
	var id string
	err := Update(path, func(s *Settings) error {
		if s.MachineID == "" {
			u, err := newUUID()
			if err != nil {
				return err
			}
			s.MachineID = u
		}
		id = s.MachineID
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("settings: random machine id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// Source says where a resolved relay URL came from.
type Source string

// Sources of a relay URL, in order of precedence.
const (
	SourceEnv      Source = "env"      // HAPPY_SERVER_URL
	SourceSettings Source = "settings" // serverUrl in settings.json
	SourceDefault  Source = "default"  // DefaultServerURL
)

// ServerURL resolves the relay base URL: HAPPY_SERVER_URL from getenv, then
// s.ServerURL, then the embedded relay's (HAPPY_EMBEDDED_URL, else
// DefaultServerURL; SourceDefault). The chosen value is validated (absolute
// http or https URL with a host; a trailing slash is removed); an invalid
// value is an error wrapping ErrBadServerURL and is never replaced by the
// next source (fail closed).
func ServerURL(getenv func(string) string, s Settings) (string, Source, error) {
	raw, src := DefaultServerURL, SourceDefault
	if v := getenv(EnvEmbeddedURL); v != "" {
		raw = v
	}
	if v := getenv(EnvServerURL); v != "" {
		raw, src = v, SourceEnv
	} else if s.ServerURL != "" {
		raw, src = s.ServerURL, SourceSettings
	}
	u, err := NormalizeServerURL(raw)
	if err != nil {
		return "", src, fmt.Errorf("settings: relay URL from %s: %w", src, err)
	}
	return u, src, nil
}

// NormalizeServerURL checks that raw is an absolute http(s) URL with a host
// and no query or fragment, and returns it without trailing slashes. Errors
// wrap ErrBadServerURL.
func NormalizeServerURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadServerURL, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: %q: scheme must be http or https", ErrBadServerURL, raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w: %q: no host", ErrBadServerURL, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: %q: no user, query or fragment allowed", ErrBadServerURL, raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// Raw returns the JSON value of a key this package does not interpret
// (e.g. "notifications"), and whether the file has it.
func (s Settings) Raw(key string) (json.RawMessage, bool) {
	v, ok := s.other[key]
	return v, ok
}

// Bool reads the boolean key (one this package does not otherwise
// interpret, e.g. "remoteShell"): set is false when the key is absent or
// null. A value that is not a JSON boolean is an error wrapping
// ErrMalformed.
func (s Settings) Bool(key string) (v, set bool, err error) {
	raw, ok := s.other[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return false, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, false, fmt.Errorf("%w: %s is not a boolean", ErrMalformed, key)
	}
	return v, true, nil
}

// KeyTrustedWebRelay is the settings key naming a relay the person runs
// (or trusts as much as this machine): happy web hands the pairing link,
// which carries the account secret, to the web app that relay serves
// (docs/ARCHITECTURE.md, "The web app").
const KeyTrustedWebRelay = "trustedWebRelay"

// TrustedWebRelay returns the trustedWebRelay key, normalized as
// NormalizeServerURL does, or "" when it is absent or null. A value that is
// not a string is an error wrapping ErrMalformed; one that is not an
// absolute http(s) URL wraps ErrBadServerURL.
func (s Settings) TrustedWebRelay() (string, error) {
	raw, ok := s.other[KeyTrustedWebRelay]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%w: %s is not a string", ErrMalformed, KeyTrustedWebRelay)
	}
	u, err := NormalizeServerURL(v)
	if err != nil {
		return "", fmt.Errorf("settings: %s: %w", KeyTrustedWebRelay, err)
	}
	return u, nil
}

// EnvRemoteShell names the environment variable that overrides the
// remoteShell setting: 1/true/yes/on or 0/false/no/off.
const EnvRemoteShell = "HAPPY_REMOTE_SHELL"

// RemoteShell resolves whether other devices may run commands and write
// files in a session's folder (the session RPCs bash, writeFile and
// ripgrep): HAPPY_REMOTE_SHELL from getenv, then "remoteShell" in s, then
// off (docs/ARCHITECTURE.md, "Remote file and shell access"). A value that
// is not a boolean is an error wrapping ErrMalformed, and the caller keeps
// it off.
func RemoteShell(getenv func(string) string, s Settings) (bool, error) {
	return s.Switch(getenv, EnvRemoteShell, "remoteShell", false)
}

// Switch resolves an on/off setting: the environment variable envName
// from getenv when set (1/true/yes/on or 0/false/no/off, any case), else
// the boolean key in s, else def. A value that is neither is an error
// wrapping ErrMalformed, returned with def. getenv may be nil.
func (s Settings) Switch(getenv func(string) string, envName, key string, def bool) (bool, error) {
	if getenv != nil {
		if v := strings.TrimSpace(getenv(envName)); v != "" {
			switch strings.ToLower(v) {
			case "1", "true", "yes", "on":
				return true, nil
			case "0", "false", "no", "off":
				return false, nil
			}
			return def, fmt.Errorf("%w: %s=%q is not a boolean", ErrMalformed, envName, v)
		}
	}
	v, set, err := s.Bool(key)
	if err != nil || !set {
		return def, err
	}
	return v, nil
}
