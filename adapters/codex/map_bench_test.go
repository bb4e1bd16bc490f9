package codex

import (
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc/jsonrpctest"
)

// BenchmarkMapTraffic measures the live mapping path (frame parse and
// decode) over every app-server capture (testdata/captures/codex-app*);
// see jsonrpctest.MapTraffic for what it reports.
func BenchmarkMapTraffic(b *testing.B) {
	jsonrpctest.MapTraffic(b, filepath.Join("testdata", "captures", "codex-app*", "rpc-traffic.jsonl"),
		func() jsonrpctest.Decoder { return NewDecoder(ProtocolAppServer) })
}
