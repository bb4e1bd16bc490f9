// Package trafficlog reads and writes traffic logs: both directions of a
// stdio protocol (Claude SDK stream-json, Codex app-server, ACP JSON-RPC)
// recorded one JSON object per line, so that `happy replay` can reproduce a
// live session and `--record` can capture one.
//
// The format (shared test data README, "traffic log"):
//
//	{"t": <unix ms>, "dir": "c2a" | "a2c" | "stderr" | "exit" | "note", "msg": <value>}
//
// c2a is wrapper to agent, a2c agent to wrapper: msg is the JSON message as
// written on the pipe. stderr and note carry a string (a note may carry any
// JSON value); exit carries {"code": <int|null>, "sig": <string|null>}.
package trafficlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Dir is the direction (or kind) of a traffic log record.
type Dir string

// Directions.
const (
	C2A    Dir = "c2a"    // wrapper (client) to agent
	A2C    Dir = "a2c"    // agent to wrapper
	Stderr Dir = "stderr" // a line the agent wrote on stderr
	Exit   Dir = "exit"   // the agent process ended
	Note   Dir = "note"   // a remark of the recorder
)

// Valid reports whether d is one of the five directions.
func (d Dir) Valid() bool {
	switch d {
	case C2A, A2C, Stderr, Exit, Note:
		return true
	}
	return false
}

// Errors of Decode; callers branch on them with errors.Is to choose a drop
// reason.
var (
	ErrSyntax     = errors.New("trafficlog: not valid JSON")
	ErrNotObject  = errors.New("trafficlog: record is not a JSON object")
	ErrMissing    = errors.New("trafficlog: required field missing")
	ErrInvalid    = errors.New("trafficlog: field has the wrong type")
	ErrUnknownDir = errors.New("trafficlog: unknown dir")
)

// Record is one line of a traffic log.
type Record struct {
	T   int64           // Unix milliseconds when the recorder saw the message
	Dir Dir             // direction
	Msg json.RawMessage // the message, as written on the pipe (never nil after Decode)
}

// ExitStatus is the msg of an exit record. Code is nil when the process was
// killed by a signal (Sig set) or the status is unknown.
type ExitStatus struct {
	Code *int    `json:"code"`
	Sig  *string `json:"sig"`
}

// Decode parses one traffic log line. Errors wrap one of ErrSyntax,
// ErrNotObject, ErrMissing, ErrInvalid or ErrUnknownDir and name the field.
func Decode(line []byte) (Record, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		if json.Valid(line) {
			return Record{}, ErrNotObject
		}
		return Record{}, ErrSyntax
	}
	var raw struct {
		T   json.RawMessage `json:"t"`
		Dir json.RawMessage `json:"dir"`
		Msg json.RawMessage `json:"msg"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	var r Record
	if raw.Dir == nil {
		return Record{}, fmt.Errorf("%w: dir", ErrMissing)
	}
	var dir string
	if err := json.Unmarshal(raw.Dir, &dir); err != nil {
		return Record{}, fmt.Errorf("%w: dir is %s", ErrInvalid, prefix(raw.Dir))
	}
	r.Dir = Dir(dir)
	if !r.Dir.Valid() {
		return Record{}, fmt.Errorf("%w %q", ErrUnknownDir, dir)
	}
	if raw.T == nil {
		return Record{}, fmt.Errorf("%w: t", ErrMissing)
	}
	if err := json.Unmarshal(raw.T, &r.T); err != nil {
		// Accept a float with no fractional part (some recorders write 1.7e12).
		var f float64
		if json.Unmarshal(raw.T, &f) != nil || f != float64(int64(f)) {
			return Record{}, fmt.Errorf("%w: t is %s", ErrInvalid, prefix(raw.T))
		}
		r.T = int64(f)
	}
	if raw.Msg == nil {
		return Record{}, fmt.Errorf("%w: msg", ErrMissing)
	}
	r.Msg = raw.Msg
	return r, nil
}

// DecodeExit parses the msg of an exit record.
func DecodeExit(msg json.RawMessage) (ExitStatus, error) {
	var s ExitStatus
	if len(msg) == 0 || msg[0] != '{' {
		return s, fmt.Errorf("%w: exit msg is %s", ErrInvalid, prefix(msg))
	}
	if err := json.Unmarshal(msg, &s); err != nil {
		return s, fmt.Errorf("%w: exit msg: %v", ErrInvalid, err)
	}
	return s, nil
}

// Text returns the string of a stderr or note record's msg, and false when
// msg is not a JSON string.
func Text(msg json.RawMessage) (string, bool) {
	var s string
	if len(msg) == 0 || msg[0] != '"' || json.Unmarshal(msg, &s) != nil {
		return "", false
	}
	return s, true
}

func prefix(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// Writer appends records to an io.Writer, one line each. It is safe for
// concurrent use: records from several goroutines (stdout reader, stdin
// writer, stderr reader) never interleave within a line.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	buf bytes.Buffer
}

// NewWriter returns a Writer on w stamping records with now (time.Now when
// nil).
func NewWriter(w io.Writer, now func() time.Time) *Writer {
	if now == nil {
		now = time.Now
	}
	return &Writer{w: w, now: now}
}

// Message records a JSON message sent in direction dir (C2A or A2C). msg
// must be one valid JSON value; it is written unchanged except that
// insignificant whitespace (including a trailing newline) is removed so the
// record stays on one line.
func (w *Writer) Message(dir Dir, msg []byte) error {
	if !dir.Valid() {
		return fmt.Errorf("trafficlog: write: %w %q", ErrUnknownDir, dir)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, msg); err != nil {
		return fmt.Errorf("trafficlog: write %s message: %w", dir, err)
	}
	return w.write(dir, compact.Bytes())
}

// Text records a string: a stderr line or a note.
func (w *Writer) Text(dir Dir, s string) error {
	if !dir.Valid() {
		return fmt.Errorf("trafficlog: write: %w %q", ErrUnknownDir, dir)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("trafficlog: write %s text: %w", dir, err)
	}
	return w.write(dir, b)
}

// Exit records the end of the agent process: code is nil when it was
// killed by signal sig ("" when none).
func (w *Writer) Exit(code *int, sig string) error {
	s := ExitStatus{Code: code}
	if sig != "" {
		s.Sig = &sig
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("trafficlog: write exit: %w", err)
	}
	return w.write(Exit, b)
}

func (w *Writer) write(dir Dir, msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	fmt.Fprintf(&w.buf, `{"t":%d,"dir":%q,"msg":`, w.now().UnixMilli(), string(dir))
	w.buf.Write(msg)
	w.buf.WriteString("}\n")
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("trafficlog: write %s record: %w", dir, err)
	}
	return nil
}
