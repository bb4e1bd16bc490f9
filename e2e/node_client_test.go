//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nodeClientScript drives `happy server` with the reference Socket.IO
// client (socket.io-client 4.8, the one the reference apps and CLI use):
// a refused handshake, compare-and-set with its ack, an RPC between two
// sockets, and new-message updates on a session-scoped and a user-scoped
// socket. It prints one JSON line per observation and "READY" when the Go
// side may post messages.
const nodeClientScript = `
const { io } = require("socket.io-client");
const [url, token, sid, want] = process.argv.slice(2);
const out = (o) => console.log(JSON.stringify(o));
const opts = (auth) => ({ path: "/v1/updates", transports: ["websocket"], auth, reconnection: false, timeout: 5000 });
const fail = (e) => { out({ error: String(e && e.message || e) }); process.exit(1); };
setTimeout(() => fail("timeout"), 20000);

const bad = io(url, opts({ token: "not-a-token", clientType: "user-scoped" }));
bad.on("connect_error", (e) => { out({ refused: e.message }); bad.close(); next(); });

function next() {
  const sess = io(url, opts({ token, clientType: "session-scoped", sessionId: sid }));
  const user = io(url, opts({ token, clientType: "user-scoped" }));
  const seen = { session: [], user: [] };
  let done = 0;
  const onUpdate = (who) => (u) => {
    if (!u || !u.body || u.body.t !== "new-message") return;
    seen[who].push(u.body.message.seq);
    if (seen[who].length === Number(want)) { out({ who, seqs: seen[who], content: u.body.message.content }); if (++done === 2) finish(); }
  };
  sess.on("update", onUpdate("session"));
  user.on("update", onUpdate("user"));
  sess.on("rpc-request", (req, ack) => ack({ echoed: req.params }));
  let ready = 0;
  const both = () => { if (++ready === 2) go(); };
  sess.on("connect", both);
  user.on("connect", both);
  sess.on("connect_error", fail);
  user.on("connect_error", fail);
  async function go() {
    const cas = await sess.timeout(5000).emitWithAck("update-metadata", { sid, metadata: "m2", expectedVersion: 0 });
    out({ cas });
    const stale = await sess.timeout(5000).emitWithAck("update-metadata", { sid, metadata: "m3", expectedVersion: 0 });
    out({ stale });
    sess.once("rpc-registered", async () => {
      const rpc = await user.timeout(5000).emitWithAck("rpc-call", { method: sid + ":echo", params: "p1" });
      out({ rpc });
      console.log("READY");
    });
    sess.emit("rpc-register", { method: sid + ":echo" });
  }
  function finish() { sess.close(); user.close(); process.exit(0); }
}
`

// The reference Node Socket.IO client works against `happy server`
// unchanged: refused handshake text, acked compare-and-set, RPC forwarding
// and new-message fan-out in seq order.
func TestE2ENodeSocketIOClient(t *testing.T) {
	modules := os.Getenv("HAPPY_E2E_SIO_CLIENT")
	if modules == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HAPPY_E2E_SIO_CLIENT is not set: run make e2e (it installs socket.io-client)")
		}
		t.Skip("HAPPY_E2E_SIO_CLIENT not set (make e2e installs socket.io-client)")
	}
	r := startRelay(t)
	creds := newAccount(t, r.URL)
	post := func(path string, body any, out any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", r.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+creds.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sess struct{ Session struct{ ID string } }
	post("/v1/sessions", map[string]any{"tag": "node", "metadata": "m1"}, &sess)
	sid := sess.Session.ID

	const n = 120
	script := filepath.Join(t.TempDir(), "client.js")
	if err := os.WriteFile(script, []byte(nodeClientScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, r.URL, creds.Token, sid, fmt.Sprint(n))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })

	var lines []map[string]any
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() == "READY" {
			// Three batches, so the updates cross several POSTs.
			for b := 0; b < 3; b++ {
				msgs := make([]map[string]string, n/3)
				for i := range msgs {
					msgs[i] = map[string]string{"localId": fmt.Sprint("l", b, "-", i), "content": "c" + strings.Repeat("x", 2000)}
				}
				post("/v3/sessions/"+sid+"/messages", map[string]any{"messages": msgs}, nil)
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("node printed %q", sc.Text())
		}
		lines = append(lines, m)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node client: %v\n%s\nseen: %v", err, stderr.String(), lines)
	}
	want := []string{
		`{"refused":"Invalid authentication token"}`,
		`{"cas":{"metadata":"m2","result":"success","version":1}}`,
		`{"stale":{"metadata":"m2","result":"version-mismatch","version":1}}`,
		`{"rpc":{"ok":true,"result":{"echoed":"p1"}}}`,
	}
	seqs := make([]any, n)
	for i := range seqs {
		seqs[i] = float64(i + 1)
	}
	content := map[string]any{"c": "c" + strings.Repeat("x", 2000), "t": "encrypted"}
	if len(lines) != len(want)+2 {
		t.Fatalf("node client saw %d lines, want %d: %v", len(lines), len(want)+2, lines)
	}
	for i, w := range want {
		got, _ := json.Marshal(lines[i])
		if string(got) != w {
			t.Errorf("line %d: %s, want %s", i, got, w)
		}
	}
	for _, l := range lines[len(want):] {
		got, _ := json.Marshal(l["seqs"])
		exp, _ := json.Marshal(seqs)
		if string(got) != string(exp) {
			t.Errorf("%v socket: seqs %s", l["who"], got)
		}
		gc, _ := json.Marshal(l["content"])
		ec, _ := json.Marshal(content)
		if string(gc) != string(ec) {
			t.Errorf("%v socket: content %.80s", l["who"], gc)
		}
	}
}
