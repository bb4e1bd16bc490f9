//go:build linux

package fdlimit

import (
	"fmt"
	"os"
	"syscall"
)

func raise() (uint64, uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, fmt.Errorf("fdlimit: getrlimit: %w", err)
	}
	if l.Cur < l.Max {
		want := l
		want.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return l.Cur, l.Max, fmt.Errorf("fdlimit: setrlimit %d: %w", want.Cur, err)
		}
		l = want
	}
	return l.Cur, l.Max, nil
}

func soft() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}

func open() (int, bool) {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, false
	}
	// The descriptor reading the folder is one of them.
	return len(names) - 1, true
}
