package jsonrpc

import (
	"fmt"
	"io"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// Frame is one unit of traffic in the traffic log's terms, as a live
// connection taps it and as a recorded log gives it back:
//
//   - T is when it was seen, in Unix milliseconds.
//   - Dir is c2a (we wrote it), a2c (the peer wrote it), stderr (a line of
//     the child's stderr), exit (the child ended; Data is
//     {"code":…,"sig":…}) or note (a remark of ours, see Conn.Note).
//   - Data is the frame as written on the pipe (without the newline) when
//     live, or the record's msg when read back from a log. JSON is false
//     when Data is not valid JSON (a stderr line, a line that is not JSON,
//     or the first 512 bytes of an oversize one); a log keeps such text as
//     a JSON string, so decoders read it with Text.
//   - For a2c and c2a, Msg is the frame decoded (once: see DecodeFrame), or
//     the zero Message (Kind 0: HasMsg is false) with Err saying why it is
//     not a frame (a *FrameError).
type Frame struct {
	T    int64
	Dir  trafficlog.Dir
	Data []byte
	JSON bool
	Msg  Message
	Err  error
}

// HasMsg reports whether the frame is a decoded JSON-RPC message (Msg; a
// decoded message always has a Kind).
func (f *Frame) HasMsg() bool { return f.Msg.Kind != 0 }

// Text returns the text of a frame that carries no JSON message: Data when
// it is not JSON, or the string when it is a JSON string (the form a
// traffic log gives text back in). ok is false for any other JSON value.
func (f Frame) Text() (string, bool) {
	if !f.JSON {
		return string(f.Data), true
	}
	return trafficlog.Text(f.Data)
}

// NewFrame returns the frame of data seen at t (Unix ms) going dir,
// decoding a2c and c2a data (Msg or Err) the way a live connection does.
func NewFrame(t int64, dir trafficlog.Dir, data []byte) Frame {
	f := Frame{T: t, Dir: dir, Data: data}
	if dir == trafficlog.A2C || dir == trafficlog.C2A {
		m, err := DecodeFrame(data)
		if err == nil {
			f.Msg, f.JSON = m, true
			return f
		}
		f.Err = err
	}
	f.JSON = jsonlex.Valid(data)
	return f
}

// FrameOf returns the frame a traffic log record holds (see NewFrame).
func FrameOf(rec trafficlog.Record) Frame { return NewFrame(rec.T, rec.Dir, rec.Msg) }

// Decoder turns traffic into agent events: it is fed every frame of a
// connection, both directions, in traffic order, and returns the events
// each yields (possibly none). The decoders of the JSON-RPC adapters are
// deterministic, so a recorded log replays to the events the live
// connection produced. The slice Decode returns may be the decoder's own
// buffer, valid only until its next call: a caller that keeps the events
// past that (rpcagent.Link holding a frame's events across frames) copies
// them; the events themselves are the caller's.
type Decoder interface {
	Decode(f Frame) []agent.Event
}

// TrafficSource is the Dropped.Source of a traffic log record that is not
// a valid record.
const TrafficSource = "traffic-log"

// Traffic is a traffic log read whole: its frames in order, and the
// records that are not valid ones, as Dropped records at their place (Bad[i]
// precede Frames[i]; Bad[len(Frames)] come after the last frame).
type Traffic struct {
	Frames []Frame
	Bad    map[int][]agent.Dropped
}

// ReadTraffic reads a traffic log (one {"t","dir","msg"} object per line,
// lines of any length; see package trafficlog). A line that is not a valid
// record is kept in Bad with its line number and reason. Only a read error
// of r is returned as an error.
func ReadTraffic(r io.Reader) (Traffic, error) {
	t := Traffic{Bad: map[int][]agent.Dropped{}}
	err := trafficlog.Scan(r, func(line int64, rec trafficlog.Record, derr error, data []byte) {
		if derr != nil {
			i := len(t.Frames)
			t.Bad[i] = append(t.Bad[i], agent.Dropped{Source: TrafficSource, Line: line, Reason: trafficlog.DropReason(derr),
				Detail: derr.Error(), Raw: agent.CutUTF8(string(data), agent.DroppedRawMax)})
			return
		}
		t.Frames = append(t.Frames, FrameOf(rec))
	})
	if err != nil {
		return t, fmt.Errorf("read traffic log: %w", err)
	}
	return t, nil
}

// Decode runs every frame through decode, in order, with a DroppedInput
// event for each bad record at its place.
func (t Traffic) Decode(decode func(Frame) []agent.Event) []agent.Event {
	var evs []agent.Event
	bad := func(i int) {
		for _, d := range t.Bad[i] {
			evs = append(evs, &agent.DroppedInput{Dropped: d})
		}
	}
	for i, f := range t.Frames {
		bad(i)
		evs = append(evs, decode(f)...)
	}
	bad(len(t.Frames))
	return evs
}

// LastT is the time of the last frame (Unix ms), 0 for an empty log.
func (t Traffic) LastT() int64 {
	if len(t.Frames) == 0 {
		return 0
	}
	return t.Frames[len(t.Frames)-1].T
}
