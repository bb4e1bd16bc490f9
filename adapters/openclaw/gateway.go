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
	"syscall"
	"time"

	"github.com/happy-dev/happy/internal/proc"
)

// GatewayOptions configure StartGateway.
type GatewayOptions struct {
	// Command is the openclaw executable and any arguments before
	// "gateway" (e.g. a node runtime and the CLI script).
	Command []string
	// Token is the shared token the gateway requires; "" runs it with
	// --auth none. It goes to the gateway in its environment
	// (OPENCLAW_GATEWAY_TOKEN, which `openclaw gateway` reads when no
	// --token is given), not on its command line, where any local user
	// could read it. A gateway.auth.token of the user's openclaw config
	// takes precedence over it (the gateway's config-first rule).
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
// --allow-unconfigured --auth token` (token in OPENCLAW_GATEWAY_TOKEN) on a
// free loopback port P in its own process group, and returns once the port
// accepts connections. Errors: proc.ErrNotStarted (wrapped), the gateway
// exiting before it listens ("the gateway exited (status N) before
// listening"), or the Ready deadline.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("openclaw: no gateway command")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), o.Command[1:]...), "gateway", "--port", strconv.Itoa(port), "--bind", "loopback", "--allow-unconfigured")
	env := append(os.Environ(), o.Env...)
	if o.Token != "" {
		args = append(args, "--auth", "token")
		env = append(env, "OPENCLAW_GATEWAY_TOKEN="+o.Token) // the last value of a name wins
	} else {
		args = append(args, "--auth", "none")
	}
	cmd := exec.Command(o.Command[0], args...)
	cmd.Dir = o.Dir
	cmd.Env = env
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
			st, _ := p.Wait()
			_ = g.Stop()
			status := "unknown status"
			if st != nil {
				status = "status " + strconv.Itoa(st.ExitCode())
				if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					status = "signal " + ws.Signal().String()
				}
			}
			return nil, fmt.Errorf("openclaw: the gateway exited (%s) before listening on %s", status, addr)
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
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("openclaw: find a free port: the listener's address %q is not TCP", l.Addr())
	}
	return addr.Port, nil
}
