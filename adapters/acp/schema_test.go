package acp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
)

// acpSchema is the ACP v1 JSON Schema (testdata/schema/schema.v1.json,
// copied unchanged), compiled once per test binary run: the whole-message
// schema, and per method the schema of its params and of its result, taken
// from the x-method annotations of the schema's definitions.
type acpSchema struct {
	once    sync.Once
	err     error
	root    *jsonschema.Schema
	params  map[string]*jsonschema.Schema // by method
	results map[string]*jsonschema.Schema // by method
}

// Test-only state: compiling the schema is the slow part.
var schemaV1 acpSchema

func (s *acpSchema) load(t *testing.T) {
	t.Helper()
	s.once.Do(func() {
		raw, err := os.ReadFile(filepath.Join("testdata", "schema", "schema.v1.json"))
		if err != nil {
			s.err = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			s.err = err
			return
		}
		c := jsonschema.NewCompiler()
		const url = "file:///schema.v1.json"
		if err := c.AddResource(url, doc); err != nil {
			s.err = err
			return
		}
		if s.root, err = c.Compile(url); err != nil {
			s.err = err
			return
		}
		var defs struct {
			Defs map[string]struct {
				Method string `json:"x-method"`
			} `json:"$defs"`
		}
		if err := json.Unmarshal(raw, &defs); err != nil {
			s.err = err
			return
		}
		s.params, s.results = map[string]*jsonschema.Schema{}, map[string]*jsonschema.Schema{}
		for name, d := range defs.Defs {
			if d.Method == "" {
				continue
			}
			sch, err := c.Compile(url + "#/$defs/" + name)
			if err != nil {
				s.err = err
				return
			}
			switch {
			case strings.HasSuffix(name, "Response"):
				s.results[d.Method] = sch
			default: // …Request, …Notification
				s.params[d.Method] = sch
			}
		}
	})
	if s.err != nil {
		t.Fatalf("compile ACP schema: %v", s.err)
	}
}

// validator checks a sequence of traffic frames: each message against the
// whole-message schema, and its params or result against the schema of
// its method (a response's method is that of the request it answers).
type validator struct {
	t       *testing.T
	pending map[string]string // "<dir>:<id>" of a request → method
}

func newValidator(t *testing.T) *validator {
	schemaV1.load(t)
	return &validator{t: t, pending: map[string]string{}}
}

// check validates one frame; it reports failures with Errorf and returns
// false when the message is invalid.
func (v *validator) check(where string, f jsonrpc.Frame) bool {
	t := v.t
	t.Helper()
	if f.Dir != trafficlog.C2A && f.Dir != trafficlog.A2C {
		return true
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.Data))
	if err != nil {
		t.Errorf("%s: not JSON: %v", where, err)
		return false
	}
	ok := true
	if err := schemaV1.root.Validate(inst); err != nil {
		t.Errorf("%s: %s message does not match the ACP schema: %v\n%s", where, f.Dir, err, f.Data)
		ok = false
	}
	if !f.HasMsg() {
		t.Errorf("%s: %v", where, f.Err)
		return false
	}
	m := f.Msg
	other := trafficlog.C2A
	if f.Dir == trafficlog.C2A {
		other = trafficlog.A2C
	}
	var sch *jsonschema.Schema
	var part json.RawMessage
	what := ""
	switch m.Kind {
	case jsonrpc.KindRequest, jsonrpc.KindNotification:
		if m.Kind == jsonrpc.KindRequest {
			v.pending[string(f.Dir)+":"+m.ID.String()] = m.Method
		}
		sch, part, what = schemaV1.params[m.Method], m.Params, m.Method+" params"
	case jsonrpc.KindResponse:
		method := v.pending[string(other)+":"+m.ID.String()]
		delete(v.pending, string(other)+":"+m.ID.String())
		if m.Error == nil {
			sch, part, what = schemaV1.results[method], m.Result, method+" result"
		}
	}
	if sch == nil || part == nil {
		return ok
	}
	pi, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
	if err != nil {
		t.Errorf("%s: %s: %v", where, what, err)
		return false
	}
	if err := sch.Validate(pi); err != nil {
		t.Errorf("%s: %s does not match the ACP schema: %v\n%s", where, what, err, f.Data)
		return false
	}
	return ok
}

// TestCapturesMatchSchema: every message of every capture (both
// directions) is valid ACP v1.
func TestCapturesMatchSchema(t *testing.T) {
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			frames, _, err := readFrames(bytes.NewReader(readCapture(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			v := newValidator(t)
			n := 0
			for i, f := range frames {
				if v.check(name+" frame "+strconv.Itoa(i), f) {
					n++
				}
			}
			if n == 0 {
				t.Fatal("no message checked")
			}
		})
	}
}

// TestSchemaRejectsWrongPermissionAnswers: the validator is not a rubber
// stamp — the wrong answers B19 saw in the wild fail it, the right shape
// passes.
func TestSchemaRejectsWrongPermissionAnswers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "regressions", "B19-acp-permission-response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b19 struct {
		Request json.RawMessage   `json:"request"`
		Wrong   []json.RawMessage `json:"wrong_responses_seen_in_the_wild"`
	}
	if err := json.Unmarshal(raw, &b19); err != nil {
		t.Fatal(err)
	}
	schemaV1.load(t)
	for i, w := range b19.Wrong {
		m, _ := jsonrpc.DecodeFrame(w)
		if m.Error != nil {
			continue // an error answer is valid JSON-RPC; B19 forbids producing it, tested elsewhere
		}
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(m.Result))
		if schemaV1.results["session/request_permission"].Validate(inst) == nil {
			t.Errorf("wrong response %d passes the schema: %s", i, w)
		}
	}
	good := Outcome{OptionID: "proceed_once"}.JSON()
	b, _ := json.Marshal(good)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err := schemaV1.results["session/request_permission"].Validate(inst); err != nil {
		t.Errorf("the right shape fails: %v", err)
	}
}
