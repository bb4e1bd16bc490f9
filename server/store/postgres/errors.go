package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/happy-dev/happy/server/store"
)

// errf is fmt.Errorf marking failures of the database server with
// store.ErrUnavailable (see unavailable).
func errf(format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	if unavailable(err) {
		return unavailableError{err}
	}
	return err
}

// unavailableError is a database failure that is also store.ErrUnavailable.
type unavailableError struct{ err error }

func (e unavailableError) Error() string        { return e.err.Error() }
func (e unavailableError) Unwrap() error        { return e.err }
func (e unavailableError) Is(target error) bool { return target == store.ErrUnavailable }

// unavailable reports whether err comes from the server or the connection
// rather than from the statement: a connection error class (08…), an
// administrator or crash shutdown, a server still starting, too many
// connections, a deadlock or serialization failure (the transaction was
// rolled back), a refused or broken connection. A cancelled or expired
// context is the caller's, never the database's.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300", "40001", "40P01":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || pgconn.SafeToRetry(err)
}
