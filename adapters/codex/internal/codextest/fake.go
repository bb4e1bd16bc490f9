// Package codextest is test support for the Codex packages: a scripted
// Codex over in-process pipes (for lifecycle tests in a synctest bubble),
// the test binary acting as a Codex process that replays a capture, event
// collection and rendering, and validation of traffic against the
// app-server JSON Schemas in adapters/codex/testdata/schema.
package codextest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
)

// Server is an in-process scripted Codex over pipes. Build one with Pipe;
// the client's messages arrive in order on an internal queue.
type Server struct {
	t     *testing.T
	w     io.WriteCloser
	lines chan map[string]json.RawMessage
	start time.Time
}

type pipeEnd struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p *pipeEnd) Close() error {
	for _, c := range p.closers {
		_ = c.Close()
	}
	return nil
}

// Pipe returns the client's end of a pair of pipes (Codex's output to
// read, its input to write) and the scripted server at the other end. The
// pipes are closed at the end of the test.
func Pipe(t *testing.T) (io.ReadWriteCloser, *Server) {
	s2cR, s2cW := io.Pipe()
	c2sR, c2sW := io.Pipe()
	s := &Server{t: t, w: s2cW, lines: make(chan map[string]json.RawMessage, 100), start: time.Now()}
	go func() {
		r := bufio.NewReader(c2sR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(s.lines)
				return
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("client wrote %q: %v", line, err)
				continue
			}
			s.lines <- m
		}
	}()
	t.Cleanup(func() { _ = s2cW.Close(); _ = c2sR.Close() })
	return &pipeEnd{Reader: s2cR, Writer: c2sW, closers: []io.Closer{s2cR, c2sW}}, s
}

// Send writes one line (a format and its arguments) to the client.
func (s *Server) Send(format string, args ...any) {
	if _, err := fmt.Fprintf(s.w, format+"\n", args...); err != nil {
		s.t.Errorf("fake send: %v", err)
	}
}

// Expect returns the client's next message and checks its method ("" for
// a response).
func (s *Server) Expect(method string) map[string]json.RawMessage {
	s.t.Helper()
	m, ok := <-s.lines
	if !ok {
		s.t.Fatalf("client closed its end, want %q", method)
	}
	var got string
	_ = json.Unmarshal(m["method"], &got)
	if got != method {
		b, _ := json.Marshal(m)
		s.t.Fatalf("at %s client sent %s, want method %q", s.Elapsed(), b, method)
	}
	return m
}

// Elapsed is the time since Pipe (the fake clock in a synctest bubble).
func (s *Server) Elapsed() time.Duration { return time.Since(s.start) }

// Quiet checks the client sent nothing more. In a synctest bubble, call it
// after synctest.Wait, so that a message the client is about to send is
// already queued.
func (s *Server) Quiet() {
	s.t.Helper()
	select {
	case m, ok := <-s.lines:
		if ok {
			b, _ := json.Marshal(m)
			s.t.Errorf("at %s client sent unexpected %s", s.Elapsed(), b)
		}
	default:
	}
}

// AppServerHandshake plays Codex's side of initialize and thread/start
// (thread th1, model m, cwd /w).
func (s *Server) AppServerHandshake() {
	s.Expect("initialize")
	s.Send(`{"id":1,"result":{"userAgent":"fake","codexHome":"/h","platformFamily":"unix","platformOs":"linux"}}`)
	s.Expect("initialized")
	s.Expect("thread/start")
	s.Send(`{"id":2,"result":{"thread":{"id":"th1","model":"m","modelProvider":"fake","cwd":"/w"}}}`)
}

// TextOf is the prompt text of a turn/start or tools/call message.
func TextOf(m map[string]json.RawMessage) string {
	var p struct {
		Params struct {
			Input []struct {
				Text string `json:"text"`
			} `json:"input"`
			Arguments struct {
				Prompt string `json:"prompt"`
			} `json:"arguments"`
		} `json:"params"`
	}
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &p)
	if len(p.Params.Input) > 0 {
		return p.Params.Input[0].Text
	}
	return p.Params.Arguments.Prompt
}

// Collector gathers a client's events on a goroutine of its own.
type Collector struct {
	mu    sync.Mutex
	evs   []agent.Event
	added chan struct{} // buffered 1: an event arrived
	done  chan struct{}
}

// Collect starts gathering the events of ch until it closes.
func Collect(ch <-chan agent.Event) *Collector {
	col := &Collector{added: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(col.done)
		for e := range ch {
			col.mu.Lock()
			col.evs = append(col.evs, e)
			col.mu.Unlock()
			select {
			case col.added <- struct{}{}:
			default:
			}
		}
	}()
	return col
}

// Events is what was gathered so far.
func (col *Collector) Events() []agent.Event {
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]agent.Event(nil), col.evs...)
}

// Until waits until an event satisfying ok was gathered (false when the
// channel closed first).
func (col *Collector) Until(ok func(agent.Event) bool) bool {
	for {
		for _, e := range col.Events() {
			if ok(e) {
				return true
			}
		}
		select {
		case <-col.added:
		case <-col.done:
			for _, e := range col.Events() {
				if ok(e) {
					return true
				}
			}
			return false
		}
	}
}

// Done is closed once the channel closed and every event was gathered.
func (col *Collector) Done() <-chan struct{} { return col.done }

