//go:build unix

package openclaw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/happy-dev/happy/internal/proc"
)

// GatewayOptions configure StartGateway.
type GatewayOptions struct {
	// Command is the openclaw executable and any arguments before
	// "gateway" (e.g. a node runtime and the CLI script).
	Command []string
	// Token is the shared token the gateway requires (--token); "" runs it
	// with --auth none.
	Token string
	// Dir is the gateway's working folder; Env is added to its
	// environment.
	Dir string
	Env []string
	// Log receives the gateway's stdout and stderr (nil: discarded).
	Log *os.File
	// Ready bounds the wait for the gateway to accept connections
	// (default three minutes: it loads its plugins first, and a busy machine slows that down).
	Ready time.Duration
}

// Gateway is an `openclaw gateway` started by happy, leading its own
// process group.
type Gateway struct {
	// URL is its WebSocket address, ws://127.0.0.1:<port>.
	URL string
	p   *proc.Process
}

// StartGateway runs `<Command> gateway --port P --bind loopback
// --allow-unconfigured --auth token --token T` on a free loopback port P
// in its own process group, and returns once the port accepts
// connections. Errors: proc.ErrNotStarted (wrapped), the gateway exiting
// before it listens, or the Ready deadline.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("openclaw: no gateway command")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), o.Command[1:]...), "gateway", "--port", strconv.Itoa(port), "--bind", "loopback", "--allow-unconfigured")
	if o.Token != "" {
		args = append(args, "--auth", "token", "--token", o.Token)
	} else {
		args = append(args, "--auth", "none")
	}
	cmd := exec.Command(o.Command[0], args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), o.Env...)
	if o.Log != nil {
		cmd.Stdout, cmd.Stderr = o.Log, o.Log
	}
	p, err := proc.Start(context.WithoutCancel(ctx), cmd, proc.Options{Grace: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("openclaw: start the gateway: %w", err)
	}
	g := &Gateway{URL: "ws://127.0.0.1:" + strconv.Itoa(port), p: p}
	ready := o.Ready
	if ready <= 0 {
		ready = 3 * time.Minute
	}
	deadline := time.Now().Add(ready)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return g, nil
		}
		select {
		case <-p.Done():
			_ = g.Stop()
			return nil, fmt.Errorf("openclaw: the gateway exited before listening on %s", addr)
		case <-ctx.Done():
			_ = g.Stop()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			_ = g.Stop()
			return nil, fmt.Errorf("openclaw: the gateway did not listen on %s within %s", addr, ready)
		}
	}
}

// Stop ends the gateway's whole process group (SIGTERM, then SIGKILL after
// the grace period) and reaps it.
func (g *Gateway) Stop() error {
	if g == nil || g.p == nil {
		return nil
	}
	return g.p.Stop()
}

// freePort returns a loopback TCP port nobody listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("openclaw: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
