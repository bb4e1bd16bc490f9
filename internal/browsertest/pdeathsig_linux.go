package browsertest

import "syscall"

// dieWithParent makes the browser get SIGKILL when the test process dies.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
