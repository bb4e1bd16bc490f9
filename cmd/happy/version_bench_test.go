package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkVersionExec measures what a user pays to start happy: it builds
// the full binary (stripped, as `make build` does) and runs `happy --version`
// as a child process. Reported: wall time per run (ns/op) and the peak
// resident set of the child (peak-RSS-MiB, the largest seen). Targets: under
// 20 ms and 30 MiB.
func BenchmarkVersionExec(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "happy")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	home := b.TempDir()
	var peakKiB int64
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(bin, "--version")
		cmd.Env = []string{"HAPPY_HOME_DIR=" + home}
		if err := cmd.Run(); err != nil {
			b.Fatalf("happy --version: %v", err)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > peakKiB {
			peakKiB = ru.Maxrss
		}
	}
	b.ReportMetric(float64(peakKiB)/1024, "peak-RSS-MiB")
}
