package codextest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
)

// schemaDir is adapters/codex/testdata/schema, found from this file.
func schemaDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "schema")
}

// idKey renders a raw JSON-RPC id as a map key: 7, or "abc" quoted.
func idKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.Quote(s)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// schemaSet compiles the app-server JSON Schemas (copied unchanged into
// adapters/codex/testdata/schema) once per test binary run.
type schemaSet struct {
	once    sync.Once
	err     error
	schemas map[string]*jsonschema.Schema
}

func (s *schemaSet) get(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	s.once.Do(func() {
		s.schemas = map[string]*jsonschema.Schema{}
		c := jsonschema.NewCompiler()
		var names []string
		err := filepath.Walk(schemaDir(), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			doc, err := jsonschema.UnmarshalJSON(f)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(schemaDir(), p)
			names = append(names, filepath.ToSlash(rel))
			return c.AddResource("file:///"+filepath.ToSlash(rel), doc)
		})
		if err != nil {
			s.err = err
			return
		}
		for _, n := range names {
			sch, err := c.Compile("file:///" + n)
			if err != nil {
				s.err = err
				return
			}
			s.schemas[n] = sch
		}
	})
	if s.err != nil {
		t.Fatalf("compile schemas: %v", s.err)
	}
	sch := s.schemas[name]
	if sch == nil {
		t.Fatalf("no schema %s", name)
	}
	return sch
}

// The compiled schemas are shared by the tests of one run; compiling them
// is the slow part. Test-only state.
var appServerSchemas schemaSet

// responseSchema names the schema of a response to method, "" when the
// test data has none (the message is then not checked).
func responseSchema(method string) string {
	switch method {
	case "initialize":
		return "v1/InitializeResponse.json"
	case "thread/start":
		return "v2/ThreadStartResponse.json"
	case "thread/resume":
		return "v2/ThreadResumeResponse.json"
	case "turn/start":
		return "v2/TurnStartResponse.json"
	case "thread/read":
		return "v2/ThreadReadResponse.json"
	case "turn/interrupt":
		return "v2/TurnInterruptResponse.json"
	case "item/commandExecution/requestApproval":
		return "CommandExecutionRequestApprovalResponse.json"
	case "item/fileChange/requestApproval":
		return "FileChangeRequestApprovalResponse.json"
	case "execCommandApproval":
		return "ExecCommandApprovalResponse.json"
	case "applyPatchApproval":
		return "ApplyPatchApprovalResponse.json"
	case "item/tool/requestUserInput":
		return "ToolRequestUserInputResponse.json"
	}
	return ""
}

// ValidateTraffic checks every app-server message of a traffic log against
// the schema: requests, notifications and responses, in both directions
// (dirs selects which). It returns how many messages it checked.
func ValidateTraffic(t *testing.T, traffic []byte, dirs ...trafficlog.Dir) int {
	t.Helper()
	tr, err := jsonrpc.ReadTraffic(bytes.NewReader(traffic))
	if err != nil || len(tr.Bad) > 0 {
		t.Fatalf("read traffic: %v %v", err, tr.Bad)
	}
	frames := tr.Frames
	want := map[trafficlog.Dir]bool{}
	for _, d := range dirs {
		want[d] = true
	}
	sentBy := map[trafficlog.Dir]map[string]string{trafficlog.C2A: {}, trafficlog.A2C: {}}
	checked := 0
	for i, f := range frames {
		if f.Dir != trafficlog.C2A && f.Dir != trafficlog.A2C {
			continue
		}
		var m struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(f.Data, &m); err != nil {
			t.Errorf("frame %d: %v", i, err)
			continue
		}
		var name string
		var inst []byte = f.Data
		switch {
		case m.Method != "" && m.ID != nil:
			sentBy[f.Dir][idKey(m.ID)] = m.Method
			name = "ClientRequest.json"
			if f.Dir == trafficlog.A2C {
				name = "ServerRequest.json"
			}
		case m.Method != "":
			name = "ClientNotification.json"
			if f.Dir == trafficlog.A2C {
				name = "ServerNotification.json"
			}
		case m.Result != nil:
			other := trafficlog.A2C
			if f.Dir == trafficlog.A2C {
				other = trafficlog.C2A
			}
			name = responseSchema(sentBy[other][idKey(m.ID)])
			inst = m.Result
		}
		if name == "" || !want[f.Dir] {
			continue
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(inst))
		if err != nil {
			t.Errorf("frame %d: %v", i, err)
			continue
		}
		if err := appServerSchemas.get(t, name).Validate(doc); err != nil {
			t.Errorf("frame %d (%s %s) does not validate against %s: %v\n%s", i, f.Dir, m.Method, name, err, f.Data)
		}
		checked++
	}
	return checked
}

// CheckSent validates what a live app-server client sent against the
// schema (there is none for mcp-server).
func CheckSent(t *testing.T, traffic []byte) {
	t.Helper()
	if n := ValidateTraffic(t, traffic, trafficlog.C2A); n < 3 {
		t.Errorf("only %d sent messages checked", n)
	}
}
