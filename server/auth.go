package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/happy-dev/happy/server/store"
)

// Sign-in challenges (POST /v1/auth; docs/ARCHITECTURE.md, "Sign-in
// challenges"). A signed challenge mints a token once: the relay records
// each challenge it accepted (table auth_challenges, by SHA-256 of public
// key and challenge) and refuses it afterwards with 401 "Challenge already
// used", so a captured request body cannot mint tokens again, after a
// revocation or ever. A challenge of the timed form also carries the time
// it was drawn and is accepted only within ChallengeWindow of the relay's
// clock; its record is pruned once the window is over. Any other challenge
// (the reference clients draw 32 random bytes) is accepted once and its
// record kept for good.

// ChallengeMagic starts a timed challenge: ChallengeMagic (8 bytes), the
// Unix time in milliseconds (8 bytes, big-endian), 16 random bytes; 32
// bytes in all, like the reference clients' random ones (relay/auth.go
// draws them).
const ChallengeMagic = "happy-c1"

// TimedChallengeSize is the length of a timed challenge.
const TimedChallengeSize = 32

// DefaultChallengeWindow is Config.ChallengeWindow's default: how far the
// time in a timed challenge may be from the relay's, either way.
const DefaultChallengeWindow = 10 * time.Minute

// Refusal texts of POST /v1/auth (this relay's own).
const (
	errChallengeUsed   = "Challenge already used: sign a new one"
	errChallengeWindow = "Challenge time outside the relay's window"
)

// challengeTime returns the time carried by a timed challenge.
func challengeTime(ch []byte) (time.Time, bool) {
	if len(ch) != TimedChallengeSize || !bytes.HasPrefix(ch, []byte(ChallengeMagic)) {
		return time.Time{}, false
	}
	ms := int64(binary.BigEndian.Uint64(ch[len(ChallengeMagic):]))
	return time.UnixMilli(ms), true
}

// challengeDigest names a challenge of a key in auth_challenges.
func challengeDigest(pk, ch []byte) string {
	h := sha256.New()
	h.Write(pk)
	h.Write(ch)
	return hex.EncodeToString(h.Sum(nil))
}

// postAuth: POST /v1/auth {publicKey, challenge, signature} (base64) →
// {success:true, token}. Refusals: 401 "Invalid signature"; 401
// "Challenge already used: …" for a challenge accepted before; 401
// "Challenge time outside the relay's window …" for a timed challenge too
// old or too new; 429 with Retry-After past AuthRate (every sign-in of the
// address) or AccountRate (a key the relay does not know yet, from that
// address).
func (s *Server) postAuth(w http.ResponseWriter, r *http.Request) {
	addr := clientKey(r.RemoteAddr)
	if !s.limited(w, s.lim.auth, addr) {
		return
	}
	var req struct {
		PublicKey *string `json:"publicKey"`
		Challenge *string `json:"challenge"`
		Signature *string `json:"signature"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.PublicKey == nil || req.Challenge == nil || req.Signature == nil {
		writeErr(w, http.StatusBadRequest, "publicKey, challenge and signature are required strings")
		return
	}
	pk, err1 := decodeB64(*req.PublicKey)
	ch, err2 := decodeB64(*req.Challenge)
	sig, err3 := decodeB64(*req.Signature)
	if err := errors.Join(err1, err2, err3); err != nil {
		writeErr(w, http.StatusBadRequest, "publicKey, challenge and signature must be base64")
		return
	}
	if len(pk) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pk, ch, sig) {
		writeErr(w, http.StatusUnauthorized, "Invalid signature")
		return
	}
	now := s.cfg.Now()
	keep := store.KeepForever
	if at, ok := challengeTime(ch); ok {
		if d := now.Sub(at); d > s.cfg.ChallengeWindow || d < -s.cfg.ChallengeWindow {
			s.metrics.refused("challenge_window")
			writeErr(w, http.StatusUnauthorized, fmt.Sprintf("%s (its time %s, the relay's %s, window ±%s): sign a new one, and check this machine's clock",
				errChallengeWindow, at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), s.cfg.ChallengeWindow))
			return
		}
		keep = at.Add(s.cfg.ChallengeWindow).UnixMilli()
	}
	key := hex.EncodeToString(pk)
	ctx := r.Context()
	if _, err := s.st.AccountByKey(ctx, key); errors.Is(err, store.ErrNotFound) {
		if !s.limited(w, s.lim.account, addr) {
			return
		}
	} else if err != nil {
		s.fail(w, r, err, "")
		return
	}
	switch err := s.st.UseChallenge(ctx, challengeDigest(pk, ch), now.UnixMilli(), keep); {
	case errors.Is(err, store.ErrChallengeUsed):
		s.metrics.refused("challenge_used")
		writeErr(w, http.StatusUnauthorized, errChallengeUsed)
		return
	case err != nil:
		s.fail(w, r, err, "")
		return
	}
	acct, err := s.st.UpsertAccount(ctx, key, now.UnixMilli())
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	token, err := s.issueToken(ctx, acct.ID, "")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "token": token})
}

// sweepChallenges removes the records of timed challenges whose window is
// over (a replay of one is refused by its time).
func (s *Server) sweepChallenges(ctx context.Context) {
	n, err := s.st.DeleteChallengesBefore(ctx, s.nowMs())
	if err != nil {
		s.log.Error().Err(err).Msg("remove used sign-in challenges past their window")
		return
	}
	if n > 0 {
		s.log.Debug().Int64("removed", n).Msg("used sign-in challenges past their window")
	}
}
