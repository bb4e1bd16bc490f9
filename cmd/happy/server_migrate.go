//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/backend"
)

// migrateOptions are the flags of `happy server migrate`.
type migrateOptions struct {
	db      string
	dataDir string
	from    string
	to      string
	replace bool
}

// newServerMigrateCmd builds `happy server migrate`: bring a relay database's
// schema up to date, or copy a relay's whole data into another database.
func newServerMigrateCmd(f *factory) *cobra.Command {
	opts := migrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate [--db URL | --data DIR] | --from DB --to DB [--replace]",
		Short: "Apply the relay's schema migrations, or copy its data to another database",
		Long: `Without --from, apply the pending schema migrations of the relay database
(--db, default the SQLite file of the data folder) and list them; the relay
also applies them at start.

With --from and --to, copy everything a relay stores (accounts, sessions,
messages with their seqs, machines, pairing requests, push tokens, usage
reports, attachments) from one database into another, then verify that every
table holds the same rows in both (counts and contents). DB is
postgres://… or sqlite:PATH (a happy.db file, or a data folder). The target
must be empty unless --replace, which removes its content first. Stop the
relays using the source first: rows written meanwhile are not copied.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServerMigrate(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.db, "db", "", "database to migrate: postgres://… or sqlite:PATH (default: the SQLite file in the data folder)")
	cmd.Flags().StringVar(&opts.dataDir, "data", "", "data folder whose SQLite file to migrate (default $HAPPY_HOME_DIR/server)")
	cmd.Flags().StringVar(&opts.from, "from", "", "copy from this database (postgres://… or sqlite:PATH)")
	cmd.Flags().StringVar(&opts.to, "to", "", "copy into this database (postgres://… or sqlite:PATH)")
	cmd.Flags().BoolVar(&opts.replace, "replace", false, "with --to: remove the target's content before copying")
	return cmd
}

func runServerMigrate(ctx context.Context, f *factory, opts migrateOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	usage := func(format string, a ...any) error {
		return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
	}
	copying := opts.from != "" || opts.to != ""
	switch {
	case copying && (opts.from == "" || opts.to == ""):
		return usage("--from and --to go together")
	case copying && (opts.db != "" || opts.dataDir != ""):
		return usage("--db and --data name the database to migrate; with --from and --to, name both databases there")
	case !copying && opts.replace:
		return usage("--replace needs --from and --to")
	case opts.db != "" && opts.dataDir != "":
		return usage("--db and --data are two ways to name the database: give one")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if copying {
		src, err := backend.Parse(opts.from)
		if err != nil {
			return usage("--from: %w", err)
		}
		dst, err := backend.Parse(opts.to)
		if err != nil {
			return usage("--to: %w", err)
		}
		if src == dst {
			return usage("--from and --to name the same database")
		}
		return copyStore(ctx, f, src, dst, opts.replace)
	}
	name := opts.db
	if name == "" {
		data := opts.dataDir
		if data == "" {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("server migrate: %w", err)}
			}
			data = h.Server()
		}
		name = "sqlite:" + filepath.Join(data, backend.DefaultFile)
	}
	spec, err := backend.Parse(name)
	if err != nil {
		return usage("--db: %w", err)
	}
	release, err := lockSQLite(spec)
	if err != nil {
		return err
	}
	defer release()
	st, err := backend.Open(ctx, spec, backend.Options{})
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("server migrate: %w", err)}
	}
	defer st.Close()
	now := st.MigratedAtOpen()
	for _, m := range now {
		fmt.Fprintf(f.stdout, "%s: applied %s\n", spec, m)
	}
	all, err := st.AppliedMigrations(ctx)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("server migrate: %w", err)}
	}
	if len(now) == 0 {
		fmt.Fprintf(f.stdout, "%s: schema up to date (%d migrations)\n", spec, len(all))
	}
	return nil
}

// copyStore copies src into dst with store.Copy and prints the verified
// row counts.
func copyStore(ctx context.Context, f *factory, src, dst backend.Spec, replace bool) error {
	fail := func(err error) error {
		return &exitError{code: exitFailed, err: fmt.Errorf("server migrate: %w", err)}
	}
	for _, spec := range []backend.Spec{src, dst} {
		release, err := lockSQLite(spec)
		if err != nil {
			return err
		}
		defer release()
	}
	if src.Kind == backend.SQLite {
		// Opening would create an empty source; a missing file is a mistake.
		if _, err := os.Stat(src.Target); err != nil {
			return fail(fmt.Errorf("--from: %w", err))
		}
	}
	from, err := backend.Open(ctx, src, backend.Options{})
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", src, err))
	}
	defer from.Close()
	to, err := backend.Open(ctx, dst, backend.Options{})
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", dst, err))
	}
	defer to.Close()
	counts, err := store.Copy(ctx, to, from, replace)
	if errors.Is(err, store.ErrNotEmpty) {
		return fail(fmt.Errorf("%w (%s; --replace overwrites it)", err, dst))
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(f.stdout, "copied %s to %s:\n", src, dst)
	for _, c := range counts {
		fmt.Fprintf(f.stdout, "  %-24s %d\n", c.Table, c.Rows)
	}
	fmt.Fprintln(f.stdout, "verified: every table holds the same rows in both")
	return nil
}

// lockSQLite takes the data folder lock of a SQLite database (the folder
// holding the file) for the time of the migration, so that a running relay
// and a migration never work on the same file: a relay started meanwhile
// refuses to start, and a migration refuses while a relay runs. A
// PostgreSQL database takes no lock (several relays share it; stop them
// before copying out of it).
func lockSQLite(spec backend.Spec) (func(), error) {
	if spec.Kind != backend.SQLite {
		return func() {}, nil
	}
	release, err := server.LockDataDir(filepath.Dir(spec.Target))
	if errors.Is(err, server.ErrDataDirInUse) {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("server migrate: %w: stop the relay first", err)}
	}
	if err != nil {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("server migrate: %w", err)}
	}
	return release, nil
}
