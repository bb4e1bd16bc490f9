package claude

// Regression tests for the shared regression inputs (testdata/regressions,
// see SOURCE.md), one per input, asserting the outcome of its
// .expected.md. Where an expected outcome differs from the design, the
// design wins and the test says so.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/mapper"
)

// chunked delivers data in the given read sizes ("rest" = 0: everything
// left), then io.EOF.
type chunked struct {
	data  []byte
	sizes []int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		if c.sizes[0] > 0 {
			n = min(c.sizes[0], n)
		}
		c.sizes = c.sizes[1:]
	}
	n = min(n, len(p))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// stream decodes everything r delivers with one decoder; the reader and
// decoder are returned for more.
type stream struct {
	t     *testing.T
	dec   *Decoder
	lr    *linereader.Reader
	lines int
}

func newStream(t *testing.T, form Form, r io.Reader, maxLine int) *stream {
	t.Helper()
	dec, err := NewDecoder(form, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lr, err := linereader.New(r, linereader.Options{MaxLine: maxLine})
	if err != nil {
		t.Fatal(err)
	}
	return &stream{t: t, dec: dec, lr: lr}
}

// drain decodes every complete line available now.
func (s *stream) drain() []agent.Event {
	var evs []agent.Event
	for {
		l, err := s.lr.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			s.t.Fatal(err)
		}
		s.lines++
		evs = append(evs, s.dec.DecodeLine(l)...)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "regressions", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eventsOf[T agent.Event](evs []agent.Event) []T {
	var out []T
	for _, ev := range evs {
		if x, ok := ev.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

func mustEncode(t *testing.T, evs []agent.Event) string { return string(encodeEvents(t, evs)) }

// toolState finds a tool part anywhere in a transcript.
func toolState(t *testing.T, tr mapper.Transcript, callID string) mapper.ToolState {
	t.Helper()
	for _, s := range allSessions(tr) {
		for _, m := range s.Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == callID {
					return tp.State
				}
			}
		}
	}
	t.Fatalf("no tool %s in the transcript", callID)
	return mapper.ToolState{}
}

// B02b: a ~40 KB line of 3-byte runes arriving in reads that cut the runes.
func TestB02MultibyteChunks(t *testing.T) {
	var spec struct {
		Line       json.RawMessage `json:"line_template"`
		FollowedBy json.RawMessage `json:"followed_by"`
		Delivery   struct {
			Sizes []any `json:"chunk_sizes_bytes"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal(readTestdata(t, "B02-multibyte-chunks.spec.json"), &spec); err != nil {
		t.Fatal(err)
	}
	// Generate the line from the template (members in its order): the
	// tool_result content repeats "  12→x = 1\n" until the line is at
	// least 40000 bytes.
	var compact bytes.Buffer
	if err := json.Compact(&compact, spec.Line); err != nil {
		t.Fatal(err)
	}
	const placeholder = `"<<REPEAT '  12→x = 1\\n' UNTIL LINE >= 40000 BYTES>>"`
	template := compact.String()
	if !strings.Contains(template, placeholder) {
		t.Fatalf("template lacks the placeholder: %s", template)
	}
	const unit = "  12→x = 1\n" // 14 bytes once JSON-encoded
	unitEnc, _ := json.Marshal(unit)
	n := (40000 - (len(template) - len(placeholder) + 2) + len(unitEnc) - 3) / (len(unitEnc) - 2)
	text := strings.Repeat(unit, n)
	enc, _ := json.Marshal(text)
	line := []byte(strings.Replace(template, placeholder, string(enc), 1))
	if len(line) < 40000 || len(line) >= 40000+len(unitEnc) {
		t.Fatalf("generated line of %d bytes", len(line))
	}
	var result bytes.Buffer
	_ = json.Compact(&result, spec.FollowedBy)
	data := append(append(append(line, '\n'), result.Bytes()...), '\n')
	var sizes []int
	for _, s := range spec.Delivery.Sizes {
		if n, ok := s.(float64); ok {
			sizes = append(sizes, int(n))
		} else {
			sizes = append(sizes, 0) // "rest"
		}
	}
	// The spec's sizes cut a rune; shifting the first read through one
	// period of the repeated unit puts the boundaries at every position of
	// every rune, and all deliveries must decode alike.
	cutsRune := func(sizes []int) int {
		cuts, off := 0, 0
		for _, n := range sizes[:len(sizes)-1] {
			off += n
			if !utf8.RuneStart(data[off]) {
				cuts++
			}
		}
		return cuts
	}
	if cutsRune(sizes) == 0 {
		t.Fatal("no chunk boundary of the spec falls inside a rune")
	}

	decode := func(r io.Reader) (string, *stream, []agent.Event) {
		s := newStream(t, FormStreamJSON, r, 0)
		evs := s.drain()
		return mustEncode(t, evs), s, evs
	}
	want, s, evs := decode(&chunked{data: bytes.Clone(data), sizes: sizes})
	if s.lines != 2 {
		t.Fatalf("%d lines framed, want 2", s.lines)
	}
	if d := eventsOf[*agent.DroppedInput](evs); len(d) != 0 {
		t.Fatalf("dropped: %+v", d)
	}
	done := eventsOf[*agent.ToolCompleted](evs)
	if len(done) != 1 || done[0].CallID != "toolu_R" {
		t.Fatalf("tool results: %+v", done)
	}
	if done[0].Output != text || strings.ContainsRune(done[0].Output, utf8.RuneError) {
		t.Fatalf("tool_result text differs from the generated text (%d vs %d bytes)", len(done[0].Output), len(text))
	}
	if te := eventsOf[*agent.TurnEnded](evs); len(te) != 1 || te[0].Reason != agent.TurnCompleted {
		t.Fatalf("turn end: %+v", te)
	}
	// The same bytes one byte per read give the same events.
	if got, _, _ := decode(iotest.OneByteReader(bytes.NewReader(data))); got != want {
		t.Fatal("one byte per read decodes differently")
	}
	inside := 0
	for k := range len(unitEnc) - 2 {
		shifted := append([]int{sizes[0] + k}, sizes[1:]...)
		inside += cutsRune(shifted)
		if got, _, _ := decode(&chunked{data: bytes.Clone(data), sizes: shifted}); got != want {
			t.Fatalf("reads %v decode differently", shifted)
		}
	}
	if inside < 10 {
		t.Fatalf("only %d boundaries fell inside a rune over all shifts", inside)
	}
}

// B02a: raw U+2028 / U+2029 inside a JSON string, and CRLF line ends.
func TestB02U2028InString(t *testing.T) {
	data := readTestdata(t, "B02-u2028-in-string.jsonl")
	if !bytes.Contains(data, []byte("\u2028")) || !bytes.Contains(data, []byte("\u2029")) {
		t.Fatal("input lost its raw separators")
	}
	for _, variant := range []struct {
		name string
		data []byte
	}{{"lf", data}, {"crlf", bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))}} {
		t.Run(variant.name, func(t *testing.T) {
			s := newStream(t, FormStreamJSON, bytes.NewReader(variant.data), 0)
			evs := s.drain()
			if s.lines != 4 {
				t.Fatalf("%d lines framed, want 4", s.lines)
			}
			tr, _ := transcriptOf(t, evs)
			st := toolState(t, tr, "toolu_U")
			if st.Status != mapper.StatusCompleted || st.Output != "before\u2028middle\u2029after" {
				t.Fatalf("toolu_U: %s %q", st.Status, st.Output)
			}
			if te := eventsOf[*agent.TurnEnded](evs); len(te) != 1 || te[0].Reason != agent.TurnCompleted {
				t.Fatalf("turn end: %+v", te)
			}
			if n := countDropped(tr); n != 0 {
				t.Fatalf("%d dropped", n)
			}
		})
	}
}

// b03Lines expands B03's spec (members in the spec's order): a ~300 KB
// init, a ~2 MiB user line with a base64 image, then an assistant line and a
// result.
func b03Lines(t *testing.T) ([][]byte, string) {
	t.Helper()
	var spec struct {
		Lines []struct {
			Template json.RawMessage `json:"template"`
			Literal  json.RawMessage `json:"literal"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(readTestdata(t, "B03-oversized-line.spec.json"), &spec); err != nil {
		t.Fatal(err)
	}
	compact := func(raw json.RawMessage) string {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	fill := func(s, placeholder string, v any) string {
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		q := `"` + placeholder + `"`
		if !strings.Contains(s, q) {
			t.Fatalf("no placeholder %s", q)
		}
		return strings.Replace(s, q, string(enc), 1)
	}
	var tools []string
	for i := range 2500 {
		tools = append(tools, fmt.Sprintf("mcp__server_%02d__tool_%04d", i%40, i))
	}
	var servers []map[string]string
	for i := range 40 {
		servers = append(servers, map[string]string{"name": fmt.Sprintf("server_%02d", i), "status": "connected"})
	}
	init := fill(compact(spec.Lines[0].Template), "<<2500 entries of the form mcp__server_NN__tool_MMMM>>", tools)
	init = fill(init, "<<40 entries {name,status:connected}>>", servers)
	img := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, (2<<20)/4*3/4))
	user := fill(compact(spec.Lines[1].Template), "<<2 MiB of base64>>", img)
	lines := [][]byte{[]byte(init), []byte(user), []byte(compact(spec.Lines[2].Literal)), []byte(compact(spec.Lines[3].Literal))}
	if len(lines[1]) < 2<<20 || len(lines[0]) < 64<<10 {
		t.Fatalf("generated lines too small: %d, %d bytes", len(lines[0]), len(lines[1]))
	}
	return lines, img
}

// B03: an oversized single line.
func TestB03OversizedLine(t *testing.T) {
	lines, img := b03Lines(t)
	data := append(bytes.Join(lines, []byte("\n")), '\n')

	t.Run("no limit", func(t *testing.T) {
		s := newStream(t, FormStreamJSON, bytes.NewReader(data), 0)
		evs := s.drain()
		if s.lines != 4 {
			t.Fatalf("%d lines, want 4", s.lines)
		}
		if d := eventsOf[*agent.DroppedInput](evs); len(d) != 0 {
			t.Fatalf("dropped: %+v", d)
		}
		up := eventsOf[*agent.UserPrompt](evs)
		if len(up) != 1 || up[0].Text != "what is in this screenshot?" || len(up[0].Files) != 1 ||
			up[0].Files[0].Mime != "image/png" || up[0].Files[0].URL != "data:image/png;base64,"+img {
			t.Fatalf("prompt with image not decoded whole")
		}
		if tf := eventsOf[*agent.TextFinal](evs); len(tf) != 1 || tf[0].Text != "It shows a login form." {
			t.Fatalf("assistant text: %+v", tf)
		}
		if te := eventsOf[*agent.TurnEnded](evs); len(te) != 1 || te[0].Reason != agent.TurnCompleted {
			t.Fatalf("turn end: %+v", te)
		}
	})
	t.Run("1 MiB cap skips and continues", func(t *testing.T) {
		s := newStream(t, FormStreamJSON, &chunked{data: bytes.Clone(data), sizes: nil}, 1<<20)
		var evs []agent.Event
		for {
			l, err := s.lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			s.lines++
			evs = append(evs, s.dec.DecodeLine(l)...)
			// The skipped line is never held whole.
			if c := s.lr.BufferCap(); c > 2<<20 {
				t.Fatalf("reader buffer grew to %d bytes", c)
			}
		}
		if s.lines != 4 {
			t.Fatalf("%d lines, want 4", s.lines)
		}
		d := eventsOf[*agent.DroppedInput](evs)
		want := fmt.Sprintf("line of %d bytes is over the reader's limit of 1048576 bytes; skipped", len(lines[1]))
		if len(d) != 1 || d[0].Dropped.Reason != agent.DropOversize || d[0].Dropped.Line != 2 ||
			d[0].Dropped.Kind != "user" || d[0].Dropped.Detail != want || len(d[0].Dropped.Raw) > 512 {
			t.Fatalf("want one oversize drop for line 2, got %+v", d)
		}
		if tf := eventsOf[*agent.TextFinal](evs); len(tf) != 1 || tf[0].Text != "It shows a login form." {
			t.Fatalf("line after the oversized one lost: %+v", tf)
		}
		if te := eventsOf[*agent.TurnEnded](evs); len(te) != 1 || te[0].Reason != agent.TurnCompleted {
			t.Fatalf("turn end: %+v", te)
		}
	})
}

// B04: a malformed line mid-file, bookkeeping kinds, and a partial tail the
// writer is still appending.
func TestB04TruncatedLines(t *testing.T) {
	data := readTestdata(t, "B04-truncated-lines.jsonl")
	if bytes.HasSuffix(data, []byte("\n")) {
		t.Fatal("input should end without a newline")
	}
	var file bytes.Buffer
	file.Write(data)
	s := newStream(t, FormSessionJSONL, &file, 0)
	evs := s.drain()
	if s.lines != 7 || string(s.lr.Pending()) != `{"type":"assistant","message":{"id":"msg_43","type":"message","role":"assistant","content":[{"type":"text","text":"par` {
		t.Fatalf("%d lines; pending %q", s.lines, s.lr.Pending())
	}
	ups := eventsOf[*agent.UserPrompt](evs)
	texts := eventsOf[*agent.TextFinal](evs)
	if len(ups) != 2 || ups[0].Text != "rename the helper in a.ts" || ups[1].Text != "also update the tests" {
		t.Fatalf("prompts: %+v", ups)
	}
	if len(texts) != 2 || texts[0].Text != "Renaming now." || texts[1].Text != "Tests updated." {
		t.Fatalf("texts: %+v", texts)
	}
	drops := eventsOf[*agent.DroppedInput](evs)
	if len(drops) != 1 || drops[0].Dropped.Line != 3 || drops[0].Dropped.Reason != agent.DropUnparseableJSON ||
		drops[0].Dropped.Kind != "file-history-snapshot" || drops[0].Dropped.Source != SourceSessionJSONL {
		t.Fatalf("want one drop for line 3, got %+v", drops)
	}
	// Lines 4 and 7 (queue-operation, progress) are known and skipped: no
	// event names them.
	for _, ev := range evs {
		if d, ok := ev.(*agent.DroppedInput); ok && d.Dropped.Line != 3 {
			t.Fatalf("unexpected drop %+v", d)
		}
	}

	// The writer finishes line 8: msg_43 appears, exactly once. (The
	// .expected.md appends `ial answer…` yet expects "partial answer"
	// after "par"; the missing "t" is a typo there.)
	file.WriteString("tial answer\"}]}}\n")
	more := s.drain()
	if tf := eventsOf[*agent.TextFinal](more); len(tf) != 1 || tf[0].Message != "msg_43" || tf[0].Text != "partial answer" {
		t.Fatalf("after completion: %s", mustEncode(t, more))
	}
	if again := s.drain(); len(again) != 0 {
		t.Fatalf("events without new input: %s", mustEncode(t, again))
	}
	full := append(append(append([]agent.Event{}, evs...), more...), s.dec.Finish(EndOfStream{})...)

	// Re-reading the whole file from the start with a fresh decoder gives
	// the same events; feeding it again to the same decoder adds nothing
	// but the same refusal (which the reducer counts once).
	complete := append(bytes.Clone(data), "tial answer\"}]}}\n"...)
	s2 := newStream(t, FormSessionJSONL, bytes.NewReader(complete), 0)
	second := append(s2.drain(), s2.dec.Finish(EndOfStream{})...)
	if mustEncode(t, second) != mustEncode(t, full) {
		t.Fatalf("re-scan differs:\n%s\nvs\n%s", mustEncode(t, second), mustEncode(t, full))
	}
	s3 := newStream(t, FormSessionJSONL, bytes.NewReader(complete), 0)
	twice := s3.drain()
	s3.lr, _ = linereader.New(bytes.NewReader(complete), linereader.Options{})
	twice = append(twice, s3.drain()...)
	trOnce, _ := transcriptOf(t, second)
	trTwice, _ := transcriptOf(t, append(twice, s3.dec.Finish(EndOfStream{})...))
	if a, b := dump(contentOf(trOnce)), dump(contentOf(trTwice)); a != b {
		t.Fatalf("reading the file twice duplicated content:\n%s\nvs\n%s", a, b)
	}
	if prompts(trTwice)[1] != "also update the tests" || len(prompts(trTwice)) != 2 || countDropped(trTwice) != 1 {
		t.Fatalf("twice: prompts %q, %d dropped", prompts(trTwice), countDropped(trTwice))
	}

	// If the writer stops instead, the fragment is dropped with a warning.
	s4 := newStream(t, FormSessionJSONL, bytes.NewReader(data), 0)
	s4.drain()
	tail := s4.dec.Incomplete(s4.lr.Pending(), s4.lr.PendingSize(), s4.lr.LineNumber()+1)
	if len(tail) != 1 {
		t.Fatalf("incomplete tail: %s", mustEncode(t, tail))
	}
	d := tail[0].(*agent.DroppedInput).Dropped
	if d.Line != 8 || d.Reason != agent.DropUnparseableJSON || d.Kind != "assistant" || !strings.Contains(d.Detail, "incomplete last line") {
		t.Fatalf("fragment drop: %+v", d)
	}
}

// B06: a tool_use that never gets its tool_result.
func TestB06OrphanToolUse(t *testing.T) {
	data := readTestdata(t, "B06-orphan-tool-use.jsonl")
	s := newStream(t, FormSessionJSONL, bytes.NewReader(data), 0)
	evs := s.drain()

	// The interruption marker (row 3) settles toolu_9: error, interrupted,
	// no output, and the turn ends interrupted.
	fail := eventsOf[*agent.ToolFailed](evs)
	if len(fail) != 1 || fail[0].CallID != "toolu_9" || fail[0].Error != "interrupted by user" {
		t.Fatalf("toolu_9 not settled by the marker: %+v", fail)
	}
	if te := eventsOf[*agent.TurnEnded](evs); len(te) != 1 || te[0].Reason != agent.TurnInterrupted {
		t.Fatalf("turn ends: %+v", te)
	}
	if c := eventsOf[*agent.ToolCompleted](evs); len(c) != 0 {
		t.Fatalf("fabricated completion: %+v", c)
	}
	// A late result after the next turn started is refused, not applied.
	late := `{"parentUuid":"00000000-0000-4000-8000-000000000005","isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"done waiting"}]},"uuid":"00000000-0000-4000-8000-000000000006","timestamp":"2026-01-01T00:00:06.000Z","sessionId":"11111111-2222-4333-8444-555555555555"}`
	lateEvs := s.dec.Decode([]byte(late), 6)
	if len(lateEvs) != 1 {
		t.Fatalf("late result: %s", mustEncode(t, lateEvs))
	}
	if d := lateEvs[0].(*agent.DroppedInput).Dropped; d.Reason != agent.DropIllegalTransition || d.Line != 6 {
		t.Fatalf("late result drop: %+v", d)
	}
	all := append(append(evs, lateEvs...), s.dec.Finish(EndOfStream{})...)
	tr, _ := transcriptOf(t, all)
	st := toolState(t, tr, "toolu_9")
	if st.Status != mapper.StatusError || st.Output != "" {
		t.Fatalf("toolu_9: %s %q", st.Status, st.Output)
	}
	// The marker is not a chat message; the next turn renders normally.
	if p := prompts(tr); len(p) != 2 || p[0] != "wait ten minutes then say done" || p[1] != "never mind, just list the files" {
		t.Fatalf("user messages %q", p)
	}
	last := tr.Messages[len(tr.Messages)-1].Info.(*mapper.AssistantMessage)
	if last.Finish != agent.FinishStop || last.Time.Completed == nil {
		t.Fatalf("last message finish %q completed %v", last.Finish, last.Time.Completed)
	}

	// The process killed after row 2: on exit the open tool is settled
	// (design: the turn ends agent-exited, the tool error with that reason).
	rows := bytes.SplitAfter(data, []byte("\n"))
	s2 := newStream(t, FormSessionJSONL, bytes.NewReader(bytes.Join(rows[:2], nil)), 0)
	cut := append(s2.drain(), s2.dec.Finish(EndOfStream{Exited: true, Code: nil, Signal: "SIGKILL"})...)
	tr2, _ := transcriptOf(t, cut)
	if st := toolState(t, tr2, "toolu_9"); st.Status != mapper.StatusError || st.Error != "agent exited unexpectedly, signal SIGKILL" {
		t.Fatalf("after kill: %s %q", st.Status, st.Error)
	}
	if te := eventsOf[*agent.TurnEnded](cut); len(te) != 1 || te[0].Reason != agent.TurnAgentExited {
		t.Fatalf("turn end after kill: %+v", te)
	}
}

// B07a: a second result after the first.
func TestB07ResultAnomalies(t *testing.T) {
	data := readTestdata(t, "B07-result-anomalies.jsonl")
	s := newStream(t, FormStreamJSON, bytes.NewReader(data), 0)
	var perLine [][]agent.Event
	for {
		l, err := s.lr.Next()
		if err != nil {
			break
		}
		perLine = append(perLine, s.dec.DecodeLine(l))
	}
	if len(perLine) != 4 {
		t.Fatalf("%d lines", len(perLine))
	}
	// The first result closes the turn as a success, as soon as it arrives.
	te := eventsOf[*agent.TurnEnded](perLine[2])
	if len(te) != 1 || te[0].Reason != agent.TurnCompleted {
		t.Fatalf("first result: %s", mustEncode(t, perLine[2]))
	}
	// The second is a counted notice, not a failure of the model.
	second := perLine[3]
	if len(second) != 1 {
		t.Fatalf("second result: %s", mustEncode(t, second))
	}
	if d := second[0].(*agent.DroppedInput).Dropped; d.Reason != agent.DropOrphan || d.Kind != "result" || d.Line != 4 {
		t.Fatalf("second result drop: %+v", d)
	}
	var all []agent.Event
	for _, evs := range perLine {
		all = append(all, evs...)
	}
	// The process exits right after: nothing is open, nothing changes.
	if fin := s.dec.Finish(EndOfStream{Exited: true, Code: new(int)}); len(fin) != 0 {
		t.Fatalf("exit after the result: %s", mustEncode(t, fin))
	}
	tr, _ := transcriptOf(t, all)
	var texts []string
	for _, m := range tr.Messages {
		a, ok := m.Info.(*mapper.AssistantMessage)
		if !ok {
			continue
		}
		if a.Error != nil || a.Finish != agent.FinishStop {
			t.Fatalf("message %s: finish %q error %+v", a.ID, a.Finish, a.Error)
		}
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				texts = append(texts, tp.Text)
			}
		}
	}
	if len(texts) != 1 || texts[0] != "Started the background task." {
		t.Fatalf("texts %q", texts)
	}
	if a := tr.Messages[0].Info.(*mapper.AssistantMessage); a.Cost == nil || *a.Cost != 0.01 {
		t.Fatalf("cost %v, want 0.01 from total_cost_usd", a.Cost)
	}
}

// B07b: no result at all.
func TestB07MissingResult(t *testing.T) {
	data := readTestdata(t, "B07-missing-result.jsonl")
	for _, code := range []int{0, 1} {
		t.Run(fmt.Sprint("exit ", code), func(t *testing.T) {
			s := newStream(t, FormStreamJSON, bytes.NewReader(data), 0)
			evs := append(s.drain(), s.dec.Finish(EndOfStream{Exited: true, Code: &code})...)
			want := fmt.Sprintf("agent exited unexpectedly, code %d", code)
			te := eventsOf[*agent.TurnEnded](evs)
			if len(te) != 1 || te[0].Reason != agent.TurnAgentExited || te[0].Error != want {
				t.Fatalf("turn end: %+v", te)
			}
			tr, _ := transcriptOf(t, evs)
			if st := toolState(t, tr, "toolu_71"); st.Status != mapper.StatusError || st.Error != want {
				t.Fatalf("toolu_71: %s %q", st.Status, st.Error)
			}
		})
	}
	// Stream closed with no exit status known: truncated, still settled.
	s := newStream(t, FormStreamJSON, bytes.NewReader(data), 0)
	evs := append(s.drain(), s.dec.Finish(EndOfStream{})...)
	if te := eventsOf[*agent.TurnEnded](evs); len(te) != 1 || te[0].Reason != agent.TurnTruncated || te[0].Error != "stream ended without a result" {
		t.Fatalf("turn end: %+v", te)
	}
}

// B11: a text message while a permission is pending. The decoder's part:
// the request blocks the tool; whatever the runner chooses (the text as a
// denial with feedback, or queued until an answer), the tool ends denied or
// proceeds, never "permission stream closed", and is never left blocked.
func TestB11PermissionThenText(t *testing.T) {
	var steps []struct {
		Dir string          `json:"dir"`
		Msg json.RawMessage `json:"msg"`
	}
	if err := json.Unmarshal(readTestdata(t, "B11-permission-then-text.json"), &steps); err != nil {
		t.Fatal(err)
	}
	var traffic []string
	for i, st := range steps {
		if st.Dir == "claude->wrapper" {
			traffic = append(traffic, fmt.Sprintf(`{"t":%d,"dir":"a2c","msg":%s}`, 1767225600000+int64(i), st.Msg))
		}
	}
	const text = "why do you need that skill?"
	variants := map[string]struct {
		lines   []string
		outcome mapper.ToolStatus
		dec     agent.Decision
	}{
		// (b) the text denies the request with the user's words as feedback.
		"denial with feedback": {lines: []string{
			`{"t":1767225626000,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"req-perm-1","response":{"behavior":"deny","message":"` + text + `"}}}}`,
			`{"t":1767225626010,"dir":"a2c","msg":{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_P","content":"` + text + `","is_error":true}]},"parent_tool_use_id":null,"session_id":"11111111-2222-4333-8444-555555555555"}}`,
		}, outcome: mapper.StatusError, dec: agent.DecisionReject},
		// (a) the text is queued; the permission is answered later.
		"queued text": {lines: []string{
			`{"t":1767225626000,"dir":"c2a","msg":{"type":"user","message":{"role":"user","content":[{"type":"text","text":"` + text + `"}]},"parent_tool_use_id":null,"session_id":""}}`,
			`{"t":1767225630000,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"req-perm-1","response":{"behavior":"allow","updatedInput":{"skill":"release-notes"}}}}}`,
			`{"t":1767225630010,"dir":"a2c","msg":{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_P","content":"Launching skill: release-notes"}]},"parent_tool_use_id":null,"session_id":"11111111-2222-4333-8444-555555555555"}}`,
		}, outcome: mapper.StatusCompleted, dec: agent.DecisionOnce},
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			dec, _ := NewDecoder(FormTrafficLog, Options{})
			var evs []agent.Event
			for i, l := range append(append([]string{}, traffic...), v.lines...) {
				evs = append(evs, dec.Decode([]byte(l), int64(i+1))...)
			}
			blocked := eventsOf[*agent.ToolBlocked](evs)
			if len(blocked) != 1 || blocked[0].CallID != "toolu_P" || blocked[0].Permission == nil ||
				blocked[0].Permission.ID != "req-perm-1" || blocked[0].Permission.Permission != agent.ToolOther ||
				fmt.Sprint(blocked[0].Permission.Patterns) != "[Skill release-notes]" {
				t.Fatalf("blocked: %s", mustEncode(t, evs))
			}
			if te := eventsOf[*agent.TurnEnded](evs); len(te) != 0 {
				t.Fatalf("the turn was ended by a text message: %+v", te)
			}
			tr, _ := transcriptOf(t, evs)
			st := toolState(t, tr, "toolu_P")
			if st.Status != v.outcome || st.Block == nil || st.Block.Decision != v.dec || strings.Contains(st.Error, "stream closed") {
				t.Fatalf("toolu_P: %s block %+v error %q", st.Status, st.Block, st.Error)
			}
			if name == "queued text" {
				if p := prompts(tr); len(p) != 1 || p[0] != text {
					t.Fatalf("queued prompt not recorded: %q", p)
				}
			}
		})
	}
}

