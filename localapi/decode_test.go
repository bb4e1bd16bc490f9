package localapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

// busLines are the lines of the reducer's golden bus.jsonl files: every
// change the reducer makes, as EncodeChange writes it.
func busLines(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "mapper", "testdata", "reducer", "*", "bus.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bus.jsonl files: %v", err)
	}
	var out []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				out = append(out, l)
			}
		}
		fh.Close()
	}
	return out
}

func typeOf(t testing.TB, line string) string {
	var v struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return v.Type
}

// Every change the reducer's goldens hold decodes and encodes back to the
// same bytes: a hub fed by another hub's stream republishes it unchanged.
func TestDecodeChangeRoundTrip(t *testing.T) {
	lines := busLines(t)
	names := map[string]int{}
	for _, l := range lines {
		name := typeOf(t, l)
		c, err := DecodeChange(name, []byte(l))
		if err != nil {
			t.Fatalf("DecodeChange(%s): %v", l, err)
		}
		got, err := mapper.EncodeChange(c.Event)
		if err != nil || string(got) != l {
			t.Fatalf("round trip:\n got %s (%v)\nwant %s", got, err, l)
		}
		names[name]++
	}
	for _, n := range []string{mapper.EvSessionCreated, mapper.EvSessionStatus, mapper.EvMessageUpdated, mapper.EvMessagePartUpdated, mapper.EvMessagePartDelta} {
		if names[n] == 0 {
			t.Errorf("the goldens hold no %s: the round trip proves less than it says", n)
		}
	}
	for _, tc := range []struct {
		event, data string
		want        Removal
	}{
		{EvMessageRemoved, `{"type":"message.removed","properties":{"sessionID":"s","messageID":"m"}}`, Removal{"s", "m", ""}},
		{EvMessagePartRemoved, `{"type":"message.part.removed","properties":{"sessionID":"s","messageID":"m","partID":"p"}}`, Removal{"s", "m", "p"}},
	} {
		c, err := DecodeChange(tc.event, []byte(tc.data))
		if err != nil || c.Removed == nil || *c.Removed != tc.want {
			t.Errorf("DecodeChange(%s) = %+v, %v", tc.data, c, err)
		}
	}
}

// What another stream may send that is not a change is refused with the
// reason, never half-applied.
func TestDecodeChangeRefuses(t *testing.T) {
	for _, tc := range []struct{ event, data, want string }{
		{"file.edited", `{"type":"file.edited","properties":{}}`, "file.edited: not an event of the local event API"},
		{"message.part.delta", `{"type":"error","properties":{}}`, `message.part.delta: data type "error" differs from the event name`},
		{"session.status", `{"properties":{}}`, "session.status: data type none differs from the event name"},
		{"session.status", `nope`, "session.status: data is not {\"type\",\"properties\"}: invalid character 'o' in literal null (expecting 'u')"},
		{"session.status", `{"type":"session.status","properties":{}} {}`, "session.status: data is not {\"type\",\"properties\"}: data after the JSON value"},
		{"session.status", `{"type":"session.status","properties":[]}`, "session.status: properties is not an object"},
		{"session.status", `{"type":"session.status","properties":{"sessionID":"s"}}`, "session.status: not {sessionID, status}: <nil>"},
		{"session.status", `{"type":"session.status","properties":{"status":{"type":"idle"}}}`, "session.status: sessionID, status.type missing"},
		{"session.created", `{"type":"session.created","properties":{"info":{"id":""}}}`, "session.created: info.id missing"},
		{"message.part.delta", `{"type":"message.part.delta","properties":{"sessionID":"s","messageID":"m","partID":"p","field":"text"}}`, "message.part.delta: not {sessionID, messageID, partID, field, delta}: <nil>"},
		{"message.part.updated", `{"type":"message.part.updated","properties":{"part":{"type":"text"}}}`, "message.part.updated: part: "},
		{"message.updated", `{"type":"message.updated","properties":{"info":{"role":"robot"}}}`, "message.updated: info: "},
		{"message.part.removed", `{"type":"message.part.removed","properties":{"sessionID":"s","messageID":"m"}}`, "message.part.removed: partID missing"},
		{"todo.updated", "{\"type\":\"todo.updated\",\"properties\":{\"sessionID\":\"\xff\"}}", "todo.updated: data is not UTF-8"},
	} {
		_, err := DecodeChange(tc.event, []byte(tc.data))
		if !errors.Is(err, ErrBadChange) || !strings.HasPrefix(err.Error(), "localapi: bad change: "+tc.want) {
			t.Errorf("DecodeChange(%q, %s) = %v; want %q", tc.event, tc.data, err, tc.want)
		}
	}
}

