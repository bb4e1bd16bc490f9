// Package backend opens a relay store by name: a PostgreSQL URL or an
// embedded SQLite file. It is what `happy server --db` and
// `happy server migrate` take.
package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/postgres"
	"github.com/happy-dev/happy/server/store/sqlite"
)

// Store is what both backends provide: the relay's storage, copying its
// whole content, and its schema state.
type Store interface {
	store.Store
	store.Copier
	// AppliedMigrations lists the schema migrations applied so far.
	AppliedMigrations(ctx context.Context) ([]store.Migration, error)
	// MigratedAtOpen lists those that opening the store applied.
	MigratedAtOpen() []string
}

var (
	_ Store = (*sqlite.Store)(nil)
	_ Store = (*postgres.Store)(nil)
)

// Kind is a backend's name.
type Kind string

// The backends.
const (
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
)

// ErrSpec is returned for a database name that is neither form Parse takes.
var ErrSpec = errors.New("backend: unknown database")

// DefaultFile is the SQLite file's name inside a relay's data folder.
const DefaultFile = "happy.db"

// Spec is a parsed database name.
type Spec struct {
	Kind Kind
	// Target is the PostgreSQL URL, or the SQLite file's path.
	Target string
}

// Parse reads a database name: "postgres://…" or "postgresql://…" (a libpq
// URL) is PostgreSQL; "sqlite:PATH" is the SQLite file PATH, or PATH/happy.db
// when PATH is an existing folder (a relay's data folder), made absolute.
func Parse(name string) (Spec, error) {
	switch {
	case strings.HasPrefix(name, "postgres://"), strings.HasPrefix(name, "postgresql://"):
		return Spec{Kind: Postgres, Target: name}, nil
	case strings.HasPrefix(name, "sqlite:"):
		path := strings.TrimPrefix(name, "sqlite:")
		if path == "" || strings.ContainsRune(path, 0) {
			return Spec{}, fmt.Errorf("%w %q: sqlite: needs a file or data folder path", ErrSpec, name)
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			path = filepath.Join(path, DefaultFile)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return Spec{}, fmt.Errorf("%w %q: %w", ErrSpec, name, err)
		}
		return Spec{Kind: SQLite, Target: abs}, nil
	}
	return Spec{}, fmt.Errorf("%w %q: want postgres://… or sqlite:PATH", ErrSpec, redact(name))
}

// String is the name back, its password hidden.
func (s Spec) String() string {
	if s.Kind == SQLite {
		return "sqlite:" + s.Target
	}
	return redact(s.Target)
}

// redact hides the password of a URL-shaped name.
func redact(name string) string {
	scheme, rest, ok := strings.Cut(name, "://")
	if !ok {
		return name
	}
	at := strings.LastIndex(rest, "@")
	if slash := strings.Index(rest, "/"); slash >= 0 && slash < at {
		at = -1
	}
	if at < 0 {
		return name
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return name
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// Options configure Open.
type Options struct {
	// Synchronous is SQLite's synchronous setting ("" = NORMAL); ignored by
	// PostgreSQL.
	Synchronous string
	// AttachmentsDir is SQLite's attachment folder ("" = attachments beside
	// the file); PostgreSQL keeps attachments in the database.
	AttachmentsDir string
}

// Open opens the store named by spec, applying pending migrations. A SQLite
// file's folder is created (0700) when missing.
func Open(ctx context.Context, spec Spec, opts Options) (Store, error) {
	switch spec.Kind {
	case Postgres:
		s, err := postgres.Open(ctx, spec.Target, postgres.Options{})
		if err != nil {
			return nil, err
		}
		return s, nil
	case SQLite:
		if err := private.MkdirAll(filepath.Dir(spec.Target)); err != nil {
			return nil, fmt.Errorf("backend: create %s: %w", filepath.Dir(spec.Target), err)
		}
		s, err := sqlite.Open(ctx, spec.Target, sqlite.Options{Synchronous: sqlite.Sync(strings.ToUpper(opts.Synchronous)), AttachmentsDir: opts.AttachmentsDir})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: kind %q", ErrSpec, spec.Kind)
}
