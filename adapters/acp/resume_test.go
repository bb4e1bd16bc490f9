package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// continueSession starts the fake agent continuing session "old-sess"
// (known: the transcript holds its history), runs one prompt as a runner's
// Agent and returns the events, the traffic and the log.
func continueSession(t *testing.T, known bool, env ...string) (evs []agent.Event, traffic, logText string) {
	t.Helper()
	rec, logs := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := fakeOptions(t, rec, env...)
	o.LoadSessionID, o.HistoryKnown = "old-sess", known
	o.Logger = zerolog.New(logs)
	started, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := started.SessionID(); got != "old-sess" {
		t.Errorf("session id %q, want old-sess", got)
	}
	c := NewAgent(started).Client
	if err := c.Prompt(ctx, Prompt{Text: "next"}); err != nil {
		t.Fatal(err)
	}
	evs = untilTurns(t, c, 1, nil)
	evs = append(evs, closeAndDrain(t, c)...)
	return evs, string(rec.Bytes()), string(logs.Bytes())
}

// A session continued with session/load: the conversation the agent
// replays (a prompt, a thought, a tool call before it answers the load, an
// answer after) is left out of the events and counted in the log when the
// next prompt goes out; the mode it reports is kept, and the next turn is
// recorded. The recorded
// traffic replays to the same events (the history-known note).
func TestLiveLoadLeavesOutReplayedHistory(t *testing.T) {
	evs, traffic, logText := continueSession(t, true)
	want := `{"type":"SessionInfo","providerSessionID":"old-sess","agent":"default"}
{"type":"SessionInfo","agent":"plan"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"TextDelta","delta":"echo: next"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`
	if got := liveLines(t, evs); got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
	if !strings.Contains(traffic, `"method":"session/load"`) || !strings.Contains(traffic, `{"happy":"history-known"}`) {
		t.Errorf("no session/load after a history-known note:\n%s", traffic)
	}
	if !strings.Contains(logText, `"replayed_updates":4`) || !strings.Contains(logText, `"session":"old-sess"`) {
		t.Errorf("the log does not count the 4 replayed updates:\n%s", logText)
	}
	again, err := Replay(bytes.NewReader([]byte(traffic)))
	if err != nil {
		t.Fatal(err)
	}
	// The replay also has the prompt happy sent (the runner records it
	// live).
	wantReplay := strings.Replace(want, `{"type":"TurnStarted","turnID":"turn-1"}`,
		`{"type":"TurnStarted","turnID":"turn-1"}`+"\n"+`{"type":"UserPrompt","promptID":"prompt-1","text":"next"}`, 1)
	if got := liveLines(t, again); got != wantReplay {
		t.Errorf("replay of the recorded traffic differs:\n%s", firstDiff(wantReplay, got))
	}
	checkSent(t, []byte(traffic))
}

// A load whose history the transcript does not hold (happy acp --resume
// starts a new relay session): the replay, before and after the answer,
// is the new transcript's history; the turn after it is the prompt's.
func TestLiveLoadUnknownHistoryReplays(t *testing.T) {
	evs, traffic, logText := continueSession(t, false)
	want := `{"type":"UserPrompt","promptID":"load-1","text":"earlier prompt"}
{"type":"ReasoningDelta","delta":"thinking it over"}
{"type":"ToolCall","callID":"old-1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"providerTool":"execute"}}
{"type":"ToolCompleted","callID":"old-1"}
{"type":"SessionInfo","providerSessionID":"old-sess","agent":"default"}
{"type":"TextDelta","delta":"earlier answer"}
{"type":"SessionInfo","agent":"plan"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"TextDelta","delta":"echo: next"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`
	if got := liveLines(t, evs); got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
	if strings.Contains(traffic, "history-known") || strings.Contains(logText, "replayed_updates") {
		t.Errorf("history left out of a load whose history is not known:\n%s\n%s", traffic, logText)
	}
}

// An agent that advertises sessionCapabilities.resume is continued with
// session/resume, even when it can load too: nothing is replayed.
func TestLiveResumePreferredOverLoad(t *testing.T) {
	evs, traffic, _ := continueSession(t, true, "ACP_FAKE_RESUME=1")
	want := `{"type":"SessionInfo","providerSessionID":"old-sess","agent":"default"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"TextDelta","delta":"echo: next"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`
	if got := liveLines(t, evs); got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
	if !strings.Contains(traffic, `"method":"session/resume"`) || strings.Contains(traffic, `"method":"session/load"`) ||
		strings.Contains(traffic, "history-known") {
		t.Errorf("not continued with session/resume alone:\n%s", traffic)
	}
	checkSent(t, []byte(traffic))
}

