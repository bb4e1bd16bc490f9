package embedded

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/server"
)

// envServe makes the test binary act as `happy server --listen A --data D`
// when Ensure starts it, so the tests start a real relay without building
// the whole happy binary first.
const envServe = "HAPPY_EMBEDDED_TEST_SERVE"

// TestMain fails the run when a goroutine started by a test outlives it;
// started as the relay (envServe), it serves until SIGTERM instead.
func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" && len(os.Args) > 1 && os.Args[1] == "server" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "test relay:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// serve is `happy server --listen A --data D` with the relay's defaults.
func serve(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:3005", "")
	data := fs.String("data", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(server.Config{DataDir: *data})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = srv.Close()
		return err
	}
	serveErr := srv.Serve(ctx, l)
	if err := srv.Close(); serveErr == nil {
		serveErr = err
	}
	return serveErr
}
