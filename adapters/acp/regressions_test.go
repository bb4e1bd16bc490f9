package acp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// toolPart finds the tool part of callID in a transcript.
func toolPart(tr mapper.Transcript, callID string) (*mapper.ToolPart, *mapper.AssistantMessage, int) {
	var found *mapper.ToolPart
	var msg *mapper.AssistantMessage
	n := 0
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == callID {
				found, n = tp, n+1
				msg, _ = m.Info.(*mapper.AssistantMessage)
			}
		}
	}
	return found, msg, n
}

// B18: a permission for a tool never announced creates the part; a
// rejection settles it failed; an approval's update completes that same
// part; a reused id in a later turn is a new part.
func TestB18PermissionBeforeToolCall(t *testing.T) {
	cases := regressionCases(t)

	tr, _ := reduce(t, "b18", decodeAll(cases["B18-acp-permission-before-toolcall"]))
	tp, _, n := toolPart(tr, "mcp_lookup_get_code-1")
	if n != 1 || tp.State.Status != mapper.StatusError || tp.Tool != "other" {
		t.Fatalf("rejected: %d parts, %+v", n, tp)
	}
	if b := tp.State.Block; b == nil || b.Decision != agent.DecisionReject || b.Reason != "" {
		t.Errorf("rejected block: %+v", tp.State.Block)
	}
	var opts []any // the options are kept as their JSON text (optionsText)
	if tp.State.Block != nil {
		raw, _ := tp.State.Block.Metadata["options"].(json.RawMessage)
		_ = json.Unmarshal(raw, &opts)
	}
	if len(opts) != 3 {
		t.Errorf("the prompt shows %d options, want 3", len(opts))
	}
	if string(mustJSON(tp.State.Input)) != `{"code":42}` {
		t.Errorf("input %s", mustJSON(tp.State.Input))
	}

	tr, _ = reduce(t, "b18a", decodeAll(cases["B18-approved"]))
	tp, _, n = toolPart(tr, "mcp_lookup_get_code-1")
	if n != 1 || tp.State.Status != mapper.StatusCompleted || tp.State.Output != "code 42 is ok" || tp.State.Title != "get_code (lookup MCP)" {
		t.Fatalf("approved: %d parts, %+v", n, tp)
	}
	if len(tr.Dropped) != 0 {
		t.Errorf("dropped: %+v", tr.Dropped)
	}

	tr, _ = reduce(t, "b18r", decodeAll(cases["B18-reused-id"]))
	first, _, n1 := toolPart(tr, "mcp_lookup_get_code-1")
	second, _, n2 := toolPart(tr, "mcp_lookup_get_code-1#2")
	if n1 != 1 || n2 != 1 || string(mustJSON(first.State.Input)) != `{"code":42}` || string(mustJSON(second.State.Input)) != `{"code":43}` {
		t.Fatalf("reused id merged turns: %+v / %+v", first, second)
	}
}

// B20: whatever the agent answers after session/cancel, the turn ends
// aborted, the open tool is settled cancelled, and the late chunk is
// counted, not shown.
func TestB20Cancel(t *testing.T) {
	cases := regressionCases(t)
	for _, v := range []string{"A", "B", "C"} {
		tr, _ := reduce(t, "b20", decodeAll(cases["B20-acp-cancel-"+v]))
		tp, msg, n := toolPart(tr, "web_fetch-2")
		if n != 1 || tp.State.Status != mapper.StatusError {
			t.Fatalf("%s: tool %+v", v, tp)
		}
		if b := tp.State.Block; b == nil || b.Decision != agent.DecisionReject || b.Reason != agent.ReasonCancelled {
			t.Errorf("%s: block %+v", v, tp.State.Block)
		}
		if msg == nil || msg.Finish != agent.FinishAborted || msg.Error != nil {
			t.Errorf("%s: message finish %+v", v, msg)
		}
		if len(tr.Messages) != 2 {
			t.Errorf("%s: %d messages, want the prompt and one answer (the late chunk reopened the turn?)", v, len(tr.Messages))
		}
		if len(tr.Dropped) != 1 || tr.Dropped[0].Reason != agent.DropOrphan || tr.Dropped[0].Kind != "session/update:agent_message_chunk" {
			t.Errorf("%s: dropped %+v", v, tr.Dropped)
		}
	}
}

