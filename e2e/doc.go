// Package e2e holds end-to-end tests that run the built happy binary, and in
// later suites the real agent CLIs, against an in-process relay and a fake
// model. They are behind the "e2e" build tag: run them with `make e2e`.
package e2e
