package app

import (
	"context"
	"encoding/json"

	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
	"github.com/happy-dev/happy/session/compat"
)

// EnvAppCompat names the environment variable that overrides the appCompat
// setting (1/true/yes/on, 0/false/no/off).
const EnvAppCompat = "HAPPY_APP_COMPAT"

// AppCompatEnabled resolves the appCompat setting: HAPPY_APP_COMPAT, then
// "appCompat" in settings.json, then on. On, happy also writes what the
// reference app reads and accepts its dialect of control inputs
// (docs/ARCHITECTURE.md, "The reference app" and "Trust"); off suits a
// relay no reference app reads: nothing but the canonical records and the
// metadata is written, and only sealed control envelopes are accepted.
func AppCompatEnabled(env Env) bool {
	return switchOn(env, EnvAppCompat, "appCompat", true)
}

// switchOn resolves an on/off setting of env's home (settings.Switch:
// the environment variable, then the key in settings.json, then def); an
// unreadable file or value is logged and def is used.
func switchOn(env Env, envName, key string, def bool) bool {
	st, err := settings.Load(env.Home.Settings())
	if err == nil {
		var on bool
		if on, err = st.Switch(env.Getenv, envName, key, def); err == nil {
			return on
		}
	}
	env.Log.Warn().Err(err).Str("setting", key).Bool("default", def).Msg("setting unreadable: its default applies")
	return def
}

// startCompat returns the writer of the reference app's legacy records and
// agentState for sess (docs/ARCHITECTURE.md, "The reference app"), added to
// the sink, or nil when the appCompat setting is off.
func startCompat(env Env, sess *relay.Session, sink *session.Sink, rootID, flavor string) *compat.Writer {
	if !AppCompatEnabled(env) {
		return nil
	}
	w := compat.New(compat.Options{
		Store: sess, RootID: rootID, Flavor: flavor, Now: env.Now, Log: env.Log,
		UpdateState: func(ctx context.Context, fn compat.Updater) error {
			return sess.UpdateAgentState(ctx, relay.Updater(fn))
		},
	})
	sink.SetCompanion(w)
	return w
}

// closeCompat writes the writer's last agentState, bounded by ctx (nil w:
// nothing).
func closeCompat(ctx context.Context, env Env, w *compat.Writer) {
	if w == nil {
		return
	}
	if err := w.Close(ctx); err != nil {
		env.Log.Warn().Err(err).Msg("last agentState not written")
	}
}

// legacyPrompt reports whether a relay record is the reference app's own
// prompt ({role:"user", content:{type:"text"}}, no kind), which the app
// shows already and compat must not echo.
func legacyPrompt(plain json.RawMessage) bool {
	var head struct {
		Kind *string `json:"kind"`
		Role string  `json:"role"`
	}
	return json.Unmarshal(plain, &head) == nil && head.Kind == nil && head.Role == "user"
}
