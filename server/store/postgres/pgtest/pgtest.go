// Package pgtest gives tests a fresh PostgreSQL database on the server named
// by HAPPY_TEST_POSTGRES (scripts/postgres.sh starts a throwaway one and
// prints the variable). Without the variable a test that asks for a database
// is skipped, except in CI (CI set to anything but "" or "false"), where it
// fails: CI must run the PostgreSQL tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/happy-dev/happy/server/store/postgres"
)

// Env names the variable holding the server's URL, e.g.
// postgres://happy@127.0.0.1:5432/postgres?sslmode=disable. Its user must be
// allowed to create and drop databases.
const Env = "HAPPY_TEST_POSTGRES"

// inCI reports whether the tests run in CI.
func inCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "false" && v != "0"
}

// ServerURL returns HAPPY_TEST_POSTGRES, skipping the test when it is not set
// (failing it in CI).
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		if inCI() {
			t.Fatalf("%s is not set: CI must run the PostgreSQL tests (.ci/run starts a server with scripts/postgres.sh)", Env)
		}
		t.Skipf("%s is not set; run eval \"$(scripts/postgres.sh start)\" to run the PostgreSQL tests", Env)
	}
	return u
}

// URL creates an empty database on the test server and returns its URL; the
// database is dropped (with any connection still open to it) when the test
// ends.
func URL(t testing.TB) string {
	t.Helper()
	base := ServerURL(t)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "happy_test_" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, base, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, base, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := WithDatabase(base, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// WithDatabase returns the URL base with its database replaced by name.
func WithDatabase(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL", Env)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// Open returns a migrated store on a fresh database, closed when the test
// ends (before the database is dropped).
func Open(t testing.TB) *postgres.Store {
	t.Helper()
	u := URL(t)
	s, err := postgres.Open(context.Background(), u, postgres.Options{})
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func admin(ctx context.Context, base, stmt string) error {
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	_, err = c.Exec(ctx, stmt)
	return err
}
