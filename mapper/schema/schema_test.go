package schema

import (
	"encoding/json"
	"errors"
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
