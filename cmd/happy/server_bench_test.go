//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/happy-dev/happy/server/servertest"
)

// happy server bench rpc|ingest --json against an in-process relay: the
// JSON result carries real figures; the text form names them.
func TestServerBenchCommand(t *testing.T) {
	url := servertest.Start(t).URL
	pid := strconv.Itoa(os.Getpid()) // the in-process relay's process
	code, out, errb := runHappy(t, nil, "server", "bench", "rpc", "--url", url, "--pid", pid, "--calls", "20", "--json")
	if code != exitOK {
		t.Fatalf("rpc: exit %d, stderr %q", code, errb)
	}
	var r struct {
		Kind       string  `json:"kind"`
		Ops        int64   `json:"ops"`
		Errors     int64   `json:"errors"`
		Throughput float64 `json:"throughput"`
		Latency    struct {
			Samples int     `json:"samples"`
			P50     float64 `json:"p50"`
			P99     float64 `json:"p99"`
		} `json:"latency_ms"`
		Relay *struct {
			RSSKiB int64 `json:"rss_kib"`
		} `json:"relay"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("rpc --json: %v in %q", err, out)
	}
	if r.Kind != "rpc" || r.Ops != 20 || r.Errors != 0 || r.Throughput <= 0 || r.Latency.Samples != 20 || r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 || r.Relay == nil || r.Relay.RSSKiB <= 0 {
		t.Fatalf("rpc result %+v (relay %+v)", r, r.Relay)
	}
	code, out, errb = runHappy(t, nil, "server", "bench", "ingest", "--url", url, "--clients", "2", "--batch", "3", "--size", "10", "--duration", "200ms")
	if code != exitOK || !strings.HasPrefix(out, "ingest: ") || !strings.Contains(out, " msg/s, 0 errors\n") || !strings.Contains(out, "latency ms (") {
		t.Fatalf("ingest: exit %d\nstdout %q\nstderr %q", code, out, errb)
	}
	code, _, errb = runHappy(t, nil, "server", "bench", "fanout", "--url", url, "--token", "bogus", "--sockets", "1", "--messages", "1")
	if code != exitFailed || !strings.Contains(errb, "HTTP 401") {
		t.Fatalf("bad token: exit %d, stderr %q", code, errb)
	}
}

// A flag out of its range is refused before anything is sent (exit 2,
// the range in the message), as an unknown subcommand is.
func TestServerBenchRefusesOutOfRange(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ingest", "--batch", "101"}, "happy: --batch is 101, want 1 to 100\n"},
		{[]string{"ingest", "--clients", "-5"}, "happy: --clients is -5, want 1 to 10000\n"},
		{[]string{"ingest", "--size", "9000000000000"}, "happy: --size is 9000000000000, want 1 to 1048576\n"},
		{[]string{"ingest", "--duration", "0s"}, "happy: --duration is 0s, want 1ms to 24h0m0s\n"},
		{[]string{"fanout", "--messages", "9000000000000000000"}, "happy: --messages is 9000000000000000000, want 1 to 1000000\n"},
		{[]string{"fanout", "--gap", "-1s"}, "happy: --gap is -1s, want 0s to 24h0m0s\n"},
		{[]string{"sockets", "--hold", "0s"}, "happy: --hold is 0s, want 1ms to 24h0m0s\n"},
		{[]string{"sockets", "--sockets", "0"}, "happy: --sockets is 0, want 1 to 100000\n"},
		{[]string{"rpc", "--concurrency", "100"}, "happy: --concurrency is 100, want 1 to 64\n"},
		{[]string{"rpc", "--pid", "-5"}, "happy: --pid is -5, want a process id\n"},
		{[]string{"ingest", "--batch", "100", "--size", "1048576"}, "happy: --batch 100 × --size 1048576 make posts of about 104867200 bytes; the relay takes at most 8388608\n"},
		{[]string{"rpc", "--url", "127.0.0.1:3005"}, "happy: --url \"127.0.0.1:3005\": parse \"127.0.0.1:3005\": first path segment in URL cannot contain colon\n"},
		{[]string{"rpc", "--url", "http://127.0.0.1:3005?x=1"}, "happy: --url \"http://127.0.0.1:3005?x=1\": want http://host:port or https://host[:port], without query or fragment\n"},
		{[]string{"rpc", "--url", ""}, "happy: --url \"\": want http://host:port or https://host[:port], without query or fragment\n"},
		{[]string{"rpc", "--url", "ftp://h/"}, "happy: --url \"ftp://h/\": want http://host:port or https://host[:port], without query or fragment\n"},
	} {
		args := append([]string{"server", "bench"}, c.args...)
		if !slices.Contains(c.args, "--url") {
			args = append(args, "--url", "http://127.0.0.1:1")
		}
		code, out, errb := runHappy(t, nil, args...)
		if code != exitUsage || errb != c.want || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errb, exitUsage, c.want)
		}
	}
	if code, _, errb := runHappy(t, nil, "server", "bench", "nonsense"); code == exitOK || !strings.Contains(errb, `unknown command "nonsense"`) {
		t.Errorf("bench nonsense: exit %d, stderr %q; want a failure naming it", code, errb)
	}
}

// A run whose every post fails (a server that answers 200 but is not a
// relay) prints what it measured, stops early and exits 1 with the first
// error.
func TestServerBenchFailsOnErrors(t *testing.T) {
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			_, _ = w.Write([]byte(`{"session":{"id":"s1"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer stub.Close()
	code, out, errb := runHappy(t, nil, "server", "bench", "ingest", "--url", stub.URL, "--token", "t", "--clients", "1", "--duration", "1m")
	if code != exitFailed || !strings.HasPrefix(out, "ingest: 0 ops in ") || !strings.Contains(out, "stopped early: 50 failures in a row") ||
		errb != "happy: bench: stopped early: 50 failures in a row; first error: not a relay's answer (want 50 stored messages): {\"ok\":true}\n" {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errb)
	}
}
