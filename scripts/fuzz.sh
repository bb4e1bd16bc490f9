#!/usr/bin/env bash
# Runs every fuzz target of the module for $FUZZTIME (default 10s) each.
# Go fuzzes one target per `go test` invocation, so targets are listed first.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
cd "$(dirname "$0")/.."
status=0
for pkg in $($GO list ./...); do
  targets=$($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "== $pkg $t ($FUZZTIME)"
    if ! $GO test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "$pkg"; then
      status=1
    fi
  done
done
exit $status
