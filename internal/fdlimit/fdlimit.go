// Package fdlimit raises and reads this process's open-file limit
// (RLIMIT_NOFILE) and counts its open file descriptors, for servers that
// must refuse connections before the limit is reached.
package fdlimit

// Raise sets the soft RLIMIT_NOFILE to the hard limit and returns the
// limits now in force (soft, hard). On Linux it is one getrlimit and,
// when the soft limit is lower, one setrlimit; on other systems it
// changes nothing and returns (0, 0, nil): an unknown limit.
func Raise() (soft, hard uint64, err error) { return raise() }

// Soft returns the soft RLIMIT_NOFILE (0 when unknown: not Linux, or the
// call failed).
func Soft() uint64 { return soft() }

// Open counts this process's open file descriptors (the entries of
// /proc/self/fd on Linux); ok is false where that cannot be known.
func Open() (n int, ok bool) { return open() }
