package app

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// SpawnReportEnv names the environment variable through which the daemon
// hands a session it starts the number of an inherited file descriptor (the
// write end of a pipe). Once the relay session exists, the session writes
// one JSON line, SpawnReport, to it and closes it (docs/ARCHITECTURE.md,
// section "The daemon").
const SpawnReportEnv = "HAPPY_DAEMON_REPORT_FD"

// SpawnReport is the line a session started by the daemon writes to the
// descriptor of SpawnReportEnv: its relay session id, its process id, and
// the address of its local event API ("127.0.0.1:PORT", when it serves
// one: the daemon passes --events-listen and follows it).
type SpawnReport struct {
	SessionID string `json:"sessionId"`
	PID       int    `json:"pid"`
	Events    string `json:"events,omitempty"`
}

var spawnReport struct {
	mu     sync.Mutex
	f      *os.File
	events string // the local event API's address (StartEvents)
}

// reportEvents records the local event API's address for the spawn report.
func reportEvents(addr string) {
	spawnReport.mu.Lock()
	spawnReport.events = addr
	spawnReport.mu.Unlock()
}

// TakeSpawnReport takes the descriptor SpawnReportEnv names, if any: it is
// marked close-on-exec (the agent and its tools never inherit it) and the
// variable is removed from the environment. Call it once at process start.
// A value that is not a descriptor number above 2 is ignored.
func TakeSpawnReport() {
	v, ok := os.LookupEnv(SpawnReportEnv)
	if !ok {
		return
	}
	_ = os.Unsetenv(SpawnReportEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd <= 2 {
		return
	}
	syscall.CloseOnExec(fd)
	spawnReport.mu.Lock()
	spawnReport.f = os.NewFile(uintptr(fd), "spawn-report")
	spawnReport.mu.Unlock()
}

// reportSpawned writes the session id to the daemon's descriptor, once.
func reportSpawned(id string) {
	spawnReport.mu.Lock()
	f, events := spawnReport.f, spawnReport.events
	spawnReport.f = nil
	spawnReport.mu.Unlock()
	if f == nil {
		return
	}
	b, _ := json.Marshal(SpawnReport{SessionID: id, PID: os.Getpid(), Events: events})
	_, _ = f.Write(append(b, '\n'))
	_ = f.Close()
}

// MaxInitialPrompt bounds the first prompt a session started by the daemon
// reads from its descriptor (ReadInitialPrompt), in bytes.
const MaxInitialPrompt = 64 << 10

// ReadInitialPrompt reads the first prompt of a session the daemon started
// from the inherited file descriptor fd (the read end of a pipe the daemon
// writes the prompt to and closes; `--initial-prompt-fd`), up to its end,
// and closes it. The prompt never travels on the command line, which every
// local user can read (docs/ARCHITECTURE.md, "The daemon"). Errors: fd is
// not a descriptor above 2, reading it fails, or the prompt is over
// MaxInitialPrompt bytes.
func ReadInitialPrompt(fd int) (string, error) {
	if fd <= 2 {
		return "", fmt.Errorf("initial prompt: descriptor %d is not an inherited pipe (want 3 or more)", fd)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "initial-prompt")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxInitialPrompt+1))
	if err != nil {
		return "", fmt.Errorf("initial prompt: read descriptor %d: %w", fd, err)
	}
	if len(b) > MaxInitialPrompt {
		return "", fmt.Errorf("initial prompt: over %d bytes", MaxInitialPrompt)
	}
	return string(b), nil
}
