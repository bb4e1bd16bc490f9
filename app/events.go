package app

import (
	"fmt"

	"github.com/happy-dev/happy/localapi"
)

// EventServer is this process's local event API (docs/ARCHITECTURE.md,
// section "Local event API"): one hub every session of the process
// publishes to (SessionOptions.Events), served on a loopback address.
type EventServer struct {
	// Hub is what sessions publish to.
	Hub *localapi.Hub
	// Server is the HTTP server.
	Server *localapi.Server
	// TokenPath is the file holding the bearer token (in the happy home).
	TokenPath string

	env Env
}

// StartEvents starts the local event API on addr (host:port with a
// loopback host; port 0 picks one), with the home's token
// (home.Dir.EventsToken, made on first use). Errors: a non-loopback
// address (wrapping localapi.ErrNotLoopback), an unusable token file, an
// address in use. The address goes into the spawn report of a session the
// daemon started (SpawnReport.Events).
func StartEvents(env Env, addr string) (*EventServer, error) {
	if err := localapi.CheckLoopback(addr); err != nil {
		return nil, err
	}
	path := env.Home.EventsToken()
	tok, err := localapi.LoadOrCreateToken(path)
	if err != nil {
		return nil, fmt.Errorf("local event API: %w", err)
	}
	hub := localapi.NewHub(localapi.HubOptions{Log: env.Log})
	srv, err := localapi.Start(addr, localapi.ServerOptions{Hub: hub, Token: tok, Log: env.Log})
	if err != nil {
		return nil, fmt.Errorf("local event API: %w", err)
	}
	env.Log.Info().Str("addr", srv.Addr()).Str("token", path).Msg("local event API listening")
	reportEvents(srv.Addr()) // a session the daemon started tells it where (SpawnReport.Events)
	return &EventServer{Hub: hub, Server: srv, TokenPath: path, env: env}, nil
}

// Close stops the server, ends every subscriber and logs the hub's
// counters; a nil EventServer is a no-op.
func (e *EventServer) Close() error {
	if e == nil {
		return nil
	}
	err := e.Server.Close()
	e.Hub.Close()
	st := e.Hub.Stats()
	e.env.Log.Info().Int64("published", st.Published).Int64("droppedDeltas", st.DroppedDeltas).
		Int64("resynced", st.Resynced).Int64("disconnected", st.Disconnected).Int64("unencodable", st.Unencodable).
		Msg("local event API stopped")
	return err
}
