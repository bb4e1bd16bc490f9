// Package schema holds the JSON Schema (draft 2020-12) of happy's transcript
// document, transcript.schema.json, and validators for it.
//
// The schema describes exactly what mapper.EncodeTranscript writes: the
// seed-001 messages-and-parts model with the blocked tool state, resolved
// blocks, child sessions under "children", the todo list and the "dropped"
// records. It is the reference for readers in other languages; tests use
// it to check golden files. Members it does not list are refused (the Go
// decoder ignores them, for forward compatibility), and two rules are left
// to the Go decoder: a resolved question has one answer list per question,
// and a part's sessionID and messageID are those of its message.
//
// The validator library sits behind Validator, so it can be replaced
// without touching callers.
package schema

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed transcript.schema.json
var transcriptSchema string

// TranscriptSchema returns the schema document (JSON, draft 2020-12).
func TranscriptSchema() []byte { return []byte(transcriptSchema) }

// ErrMismatch is wrapped by every validation failure: the document is JSON
// but does not match the schema.
var ErrMismatch = errors.New("document does not match the transcript schema")

// ErrNotJSON is wrapped when the document is not JSON at all.
var ErrNotJSON = errors.New("document is not JSON")

// resource is the name the schema is registered under in the compiler.
const resource = "transcript.schema.json"

// Validator checks documents against the compiled schema. It is safe for
// concurrent use; compile one and keep it when validating many documents.
type Validator struct {
	transcript *jsonschema.Schema
	message    *jsonschema.Schema
	part       *jsonschema.Schema
}

// NewValidator compiles the embedded schema. An error means the embedded
// schema itself is broken.
func NewValidator() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(transcriptSchema)))
	if err != nil {
		return nil, fmt.Errorf("read embedded transcript schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(resource, doc); err != nil {
		return nil, fmt.Errorf("load embedded transcript schema: %w", err)
	}
	var v Validator
	for _, s := range []struct {
		dst **jsonschema.Schema
		loc string
	}{
		{&v.transcript, resource},
		{&v.message, resource + "#/$defs/messageWithParts"},
		{&v.part, resource + "#/$defs/part"},
	} {
		sch, err := c.Compile(s.loc)
		if err != nil {
			return nil, fmt.Errorf("compile transcript schema %s: %w", s.loc, err)
		}
		*s.dst = sch
	}
	return &v, nil
}

func validate(sch *jsonschema.Schema, what string, data []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("validate %s: %w: %w", what, ErrNotJSON, err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("validate %s: %w: %w", what, ErrMismatch, err)
	}
	return nil
}

// Transcript validates a transcript document
// ({"session","messages","children","todos","dropped"}). The error wraps
// ErrNotJSON or ErrMismatch; the mismatch text lists every failing location
// as a JSON pointer.
func (v *Validator) Transcript(data []byte) error { return validate(v.transcript, "transcript", data) }

// MessageWithParts validates one {"info","parts"} document (the body of a
// relay message record).
func (v *Validator) MessageWithParts(data []byte) error {
	return validate(v.message, "message", data)
}

// Part validates one part.
func (v *Validator) Part(data []byte) error { return validate(v.part, "part", data) }

// ValidateTranscriptJSON validates a transcript document against the
// embedded schema, compiling it for this call (use a Validator to check
// many documents). Errors as Validator.Transcript.
func ValidateTranscriptJSON(data []byte) error {
	v, err := NewValidator()
	if err != nil {
		return err
	}
	return v.Transcript(data)
}

// ValidateMessageWithPartsJSON validates one {"info","parts"} document
// against the embedded schema. Errors as Validator.Transcript.
func ValidateMessageWithPartsJSON(data []byte) error {
	v, err := NewValidator()
	if err != nil {
		return err
	}
	return v.MessageWithParts(data)
}
