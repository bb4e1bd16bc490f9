//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/store/backend"
	"github.com/happy-dev/happy/webapp"
)

// serverOptions are the flags of `happy server`.
type serverOptions struct {
	listen      string
	dataDir     string
	synchronous string
	db          string
}

// newServerCmd builds `happy server`: the relay, in the foreground.
func newServerCmd(f *factory) *cobra.Command {
	opts := serverOptions{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the relay (HTTP + Socket.IO) in the foreground",
		Long: `Run happy's own relay in the foreground. It implements the reference relay
contract, stores only ciphertext in an embedded SQLite file under the data
folder (or, with --db postgres://…, in a PostgreSQL database that several
relays may share), and creates its token signing secret there on first start.
Schema migrations are applied at start; "happy server migrate" applies them,
or copies a relay's data between databases, without serving.

Listen on loopback by default; use --listen 0.0.0.0:3005 to reach it from a phone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServer(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.listen, "listen", "127.0.0.1:3005", "address to listen on (host:port)")
	cmd.Flags().StringVar(&opts.dataDir, "data", "", "data folder (default $HAPPY_HOME_DIR/server)")
	cmd.Flags().StringVar(&opts.synchronous, "synchronous", "NORMAL", "SQLite synchronous setting: NORMAL (survives a crash of the process) or FULL (also a power loss)")
	cmd.Flags().StringVar(&opts.db, "db", "", "database: postgres://user:password@host:port/db?sslmode=… (default: the SQLite file in the data folder)")
	cmd.AddCommand(newServerMigrateCmd(f))
	return cmd
}

func runServer(ctx context.Context, f *factory, opts serverOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// A bad flag is refused before anything is created on disk.
	opts.synchronous = strings.ToUpper(opts.synchronous)
	if opts.synchronous != "NORMAL" && opts.synchronous != "FULL" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--synchronous must be NORMAL or FULL, got %q", opts.synchronous)}
	}
	if opts.db != "" {
		if _, err := backend.Parse(opts.db); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--db: %w", err)}
		}
	}
	data := opts.dataDir
	if data == "" {
		h, err := f.home()
		if err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("server: %w", err)}
		}
		data = h.Server()
	}
	lg, lerr := f.log("server")
	if lerr != nil {
		fmt.Fprintln(f.stderr, "happy: logging disabled:", lerr)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(server.Config{DataDir: data, Database: opts.db, Logger: lg.Logger, Synchronous: opts.synchronous, App: webapp.Files()})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", opts.listen)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("server: listen on %s: %w", opts.listen, err)
	}
	where := "data " + data
	if spec, err := backend.Parse(opts.db); err == nil {
		where += ", database " + spec.String()
	}
	fmt.Fprintf(f.stdout, "happy relay listening on http://%s (%s)\n", l.Addr(), where)
	serveErr := srv.Serve(ctx, l)
	closeErr := srv.Close()
	if serveErr != nil {
		return serveErr
	}
	return closeErr
}
