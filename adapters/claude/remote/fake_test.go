package remote

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"

	"github.com/happy-dev/happy/adapters/trafficlog"
)

// The fake CLI: the test binary re-executed with fakeScriptEnv naming a
// traffic log (a capture of Claude Code in SDK mode). It writes the log's
// a2c side on stdout and, at each c2a record, reads one line from stdin. A
// permission answer whose behavior (or updatedInput, when the script has
// one) differs from the script's ends it with
// exit code 3 ("MISMATCH" on stderr); the id of the client's initialize
// request replaces the script's in the answer to it.
const fakeScriptEnv = "REMOTE_FAKE_CLAUDE_SCRIPT"

func runFakeClaude(script string) int {
	b, err := os.ReadFile(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read script:", err)
		return 4
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	ids := map[string]string{} // script request id → client request id
	for n, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		rec, err := trafficlog.Decode(line)
		if err != nil {
			fmt.Fprintf(os.Stderr, "script line %d: %v\n", n+1, err)
			return 4
		}
		switch rec.Dir {
		case trafficlog.A2C:
			msg := []byte(rec.Msg)
			for script, client := range ids {
				msg = bytes.Replace(msg, []byte(`"request_id":"`+script+`"`), []byte(`"request_id":"`+client+`"`), 1)
			}
			out.Write(msg)
			out.WriteByte('\n')
			if out.Flush() != nil {
				return 5
			}
		case trafficlog.C2A:
			got, err := in.ReadBytes('\n')
			if err != nil {
				fmt.Fprintf(os.Stderr, "MISMATCH script line %d: stdin ended: %v\n", n+1, err)
				return 3
			}
			var want, have struct {
				Type      string `json:"type"`
				RequestID string `json:"request_id"`
				Response  struct {
					Response struct {
						Behavior     string `json:"behavior"`
						UpdatedInput any    `json:"updatedInput"`
					} `json:"response"`
				} `json:"response"`
			}
			_ = json.Unmarshal(rec.Msg, &want)
			_ = json.Unmarshal(got, &have)
			if want.Type == "control_request" {
				ids[want.RequestID] = have.RequestID
			}
			w, h := want.Response.Response, have.Response.Response
			if want.Type == "control_response" && (w.Behavior != h.Behavior ||
				(w.UpdatedInput != nil && !reflect.DeepEqual(w.UpdatedInput, h.UpdatedInput))) {
				fmt.Fprintf(os.Stderr, "MISMATCH script line %d: got %s\n", n+1, got)
				return 3
			}
		case trafficlog.Exit:
			return 0
		}
	}
	_, _ = io.Copy(io.Discard, in)
	return 0
}
