// Package e2e holds end-to-end tests that run the built happy binary with the
// real, pinned agent CLIs against a relay and the fake model
// (internal/fakemodel), inside a loopback-only network namespace. The
// real-agent matrix (TestE2EMatrix, matrix_test.go) runs every agent through
// the same scenarios and prints a table of the outcome. They are behind the
// "e2e" build tag: run them with `make e2e` (E2E_UPDATE=1 rewrites the golden
// files).
package e2e
