//go:build windows

// Command happy wraps a coding agent and pushes its transcript to a relay;
// on Windows it only says that it does not run there yet.
package main

import (
	"fmt"
	"os"
)

// main refuses: happy's process groups, parent-death signal, subreaper and
// pseudo-terminal proxy are POSIX (docs/ARCHITECTURE.md, section "Platforms").
func main() {
	fmt.Fprintln(os.Stderr, "happy: Windows is not supported yet; run happy inside WSL (Windows Subsystem for Linux), where the Linux build works")
	os.Exit(1)
}
