package acp

import (
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc/jsonrpctest"
)

// BenchmarkMapTraffic measures the live mapping path (frame parse and
// decode) over every capture in testdata/captures (all the ACP agents);
// see jsonrpctest.MapTraffic for what it reports.
func BenchmarkMapTraffic(b *testing.B) {
	jsonrpctest.MapTraffic(b, filepath.Join("testdata", "captures", "*", "rpc-traffic.jsonl"),
		func() jsonrpctest.Decoder { return NewDecoder() })
}