// An agent that can neither load nor resume: Start fails with
// ErrUnsupported, naming the agent and what it lacks.
func TestLiveContinueUnsupported(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := fakeOptions(t, nil, "ACP_FAKE_NO_LOAD=1")
	o.LoadSessionID = "old-sess"
	c, err := Start(ctx, o)
	if err == nil {
		_ = c.Close()
		t.Fatal("Start continued a session the agent cannot continue")
	}
	want := "acp: not supported by the agent: fake cannot continue session old-sess: it advertises neither loadSession (session/load) nor sessionCapabilities.resume (session/resume)"
	if !errors.Is(err, ErrUnsupported) || err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
}

// The decoder leaves out the history only of a load that follows a
// history-known note (a load without it replays as before), and only until
// the next prompt; the session's state (a title) is read meanwhile.
func TestDecoderHistoryKnown(t *testing.T) {
	frames := script(
		`> {"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[]}}`,
		`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"kept"}}}}`,
		`< {"jsonrpc":"2.0","id":1,"result":{}}`,
		`# {"happy":"history-known"}`,
		`> {"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[]}}`,
		`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"left out"}}}}`,
		`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}`,
		`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"session_info_update","title":"T"}}}`,
		`< {"jsonrpc":"2.0","id":2,"result":{}}`,
		`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"replayed after the answer"}}}}`,
		`> {"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"next"}]}}`,
		`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"new"}}}}`,
	)
	d := NewDecoder()
	var evs []agent.Event
	for _, f := range frames {
		evs = append(evs, d.Decode(f)...)
	}
	got := eventLines(t, evs)
	want := `{"type":"UserPrompt","promptID":"load-1","text":"kept"}
{"type":"SessionInfo","providerSessionID":"s","cwd":"/w"}
{"type":"SessionInfo","title":"T"}
{"type":"SessionInfo","providerSessionID":"s","cwd":"/w"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"UserPrompt","promptID":"prompt-1","text":"next"}
{"type":"TextDelta","delta":"new"}`
	if got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
	if n := d.SkippedHistory(); n != 3 {
		t.Errorf("SkippedHistory %d, want 3", n)
	}
	if n := d.SkippedHistory(); n != 0 {
		t.Errorf("SkippedHistory after reporting %d, want 0", n)
	}
}

// The cause an agent gives in data.details (the TypeScript SDK), else in
// data.message (codex-acp) or as a string data, is added to the error of a
// request; without one (or without a message) nothing is.
func TestRPCDetails(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"No previous sessions found for this project."}`)},
			": No previous sessions found for this project."},
		{&jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"Internal error"}`)}, ""},
		{&jsonrpc.RPCError{Code: -32603, Message: "Internal error"}, ""},
		// codex-acp puts the cause in data.message.
		{&jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"message":"model is at capacity"}`)},
			": model is at capacity"},
		{&jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`"model is at capacity"`)},
			": model is at capacity"},
		{&jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"d","message":"m"}`)}, ": d"},
		{&jsonrpc.RPCError{Code: -32603, Data: json.RawMessage(`{"details":"x"}`)}, ""},
		{errors.New("write: broken pipe"), ""},
	}
	for _, tc := range cases {
		if got := rpcDetails(tc.err); got != tc.want {
			t.Errorf("rpcDetails(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Gemini CLI answers session/load of a session started less than about a
// minute ago with "No previous sessions found": the error says that this is
// the agent's and what to do; other failures get no such word.
func TestResumeErrorExplainsGemini(t *testing.T) {
	gemini := &jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"No previous sessions found for this project."}`)}
	want := "acp: session/load: " + gemini.Error() + ": No previous sessions found for this project." +
		" (Gemini CLI does not find a session it started less than about a minute ago, a Gemini CLI bug: resume it again in a minute)"
	if got := requestError("session/load", gemini).Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	other := &jsonrpc.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"disk full"}`)}
	if got, want := requestError("session/load", other).Error(), "acp: session/load: "+other.Error()+": disk full"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := requestError("session/new", gemini).Error(); strings.Contains(got, "minute") {
		t.Errorf("session/new error explains a resume: %s", got)
	}
	if !errors.Is(requestError("session/load", gemini), gemini) {
		t.Error("the agent's error is not wrapped")
	}
}
