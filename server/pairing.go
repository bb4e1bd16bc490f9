package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/server/store"
)

// DefaultPairingTTL is how long a terminal pairing request lives.
const DefaultPairingTTL = 5 * time.Minute

// maxLookup bounds how many live requests GET /v1/auth/request/lookup reads
// to find the ones matching a code.
const maxLookup = 10_000

// Terminal pairing (docs/ARCHITECTURE.md, section "Pairing"). The routes
// keep the reference relay's shapes; this relay adds three rules the
// reference does not have:
//
//   - a request lives Config.PairingTTL from its creation, answered or not:
//     after that it is not found, cannot be answered, and its answer is
//     never delivered;
//   - a request is answered once: a second POST /v1/auth/response is
//     refused with 409 "Request already answered" (the reference keeps the
//     first answer and says success to both);
//   - the token of the answer goes only to the holder of the request's
//     secret key: it is sealed for the request's public key
//     (crypto.SealToken) and sent as sealedToken, never as a plain token,
//     so a caller who learnt the public key (from the lookup by code, or
//     the QR code) gets nothing usable. Every poll of the key gets the
//     answer until the request expires or the terminal says it collected
//     it (POST /v1/auth/request/collected with the new token), so an
//     earlier poll by someone else does not take it from the terminal;
//   - with Config.PairingPlainToken (for the reference CLI, which reads a
//     plain token) the answer also carries the plain token, and is
//     delivered once: the POST that receives it removes the request, so
//     the next POST of the same key starts a new request and gets
//     {state:"requested"}, as for a key never seen. Whoever posts the
//     key first then collects the token.
//
// The lookup by code is rate limited per account (lookupLimiter).

// errRequestAnswered is the 409 text of a second answer.
const errRequestAnswered = "Request already answered"

// expired reports whether ar is past the pairing lifetime at now (Unix ms).
func (s *Server) expired(ar store.AuthRequest, now int64) bool {
	return now-ar.CreatedAt >= s.cfg.PairingTTL.Milliseconds()
}

// liveAuthRequest returns the request of pk (hex) unless it is missing or
// expired (ErrNotFound; an expired one is removed).
func (s *Server) liveAuthRequest(ctx context.Context, pk string) (store.AuthRequest, error) {
	ar, err := s.st.AuthRequest(ctx, pk)
	if err != nil {
		return ar, err
	}
	if s.expired(ar, s.nowMs()) {
		if _, err := s.st.DeleteAuthRequest(ctx, ar.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.AuthRequest{}, err
		}
		return store.AuthRequest{}, store.ErrNotFound
	}
	return ar, nil
}

