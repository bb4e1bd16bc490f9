package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/app"
)

// TestStopAnswer: happy stop takes the reference CLI's unsealed answers
// (killSession's {success:true, message}, its daemon's stop-session
// {message}) as a stop, and happy's own bound {success, message}; a
// refusal (success false, the callee's {error}, an unbound answer of
// another shape) stays an error.
func TestStopAnswer(t *testing.T) {
	unbound := func(plain string) error {
		return &app.UnboundAnswerError{Method: "killSession", Plain: []byte(plain), Err: errors.New("not a control answer")}
	}
	const note = " (an answer of the reference CLI, not bound to this request)"
	for _, tc := range []struct {
		name    string
		res     string
		err     error
		want    string
		wantErr string
	}{
		{"reference killSession", "", unbound(`{"success":true,"message":"Killing happy-cli process"}`), "Killing happy-cli process" + note, ""},
		{"reference stop-session", "", unbound(`{"message":"Session stopped"}`), "Session stopped" + note, ""},
		{"happy bound", `{"success":true,"message":"ending the session"}`, nil, "ending the session", ""},
		{"happy refusal", `{"success":false,"message":"no such session"}`, nil, "", "no such session"},
		{"happy refusal without reason", `{"success":false}`, nil, "", "refused without a reason"},
		{"unbound refusal", "", unbound(`{"success":false,"message":"busy"}`), "", "control call failed: killSession: the answer is not bound to this call"},
		{"unbound other shape", "", unbound(`{"ok":true}`), "", "the answer is not bound to this call"},
		{"unbound empty message", "", unbound(`{"success":true,"message":""}`), "", "the answer is not bound to this call"},
		{"unbound with extra field", "", unbound(`{"success":true,"message":"x","error":"y"}`), "", "the answer is not bound to this call"},
		{"callee error", "", fmt.Errorf("%w: killSession: Session not found or failed to stop", app.ErrRPC), "", "control call failed: killSession: Session not found or failed to stop"},
		{"not a stop answer", `[1]`, nil, "", "not a stop answer: [1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StopAnswer(json.RawMessage(tc.res), tc.err)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("= %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || got != "" || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("= %q, %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
}
