package openclaw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/trafficlog"
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
// (the gateway went away and could not be reached again). No secret is
// written: the token of the connect request, the string value of any key
// ending in token, secret, password or apiKey (either case of its first
// letter: deviceToken, clientSecret), and the secret path
// segment of a capability URL (…/__openclaw__/cap/<secret>, e.g. hello-ok's
// pluginSurfaceUrls) become "[redacted]" (redact).

// Dir is the direction (or kind) of a traffic record: the traffic log's.
type Dir = trafficlog.Dir

// Directions of a traffic record.
const (
	C2A  = trafficlog.C2A  // happy to the gateway
	A2C  = trafficlog.A2C  // the gateway to happy
	Note = trafficlog.Note // a remark of happy's client
)

// Record is one unit of traffic: T in Unix ms, the direction and the
// message (a frame's JSON, or a note object), and for a log read back its
// 1-based line (0 live).
type Record struct {
	T    int64
	Dir  Dir
	Msg  json.RawMessage
	Line int64
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

// recorder writes traffic records with the traffic log's writer; its
// methods are safe for concurrent use and a nil recorder writes nothing.
type recorder struct {
	mu  sync.Mutex
	w   *trafficlog.Writer
	t   int64 // the time of the record being written, for the writer's clock
	err error
}

func newRecorder(w io.Writer) *recorder {
	if w == nil {
		return nil
	}
	r := &recorder{}
	r.w = trafficlog.NewWriter(w, func() time.Time { return time.UnixMilli(r.t) })
	return r
}

// write appends one record. A message that is not valid JSON is kept as a
// JSON string. The first write error stops the recording (the session goes
// on).
func (r *recorder) write(rec Record) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.t = rec.T
	msg := redact(rec.Msg)
	if json.Valid(msg) {
		r.err = r.w.Message(rec.Dir, msg)
	} else {
		r.err = r.w.Text(rec.Dir, string(msg))
	}
}

// Redacted is what a secret becomes in the traffic log.
const Redacted = "[redacted]"

var (
	// capURL matches the secret segment of a gateway capability URL.
	capURL = regexp.MustCompile(`(/__openclaw__/cap/)[^"\\/?#\s]+`)
	// secretField matches a JSON member whose key names a secret and whose
	// value is a string.
	secretField = regexp.MustCompile(`("[A-Za-z_]*(?:[Tt]oken|[Ss]ecret|[Pp]assword|[Aa]pi[Kk]ey|api_key)"\s*:\s*)"(?:[^"\\]|\\.)*"`)
)

// redact replaces the secrets of a message (see the log format above) in
// its bytes, so that the rest stays as the gateway sent it; a message with
// none is returned as is.
func redact(msg []byte) []byte {
	if bytes.Contains(msg, []byte("/__openclaw__/cap/")) {
		msg = capURL.ReplaceAll(msg, []byte("${1}"+Redacted))
	}
	if bytes.Contains(msg, []byte("oken\"")) || bytes.Contains(msg, []byte("ecret\"")) || bytes.Contains(msg, []byte("assword\"")) ||
		bytes.Contains(msg, []byte("pi_key\"")) || bytes.Contains(msg, []byte("piKey\"")) {
		msg = secretField.ReplaceAll(msg, []byte(`${1}"`+Redacted+`"`))
	}
	return msg
}

// TrafficSource is the Dropped.Source of a traffic log line that is not a
// record; DecoderSource that of a frame the decoder refused.
const (
	TrafficSource = "traffic-log"
	DecoderSource = "openclaw-ws"
)

// ReadTraffic reads a traffic log (trafficlog.Scan): every line that is a
// record, in order, and a Dropped record (source traffic-log, with its
// line and trafficlog.DropReason) for every other non-blank line, at its
// place in the order (dropped[i] precede recs[i]). Stderr and exit records
// (the other adapters' child processes; a gateway is not happy's child) are
// kept and left to the decoder. Errors: a read error of r only.
func ReadTraffic(r io.Reader) (recs []Record, dropped map[int][]agent.Dropped, err error) {
	dropped = map[int][]agent.Dropped{}
	err = trafficlog.Scan(r, func(line int64, rec trafficlog.Record, derr error, data []byte) {
		if derr != nil {
			dropped[len(recs)] = append(dropped[len(recs)], agent.Dropped{Source: TrafficSource, Line: line,
				Reason: trafficlog.DropReason(derr), Detail: derr.Error(), Raw: agent.CutUTF8(string(bytes.TrimSpace(data)), agent.DroppedRawMax)})
			return
		}
		recs = append(recs, Record{T: rec.T, Dir: rec.Dir, Msg: rec.Msg, Line: line})
	})
	if err != nil {
		return recs, dropped, fmt.Errorf("openclaw: read traffic log: %w", err)
	}
	return recs, dropped, nil
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
