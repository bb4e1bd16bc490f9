package sdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"syscall"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"golang.org/x/sys/unix"
)

// The fake CLI: the test binary re-executed with fakeScriptEnv naming a
// traffic log. It replays the log's a2c side on stdout and stderr, and
// checks every c2a line it reads on stdin against the log: message by
// message, compared as JSON values, with the client's own control request
// ids mapped onto the script's. A mismatch is reported on stderr
// ("MISMATCH …") and ends the fake with exit code 3. Its argv is written to
// the file named by fakeArgvEnv.
const (
	fakeScriptEnv = "SDK_FAKE_CLAUDE_SCRIPT"
	fakeArgvEnv   = "SDK_FAKE_CLAUDE_ARGV"
)

func runFakeClaude(script string) int {
	if p := os.Getenv(fakeArgvEnv); p != "" {
		b, _ := json.Marshal(os.Args[1:])
		if err := os.WriteFile(p, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "write argv:", err)
			return 4
		}
	}
	f, err := os.Open(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open script:", err)
		return 4
	}
	defer f.Close()
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	ids := map[string]string{} // script id → client id
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	n := 0
	for sc.Scan() {
		n++
		rec, err := trafficlog.Decode(sc.Bytes())
		if err != nil {
			fmt.Fprintf(os.Stderr, "script line %d: %v\n", n, err)
			return 4
		}
		switch rec.Dir {
		case trafficlog.A2C:
			msg := substituteIDs(rec.Msg, ids)
			out.Write(msg)
			out.WriteByte('\n')
			if err := out.Flush(); err != nil {
				return 5
			}
		case trafficlog.Stderr:
			s, _ := trafficlog.Text(rec.Msg)
			fmt.Fprintln(os.Stderr, s)
		case trafficlog.C2A:
			line, err := in.ReadBytes('\n')
			if err != nil {
				fmt.Fprintf(os.Stderr, "MISMATCH script line %d: stdin ended (%v) before %s\n", n, err, rec.Msg)
				return 3
			}
			if why := matchC2A(rec.Msg, line, ids); why != "" {
				fmt.Fprintf(os.Stderr, "MISMATCH script line %d: %s\n got  %s want %s\n", n, why, strings.TrimSpace(string(line)), rec.Msg)
				return 3
			}
		case trafficlog.Exit:
			st, err := trafficlog.DecodeExit(rec.Msg)
			if err != nil {
				return 4
			}
			if st.Sig != nil {
				sig := unix.SignalNum(*st.Sig)
				if sig == 0 {
					return 4
				}
				_ = syscall.Kill(os.Getpid(), sig)
				select {}
			}
			if st.Code != nil {
				return *st.Code
			}
			return 0
		}
	}
	// No exit record: run until stdin closes, like the real CLI.
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// matchC2A compares a line the client wrote with the script's message.
func matchC2A(want json.RawMessage, got []byte, ids map[string]string) string {
	var w, g map[string]any
	if err := json.Unmarshal(want, &w); err != nil {
		return "script message is not an object"
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return "client line is not a JSON object: " + err.Error()
	}
	if w["type"] == "control_request" {
		wid, _ := w["request_id"].(string)
		gid, _ := g["request_id"].(string)
		if gid == "" {
			return "control request without request_id"
		}
		ids[wid] = gid
		delete(w, "request_id")
		delete(g, "request_id")
	}
	if !reflect.DeepEqual(w, g) {
		return "message differs"
	}
	return ""
}

// substituteIDs rewrites the request_id of a control_response to one of our
// requests with the id the client chose, leaving the other bytes as they
// are.
func substituteIDs(msg json.RawMessage, ids map[string]string) []byte {
	var m struct {
		Type     string `json:"type"`
		Response struct {
			RequestID string `json:"request_id"`
		} `json:"response"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Type != "control_response" {
		return msg
	}
	actual, ok := ids[m.Response.RequestID]
	if !ok {
		return msg
	}
	old, _ := json.Marshal(m.Response.RequestID)
	repl, _ := json.Marshal(actual)
	return bytes.Replace(msg, old, repl, 1)
}
