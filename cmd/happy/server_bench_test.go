//go:build unix

package main

import (
	"encoding/json"
	"os"
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
