// Package tail follows a growing line-oriented file (a Claude session JSONL
// transcript) and hands each complete line to a callback as soon as it is
// written.
//
// Properties (docs/ARCHITECTURE.md, "Streams are read incrementally"):
//   - reading starts at a saved offset and only ever reads bytes not read
//     before: the file is never re-read whole (Stats.BytesRead counts it);
//   - a partial last line is held until its newline arrives;
//   - the file may not exist yet (it is created late, with its folder), and
//     may be replaced (renamed over, removed and re-created) or truncated:
//     the tailer notices, reports a Reset and continues with the new content
//     from its start;
//   - changes are noticed through file system notifications on the folder
//     (fsnotify), with a periodic poll as a fallback for file systems that do
//     not notify, for a folder that does not exist yet, and for lost events.
package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/happy-dev/happy/internal/linereader"
)

// DefaultPoll is the poll interval when Options.Poll is zero.
const DefaultPoll = 250 * time.Millisecond

// ErrStopped is returned by Sync when Run has returned.
var ErrStopped = errors.New("tail: stopped")

// Options configure a Tailer.
type Options struct {
	// Offset is where reading starts (a Line.End saved earlier); 0 reads
	// from the beginning. When the file is shorter than Offset it was
	// truncated or replaced meanwhile, and reading restarts at 0 after a
	// Reset.
	Offset int64
	// LineNo is the number of complete lines before Offset.
	LineNo int64
	// Poll is the interval of the fallback poll; DefaultPoll when zero.
	Poll time.Duration
	// NoNotify disables file system notifications: polling only.
	NoNotify bool
	// MaxLine bounds one line in bytes (0: no limit); longer lines are
	// delivered with Oversize set (see linereader).
	MaxLine int
	// ReadSize is the size of each read (0: linereader.DefaultReadSize).
	ReadSize int
	// OnReset is called when the tailer starts over on new content.
	OnReset func(Reset)
}

// Reset reasons.
const (
	ResetTruncated = "truncated" // the file became shorter than what was read
	ResetReplaced  = "replaced"  // another file now has the path
	ResetRemoved   = "removed"   // the file went away (reading resumes when it comes back)
)

// Reset says the tailer gave up its position in the file.
type Reset struct {
	Reason string // one of the Reset* constants
	// Offset and LineNo are the position reached in the old content.
	Offset int64
	LineNo int64
	// Pending is the start of a last line that never got its newline
	// (nil when none) and PendingSize its full length: the writer stopped
	// mid-record.
	Pending     []byte
	PendingSize int64
}

// Stats are counters of a Tailer's work.
type Stats struct {
	BytesRead int64 // bytes read from files, all files together
	Reads     int64 // read system calls (including those returning 0 bytes)
	Opens     int64 // times the file was opened
	Resets    int64 // Reset events
	Lines     int64 // lines delivered
	Notified  int64 // reads triggered by a file system event
	Polled    int64 // reads triggered by the poll
}

// Tailer follows one file. Run it once; Offset, Stats, Poke and Sync may be
// called from other goroutines meanwhile.
type Tailer struct {
	path string
	opts Options

	f  *os.File
	id os.FileInfo // identity of the open file
	lr *linereader.Reader
	cr *countingReader

	offset atomic.Int64
	lineNo atomic.Int64

	bytesRead, reads, opens, resets, lines, notified, polled atomic.Int64

	leftover     []byte // incomplete last line held when Run returned
	leftoverSize int64

	poke    chan struct{}
	syncReq chan chan error
	stopped chan struct{}
	runOnce sync.Once
}

// New returns a Tailer of path (made absolute). Nothing is opened until Run.
func New(path string, opts Options) (*Tailer, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", path, err)
	}
	if opts.Offset < 0 || opts.LineNo < 0 {
		return nil, fmt.Errorf("tail %s: negative offset %d or line number %d", path, opts.Offset, opts.LineNo)
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	t := &Tailer{
		path:    abs,
		opts:    opts,
		poke:    make(chan struct{}, 1),
		syncReq: make(chan chan error),
		stopped: make(chan struct{}),
	}
	t.offset.Store(opts.Offset)
	t.lineNo.Store(opts.LineNo)
	return t, nil
}

// Path is the absolute path followed.
func (t *Tailer) Path() string { return t.path }

// Offset returns the position just after the last line delivered and that
// line's number: save them to resume later with Options.Offset and LineNo.
func (t *Tailer) Offset() (offset, lineNo int64) { return t.offset.Load(), t.lineNo.Load() }

// Stats returns the counters so far.
func (t *Tailer) Stats() Stats {
	return Stats{
		BytesRead: t.bytesRead.Load(), Reads: t.reads.Load(), Opens: t.opens.Load(), Resets: t.resets.Load(),
		Lines: t.lines.Load(), Notified: t.notified.Load(), Polled: t.polled.Load(),
	}
}