// B23 (terminal restored on every exit path) and B24 (no orphaned agent on
// the terminal) are about the PTY and process supervision of the live
// adapter. What applies to decoding: an interrupt (Ctrl-C forwarded as an
// SDK interrupt) ends the turn as interrupted, and an agent killed by a
// signal (or its launcher dying) ends the turn agent-exited with every
// open tool settled, after which a respawned agent continues the same
// session normally.
func TestB23B24InterruptExitRespawn(t *testing.T) {
	const sid = "11111111-2222-4333-8444-555555555555"
	a2c := func(t int, msg string) string { return fmt.Sprintf(`{"t":%d,"dir":"a2c","msg":%s}`, t, msg) }
	init := `{"type":"system","subtype":"init","session_id":"` + sid + `","cwd":"/w","model":"m","tools":["Bash"]}`
	toolUse := func(msg, id, cmd string) string {
		return `{"type":"assistant","message":{"id":"` + msg + `","role":"assistant","model":"m","content":[{"type":"tool_use","id":"` + id + `","name":"Bash","input":{"command":"` + cmd + `"}}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"` + sid + `"}`
	}
	prompt := func(t int, text string) string {
		return fmt.Sprintf(`{"t":%d,"dir":"c2a","msg":{"type":"user","message":{"role":"user","content":[{"type":"text","text":%q}]},"parent_tool_use_id":null,"session_id":""}}`, t, text)
	}
	lines := []string{
		prompt(1, "run the slow tests"),
		a2c(2, init),
		a2c(3, toolUse("msg_1", "toolu_1", "make test")),
		// Ctrl-C: the wrapper interrupts; Claude stops the tool and reports.
		`{"t":4,"dir":"c2a","msg":{"type":"control_request","request_id":"int-1","request":{"subtype":"interrupt"}}}`,
		a2c(5, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},"parent_tool_use_id":null,"session_id":"`+sid+`"}`),
		a2c(6, `{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"`+sid+`","total_cost_usd":0.02}`),
		// Next turn: the agent is killed mid-tool (SIGTERM from the dying launcher).
		prompt(7, "try again"),
		a2c(8, toolUse("msg_2", "toolu_2", "make test")),
		`{"t":9,"dir":"exit","msg":{"code":null,"sig":"SIGTERM"}}`,
		// The respawned agent (--resume) continues the session.
		prompt(10, "just say hi"),
		a2c(11, init),
		a2c(12, `{"type":"assistant","message":{"id":"msg_3","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"`+sid+`"}`),
		a2c(13, `{"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn","session_id":"`+sid+`","total_cost_usd":0.005}`),
		`{"t":14,"dir":"exit","msg":{"code":0,"sig":null}}`,
	}
	dec, _ := NewDecoder(FormTrafficLog, Options{})
	var evs []agent.Event
	for i, l := range lines {
		evs = append(evs, dec.Decode([]byte(l), int64(i+1))...)
	}
	evs = append(evs, dec.Finish(EndOfStream{})...)
	te := eventsOf[*agent.TurnEnded](evs)
	if len(te) != 3 || te[0].Reason != agent.TurnInterrupted || te[1].Reason != agent.TurnAgentExited ||
		te[1].Error != "agent exited unexpectedly, signal SIGTERM" || te[2].Reason != agent.TurnCompleted {
		t.Fatalf("turn ends: %+v", te)
	}
	tr, _ := transcriptOf(t, evs)
	if st := toolState(t, tr, "toolu_1"); st.Status != mapper.StatusError || st.Error != "interrupted by user" {
		t.Fatalf("toolu_1: %s %q", st.Status, st.Error)
	}
	if st := toolState(t, tr, "toolu_2"); st.Status != mapper.StatusError || st.Error != "agent exited unexpectedly, signal SIGTERM" {
		t.Fatalf("toolu_2: %s %q", st.Status, st.Error)
	}
	// The new process counts its cost from zero.
	costs := eventsOf[*agent.Usage](evs)
	if len(costs) != 2 || *costs[0].Cost != 0.02 || costs[1].Message != "msg_3" || *costs[1].Cost != 0.005 {
		t.Fatalf("costs: %s", mustEncode(t, evs))
	}
	if n := countDropped(tr); n != 0 {
		t.Fatalf("%d dropped: %+v", n, allDropped(tr))
	}
}

// B25 (resize events) is PTY work: sizes are applied by the terminal
// proxy, never decoded. A traffic log that records them as notes decodes to
// nothing and refuses nothing.
func TestB25ResizeNotesIgnored(t *testing.T) {
	var events []json.RawMessage
	if err := json.Unmarshal(readTestdata(t, "B25-resize-events.json"), &events); err != nil {
		t.Fatal(err)
	}
	dec, _ := NewDecoder(FormTrafficLog, Options{})
	for i, e := range events {
		line := fmt.Sprintf(`{"t":%d,"dir":"note","msg":%s}`, i, e)
		if evs := dec.Decode([]byte(line), int64(i+1)); len(evs) != 0 {
			t.Fatalf("note %d decoded to %s", i, mustEncode(t, evs))
		}
	}
}
