package session

import (
	"errors"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestDecodePermission(t *testing.T) {
	cases := []struct {
		in   string
		want Answer
		err  bool
	}{
		{in: `{"callID":"c1","decision":"once"}`, want: Answer{CallID: "c1", Decision: agent.DecisionOnce}},
		{in: `{"callID":"c1","decision":"always","reason":"trusted"}`, want: Answer{CallID: "c1", Decision: agent.DecisionAlways, Reason: "trusted"}},
		{in: `{"callID":"c1","decision":"reject"}`, want: Answer{CallID: "c1", Decision: agent.DecisionReject}},
		{in: `{"callID":"c1","decision":"allow"}`, err: true},
		{in: `{"callID":"c1","decision":"ONCE"}`, err: true},
		{in: `{"callID":"c1","decision":"maybe"}`, err: true},
		{in: `{"callID":"c1"}`, err: true},
		{in: `{"callID":"","decision":"once"}`, err: true},
		// reference app shape
		{in: `{"id":"c2","approved":true}`, want: Answer{CallID: "c2", Decision: agent.DecisionOnce}},
		{in: `{"id":"c2","approved":false,"reason":"no"}`, want: Answer{CallID: "c2", Decision: agent.DecisionReject, Reason: "no"}},
		{in: `{"id":"c2","approved":true,"allowTools":["Bash(ls:*)"]}`, want: Answer{CallID: "c2", Decision: agent.DecisionAlways, AllowTools: []string{"Bash(ls:*)"}}},
		{in: `{"id":"c2","approved":true,"decision":"approved_for_session"}`, want: Answer{CallID: "c2", Decision: agent.DecisionAlways}},
		{in: `{"id":"c2","approved":true,"decision":"approved","mode":"acceptEdits"}`, want: Answer{CallID: "c2", Decision: agent.DecisionOnce, Mode: "acceptEdits"}},
		{in: `{"id":"c2","approved":false,"decision":"denied"}`, want: Answer{CallID: "c2", Decision: agent.DecisionReject}},
		{in: `{"id":"c2","approved":false,"decision":"abort"}`, want: Answer{CallID: "c2", Decision: agent.DecisionReject, Abort: true, Reason: agent.ReasonCancelled}},
		{in: `{"id":"c2","decision":"abort"}`, want: Answer{CallID: "c2", Decision: agent.DecisionReject, Abort: true, Reason: agent.ReasonCancelled}},
		{in: `{"id":"c2","approved":true,"decision":"denied"}`, err: true},
		{in: `{"id":"c2","approved":false,"decision":"approved"}`, err: true},
		{in: `{"id":"c2","decision":"approved_execpolicy_amendment"}`, err: true},
		{in: `{"id":"c2"}`, err: true},
		{in: `{"id":"c2","approved":"yes"}`, err: true},
		{in: `{"id":"c2","approved":true,"allowTools":"Bash"}`, err: true},
		{in: `{"approved":true}`, err: true},
		{in: `[]`, err: true},
		{in: `null`, err: true},
		{in: `{"callID":`, err: true},
		{in: ``, err: true},
	}
	for _, tc := range cases {
		got, err := DecodePermission([]byte(tc.in))
		if tc.err {
			if err == nil || !errors.Is(err, ErrBadControl) {
				t.Errorf("DecodePermission(%s) = %+v, %v; want an ErrBadControl", tc.in, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DecodePermission(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestDecodeQuestionAnswer(t *testing.T) {
	got, err := DecodeQuestionAnswer([]byte(`{"callID":"q1","answers":[["PostgreSQL"],[]]}`))
	if err != nil || got.CallID != "q1" || !reflect.DeepEqual(got.Answers, [][]string{{"PostgreSQL"}, {}}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	got, err = DecodeQuestionAnswer([]byte(`{"callID":"q1","answers":[null]}`))
	if err != nil || !reflect.DeepEqual(got.Answers, [][]string{{}}) {
		t.Fatalf("null inner answer: %+v, %v", got, err)
	}
	for _, in := range []string{`{"answers":[["a"]]}`, `{"callID":"q"}`, `{"callID":"q","answers":[]}`, `{"callID":"q","answers":["a"]}`, `{"callID":"q","answers":[[1]]}`, `"q"`} {
		if _, err := DecodeQuestionAnswer([]byte(in)); !errors.Is(err, ErrBadControl) {
			t.Errorf("DecodeQuestionAnswer(%s) err %v, want refusal", in, err)
		}
	}
}

func TestDecodePrompt(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		want   agent.Prompt
		wantOK bool
		err    bool
	}{
		{name: "canonical", in: `{"kind":"message","version":1,"info":{"id":"msg_1","sessionID":"ses_1","role":"user","time":{"created":1}},
			"parts":[{"id":"prt_1","type":"text","text":"hello"},{"id":"prt_2","type":"file","mime":"image/png","url":"data:image/png;base64,AA=="}]}`,
			want: agent.Prompt{MessageID: "msg_1", Text: "hello", Files: []agent.PromptFile{{Mime: "image/png", URL: "data:image/png;base64,AA=="}}}, wantOK: true},
		{name: "file without a type", in: `{"kind":"message","version":1,"info":{"id":"msg_1","role":"user"},
			"parts":[{"type":"file","filename":"a.png","url":"sessions/s/attachments/a.enc"},{"type":"file","url":"sessions/s/attachments/b.enc"}]}`,
			want: agent.Prompt{MessageID: "msg_1", Files: []agent.PromptFile{{Mime: "image/png", Filename: "a.png", URL: "sessions/s/attachments/a.enc"},
				{Mime: "application/octet-stream", URL: "sessions/s/attachments/b.enc"}}}, wantOK: true},
		{name: "legacy", in: `{"role":"user","content":{"type":"text","text":"run the tests"},"localKey":"k"}`, want: agent.Prompt{Text: "run the tests"}, wantOK: true},
		{name: "assistant message is not a prompt", in: `{"kind":"message","version":3,"info":{"id":"msg_2","role":"assistant"},"parts":[]}`},
		{name: "session record", in: `{"kind":"session","version":1,"session":{"id":"ses_1"}}`},
		{name: "todos record", in: `{"kind":"todos","version":1,"sessionID":"ses_1","todos":[]}`},
		{name: "legacy agent output", in: `{"role":"agent","content":{"type":"output"}}`},
		{name: "empty canonical", in: `{"kind":"message","info":{"id":"msg_1","role":"user"},"parts":[]}`, err: true},
		{name: "no id", in: `{"kind":"message","info":{"role":"user"},"parts":[{"type":"text","text":"x"}]}`, err: true},
		{name: "parts not array", in: `{"kind":"message","info":{"id":"m","role":"user"},"parts":{}}`, err: true},
		{name: "legacy non-text", in: `{"role":"user","content":{"type":"image"}}`, err: true},
		{name: "legacy blank", in: `{"role":"user","content":{"type":"text","text":"  "}}`, err: true},
		{name: "array", in: `[1]`, err: true},
		{name: "garbage", in: `<html>`, err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := DecodePrompt([]byte(tc.in))
			if tc.err {
				if !errors.Is(err, ErrBadControl) {
					t.Fatalf("err %v, want refusal", err)
				}
				return
			}
			if err != nil || ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v ok=%v err=%v; want %+v ok=%v", got, ok, err, tc.want, tc.wantOK)
			}
		})
	}
}

func FuzzDecodeControl(f *testing.F) {
	for _, s := range []string{`{"callID":"c","decision":"once"}`, `{"id":"c","approved":true,"allowTools":["x"]}`,
		`{"callID":"q","answers":[["a"]]}`, `{"kind":"message","info":{"id":"m","role":"user"},"parts":[{"type":"text","text":"x"}]}`,
		`{"role":"user","content":{"type":"text","text":"x"}}`, `null`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if a, err := DecodePermission(data); err == nil {
			if a.CallID == "" {
				t.Fatalf("accepted an answer without call id: %s", data)
			}
			if _, perr := agent.ParseDecision(string(a.Decision)); perr != nil {
				t.Fatalf("accepted decision %q from %s", a.Decision, data)
			}
		} else if !errors.Is(err, ErrBadControl) {
			t.Fatalf("refusal not wrapped: %v", err)
		}
		if q, err := DecodeQuestionAnswer(data); err == nil && (q.CallID == "" || len(q.Answers) == 0) {
			t.Fatalf("accepted empty answer %+v", q)
		}
		if p, ok, err := DecodePrompt(data); err == nil && ok && p.Text == "" && len(p.Files) == 0 {
			t.Fatalf("accepted empty prompt from %s", data)
		}
	})
}