// postAuthRequest: POST /v1/auth/request {publicKey, supportsV2?} →
// {state:"requested"} or {state:"authorized", sealedToken, response}, the
// token sealed for publicKey (crypto.SealToken), for every poll until the
// request expires or is collected. With Config.PairingPlainToken the
// answer also holds the plain token and the caller that receives it
// removes the request (see above). Past Config.PairingRate for the
// caller's address: 429 with Retry-After.
func (s *Server) postAuthRequest(w http.ResponseWriter, r *http.Request) {
	if !s.limited(w, s.lim.pairing, clientKey(r.RemoteAddr)) {
		return
	}
	var req struct {
		PublicKey  *string `json:"publicKey"`
		SupportsV2 *bool   `json:"supportsV2"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.PublicKey == nil {
		writeErr(w, http.StatusBadRequest, "publicKey is required")
		return
	}
	pk, ok := boxKeyHex(*req.PublicKey)
	if !ok {
		writeErr(w, http.StatusUnauthorized, "Invalid public key")
		return
	}
	v2 := req.SupportsV2 != nil && *req.SupportsV2
	ctx := r.Context()
	ar, err := s.st.UpsertAuthRequest(ctx, pk, v2, s.nowMs())
	if err == nil && s.expired(ar, s.nowMs()) {
		// Past its lifetime: gone, answer and all; this POST opens a new one.
		if _, err = s.st.DeleteAuthRequest(ctx, ar.ID); err == nil || errors.Is(err, store.ErrNotFound) {
			ar, err = s.st.UpsertAuthRequest(ctx, pk, v2, s.nowMs())
		}
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if ar.Response == nil || ar.ResponseAccountID == nil {
		writeJSON(w, http.StatusOK, map[string]any{"state": "requested"})
		return
	}
	if s.cfg.PairingPlainToken {
		taken, err := s.st.DeleteAuthRequest(ctx, ar.ID)
		if errors.Is(err, store.ErrNotFound) {
			// Another caller took the answer between our read and our delete.
			writeJSON(w, http.StatusOK, map[string]any{"state": "requested"})
			return
		}
		if err != nil {
			s.fail(w, r, err, "")
			return
		}
		ar = taken
	}
	token, err := s.issueToken(ctx, *ar.ResponseAccountID, ar.ID)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	raw, err := hex.DecodeString(pk)
	if err != nil || len(raw) != 32 {
		s.fail(w, r, fmt.Errorf("server: pairing request key %q is not 32 bytes of hex", pk), "")
		return
	}
	sealed, err := crypto.SealToken(token, [32]byte(raw))
	if err != nil {
		s.fail(w, r, fmt.Errorf("server: seal the pairing token: %w", err), "")
		return
	}
	out := map[string]any{"state": "authorized", "sealedToken": crypto.EncodeBase64(sealed), "response": *ar.Response}
	if s.cfg.PairingPlainToken {
		out["token"] = token
		s.log.Info().Str("account", *ar.ResponseAccountID).Str("request", ar.ID).Msg("pairing answer delivered with a plain token")
	} else {
		s.log.Debug().Str("account", *ar.ResponseAccountID).Str("request", ar.ID).Msg("pairing answer sent, token sealed")
	}
	writeJSON(w, http.StatusOK, out)
}

// postAuthRequestCollected: POST /v1/auth/request/collected {publicKey}
// (Bearer; this relay only) → {success:true}: the terminal (or browser)
// that opened the sealed token of its answered request says so with that
// token, and the request is removed, so its answer is not sent again. 404
// "Request not found" when the key has no live request answered for the
// caller's account (never answered, answered for another account, expired,
// or collected already).
func (s *Server) postAuthRequestCollected(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		PublicKey *string `json:"publicKey"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.PublicKey == nil {
		writeErr(w, http.StatusBadRequest, "publicKey is required")
		return
	}
	pk, ok := boxKeyHex(*req.PublicKey)
	if !ok {
		writeErr(w, http.StatusUnauthorized, "Invalid public key")
		return
	}
	ar, err := s.liveAuthRequest(r.Context(), pk)
	if err == nil && (ar.Response == nil || ar.ResponseAccountID == nil || *ar.ResponseAccountID != acct) {
		err = store.ErrNotFound
	}
	if err == nil {
		_, err = s.st.DeleteAuthRequest(r.Context(), ar.ID)
	}
	if err != nil {
		s.fail(w, r, err, "Request not found")
		return
	}
	s.log.Info().Str("account", acct).Str("request", ar.ID).Msg("pairing answer collected")
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// getAuthRequestStatus: GET /v1/auth/request/status?publicKey= →
// {status:"not_found"|"pending"|"authorized", supportsV2}; an expired or
// delivered request is not_found.
func (s *Server) getAuthRequestStatus(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("publicKey") {
		writeErr(w, http.StatusBadRequest, "publicKey query parameter is required")
		return
	}
	pk, ok := boxKeyHex(q.Get("publicKey"))
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"status": "not_found", "supportsV2": false})
		return
	}
	ar, err := s.liveAuthRequest(r.Context(), pk)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "not_found", "supportsV2": false})
		return
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if ar.Response != nil && ar.ResponseAccountID != nil {
		writeJSON(w, http.StatusOK, map[string]any{"status": "authorized", "supportsV2": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "pending", "supportsV2": ar.SupportsV2})
}

