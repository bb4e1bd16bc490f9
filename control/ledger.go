package control

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Ledger is the durable record of the control inputs one target (a session
// or a machine) has consumed. It is a file of its own per target under the
// happy home's control folder: one line per consumed input, `<key>
// <keep-until unix ms>\n` (0: for ever), appended and synced to disk before
// the input is acted on, so a replay is refused after a crash, a restart, a
// resume or a daemon restart alike. Entries past their keep-until time are
// left out when the file is next opened (an input that old is refused as
// stale anyway). The folder is 0700 and the file 0600.
//
// One process at a time keeps a target's ledger open (the session's happy,
// or the machine's daemon). A Ledger is safe for concurrent use.
type Ledger struct {
	mu   sync.Mutex
	path string
	f    *os.File
	seen map[string]int64
	size int64 // the file's length up to its last whole entry
}

// OpenLedger opens (creating it when absent) the ledger of target in dir.
// target must be a relay id (letters, digits, '-' and '_'); anything else is
// an error, so an id cannot name a path outside dir. now decides which
// entries have expired. A torn last line (a crash mid-write) is ignored.
func OpenLedger(dir, target string, now time.Time) (*Ledger, error) {
	if !validTarget(target) {
		return nil, fmt.Errorf("control: ledger for %q: not a relay id", target)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control: ledger folder: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control: ledger folder: %w", err)
	}
	path := filepath.Join(dir, target+".consumed")
	l := &Ledger{path: path, seen: map[string]int64{}}
	dirty, err := l.load(now.UnixMilli())
	if err != nil {
		return nil, err
	}
	if dirty {
		if err := l.rewrite(); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control: open ledger: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("control: open ledger: %w", err)
	}
	l.f = f
	return l, nil
}

func validTarget(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// load reads the file; it reports whether the file must be written anew:
// an entry expired, or a line is not a whole entry (a torn last line after
// a crash or a full disk, anything else unreadable), which appending after
// it would corrupt the next entry.
func (l *Ledger) load(nowMs int64) (dirty bool, err error) {
	b, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("control: read ledger: %w", err)
	}
	l.size = int64(len(b))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		dirty = true // torn
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		key, until, ok := bytes.Cut(line, []byte{' '})
		u, perr := strconv.ParseInt(string(until), 10, 64)
		if !ok || perr != nil || !validKey(key) {
			dirty = true
			continue
		}
		if u != 0 && u < nowMs {
			dirty = true
			continue
		}
		l.seen[string(key)] = u
	}
	return dirty, nil
}

// validKey reports whether key is one the ledger writes: "id:" and 32 hex
// digits, or "ct:" and 64 (a torn key of either is shorter).
func validKey(key []byte) bool {
	var n int
	switch {
	case bytes.HasPrefix(key, []byte("id:")):
		n = 32
	case bytes.HasPrefix(key, []byte("ct:")):
		n = 64
	default:
		return false
	}
	hexPart := key[3:]
	if len(hexPart) != n {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// rewrite replaces the file with the entries kept in memory.
func (l *Ledger) rewrite() error {
	var buf bytes.Buffer
	for k, u := range l.seen {
		fmt.Fprintf(&buf, "%s %d\n", k, u)
	}
	tmp := l.path + ".tmp"
	if err := writeSynced(tmp, buf.Bytes()); err != nil {
		return fmt.Errorf("control: rewrite ledger: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("control: rewrite ledger: %w", err)
	}
	l.size = int64(buf.Len())
	return nil
}

// writeSynced writes a new 0600 file and syncs it.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Consume records key as consumed until keepUntil (unix ms; 0 for ever) and
// reports true; it reports false, writing nothing, when key was consumed
// before. The entry is on disk (fsync) before Consume returns true. An
// error means nothing was recorded: the caller must not act.
func (l *Ledger) Consume(key string, keepUntil int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[key]; ok {
		return false, nil
	}
	if l.f == nil {
		return false, errors.New("control: ledger is closed")
	}
	line := key + " " + strconv.FormatInt(keepUntil, 10) + "\n"
	_, err := l.f.WriteString(line)
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		// Nothing is recorded (the caller must not act): the partial
		// bytes go, so the next entry is not written after them.
		_ = l.f.Truncate(l.size)
		return false, fmt.Errorf("control: record consumed input: %w", err)
	}
	l.size += int64(len(line))
	l.seen[key] = keepUntil
	return true, nil
}

// Len is the number of entries kept.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// Close closes the file. Safe to call more than once.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Guard checks the control inputs of one target against its Ledger.
type Guard struct {
	// Target is the relay session id or machine id the inputs must name.
	Target string
	// Ledger records consumed inputs. Required.
	Ledger *Ledger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (g *Guard) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Check accepts e for method once: it must name g.Target and method, have
// been issued within Window (and at most MaxAhead in the future), and carry
// an id not consumed before; the id is then recorded as consumed. A refusal
// is a *Refusal (wrong_target, stale, replayed); an error of the ledger
// (disk) is returned as it is, and the input must not be acted on either
// way.
func (g *Guard) Check(e Envelope, method string) error {
	if e.Target != g.Target {
		return &Refusal{Reason: ReasonWrongTarget, Detail: fmt.Sprintf("sealed for %q, this is %q", e.Target, g.Target)}
	}
	if e.Method != method {
		return &Refusal{Reason: ReasonWrongTarget, Detail: fmt.Sprintf("sealed for method %q, called as %q", e.Method, method)}
	}
	now := g.now()
	issued := time.UnixMilli(e.IssuedAt)
	switch age := now.Sub(issued); {
	case age > Window:
		return &Refusal{Reason: ReasonStale, Detail: fmt.Sprintf("issued %s ago; inputs older than %s are refused", age.Round(time.Second), Window)}
	case -age > MaxAhead:
		return &Refusal{Reason: ReasonStale, Detail: fmt.Sprintf("issued %s in the future (is a clock wrong? `happy doctor` measures it)", (-age).Round(time.Second))}
	}
	fresh, err := g.Ledger.Consume("id:"+e.ID, issued.Add(Window+MaxAhead).UnixMilli())
	if err != nil {
		return err
	}
	if !fresh {
		return &Refusal{Reason: ReasonReplayed, Detail: "id " + e.ID + " was used before"}
	}
	return nil
}

// CheckDialect accepts once an input of a dialect that carries no envelope
// (the reference app's), identified by its ciphertext: a sealed input is
// unique by its random nonce, so the same bytes again are a replay,
// whatever the relay stored or routed them under. Its entry is kept for
// ever (such an input has no issue time to expire by).
func (g *Guard) CheckDialect(ciphertext []byte) error {
	sum := sha256.Sum256(ciphertext)
	fresh, err := g.Ledger.Consume("ct:"+hex.EncodeToString(sum[:]), 0)
	if err != nil {
		return err
	}
	if !fresh {
		return &Refusal{Reason: ReasonReplayed, Detail: "this ciphertext was used before"}
	}
	return nil
}
