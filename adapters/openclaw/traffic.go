package openclaw

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/happy-dev/happy/agent"
)

// The traffic log of `happy openclaw --record` has the line format of the
// other adapters' logs (docs/ARCHITECTURE.md, "Traffic logs"): one JSON
// object per line,
//
//	{"t": <unix ms>, "dir": "c2a" | "a2c" | "note", "msg": <value>}
//
// c2a is a frame happy sent to the gateway, a2c one the gateway sent; msg is
// the frame's JSON (a message that is not JSON is kept as a JSON string).
// note is a remark of happy's client, an object {"happy": <kind>, …}:
// "reconnect" (a new connection to the gateway follows), "gone" {error}
// (the gateway went away and could not be reached again). The token of the
// connect request is never written: the recorder replaces it.

// Dir is the direction (or kind) of a traffic record.
type Dir string

// Directions of a traffic record.
const (
	C2A  Dir = "c2a"  // happy to the gateway
	A2C  Dir = "a2c"  // the gateway to happy
	Note Dir = "note" // a remark of happy's client
)

// Record is one unit of traffic: T in Unix ms, the direction and the
// message (a frame's JSON, or a note object).
type Record struct {
	T    int64           `json:"t"`
	Dir  Dir             `json:"dir"`
	Msg  json.RawMessage `json:"msg"`
	Line int64           `json:"-"` // 1-based line of a log read back; 0 live
}

// Note kinds.
const (
	noteReconnect = "reconnect"
	noteGone      = "gone"
)

// note is the msg of a note record.
type note struct {
	Happy string `json:"happy"`
	Error string `json:"error,omitempty"`
}

// recorder writes traffic records; its methods are safe for concurrent use
// and a nil recorder writes nothing.
type recorder struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func newRecorder(w io.Writer) *recorder {
	if w == nil {
		return nil
	}
	return &recorder{w: w}
}

// write appends one record. A message that is not valid JSON is kept as a
// JSON string. The first write error stops the recording (the session goes
// on).
func (r *recorder) write(rec Record) {
	if r == nil {
		return
	}
	if !json.Valid(rec.Msg) {
		s, _ := json.Marshal(string(rec.Msg))
		rec.Msg = s
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	_, r.err = r.w.Write(append(line, '\n'))
}

// TrafficSource is the Dropped.Source of a traffic log line that is not a
// record; DecoderSource that of a frame the decoder refused.
const (
	TrafficSource = "traffic-log"
	DecoderSource = "openclaw-ws"
)

// maxLine bounds one line of a traffic log read back, in bytes: longer
// lines are dropped (oversize), not read whole.
const maxLine = 64 << 20

// ReadTraffic reads a traffic log: every line that is a record, in order,
// and a Dropped record (source traffic-log, with its line) for every other
// non-blank line, at its place in the order (dropped[i] precede recs[i]).
// Errors: a read error of r only.
func ReadTraffic(r io.Reader) (recs []Record, dropped map[int][]agent.Dropped, err error) {
	dropped = map[int][]agent.Dropped{}
	br := bufio.NewReader(r)
	var line int64
	for {
		data, rerr := readLine(br)
		if len(data) > 0 || rerr == nil {
			line++
		}
		if t := bytes.TrimSpace(data); len(t) > 0 {
			rec, why := decodeRecord(t, len(data) > maxLine)
			if why != nil {
				dropped[len(recs)] = append(dropped[len(recs)], agent.Dropped{Source: TrafficSource, Line: line,
					Reason: why.Reason, Detail: why.Detail, Raw: agent.CutUTF8(string(t), agent.DroppedRawMax)})
			} else {
				rec.Line = line
				recs = append(recs, rec)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return recs, dropped, nil
		}
		if rerr != nil {
			return recs, dropped, fmt.Errorf("openclaw: read traffic log: %w", rerr)
		}
	}
}

// readLine reads one line (without its newline), keeping at most
// maxLine+1 bytes of it so that an endless line cannot exhaust memory.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out) <= maxLine {
			out = append(out, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(out, []byte("\n")), err
	}
}

// decodeRecord parses one non-blank line.
func decodeRecord(t []byte, oversize bool) (Record, *FrameError) {
	if oversize {
		return Record{}, &FrameError{Reason: agent.DropOversize, Detail: fmt.Sprintf("line longer than %d bytes", maxLine)}
	}
	if !json.Valid(t) {
		return Record{}, &FrameError{Reason: agent.DropUnparseableJSON, Detail: "not JSON"}
	}
	if t[0] != '{' {
		return Record{}, &FrameError{Reason: agent.DropNotAnObject, Detail: "a record is a JSON object"}
	}
	var raw struct {
		T   *json.Number    `json:"t"`
		Dir *string         `json:"dir"`
		Msg json.RawMessage `json:"msg"`
	}
	if err := json.Unmarshal(t, &raw); err != nil {
		return Record{}, &FrameError{Reason: agent.DropInvalidField, Detail: err.Error()}
	}
	if raw.Dir == nil || raw.Msg == nil {
		return Record{}, &FrameError{Reason: agent.DropInvalidField, Detail: "record without dir or msg"}
	}
	var ms int64
	if raw.T != nil {
		v, err := raw.T.Int64()
		if err != nil {
			return Record{}, &FrameError{Reason: agent.DropInvalidField, Detail: "t is not an integer"}
		}
		ms = v
	}
	switch d := Dir(*raw.Dir); d {
	case C2A, A2C, Note:
		return Record{T: ms, Dir: d, Msg: raw.Msg}, nil
	case "stderr", "exit":
		// The other adapters' child-process records: a gateway is not our
		// child, so a log of ours holds none, but one is no error.
		return Record{T: ms, Dir: d, Msg: raw.Msg}, nil
	default:
		return Record{}, &FrameError{Reason: agent.DropInvalidField, Detail: fmt.Sprintf("unknown dir %q", d)}
	}
}

// Replay decodes a recorded traffic log (as written by --record) into
// agent events, in order: happy's prompts and approval decisions are read
// from its own frames. Bad lines are DroppedInput events at their place; a
// turn still open at the end of the log ends truncated. The caller reduces
// the events to a transcript (`happy replay --agent openclaw FILE`).
// Errors: a read error of r only.
func Replay(r io.Reader) ([]agent.Event, error) {
	recs, dropped, err := ReadTraffic(r)
	if err != nil {
		return nil, err
	}
	dec := NewDecoder()
	var evs []agent.Event
	bad := func(i int) {
		for _, d := range dropped[i] {
			evs = append(evs, &agent.DroppedInput{Dropped: d})
		}
	}
	for i, rec := range recs {
		bad(i)
		evs = append(evs, dec.Decode(rec)...)
	}
	bad(len(recs))
	return append(evs, dec.Finish()...), nil
}
