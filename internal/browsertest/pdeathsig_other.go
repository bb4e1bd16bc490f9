//go:build unix && !linux

package browsertest

import "syscall"

// dieWithParent does nothing where there is no parent-death signal: the
// test's cleanup kills the browser's group.
func dieWithParent(*syscall.SysProcAttr) {}