// postAuthResponse: POST /v1/auth/response {publicKey, response} (Bearer) →
// {success:true}; 404 "Request not found" for a missing, expired or
// delivered request, 409 "Request already answered" for a second answer.
func (s *Server) postAuthResponse(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		PublicKey *string `json:"publicKey"`
		Response  *string `json:"response"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.PublicKey == nil || req.Response == nil {
		writeErr(w, http.StatusBadRequest, "publicKey and response are required strings")
		return
	}
	pk, ok := boxKeyHex(*req.PublicKey)
	if !ok {
		writeErr(w, http.StatusUnauthorized, "Invalid public key")
		return
	}
	ar, err := s.liveAuthRequest(r.Context(), pk)
	if err != nil {
		s.fail(w, r, err, "Request not found")
		return
	}
	if ar.Response != nil {
		writeErr(w, http.StatusConflict, errRequestAnswered)
		return
	}
	// The store keeps the first answer and says whether this one was it,
	// in the same statement: a terminal that collects the answer at once
	// (deleting the request) cannot turn a success into "not found". A
	// poll that renewed the request of this key meanwhile gets the answer
	// on the new request, which is the same terminal's.
	switch err := s.st.AnswerAuthRequest(r.Context(), pk, *req.Response, acct); {
	case errors.Is(err, store.ErrAnswered):
		writeErr(w, http.StatusConflict, errRequestAnswered)
		return
	case err != nil:
		s.fail(w, r, err, "Request not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// lookupEntry is one pending request in the answer of GET
// /v1/auth/request/lookup.
type lookupEntry struct {
	PublicKey  string `json:"publicKey"`
	SupportsV2 bool   `json:"supportsV2"`
	CreatedAt  int64  `json:"createdAt"`
	ExpiresAt  int64  `json:"expiresAt"`
}

// getAuthRequestLookup: GET /v1/auth/request/lookup?code=XXXXX-XXXXX
// (Bearer; this relay only) → {requests:[{publicKey (standard base64),
// supportsV2, createdAt, expiresAt}]}: the live, unanswered requests whose
// key's pairing code (crypto.PairingCode) is code, oldest first. A code
// that does not parse is 400. The route needs a token although it returns
// only public keys, because a pending request's public key is all a caller
// needs to collect its answer's token once it is approved: only a device
// already logged in may turn a code it was shown into a key. The approving
// client must check the code of every key itself (the relay could answer
// any key). Past Config.LookupRate for the account: 429 with Retry-After.
func (s *Server) getAuthRequestLookup(w http.ResponseWriter, r *http.Request, acct string) {
	if !s.limited(w, s.lim.lookup, acct) {
		return
	}
	code, err := crypto.ParsePairingCode(r.URL.Query().Get("code"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "code must be a pairing code of 10 base32 characters (XXXXX-XXXXX)")
		return
	}
	now := s.nowMs()
	ttl := s.cfg.PairingTTL.Milliseconds()
	list, err := s.st.AuthRequestsSince(r.Context(), now-ttl+1, maxLookup)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	out := []lookupEntry{}
	for _, ar := range list {
		if ar.Response != nil || s.expired(ar, now) {
			continue
		}
		raw, err := hex.DecodeString(ar.PublicKey)
		if err != nil || len(raw) != 32 {
			continue
		}
		if crypto.PairingCode([32]byte(raw)) != code {
			continue
		}
		out = append(out, lookupEntry{PublicKey: crypto.EncodeBase64(raw), SupportsV2: ar.SupportsV2, CreatedAt: ar.CreatedAt, ExpiresAt: ar.CreatedAt + ttl})
	}
	writeJSON(w, http.StatusOK, map[string]any{"requests": out})
}

// sweepAuthRequests removes the requests past their lifetime.
func (s *Server) sweepAuthRequests(ctx context.Context) {
	n, err := s.st.DeleteAuthRequestsBefore(ctx, s.nowMs()-s.cfg.PairingTTL.Milliseconds())
	if err != nil {
		s.log.Error().Err(err).Msg("remove expired pairing requests")
		return
	}
	if n > 0 {
		s.log.Debug().Int64("removed", n).Msg("expired pairing requests")
	}
}
