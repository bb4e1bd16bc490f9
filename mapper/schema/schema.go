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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/happy-dev/happy/agent"
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
	inputs     map[string]*jsonschema.Schema // canonical tool name → its input's schema
	object     *jsonschema.Schema            // any object
}

// toolInputs names the definition of each canonical tool's input (the
// tools without one, other and mcp:…, take any object).
var toolInputs = map[string]string{
	"bash": "bashInput", "read": "readInput", "write": "writeInput", "edit": "editInput",
	"glob": "globInput", "grep": "grepInput", "fetch": "fetchInput", "search": "searchInput",
	"task": "taskInput", "todo": "todoInput", "question": "questionInput", "plan": "planInput",
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
	v.inputs = map[string]*jsonschema.Schema{}
	for tool, def := range toolInputs {
		sch, err := c.Compile(resource + "#/$defs/" + def)
		if err != nil {
			return nil, fmt.Errorf("compile transcript schema %s: %w", def, err)
		}
		v.inputs[tool] = sch
	}
	if v.object, err = c.Compile(resource + "#/$defs/object"); err != nil {
		return nil, fmt.Errorf("compile transcript schema object: %w", err)
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

// ToolInput validates the input of a call of a canonical tool (bash,
// read, …) against its definition (bashInput, readInput, …: the canonical
// inputs of docs/ARCHITECTURE.md, section "Tools"). The transcript schema
// itself takes any object as a tool's input; adapters' tests use this to
// hold them to the canonical shapes. A tool without a definition (other,
// mcp:…) takes any object. Errors as Transcript.
func (v *Validator) ToolInput(tool string, input []byte) error {
	sch, ok := v.inputs[tool]
	if !ok {
		sch = v.object
	}
	return validate(sch, tool+" input", input)
}

// ToolParts checks every tool part of a transcript document, children
// included: its tool is a canonical name (agent.IsCanonicalTool) and its
// state's input the canonical input of that tool (ToolInput). The error
// names each part that fails (its callID) and wraps ErrMismatch, or
// ErrNotJSON for a document that is not a transcript's JSON.
func (v *Validator) ToolParts(doc []byte) error {
	type node struct {
		Messages []struct {
			Parts []struct {
				Type   string `json:"type"`
				CallID string `json:"callID"`
				Tool   string `json:"tool"`
				State  struct {
					Input json.RawMessage `json:"input"`
				} `json:"state"`
			} `json:"parts"`
		} `json:"messages"`
		Children []json.RawMessage `json:"children"`
	}
	var errs []error
	var walk func(raw []byte) error
	walk = func(raw []byte) error {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("tool parts: %w: %w", ErrNotJSON, err)
		}
		for _, m := range n.Messages {
			for _, p := range m.Parts {
				if p.Type != "tool" {
					continue
				}
				if !agent.IsCanonicalTool(p.Tool) {
					errs = append(errs, fmt.Errorf("tool part %s: %w: tool %q is not a canonical name", p.CallID, ErrMismatch, p.Tool))
					continue
				}
				if err := v.ToolInput(p.Tool, p.State.Input); err != nil {
					errs = append(errs, fmt.Errorf("tool part %s: %w", p.CallID, err))
				}
			}
		}
		for _, c := range n.Children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(doc); err != nil {
		return err
	}
	return errors.Join(errs...)
}

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

// ToolPartsOfFiles checks with ToolParts every transcript document whose
// path matches the filepath.Glob pattern (golden files, for an adapter's
// tests). The error names each file that fails, or says that the pattern
// matched none.
func (v *Validator) ToolPartsOfFiles(pattern string) error {
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("tool parts: no file matches %s", pattern)
	}
	var errs []error
	for _, p := range paths {
		doc, err := os.ReadFile(p)
		if err == nil {
			err = v.ToolParts(doc)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
