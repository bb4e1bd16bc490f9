//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
)

// agentSession is what runAgentSession needs to run an agent's session and
// end the command: the connection and the running agent, the shared agent
// flags, and what differs between the agent commands.
type agentSession struct {
	env    app.Env
	conn   *app.Conn
	events *app.EventServer // nil without --events-listen
	agent  agent.Agent
	flags  *agentOptions
	// session brings the agent's own options (flavor, folder, provider,
	// rules); the flags fill in the rest.
	session app.SessionOptions
	// name is the agent's name in the turn's messages ("claude", "codex",
	// an ACP agent's command).
	name        string
	interrupted func() bool
	// exited is the error of a served session whose agent went away; nil
	// says "<name> exited".
	exited func() error

	// The rest shapes a served session (without -p) only.

	// quiet leaves out the progress lines (a tool waiting for a person, a
	// retried model call).
	quiet bool
	// sayEnded prints, once the session ended, how to read it.
	sayEnded bool
	// line is the prompt line of a terminal (nil without one): it reads
	// the prompts typed, announces waiting tools and prints the notices.
	line *app.PromptLine

	// restart starts the agent anew resuming its own session id (--recover,
	// app.SessionOptions.Recover); canRecover, when set, says whether the
	// running agent can be resumed at all.
	restart    func(ctx context.Context, providerSessionID string) (agent.Agent, error)
	canRecover func() error
}

// runAgentSession runs an agent's session: one turn with -p (its answer
// and exit status by --output), else a served session that takes prompts
// from the relay (and the prompt line) until a signal ends it (130), the
// relay fails (3) or the agent goes away (1, with exited's error). It says
// on stderr where to follow the session, and returns the command's error.
func runAgentSession(ctx context.Context, f *factory, r agentSession) error {
	o, so := r.flags, r.session
	oneShot := o.prompt != ""
	// The status line only for one turn: a served session waits for
	// prompts, not for a turn.
	prog := newProgress(f.stderr, oneShot && f.isTerminal(f.stderr), f.now).withTimeout(o.permissionTimeout)
	defer prog.close()
	out := newRunOutput(f, o.output)
	so.Prompt, so.OneShot = o.prompt, oneShot
	so.PermissionTimeout, so.StartedBy, so.Resume = o.permissionTimeout, o.startedByValue(), o.resumeOpts()
	so.FlushTimeout, so.Yolo, so.Events, so.IdleTimeout = o.flushTimeout, o.yolo, events(r.events), o.idleTimeout
	if o.recover {
		so.Recover, so.CanRecover = r.restart, r.canRecover
	}
	if oneShot || !r.quiet {
		so.OnBus, so.OnWaiting = prog.onBus, prog.waiting
	}
	so.OnCreated = func(id string) {
		if oneShot {
			prog.created(id, fmt.Sprintf("happy: session %s — follow it with: happy log %s --follow", id, id))
		} else {
			prog.created(id, fmt.Sprintf("happy: session %s — send prompts with: happy send %s \"…\" (Ctrl-C ends it)", id, id))
		}
	}
	line := r.line
	if oneShot {
		line = nil
	} else {
		so.Prompt = o.initialPrompt
	}
	if line != nil {
		// The prompt line announces waiting tools itself.
		so.Local, so.OnBus, so.OnWaiting = line.Prompts(ctx), line.OnBus, nil
		so.OnCreated = func(id string) {
			line.Notice("happy: session %s — type a prompt, or send one with: happy send %s \"…\" (Ctrl-D ends the session, Ctrl-C at once)", id, id)
			line.SetSession(id)
		}
	}
	out.wire(&so)
	res, err := app.RunSession(ctx, r.env, r.conn, r.agent, so)
	prog.close()
	if oneShot {
		return out.finish(res, turnExit(r.name, res, err, r.interrupted()))
	}
	if id := res.SessionID; id != "" && r.sayEnded {
		if line != nil {
			line.Notice("happy: session %s ended; read it with: happy log %s", id, id)
		} else {
			fmt.Fprintf(f.stderr, "happy: session %s ended; read it with: happy log %s\n", id, id)
		}
	}
	switch {
	case r.interrupted():
		return &exitError{code: exitInterrupted}
	case err != nil && app.IsRelayError(err):
		return &exitError{code: exitRelay, err: err}
	case err != nil && !errors.Is(err, context.Canceled):
		return err
	case res.AgentExited && r.exited != nil:
		return &exitError{code: exitFailed, err: r.exited()}
	case res.AgentExited:
		return &exitError{code: exitFailed, err: fmt.Errorf("%s exited", r.name)}
	}
	return nil
}
