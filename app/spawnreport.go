package app

import (
	"encoding/json"
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
