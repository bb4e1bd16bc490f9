//go:build unix

// Command happy wraps a coding agent (Claude Code, Codex, any ACP agent),
// turns what it does into one encrypted transcript of messages and parts and
// pushes it to a relay, so another device can follow and control the session.
//
// This package holds cobra commands only: each command parses flags into an
// options struct and calls a package that does the work.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
)

// Exit codes shared by all commands (docs/ARCHITECTURE.md, "Exit codes of happy <agent> -p").
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitRelay  = 3
	// exitUndelivered: the turn completed but the relay has not
	// acknowledged the whole transcript (it stays in the outbox and is sent
	// on the next run on this home).
	exitUndelivered = 4
	// exitStale: the session is stale (its happy stopped sending
	// heartbeats without ending it): control commands have nothing to
	// answer them, happy log --follow had no heartbeat for --stale-timeout.
	exitStale       = 5
	exitInterrupted = 130
)

// exitError carries a process exit code out of a command's RunE. Its message,
// when not empty, is printed on stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func main() {
	// The Socket.IO client library catches SIGQUIT at init; give it back
	// its default (a goroutine dump, then exit), which is what a stuck
	// happy or relay should do on Ctrl-\.
	signal.Reset(syscall.SIGQUIT)
	os.Exit(run(os.Args[1:], newFactory(os.Stdin, os.Stdout, os.Stderr, os.Getenv)))
}

// run executes the command line args and returns the exit code.
func run(args []string, f *factory) int {
	// A session the daemon started reports its id on an inherited pipe.
	app.TakeSpawnReport()
	root := newRootCmd(f)
	root.SetArgs(args)
	err := root.Execute()
	f.close()
	return exitCode(err, f.stderr)
}

// exitCode maps a command error to an exit code and prints its message.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "happy:", ee.err)
			if ee.code == exitRelay && !errors.Is(ee.err, app.ErrLoggedOut) {
				fmt.Fprintln(stderr, "happy: happy doctor checks the relay and the login and says what to fix")
			}
		}
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "happy:", ue.err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "happy:", err)
	return exitFailed
}

// usageError marks a wrong command line (unknown flag, missing argument).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageArgs wraps a cobra argument check so that a wrong argument count is
// a usage error (exit 2), like a wrong flag.
func usageArgs(check func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err: err}
		}
		return nil
	}
}