// TurnEnds lists "turnID:reason" of every TurnEnded of the root session.
func TurnEnds(evs []agent.Event) []string {
	var out []string
	for _, e := range evs {
		if te, ok := e.(*agent.TurnEnded); ok && te.Session == "" {
			out = append(out, te.TurnID+":"+te.Reason)
		}
	}
	return out
}

// SyncWriter makes a writer safe for concurrent use.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes b to W under a lock.
func (s *SyncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(b)
}

// StripTimes renders events as JSON lines without their times (live frames
// are stamped with the wall clock where Codex gives no emittedAtMs).
func StripTimes(t *testing.T, evs []agent.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		e.Base().Time = 0
		b, err := agent.EncodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// FirstDiff names the first line where want and got differ (golden.Diff).
func FirstDiff(want, got string) string { return golden.Diff([]byte(want), []byte(got)) }

// ScriptPrompt finds the prompt and client name a capture's driver used.
func ScriptPrompt(t *testing.T, raw []byte) (prompt, client string) {
	t.Helper()
	tr, err := jsonrpc.ReadTraffic(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tr.Frames {
		if f.Dir != trafficlog.C2A {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				ClientInfo struct {
					Name string `json:"name"`
				} `json:"clientInfo"`
				Input []struct {
					Text string `json:"text"`
				} `json:"input"`
				Arguments struct {
					Prompt string `json:"prompt"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(f.Data, &m)
		switch m.Method {
		case "initialize":
			client = m.Params.ClientInfo.Name
		case "turn/start":
			prompt = m.Params.Input[0].Text
		case "tools/call":
			prompt = m.Params.Arguments.Prompt
		}
	}
	return prompt, client
}

// ScriptEnv names the traffic log the test binary replays when it runs as
// a fake Codex process (see FakeProcess).
const ScriptEnv = "CODEX_FAKE_SCRIPT"

// VersionEnv is what the fake prints for `codex --version`.
const VersionEnv = "CODEX_FAKE_VERSION"

// FakeProcess lets a test binary act as a scripted Codex: call it first in
// TestMain. When ScriptEnv names a traffic log it never returns: it prints
// VersionEnv for --version, else writes the log's a2c frames (and stderr
// lines) in order and, at each c2a frame, reads the client's next message
// and checks it equals the recorded one (method, id, params or result; the
// "jsonrpc" member too). A mismatch exits with code 3 and the difference
// on stderr; an exit record exits with the recorded code.
func FakeProcess() {
	if script := os.Getenv(ScriptEnv); script != "" {
		os.Exit(fakeCodex(script))
	}
}

func fakeCodex(script string) int {
	if len(os.Args) > 1 && os.Args[len(os.Args)-1] == "--version" {
		fmt.Println(os.Getenv(VersionEnv))
		return 0
	}
	f, err := os.Open(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tr, err := jsonrpc.ReadTraffic(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for _, fr := range tr.Frames {
		switch fr.Dir {
		case trafficlog.A2C:
			out.Write(fr.Data)
			out.WriteByte('\n')
			out.Flush()
		case trafficlog.Stderr:
			s, _ := fr.Text()
			fmt.Fprint(os.Stderr, s)
		case trafficlog.C2A:
			line, err := in.ReadBytes('\n')
			if err != nil {
				fmt.Fprintf(os.Stderr, "MISMATCH: stdin ended (%v), want %s\n", err, fr.Data)
				return 3
			}
			var want, got any
			_ = json.Unmarshal(fr.Data, &want)
			if err := json.Unmarshal(line, &got); err != nil || !reflect.DeepEqual(want, got) {
				fmt.Fprintf(os.Stderr, "MISMATCH:\nwant %s\ngot  %s", fr.Data, line)
				return 3
			}
		case trafficlog.Exit:
			// Exiting closes stdout; the client still reads what was
			// written before.
			st, _ := trafficlog.DecodeExit(fr.Data)
			if st.Code != nil {
				return *st.Code
			}
			return 0
		}
	}
	// Script over: wait for the client to close stdin.
	_, _ = in.ReadBytes(0)
	return 0
}

// CheckLive checks a live run against the capture it was driven by: the
// fake saw no MISMATCH in the client's traffic (recorded), the live events
// equal the capture's replay, and the recorded traffic replays to the same
// events again. replay reads a traffic log of the run's protocol (the
// package's Replay). Times are left out of the comparison (StripTimes).
func CheckLive(t *testing.T, replay func([]byte) ([]agent.Event, error), capture, recorded []byte, evs []agent.Event) {
	t.Helper()
	if bytes.Contains(recorded, []byte("MISMATCH")) {
		t.Fatalf("the client's traffic differs from the capture:\n%s", recorded)
	}
	replayed, err := replay(capture)
	if err != nil {
		t.Fatal(err)
	}
	got, want := strings.Join(StripTimes(t, evs), "\n"), strings.Join(StripTimes(t, replayed), "\n")
	if got != want {
		t.Errorf("live events differ from the replay of the capture:\n%s", FirstDiff(want, got))
	}
	again, err := replay(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(StripTimes(t, again), "\n"); g != got {
		t.Errorf("replay of the recorded traffic differs from the live events:\n%s", FirstDiff(got, g))
	}
}
