package codex

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// MinAppServerVersion is the first Codex whose app-server speaks the v2
// thread/turn protocol with item notifications.
const MinAppServerVersion = "0.60.0"

// ErrVersion: `codex --version` failed or printed no version.
var ErrVersion = errors.New("codex: cannot tell the installed version")

// ChooseProtocol runs `binary --version` (at most 10 s) and picks
// app-server for Codex 0.60.0 and later (v2 threads and turns), mcp below.
// It returns the version it read ("0.171.0"). Errors: ErrVersion.
func ChooseProtocol(ctx context.Context, binary string) (Protocol, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s --version: %w", ErrVersion, binary, err)
	}
	return protocolForVersion(string(out))
}

// protocolForVersion picks the protocol from `codex --version` output
// ("codex-cli 0.171.0").
func protocolForVersion(out string) (Protocol, string, error) {
	ver, v, ok := findVersion(out)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrVersion, firstLine(out, 80))
	}
	_, min, _ := findVersion(MinAppServerVersion)
	for i := range v {
		if v[i] != min[i] {
			if v[i] > min[i] {
				return ProtocolAppServer, ver, nil
			}
			return ProtocolMCP, ver, nil
		}
	}
	return ProtocolAppServer, ver, nil
}

// findVersion finds the first "X.Y.Z" (decimal numbers) in s.
func findVersion(s string) (string, [3]int, bool) {
	for start := 0; start < len(s); start++ {
		if s[start] < '0' || s[start] > '9' || (start > 0 && s[start-1] >= '0' && s[start-1] <= '9') {
			continue
		}
		var v [3]int
		i, ok := start, true
		for part := 0; part < 3 && ok; part++ {
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i || j-i > 9 {
				ok = false
				break
			}
			v[part], _ = strconv.Atoi(s[i:j])
			i = j
			if part < 2 {
				if i >= len(s) || s[i] != '.' {
					ok = false
					break
				}
				i++
			}
		}
		if ok {
			return s[start:i], v, true
		}
	}
	return "", [3]int{}, false
}
