package pebbletest

import (
	"os"
	"strings"
	"testing"
)

// .ci/run installs the pebble this package names in its messages.
func TestCIInstallsThisVersion(t *testing.T) {
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nPEBBLE_VERSION="+Version+"\n") {
		t.Fatalf(".ci/run does not set PEBBLE_VERSION=%s", Version)
	}
}
