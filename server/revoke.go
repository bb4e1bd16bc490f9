package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/zishang520/socket.io/servers/socket/v3"

	"github.com/happy-dev/happy/server/token"
)

// DefaultRevocationRefresh is how long the relay trusts its cached token
// generation of an account before reading it from the store again.
const DefaultRevocationRefresh = 10 * time.Second

// ErrInvalidToken is returned by token verification for anything that is
// not a well-formed token signed with this server's secret, and for a
// revoked token (it is token.ErrInvalid).
var ErrInvalidToken = token.ErrInvalid

// ErrBadSecret is returned for a signing secret that is not the base64 text
// of a 32-byte Ed25519 seed (it is token.ErrBadSecret).
var ErrBadSecret = token.ErrBadSecret

// generations caches each account's token generation (store.TokenGeneration)
// with the time it was read. A revocation on this relay updates the cache at
// once; one made by another relay on the same database is seen here within
// Config.RevocationRefresh.
type generations struct {
	mu sync.Mutex
	m  map[string]generation // at most token.MaxKnown entries
}

type generation struct {
	gen int64
	at  time.Time
}

// accountGeneration returns acct's current token generation.
func (s *Server) accountGeneration(ctx context.Context, acct string) (int64, error) {
	now := s.cfg.Now()
	s.gens.mu.Lock()
	g, ok := s.gens.m[acct]
	s.gens.mu.Unlock()
	if ok && now.Sub(g.at) < s.cfg.RevocationRefresh && !now.Before(g.at) {
		return g.gen, nil
	}
	gen, err := s.st.TokenGeneration(ctx, acct)
	if err != nil {
		return 0, err
	}
	s.setGeneration(acct, gen, now)
	return gen, nil
}

func (s *Server) setGeneration(acct string, gen int64, now time.Time) {
	s.gens.mu.Lock()
	defer s.gens.mu.Unlock()
	if s.gens.m == nil || len(s.gens.m) >= token.MaxKnown {
		s.gens.m = map[string]generation{}
	}
	if cur, ok := s.gens.m[acct]; ok && cur.gen > gen {
		gen = cur.gen // generations only grow
	}
	s.gens.m[acct] = generation{gen: gen, at: now}
}

// verifyToken checks token's signature (cached, see tokens) and that it
// carries its account's current generation. It returns the account id, an
// error wrapping ErrInvalidToken for a bad or revoked token, or the store's
// error.
func (s *Server) verifyToken(ctx context.Context, token string) (string, error) {
	c, err := s.tok.Claims(token)
	if err != nil {
		return "", err
	}
	gen, err := s.accountGeneration(ctx, c.Sub)
	if err != nil {
		return "", err
	}
	if c.Gen != gen {
		return "", fmt.Errorf("%w: revoked (generation %d, the account is at %d)", ErrInvalidToken, c.Gen, gen)
	}
	return c.Sub, nil
}

// issueToken returns a token for acct at its current generation; session,
// when set, names the pairing request it came from.
func (s *Server) issueToken(ctx context.Context, acct, session string) (string, error) {
	gen, err := s.accountGeneration(ctx, acct)
	if err != nil {
		return "", err
	}
	return s.tok.IssueGen(acct, session, gen, s.cfg.Now()), nil
}

// postAuthRevoke: POST /v1/auth/revoke (Bearer) → {success:true,
// generation, disconnected}. Every token of the account issued so far,
// the caller's own included, stops working at once on this relay: HTTP
// routes answer 401 "Invalid token", socket handshakes are refused with
// "Invalid authentication token", and the account's sockets connected to
// this relay are disconnected (`disconnected` counts them) and its
// message streams end. Another relay on the same database refuses the
// tokens at once when the relays share a bus (it disconnects the
// account's sockets and ends its streams too), else within
// Config.RevocationRefresh, its sockets staying until they reconnect. The reference relay has no
// such route (its tokens cannot be revoked).
func (s *Server) postAuthRevoke(w http.ResponseWriter, r *http.Request, acct string) {
	gen, err := s.st.RevokeTokens(r.Context(), acct, s.nowMs())
	if err != nil {
		s.fail(w, r, err, "Account not found")
		return
	}
	s.setGeneration(acct, gen, s.cfg.Now())
	s.tok.Forget(acct)
	room := socket.Room("user:" + acct)
	n := 0
	// The in-memory adapter answers at once, before FetchSockets returns.
	s.io.In(room).FetchSockets()(func(list []*socket.RemoteSocket, err error) {
		if err == nil {
			n = len(list)
		}
	})
	s.io.In(room).DisconnectSockets(true)
	streams := s.streams.revoke(acct)
	// The revoked devices' browsers get no more pushes (each subscribes
	// again once signed in anew).
	if _, err := s.st.RemoveWebPushSubscriptions(r.Context(), acct); err != nil {
		s.log.Warn().Err(err).Str("account", acct).Msg("revoke: web push subscriptions not removed")
	}
	if s.cl != nil {
		// The other instances refuse the tokens at once and drop the
		// account's sockets they hold.
		s.cl.publish(busMsg{Kind: busRevoke, Acct: acct, Seq: gen})
	}
	s.log.Info().Str("account", acct).Int64("generation", gen).Int("sockets", n).Int("streams", streams).Msg("tokens revoked")
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "generation": gen, "disconnected": n})
}