// Poke asks for a read now (for example when a hook says the writer just
// wrote). It never blocks.
func (t *Tailer) Poke() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// Sync reads everything written so far and returns once those lines have
// been delivered (or the callback failed). ErrStopped when Run is not
// running anymore.
func (t *Tailer) Sync(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case t.syncReq <- reply:
	case <-t.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run follows the file, calling fn for each complete line in order, until
// ctx ends (it returns ctx.Err()) or fn returns an error (returned
// wrapped). The Line's Data is only valid during the call. A read error
// other than the file's absence is returned wrapped. Run may be called only
// once.
func (t *Tailer) Run(ctx context.Context, fn func(linereader.Line) error) error {
	first := false
	t.runOnce.Do(func() { first = true })
	if !first {
		return fmt.Errorf("tail %s: Run called twice", t.path)
	}
	defer close(t.stopped)
	defer t.closeFile()
	defer t.keepLeftover()

	var events <-chan fsnotify.Event
	var errs <-chan error
	var w *fsnotify.Watcher
	watching := false
	if !t.opts.NoNotify {
		var err error
		w, err = fsnotify.NewWatcher()
		if err == nil {
			defer w.Close()
			events, errs = w.Events, w.Errors
			watching = w.Add(filepath.Dir(t.path)) == nil
		}
	}
	tick := time.NewTicker(t.opts.Poll)
	defer tick.Stop()

	if err := t.readAll(fn); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Clean(ev.Name) != t.path {
				continue
			}
			t.notified.Add(1)
		case _, ok := <-errs:
			if !ok {
				errs = nil
			}
			continue // an overflow or a watch error: the poll covers it
		case <-tick.C:
			t.polled.Add(1)
			if w != nil && !watching {
				// The folder may exist by now.
				watching = w.Add(filepath.Dir(t.path)) == nil
			}
		case <-t.poke:
		case reply := <-t.syncReq:
			err := t.readAll(fn)
			reply <- err
			if err != nil {
				return err
			}
			continue
		}
		if err := t.readAll(fn); err != nil {
			return err
		}
	}
}

// Leftover returns the incomplete last line held when Run returned (its
// start, and its full length), or nil, 0. Valid once Run has returned.
func (t *Tailer) Leftover() ([]byte, int64) {
	select {
	case <-t.stopped:
		return t.leftover, t.leftoverSize
	default:
		return nil, 0
	}
}

func (t *Tailer) keepLeftover() {
	if t.lr != nil && t.lr.PendingSize() > 0 {
		t.leftover = append([]byte(nil), t.lr.Pending()...)
		t.leftoverSize = t.lr.PendingSize()
	}
}

// readAll opens the file when needed, notices replacement and truncation,
// and delivers every complete line available.
func (t *Tailer) readAll(fn func(linereader.Line) error) error {
	if t.f != nil {
		st, err := os.Stat(t.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Renamed away or removed: finish what was written to it, then
			// wait for the path to come back.
			if err := t.drain(fn); err != nil {
				return err
			}
			t.reset(ResetRemoved)
			t.closeFile()
			return nil
		case err != nil:
			return fmt.Errorf("tail %s: stat: %w", t.path, err)
		case !os.SameFile(st, t.id):
			if err := t.drain(fn); err != nil {
				return err
			}
			t.reset(ResetReplaced)
			t.closeFile()
		}
	}
	if t.f == nil {
		opened, err := t.open()
		if err != nil || !opened {
			return err
		}
	}
	fi, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("tail %s: stat open file: %w", t.path, err)
	}
	if fi.Size() < t.cr.pos {
		t.reset(ResetTruncated)
		if err := t.restartAt(0, 0); err != nil {
			return err
		}
	}
	return t.drain(fn)
}

// open opens the file and positions the reader at the saved offset; false
// when the file does not exist (yet).
func (t *Tailer) open() (bool, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("tail %s: open: %w", t.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return false, fmt.Errorf("tail %s: stat: %w", t.path, err)
	}
	t.opens.Add(1)
	t.f, t.id = f, fi
	off, n := t.offset.Load(), t.lineNo.Load()
	if fi.Size() < off {
		// Shorter than where we stopped: not the content we were reading.
		t.reset(ResetTruncated)
		off, n = 0, 0
	}
	return true, t.restartAt(off, n)
}

// restartAt positions the open file and a new line reader at off.
func (t *Tailer) restartAt(off, lineNo int64) error {
	if _, err := t.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("tail %s: seek to %d: %w", t.path, off, err)
	}
	t.cr = &countingReader{r: t.f, pos: off, t: t}
	lr, err := linereader.NewAt(t.cr, off, lineNo, linereader.Options{MaxLine: t.opts.MaxLine, ReadSize: t.opts.ReadSize})
	if err != nil {
		return fmt.Errorf("tail %s: %w", t.path, err)
	}
	t.lr = lr
	t.offset.Store(off)
	t.lineNo.Store(lineNo)
	return nil
}

// drain delivers every complete line up to the end of the open file.
func (t *Tailer) drain(fn func(linereader.Line) error) error {
	for {
		l, err := t.lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tail %s: %w", t.path, err)
		}
		t.offset.Store(l.End)
		t.lineNo.Store(l.Number)
		t.lines.Add(1)
		if err := fn(l); err != nil {
			return fmt.Errorf("tail %s: line %d: %w", t.path, l.Number, err)
		}
	}
}

// reset reports that the current position is abandoned and resets it.
func (t *Tailer) reset(reason string) {
	r := Reset{Reason: reason, Offset: t.offset.Load(), LineNo: t.lineNo.Load()}
	if t.lr != nil {
		if p := t.lr.Pending(); len(p) > 0 {
			r.Pending = append([]byte(nil), p...)
		}
		r.PendingSize = t.lr.PendingSize()
	}
	t.resets.Add(1)
	t.offset.Store(0)
	t.lineNo.Store(0)
	if t.opts.OnReset != nil {
		t.opts.OnReset(r)
	}
}

func (t *Tailer) closeFile() {
	if t.f != nil {
		_ = t.f.Close()
	}
	t.f, t.id, t.lr, t.cr = nil, nil, nil, nil
}

// countingReader counts what is read from the file and tracks the file
// position.
type countingReader struct {
	r   io.Reader
	pos int64
	t   *Tailer
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.pos += int64(n)
	c.t.reads.Add(1)
	c.t.bytesRead.Add(int64(n))
	return n, err
}
