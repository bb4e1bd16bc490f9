// Package buildinfo holds the version of the happy binary, stamped at link time.
package buildinfo

// Version is the release version of happy. The Makefile sets it with
// -ldflags "-X github.com/happy-dev/happy/internal/buildinfo.Version=…";
// a plain `go build` reports "dev".
var Version = "dev"

// ProtocolName is the name happy reports to relays and agents as its client
// name (the `X-Happy-Client` header and ACP/Codex clientInfo).
const ProtocolName = "happy-go"
