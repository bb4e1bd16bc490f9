package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/happy-dev/happy/server/store"
)

func TestUnavailableClassification(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, // admin shutdown
		{&pgconn.PgError{Code: "57P03"}, true}, // cannot connect now
		{&pgconn.PgError{Code: "08006"}, true}, // connection failure
		{&pgconn.PgError{Code: "53300"}, true}, // too many connections
		{&pgconn.PgError{Code: "40P01"}, true}, // deadlock
		{&pgconn.PgError{Code: "40001"}, true}, // serialization failure
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{io.ErrUnexpectedEOF, true},
		{pgconn.ErrConnClosed, true},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{errors.New("something else"), false},
	}
	for _, c := range cases {
		err := errf("postgres: op: %w", c.err)
		if got := errors.Is(err, store.ErrUnavailable); got != c.want {
			t.Errorf("%v: unavailable %v, want %v", c.err, got, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: the cause is lost", c.err)
		}
		if err.Error() != "postgres: op: "+c.err.Error() {
			t.Errorf("message %q", err.Error())
		}
	}
}
