package app

import (
	"context"
	"encoding/json"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app/remotefs"
	"github.com/happy-dev/happy/internal/confine"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// Session RPCs of the reference app besides permission, answer and abort
// (docs/ARCHITECTURE.md, "The control plane").
const (
	// MethodKillSession ends the session as SIGTERM would: {} →
	// {success, message}.
	MethodKillSession = "killSession"
)

// ModeSwitcher is an agent that can move between its local (terminal) and
// remote (other devices) modes: Claude's dual agent. SwitchMode reports
// whether the session is in mode to ("local" or "remote") afterwards.
type ModeSwitcher interface {
	SwitchMode(ctx context.Context, to string) (bool, error)
}

// KillReply is killSession's reply.
type KillReply struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// registerAppControl registers the reference app's session RPCs that
// registerControl does not: communication, switch, killSession, and the
// file and shell methods of package remotefs (confined to dir; bash,
// writeFile and ripgrep only when the remoteShell setting allows).
// kill ends the run. The returned function releases the folder.
//
// With dialect (the appCompat setting) they also accept the reference app's
// dialect (relay.Session.RegisterDialectRPC).
func registerAppControl(ctx context.Context, env Env, sess *relay.Session, runner *session.Runner, ag agent.Agent, dir string, kill func(), dialect bool) func() {
	reg := func(name string, h relay.RPCHandler) {
		if shape, ok := AppShapes[name]; ok && dialect {
			sess.RegisterDialectRPC(name, shape, h)
			return
		}
		sess.RegisterRPC(name, h)
	}
	reg(session.MethodCommunication, func(_ context.Context, params json.RawMessage) (any, error) {
		c, err := session.DecodeCommunication(params)
		if err != nil {
			return nil, err
		}
		reply := make(chan error, 1)
		if err := runner.Control(ctx, session.ControlCommunication{Communication: c, Reply: reply}); err != nil {
			return nil, err
		}
		select {
		case err := <-reply:
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true}, nil
		case <-ctx.Done():
			return nil, session.ErrNotRunning
		}
	})
	reg(session.MethodSwitch, func(rctx context.Context, params json.RawMessage) (any, error) {
		return switchMode(rctx, env, ag, params), nil
	})
	reg(MethodKillSession, func(context.Context, json.RawMessage) (any, error) {
		env.Log.Info().Msg("killSession from another device: ending the session")
		// The reply goes out before the session's socket closes: the end
		// writes the lifecycle, session-end and flushes first.
		go kill()
		return KillReply{Success: true, Message: "the session is ending"}, nil
	})

	root, err := confine.Open(dir, confine.Limits{})
	if err != nil {
		env.Log.Warn().Err(err).Str("dir", dir).Msg("remote file access unavailable: the session folder cannot be opened")
		for _, m := range remotefs.Methods {
			msg := "the session folder cannot be opened: " + err.Error()
			reg(m, func(context.Context, json.RawMessage) (any, error) {
				return remotefs.Reply{Error: msg}, nil
			})
		}
		return func() {}
	}
	shell := switchOn(env, settings.EnvRemoteShell, "remoteShell", false)
	for name, h := range remotefs.Handlers(remotefs.Options{Root: root, Shell: shell, Log: env.Log}) {
		reg(name, func(ctx context.Context, params json.RawMessage) (any, error) {
			return h(ctx, params), nil
		})
	}
	return func() { _ = root.Close() }
}

// switchMode answers the switch RPC {to: "remote"|"local"} with a boolean:
// true only when the agent has both modes and is in mode to afterwards.
func switchMode(ctx context.Context, env Env, ag agent.Agent, params json.RawMessage) bool {
	var p struct {
		To string `json:"to"`
	}
	if err := json.Unmarshal(params, &p); err != nil || (p.To != "remote" && p.To != "local") {
		env.Log.Warn().Str("params", string(params)).Msg("switch refused: to must be remote or local")
		return false
	}
	if cc, ok := ag.(callerCloses); ok {
		ag = cc.Agent
	}
	sw, ok := ag.(ModeSwitcher)
	if !ok {
		return false
	}
	done, err := sw.SwitchMode(ctx, p.To)
	if err != nil {
		env.Log.Warn().Err(err).Str("to", p.To).Msg("switch from another device failed")
		return false
	}
	return done
}
