// Package buildinfo holds the version of the happy binary, stamped at link time.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is the release version of happy. A release build (goreleaser,
// .goreleaser.yaml) sets it to the tag's version without its v (1.2.3), and
// `make build` to `git describe`'s output, both with
// -ldflags "-X github.com/happy-dev/happy/internal/buildinfo.Version=…".
// Without that flag it is the main module's version that Go records in the
// binary, also without its v: the tag's for `go install
// github.com/happy-dev/happy/cmd/happy@v1.2.3`, a pseudo-version for a
// build in a clone; "dev" when Go recorded none (tests, -buildvcs=false).
var Version = "dev"

func init() {
	if bi, ok := debug.ReadBuildInfo(); ok {
		Version = resolve(Version, bi.Main.Version)
	}
}

// resolve returns the version to report: stamped, unless it is the default
// "dev" and module (the main module's version in the build information) is
// a real one, which it returns without its leading v.
func resolve(stamped, module string) string {
	if stamped != "dev" || module == "" || module == "(devel)" {
		return stamped
	}
	return strings.TrimPrefix(module, "v")
}

// ProtocolName is the name happy reports to relays and agents as its client
// name (the `X-Happy-Client` header and ACP/Codex clientInfo).
const ProtocolName = "happy-go"
