package openclaw

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordRedacts: the recorder writes no capability URL secret and no
// token, password or key; everything else stays byte for byte.
func TestRecordRedacts(t *testing.T) {
	for _, tc := range []struct{ name, msg, want string }{
		{"hello-ok capability url and device token",
			`{"type":"res","id":"happy-1","ok":true,"payload":{"type":"hello-ok","pluginSurfaceUrls":{"canvas":"http://127.0.0.1:41635/__openclaw__/cap/Zs3cr_t-9?x=1"},"auth":{"deviceToken":"dt-1","role":"operator"},"policy":{"tickIntervalMs":15000}}}`,
			`{"type":"res","id":"happy-1","ok":true,"payload":{"type":"hello-ok","pluginSurfaceUrls":{"canvas":"http://127.0.0.1:41635/__openclaw__/cap/[redacted]?x=1"},"auth":{"deviceToken":"[redacted]","role":"operator"},"policy":{"tickIntervalMs":15000}}}`},
		{"keys naming secrets, escapes inside", `{"token":"a\"b","clientSecret":"s","password":"p","apiKey":"k","api_key":"k2"}`,
			`{"token":"[redacted]","clientSecret":"[redacted]","password":"[redacted]","apiKey":"[redacted]","api_key":"[redacted]"}`},
		{"counts and ids stay", `{"inputTokens":12,"maxTokens":4096,"sessionKey":"agent:main:x","idempotencyKey":"k1","tokens":"3"}`,
			`{"inputTokens":12,"maxTokens":4096,"sessionKey":"agent:main:x","idempotencyKey":"k1","tokens":"3"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			newRecorder(&b).write(Record{T: 5, Dir: A2C, Msg: []byte(tc.msg)})
			if got, want := strings.TrimSpace(b.String()), `{"t":5,"dir":"a2c","msg":`+tc.want+`}`; got != want {
				t.Errorf("recorded\n%s\nwant\n%s", got, want)
			}
		})
	}
	// A capture of the real gateway (stored redacted; the secret the
	// gateway sent is put back here): its hello-ok canvas URL loses it.
	raw, err := os.ReadFile(filepath.Join("testdata", "traffic", "real-approval-once.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if !bytes.Contains(line, []byte("hello-ok")) {
			continue
		}
		line = bytes.ReplaceAll(line, []byte("/__openclaw__/cap/[redacted]"), []byte("/__openclaw__/cap/RM_RaQgybcPItVTSyA46AQVi"))
		if !bytes.Contains(line, []byte("RM_RaQgybcPItVTSyA46AQVi")) {
			t.Fatal("the capture's hello-ok has no canvas URL")
		}
		got := redact(line)
		if bytes.Contains(got, []byte("RM_RaQgybcPItVTSyA46AQVi")) || !bytes.Contains(got, []byte(`"canvas":"http://127.0.0.1:39799/__openclaw__/cap/[redacted]"`)) {
			t.Errorf("hello-ok after redaction still has the capability secret")
		}
		return
	}
	t.Fatal("no hello-ok in the capture")
}
