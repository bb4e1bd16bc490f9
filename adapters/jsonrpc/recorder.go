package jsonrpc

import (
	"io"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/trafficlog"
)

// Recorder writes frames somewhere (a traffic log). Record is called
// serialised, in frame order.
type Recorder interface {
	Record(f Frame) error
}

// TrafficRecorder returns a Recorder that writes each frame to w as one
// traffic log line {"t","dir","msg"} (see package trafficlog), stamped with
// the frame's own time: c2a/a2c frames that are JSON are written as the JSON
// value, anything else (stderr lines, malformed frames) as a string, exit
// frames as their {"code","sig"} object.
func TrafficRecorder(w io.Writer) Recorder {
	r := &trafficRecorder{}
	r.w = trafficlog.NewWriter(w, func() time.Time { return r.t })
	return r
}

type trafficRecorder struct {
	mu sync.Mutex
	t  time.Time
	w  *trafficlog.Writer
}

func (r *trafficRecorder) Record(f Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t = time.UnixMilli(f.T)
	if f.JSON {
		return r.w.Message(f.Dir, f.Data)
	}
	return r.w.Text(f.Dir, string(f.Data))
}
