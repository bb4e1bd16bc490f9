//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
)

// Output formats of happy <agent> -p (--output).
const (
	outputText       = "text"        // the final answer on stdout
	outputJSON       = "json"        // one app.Report object at the end
	outputStreamJSON = "stream-json" // the flat seed-000 events as JSON lines while the turn runs
)

// checkOutput refuses an unknown --output as a usage error.
func checkOutput(mode string) error {
	switch mode {
	case outputText, outputJSON, outputStreamJSON:
		return nil
	}
	return &usageError{err: fmt.Errorf("--output %q: want text, json or stream-json", mode)}
}

// runOutput prints a -p run's output in the --output format.
type runOutput struct {
	f     *factory
	mode  string
	start time.Time
	seen  map[string]bool // flat event ids already streamed
	err   error           // the first write error of the stream
}

// newRunOutput starts the clock of the run's report.
func newRunOutput(f *factory, mode string) *runOutput {
	return &runOutput{f: f, mode: mode, start: f.now(), seen: map[string]bool{}}
}

// wire sets the session options the format needs (stream-json follows
// the transcript as it changes).
func (ro *runOutput) wire(so *app.SessionOptions) {
	if ro.mode == outputStreamJSON {
		so.OnTranscript = ro.stream
	}
}

// stream writes the settled flat events not written yet, as `happy log
// --events --follow` does.
func (ro *runOutput) stream(t mapper.Transcript) {
	if ro.err == nil {
		ro.err = writeEvents(ro.f.stdout, export.FlatSettled(t), ro.seen)
	}
}

// finish prints the end of the run (the final text, or the report) and
// returns the command's error, exit that turnExit chose.
func (ro *runOutput) finish(res app.SessionResult, exit error) error {
	switch ro.mode {
	case outputText:
		if res.FinalText != "" {
			fmt.Fprintln(ro.f.stdout, res.FinalText)
		}
	case outputStreamJSON:
		// The run is over: what never settled (a text cut short) goes too.
		if ro.err == nil {
			ro.err = writeEvents(ro.f.stdout, export.Flat(res.Transcript), ro.seen)
		}
	case outputJSON:
		code, status := runStatus(res, exit)
		errText := ""
		if exit != nil {
			var ee *exitError
			if !errors.As(exit, &ee) || ee.err != nil {
				errText = exit.Error()
			}
		}
		rep := app.NewReport(res, status, code, errText, ro.f.now().Sub(ro.start).Milliseconds())
		enc := json.NewEncoder(ro.f.stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil && exit == nil {
			return err
		}
	}
	return exit
}

// runStatus is the exit code of a run's error and the status naming it.
func runStatus(res app.SessionResult, exit error) (int, string) {
	if exit == nil {
		return exitOK, app.RunCompleted
	}
	code := exitFailed
	var ee *exitError
	if errors.As(exit, &ee) {
		code = ee.code
	}
	switch code {
	case exitUndelivered:
		return code, app.RunUndelivered
	case exitRelay:
		return code, app.RunRelay
	case exitInterrupted:
		return code, app.RunInterrupted
	}
	if res.Rejected > 0 {
		return code, app.RunRejected
	}
	return code, app.RunFailed
}