// B19: answers are chosen by option kind, in the schema's nested shape;
// option ids are only ever copied from the request.
func TestB19PermissionResponse(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "regressions", "B19-acp-permission-response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b19 struct {
		Request struct {
			Params struct {
				Options []PermissionOption `json:"options"`
			} `json:"params"`
		} `json:"request"`
	}
	if err := json.Unmarshal(raw, &b19); err != nil {
		t.Fatal(err)
	}
	opts := b19.Request.Params.Options
	onlyOnce := []PermissionOption{{OptionID: "ok", Name: "Allow", Kind: KindAllowOnce}, {OptionID: "never", Name: "Never", Kind: KindRejectAlways}}
	cases := []struct {
		name string
		opts []PermissionOption
		a    Answer
		want string
		err  error
	}{
		{"allow once", opts, Answer{Decision: agent.DecisionOnce}, `{"outcome":{"optionId":"proceed_once","outcome":"selected"}}`, nil},
		{"always", opts, Answer{Decision: agent.DecisionAlways}, `{"outcome":{"optionId":"proceed_always_server","outcome":"selected"}}`, nil},
		{"always without allow_always", onlyOnce, Answer{Decision: agent.DecisionAlways}, `{"outcome":{"optionId":"ok","outcome":"selected"}}`, nil},
		{"deny", opts, Answer{Decision: agent.DecisionReject}, `{"outcome":{"optionId":"cancel","outcome":"selected"}}`, nil},
		{"deny without reject_once: never reject_always unasked", onlyOnce, Answer{Decision: agent.DecisionReject}, `{"outcome":{"outcome":"cancelled"}}`, nil},
		{"reject always when asked", onlyOnce, Answer{Decision: agent.DecisionReject, RejectAlways: true}, `{"outcome":{"optionId":"never","outcome":"selected"}}`, nil},
		{"relay offline: timeout rejects the tool, not the turn", opts, Answer{Decision: agent.DecisionReject, Reason: agent.ReasonTimeout}, `{"outcome":{"optionId":"cancel","outcome":"selected"}}`, nil},
		{"agent exited: reject_once", opts, Answer{Decision: agent.DecisionReject, Reason: agent.ReasonAgentExited}, `{"outcome":{"optionId":"cancel","outcome":"selected"}}`, nil},
		{"timeout without reject_once: cancelled", onlyOnce, Answer{Decision: agent.DecisionReject, Reason: agent.ReasonTimeout}, `{"outcome":{"outcome":"cancelled"}}`, nil},
		{"user aborts the turn", opts, Answer{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled}, `{"outcome":{"outcome":"cancelled"}}`, nil},
		{"once without allow_once", []PermissionOption{{OptionID: "x", Name: "x", Kind: KindRejectOnce}}, Answer{Decision: agent.DecisionOnce}, "", ErrNoOption},
		{"unknown decision", opts, Answer{Decision: "yes"}, "", ErrUnknownDecision},
	}
	for _, tc := range cases {
		o, err := Choose(tc.opts, tc.a)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := string(mustJSON(o.JSON())); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if !o.Cancelled {
			found := false
			for _, op := range tc.opts {
				found = found || op.OptionID == o.OptionID
			}
			if !found {
				t.Errorf("%s: option id %q is not the request's", tc.name, o.OptionID)
			}
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		reason string
		agent  *int64
	}{
		{"1", "", nil},
		{"2", VersionTooNew, ptr(int64(2))},
		{"0", VersionTooOld, ptr(int64(0))},
		{"", VersionUnreadable, nil},
		{"null", VersionUnreadable, nil},
		{`"1"`, VersionUnreadable, nil},
		{"1.5", VersionUnreadable, nil},
		{"-1", VersionUnreadable, nil},
		{"70000", VersionUnreadable, nil},
		{"{}", VersionUnreadable, nil},
	} {
		_, err := CheckVersion(json.RawMessage(tc.raw))
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.raw, err)
			}
			continue
		}
		var ve *VersionError
		if !errors.As(err, &ve) || !errors.Is(err, ErrProtocolVersion) || ve.Reason != tc.reason || ve.Expected != ProtocolVersion {
			t.Errorf("%q: %v", tc.raw, err)
			continue
		}
		if (ve.Agent == nil) != (tc.agent == nil) || (ve.Agent != nil && *ve.Agent != *tc.agent) {
			t.Errorf("%q: agent %v, want %v (absent is never 0)", tc.raw, ve.Agent, tc.agent)
		}
	}
	_, err := CheckVersion(json.RawMessage("null"))
	if got := err.Error(); got != "acp: the agent stated no readable protocol version (got null): happy speaks version 1 (unreadable)" {
		t.Errorf("diagnostic %q", got)
	}
}

func ptr[T any](v T) *T { return &v }
