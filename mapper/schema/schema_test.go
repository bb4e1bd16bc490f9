package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const minimal = `{"session":{"id":"ses_1","projectID":"","directory":"","title":"","time":{"created":0,"updated":0}},` +
	`"messages":[],"children":[],"todos":[],"dropped":[]}`

func TestSchemaDocument(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(TranscriptSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" || doc["$ref"] != "#/$defs/transcript" {
		t.Fatalf("schema header = %v %v", doc["$schema"], doc["$ref"])
	}
	defs := doc["$defs"].(map[string]any)
	for _, name := range []string{"transcript", "session", "messageWithParts", "userMessage", "assistantMessage", "part",
		"unknownPart", "toolState", "toolBlocked", "permissionRequest", "permissionResolved", "questionRequest", "questionResolved", "todo", "dropped"} {
		if _, ok := defs[name]; !ok {
			t.Errorf("$defs lacks %s", name)
		}
	}
	// The returned bytes are a copy.
	b := TranscriptSchema()
	b[0] = 'x'
	if TranscriptSchema()[0] != '{' {
		t.Fatal("TranscriptSchema shares its bytes")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want error
	}{
		{"minimal", minimal, nil},
		{"not json", `{"session":`, ErrNotJSON},
		{"array", `[]`, ErrMismatch},
		{"extra member", minimal[:len(minimal)-1] + `,"extra":1}`, ErrMismatch},
		{"empty session id", `{"session":{"id":"","projectID":"","directory":"","title":"","time":{"created":0,"updated":0}},"messages":[],"children":[],"todos":[],"dropped":[]}`, ErrMismatch},
		{"child without parent", `{"session":{"id":"s","projectID":"","directory":"","title":"","time":{"created":0,"updated":0}},"messages":[],"children":[{"session":{}}],"todos":[],"dropped":[]}`, ErrMismatch},
	}
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		err := v.Transcript([]byte(c.doc))
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if err := ValidateTranscriptJSON([]byte(minimal)); err != nil {
		t.Errorf("ValidateTranscriptJSON: %v", err)
	}
	part := `{"id":"p","sessionID":"s","messageID":"m","type":"text","text":"x"}`
	if err := v.Part([]byte(part)); err != nil {
		t.Errorf("part: %v", err)
	}
	unknown := `{"id":"p","sessionID":"s","messageID":"m","type":"hologram","beam":1}`
	if err := v.Part([]byte(unknown)); err != nil {
		t.Errorf("unknown part: %v", err)
	}
	// A known type with a foreign member is not taken for an unknown part.
	if err := v.Part([]byte(`{"id":"p","sessionID":"s","messageID":"m","type":"text","text":"x","beam":1}`)); !errors.Is(err, ErrMismatch) {
		t.Errorf("text part with an extra member: %v", err)
	}
	msg := `{"info":{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"x"}},"parts":[` + part + `]}`
	if err := ValidateMessageWithPartsJSON([]byte(msg)); err != nil {
		t.Errorf("message: %v", err)
	}
}

// FuzzValidateTranscript: validation never panics, and every error says
// whether the input was not JSON or did not match.
func FuzzValidateTranscript(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(`{"session":{"id":"s"},"messages":[{"info":{},"parts":[{"type":"tool","state":{"status":"blocked"}}]}]}`))
	f.Add([]byte(`[]`))
	v, err := NewValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := v.Transcript(data)
		if err != nil && !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrNotJSON) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}

// The canonical tool inputs have their definitions: members of the right
// type pass, a member the shape does not have or of another type fails,
// and tools without a shape take any object.
func TestToolInput(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool, input string
		want        error
	}{
		{"bash", `{"command":"ls","description":"List","cwd":"/w","timeout":60000}`, nil},
		{"bash", `{}`, nil},
		{"bash", `{"cmd":"ls"}`, ErrMismatch},
		{"bash", `{"command":["ls"]}`, ErrMismatch},
		{"bash", `{"command":"ls","timeout":1.5}`, ErrMismatch},
		{"read", `{"path":"/a","offset":1,"limit":2}`, nil},
		{"read", `{"file_path":"/a"}`, ErrMismatch},
		{"write", `{"path":"/a","content":""}`, nil},
		{"edit", `{"path":"/a","oldString":"x","newString":"y","replaceAll":true,"diff":"@@"}`, nil},
		{"edit", `{"path":"/a","old_string":"x"}`, ErrMismatch},
		{"glob", `{"pattern":"*","path":"/w"}`, nil},
		{"grep", `{"pattern":"x","path":"/w","glob":"*.go"}`, nil},
		{"grep", `{"pattern":"x","include":"*.go"}`, ErrMismatch},
		{"fetch", `{"url":"https://x.test","prompt":"p"}`, nil},
		{"search", `{"query":"q"}`, nil},
		{"task", `{"description":"d","prompt":"p","agent":"explore"}`, nil},
		{"task", `{"subagent_type":"explore"}`, ErrMismatch},
		{"todo", `{"todos":[{"id":"1","content":"c","status":"pending","priority":"high"}]}`, nil},
		{"todo", `{"todos":[{"content":"c","status":"done"}]}`, ErrMismatch},
		{"todo", `{}`, ErrMismatch},
		{"question", `{"questions":[{"question":"q","header":"h","options":[{"label":"a","description":""}],"multiple":false}]}`, nil},
		{"plan", `{"plan":"1. x"}`, nil},
		{"mcp:docs/search", `{"q":"x"}`, nil},
		{"other", `{"anything":[1]}`, nil},
		{"other", `[1]`, ErrMismatch},
		{"bash", `{`, ErrNotJSON},
	}
	for _, c := range cases {
		err := v.ToolInput(c.tool, []byte(c.input))
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s %s: err = %v, want %v", c.tool, c.input, err, c.want)
		}
	}
}

func TestToolParts(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	doc := func(tool, input string) string {
		return `{"messages":[{"parts":[{"type":"text"},{"type":"tool","callID":"c1","tool":"` + tool + `","state":{"input":` + input + `}}]}],` +
			`"children":[{"messages":[{"parts":[{"type":"tool","callID":"c2","tool":"bash","state":{"input":{"command":"ls"}}}]}],"children":[]}]}`
	}
	if err := v.ToolParts([]byte(doc("read", `{"path":"/a"}`))); err != nil {
		t.Errorf("canonical parts: %v", err)
	}
	for _, bad := range [][2]string{{"execute", `{"command":"ls"}`}, {"read", `{"file_path":"/a"}`}} {
		err := v.ToolParts([]byte(doc(bad[0], bad[1])))
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "c1") {
			t.Errorf("%s %s: err = %v", bad[0], bad[1], err)
		}
	}
	if err := v.ToolParts([]byte(`[`)); !errors.Is(err, ErrNotJSON) {
		t.Errorf("not JSON: %v", err)
	}
}