// A hub fed another hub's frames ends with the same documents; a bad
// frame changes nothing.
func TestPublishEncodedKeepsTheDocuments(t *testing.T) {
	src, dst := NewHub(HubOptions{}), NewHub(HubOptions{})
	sub := src.Subscribe()
	defer sub.Close()
	evs := []mapper.BusEvent{
		&mapper.SessionCreated{Info: mapper.Session{ID: "ses_1", Directory: "/p"}},
		&mapper.MessageUpdated{Info: &mapper.AssistantMessage{ID: "msg_1", SessionID: "ses_1", Role: mapper.RoleAssistant}},
		&mapper.MessagePartUpdated{Part: textPart("prt_1", "he")}, delta("prt_1", "llo"),
		&mapper.TodoUpdated{SessionID: "ses_1"},
	}
	src.Publish(evs)
	src.RemovePart("ses_1", "msg_1", "prt_x")
	b, _ := sub.Take(nil)
	for _, f := range frames(t, b) {
		name, data, _ := strings.Cut(f, " ")
		if _, err := dst.PublishEncoded(name, []byte(data)); err != nil {
			t.Fatalf("PublishEncoded(%s): %v", f, err)
		}
	}
	if _, err := dst.PublishEncoded("message.part.updated", []byte(`{"type":"message.part.updated","properties":{"part":{}}}`)); !errors.Is(err, ErrBadChange) {
		t.Fatalf("bad frame: %v", err)
	}
	want, _ := src.Messages("ses_1")
	got, ok := dst.Messages("ses_1")
	wb, _ := EncodeMessages(want)
	gb, _ := EncodeMessages(got)
	if !ok || string(gb) != string(wb) || !strings.Contains(string(gb), `"text":"hello"`) {
		t.Fatalf("documents differ:\n got %s\nwant %s", gb, wb)
	}
	if st := dst.Stats(); st.Published != 6 || st.Sessions != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Forget drops the session and says so once; the hub's memory is the
// live sessions'.
func TestForget(t *testing.T) {
	h := NewHub(HubOptions{})
	h.Publish([]mapper.BusEvent{&mapper.SessionCreated{Info: mapper.Session{ID: "ses_1"}}, &mapper.MessagePartUpdated{Part: textPart("prt_1", "x")},
		&mapper.SessionCreated{Info: mapper.Session{ID: "ses_2"}}})
	sub := h.Subscribe()
	defer sub.Close()
	if !h.Forget("ses_1") || h.Forget("ses_1") || h.Forget("nope") {
		t.Fatal("Forget's results")
	}
	b, _ := sub.Take(nil)
	got := frames(t, b)
	want := []string{`session.status {"type":"session.status","properties":{"sessionID":"ses_1","status":{"type":"ended"}}}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("frames %q", got)
	}
	if _, ok := h.Messages("ses_1"); ok || h.Known("ses_1") || !h.Known("ses_2") {
		t.Fatal("ses_1 is still known")
	}
	if ss := h.Sessions(); len(ss) != 1 || ss[0].ID != "ses_2" {
		t.Fatalf("sessions %+v", ss)
	}
	if st := h.Stats(); st.Sessions != 1 || st.Forgotten != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// FuzzDecodeChange: any frame is a change or an ErrBadChange, never a
// panic; a decoded change encodes, and decodes again to the same bytes.
func FuzzDecodeChange(f *testing.F) {
	for i, l := range busLines(f) {
		if i%7 == 0 {
			f.Add(typeOf(f, l), []byte(l))
		}
	}
	f.Add("message.removed", []byte(`{"type":"message.removed","properties":{"sessionID":"s","messageID":"m"}}`))
	f.Add("session.status", []byte(`{"type":"session.status","properties":{"sessionID":"s","status":{"type":"ended"}}}`))
	f.Add("message.part.delta", []byte(`{"type":"error","properties":{}}`))
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		c, err := DecodeChange(event, data)
		if err != nil {
			if !errors.Is(err, ErrBadChange) {
				t.Fatalf("error %v does not wrap ErrBadChange", err)
			}
			return
		}
		if c.Removed != nil {
			return
		}
		b, err := mapper.EncodeChange(c.Event)
		if err != nil {
			return // e.g. a tool state the codec refuses to write: counted by the hub as unencodable
		}
		c2, err := DecodeChange(c.Event.EventType(), b)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", b, err)
		}
		b2, err := mapper.EncodeChange(c2.Event)
		if err != nil || string(b2) != string(b) {
			t.Fatalf("not stable:\n%s\n%s", b, b2)
		}
	})
}
