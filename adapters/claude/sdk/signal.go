package sdk

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName names a signal as the traffic log records it ("SIGKILL").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
