package claude

import (
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// decodeCase feeds lines to a fresh decoder of form and returns the events
// in their JSON form, one per line; end, when set, finishes the stream.
func decodeCase(t *testing.T, form Form, opts Options, lines []string, end *EndOfStream) []string {
	t.Helper()
	dec, err := NewDecoder(form, opts)
	if err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for i, l := range lines {
		evs = append(evs, dec.Decode([]byte(l), int64(i+1))...)
	}
	if end != nil {
		evs = append(evs, dec.Finish(*end)...)
	}
	out := strings.Split(strings.TrimSuffix(string(encodeEvents(t, evs)), "\n"), "\n")
	if len(out) == 1 && out[0] == "" {
		return nil
	}
	return out
}

// j builds a JSONL record: the session envelope plus the given members.
func j(members string) string {
	return `{"sessionId":"S","cwd":"/w",` + members + `}`
}

// s builds a stream-json record.
func s(members string) string {
	return `{"session_id":"S",` + members + `}`
}

type decoderCase struct {
	name  string
	form  Form
	opts  Options
	lines []string
	end   *EndOfStream
	want  []string
}

func runDecoderCases(t *testing.T, cases []decoderCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decodeCase(t, c.form, c.opts, c.lines, c.end)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("events differ.\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
			}
		})
	}
}

func TestTopLevelType(t *testing.T) {
	cases := []struct {
		line string
		typ  string
		ok   bool
	}{
		{`{"type":"progress","data":{"type":"hook_progress"}}`, "progress", true},
		{` {"attachment":{"type":"skill_listing","content":"a \" b"},"type":"attachment"} `, "attachment", true},
		{`{"Type":"mode","x":[1,{"y":"}"}],"n":-1.5e3,"t":true,"z":null}`, "mode", true},
		{`{"type":"a","TYPE":"b"}`, "b", true},
		{`{"type":"file-history-snapshot","snapshot":{"messageId":"0","trackedFileBackups":{"a.ts":{"backupFileName`, "", false},
		{`{"type":"mode"`, "", false},
		{`{"type":"mode",}`, "", false},
		{`{"type":"mode"} x`, "", false},
		{`{"typ\u0065":"mode"}`, "", false},
		{`{"type":"mo\u0064e"}`, "", false},
		{`{"type":7}`, "", false},
		{`{}`, "", false},
		{`[{"type":"mode"}]`, "", false},
		{`{"a":1 "type":"mode"}`, "", false},
	}
	for _, c := range cases {
		typ, ok := topLevelType([]byte(c.line))
		if ok != c.ok || string(typ) != c.typ {
			t.Errorf("%s: got %q %v, want %q %v", c.line, typ, ok, c.typ, c.ok)
		}
	}
}
