package server

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/wstransport"

	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/backend"
)

// Error texts of the reference relay that clients may match on.
const (
	errMissingAuth     = "Missing authorization header"
	errInvalidToken    = "Invalid token"
	errSessionNotFound = "Session not found"
)

// httpError is a handler failure with its status and client-facing text.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s", e.status, e.msg) }

func badRequest(format string, a ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"Internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// errDiskFull is what a client is told of a write the relay's storage had
// no room for (backend.DiskFull), over HTTP (with 507) and in socket acks,
// with causeDiskFull as the machine-readable cause.
const (
	errDiskFull   = "Insufficient storage: the relay's disk is full, so nothing was stored; the write can succeed once its operator frees space"
	causeDiskFull = "disk_full"
)

// fail answers err: an *httpError as is, store.ErrNotFound as 404 with
// notFound, a full disk as 507 {error, cause: "disk_full"}, an unavailable
// database as 503, anything else as a logged 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		writeErr(w, he.status, he.msg)
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, notFound)
	case backend.DiskFull(err):
		s.metrics.storeErrors.WithLabelValues("full").Inc()
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("store full: write refused")
		writeJSON(w, http.StatusInsufficientStorage, map[string]string{"error": errDiskFull, "cause": causeDiskFull})
	case errors.Is(err, store.ErrUnavailable):
		// The database is away (restarting, unreachable): a retry
		// succeeds once it is back (message batches are idempotent by
		// localId, so a write whose answer was lost is not doubled).
		s.metrics.storeErrors.WithLabelValues("unavailable").Inc()
		s.log.Warn().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("store unavailable")
		w.Header().Set("Retry-After", "1")
		writeErr(w, http.StatusServiceUnavailable, "Storage unavailable, retry")
	case errors.Is(err, context.Canceled):
		writeErr(w, 499, "Request cancelled")
	default:
		s.metrics.storeErrors.WithLabelValues("internal").Inc()
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("request failed")
		writeErr(w, http.StatusInternalServerError, "Internal error")
	}
}

// readJSON decodes the request body (at most limit bytes) into v. Errors are
// *httpError: 413 for an oversized body, 408 for one that came too slowly
// (bodyDeadlines), 400 with the reason otherwise.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	b, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("Request body too large (limit %d bytes)", limit)}
		}
		if he := slowBodyAnswer(err); he != nil {
			return he
		}
		return badRequest("Cannot read request body: %v", err)
	}
	return decodeJSON(b, v)
}

// decodeJSON unmarshals one JSON value from b into v; errors are 400s that
// say what was wrong and where.
func decodeJSON(b []byte, v any) error {
	if len(strings.TrimSpace(string(b))) == 0 {
		return badRequest("Request body is empty (want a JSON object)")
	}
	if !utf8.Valid(b) {
		// encoding/json would replace the bad bytes with U+FFFD and the
		// relay would store something other than what was sent.
		for i := 0; i < len(b); {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return badRequest("Request body is not valid UTF-8 (byte %d)", i+1) // 1-based, like the JSON errors
			}
			i += n
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badRequest("Invalid JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "body"
			}
			return badRequest("Invalid JSON: %s must be %s, got %s", field, jsonKind(te.Type), te.Value)
		default:
			return badRequest("Invalid JSON: %v", err)
		}
	}
	return nil
}

// jsonKind names the JSON kind a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return t.String()
	}
}

// authed wraps h with token verification (Authorization: Bearer <token>).
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, acct string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hdr := r.Header.Get("Authorization")
		if !strings.HasPrefix(hdr, "Bearer ") {
			writeErr(w, http.StatusUnauthorized, errMissingAuth)
			return
		}
		acct, err := s.verifyToken(r.Context(), strings.TrimPrefix(hdr, "Bearer "))
		if err != nil {
			if errors.Is(err, ErrInvalidToken) {
				writeErr(w, http.StatusUnauthorized, errInvalidToken)
			} else {
				s.fail(w, r, err, "")
			}
			return
		}
		h(w, r, acct)
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	sio := s.ws.Upgrades(s.io, s.io.ServeHandler(nil))
	// The engine exists once the handler does.
	wstransport.KeepHeartbeats(s.io, s.cfg.PingInterval, s.cfg.PingTimeout)
	mux.Handle("/v1/updates/", sio)
	mux.Handle("/v1/updates", sio)

	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /ready", s.ready)
	mux.HandleFunc("GET /v1/happy/identity", s.getIdentity)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("POST /v1/auth", s.postAuth)
	mux.HandleFunc("POST /v1/auth/request", s.postAuthRequest)
	mux.HandleFunc("GET /v1/auth/request/status", s.getAuthRequestStatus)
	mux.HandleFunc("POST /v1/auth/response", s.authed(s.postAuthResponse))
	mux.HandleFunc("GET /v1/auth/request/lookup", s.authed(s.getAuthRequestLookup))
	mux.HandleFunc("POST /v1/auth/request/collected", s.authed(s.postAuthRequestCollected))
	mux.HandleFunc("POST /v1/auth/revoke", s.authed(s.postAuthRevoke))

	mux.HandleFunc("POST /v1/sessions", s.authed(s.postSession))
	mux.HandleFunc("GET /v1/sessions", s.authed(s.getSessions))
	mux.HandleFunc("GET /v2/sessions/active", s.authed(s.getActiveSessions))
	mux.HandleFunc("POST /v1/sessions/{id}/archive", s.authed(s.postArchive))
	mux.HandleFunc("DELETE /v1/sessions/{id}", s.authed(s.deleteSession))
	mux.HandleFunc("GET /v1/sessions/{id}/messages", s.authed(s.getLegacyMessages))
	mux.HandleFunc("POST /v3/sessions/{id}/messages", s.authed(s.postMessages))
	mux.HandleFunc("GET /v3/sessions/{id}/messages", s.authed(s.getMessages))
	mux.HandleFunc("GET /v3/sessions/{id}/messages/stream", s.authed(s.getMessageStream))
	mux.HandleFunc("POST /v1/sessions/{id}/push-event", s.authed(s.postPushEvent))

	mux.HandleFunc("POST /v1/sessions/{id}/attachments/request-upload", s.authed(s.postRequestUpload))
	mux.HandleFunc("POST /v1/sessions/{id}/attachments/request-download", s.authed(s.postRequestDownload))
	mux.HandleFunc("PUT /v1/sessions/{id}/attachments/{file}", s.authed(s.putAttachment))
	mux.HandleFunc("GET /v1/sessions/{id}/attachments/{file}", s.authed(s.getAttachment))

	mux.HandleFunc("POST /v1/machines", s.authed(s.postMachine))
	mux.HandleFunc("GET /v1/machines", s.authed(s.getMachines))
	mux.HandleFunc("GET /v1/machines/{id}", s.authed(s.getMachine))

	mux.HandleFunc("GET /v1/push-tokens", s.authed(s.getPushTokens))
	mux.HandleFunc("POST /v1/push-tokens", s.authed(s.postPushToken))
	mux.HandleFunc("DELETE /v1/push-tokens/{token}", s.authed(s.deletePushToken))
	mux.HandleFunc("GET /v1/push/status", s.authed(s.getPushStatus))
	mux.HandleFunc("GET /v1/web-push/vapid-public-key", s.getVAPIDPublicKey)
	mux.HandleFunc("POST /v1/web-push/subscriptions", s.authed(s.postWebPushSubscription))
	mux.HandleFunc("DELETE /v1/web-push/subscriptions", s.authed(s.deleteWebPushSubscription))
	// What the reference app reads at start and this relay has nothing
	// behind: empty answers in the reference relay's shapes.
	mux.HandleFunc("GET /v1/friends", s.authed(getFriends))
	mux.HandleFunc("GET /v1/account/settings", s.authed(getAccountSettings))
	mux.HandleFunc("GET /v1/account/profile", s.authed(s.getAccountProfile))
	mux.HandleFunc("GET /v1/artifacts", s.authed(getArtifacts))
	mux.HandleFunc("GET /v1/feed", s.authed(getFeed))

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && wantsBanner(r) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, Banner)
			return
		}
		if s.app != nil && !isAPIPath(r.URL.Path) {
			s.app.ServeHTTP(w, r)
			return
		}
		writeErr(w, http.StatusNotFound, fmt.Sprintf("Route %s %s not found", r.Method, r.URL.Path))
	})
	return s.proxied(s.capRequests(s.cors(s.metrics.instrument(s.bodyDeadlines(mux)))))
}

// health: GET /health → {status:"ok", timestamp (Unix ms, the relay's
// clock: happy doctor measures clock skew from it), service, version}.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "timestamp": s.nowMs(), "service": "happy-server", "version": buildinfo.Version})
}

// ready: GET /ready → 200 {status:"ready"} when the store and the bus
// (with one) answer within 2 s; 503 {status:"unavailable"|"draining",
// error} otherwise, so that a load balancer sends no new clients to a
// relay that cannot serve them or is shutting down. The error names only
// what is away ("database unavailable", "bus unavailable"): the route is
// public, so the cause (addresses, user names) goes to the debug log.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining", "error": "the relay is shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.storeReady(ctx); err != nil {
		s.log.Debug().Err(err).Msg("ready: database unavailable")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "error": "database unavailable"})
		return
	}
	if s.cl != nil {
		if err := s.cl.bus.Ready(ctx); err != nil {
			s.log.Debug().Err(err).Msg("ready: bus unavailable")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "error": "bus unavailable"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}

// storeReady asks the store something cheap: a PostgreSQL ping, or a
// token generation read.
func (s *Server) storeReady(ctx context.Context) error {
	if p, ok := s.st.(pooler); ok {
		return p.Pool().Ping(ctx)
	}
	_, err := s.st.TokenGeneration(ctx, "")
	return err
}

// ---- auth ----

func decodeB64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// boxKeyHex decodes a base64 X25519 public key (32 bytes) into hex.
func boxKeyHex(b64 string) (string, bool) {
	b, err := decodeB64(b64)
	if err != nil || len(b) != 32 {
		return "", false
	}
	return hex.EncodeToString(b), true
}

// ---- sessions ----

// postSession: POST /v1/sessions {tag, metadata, agentState?, dataEncryptionKey?}
// → {session}; an existing tag returns the session unchanged, agentState is
// ignored on create (as the reference). Past Config.SessionRate for the
// account: 429 with Retry-After.
func (s *Server) postSession(w http.ResponseWriter, r *http.Request, acct string) {
	if !s.limited(w, s.lim.session, acct) {
		return
	}
	var req struct {
		Tag               *string         `json:"tag"`
		Metadata          *string         `json:"metadata"`
		AgentState        json.RawMessage `json:"agentState"`
		DataEncryptionKey *string         `json:"dataEncryptionKey"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.Tag == nil || *req.Tag == "" || req.Metadata == nil {
		writeErr(w, http.StatusBadRequest, "tag (non-empty) and metadata are required strings")
		return
	}
	sess, created, err := s.st.GetOrCreateSession(r.Context(), acct, store.NewSession{Tag: *req.Tag, Metadata: *req.Metadata, DataEncryptionKey: req.DataEncryptionKey}, s.nowMs())
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	s.resumePresence(acct, sess.ID)
	if created {
		s.emitUpdate(r.Context(), acct, wire.BodyNewSession{T: "new-session", Session: toWireSessionBase(sess)}, roomUserScoped(acct))
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": toWireSession(sess)})
}

// getSessions: GET /v1/sessions → {sessions}, 150 most recently updated.
func (s *Server) getSessions(w http.ResponseWriter, r *http.Request, acct string) {
	list, err := s.st.Sessions(r.Context(), acct, 150)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	out := make([]wire.ListedSession, len(list))
	for i, x := range list {
		out[i] = toWireSession(x)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func intParam(q map[string][]string, name string, min, max int64) (int64, bool, error) {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return 0, true, badRequest("%s must be an integer, got %q", name, v[0])
	}
	if n < min || n > max {
		return 0, true, badRequest("%s must be between %d and %d, got %d", name, min, max, n)
	}
	return n, true, nil
}

// getActiveSessions: GET /v2/sessions/active?limit=1..500 (150) → {sessions}
// active with activity in the last 15 minutes.
func (s *Server) getActiveSessions(w http.ResponseWriter, r *http.Request, acct string) {
	limit, ok, err := intParam(r.URL.Query(), "limit", 1, 500)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if !ok {
		limit = 150
	}
	since := s.cfg.Now().Add(-DefaultActiveWindow).UnixMilli()
	list, err := s.st.ActiveSessions(r.Context(), acct, since, int(limit))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	out := make([]wire.Session, len(list))
	for i, x := range list {
		out[i] = toWireSessionBase(x)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// postArchive: POST /v1/sessions/:id/archive → {success:true}; the session
// goes inactive and the account's apps get activity active:false.
func (s *Server) postArchive(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	now := s.nowMs()
	if err := s.st.SetSessionActive(r.Context(), acct, id, false, now); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	s.stopPresence(acct, id)
	s.emitEphemeral(acct, wire.Activity{Type: "activity", ID: id, Active: false, ActiveAt: now}, roomUserScoped(acct))
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// deleteSession: DELETE /v1/sessions/:id → {success:true}; messages, usage
// reports and attachments go with it; the apps get update delete-session.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	if err := s.st.DeleteSession(r.Context(), acct, id); err != nil {
		s.fail(w, r, err, "Session not found or not owned by user")
		return
	}
	s.stopPresence(acct, id)
	s.emitUpdate(r.Context(), acct, wire.BodyDeleteSession{T: "delete-session", SID: id}, roomUserScoped(acct))
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// getLegacyMessages: GET /v1/sessions/:id/messages → {messages}, newest first, at most 150.
func (s *Server) getLegacyMessages(w http.ResponseWriter, r *http.Request, acct string) {
	list, err := s.st.RecentMessages(r.Context(), acct, r.PathValue("id"), 150)
	if err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	out := make([]wire.Message, len(list))
	for i, m := range list {
		out[i] = toWireMessage(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
}

// postMessages: POST /v3/sessions/:id/messages {messages:[{content, localId}]}
// (1–100) → {messages:[{id, seq, localId, new?, createdAt, updatedAt}]}
// sorted by seq; new is true on the rows this post stored (a localId
// already taken answers with the row stored then). New rows fan out as
// new-message updates.
func (s *Server) postMessages(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		Messages *[]struct {
			Content *string `json:"content"`
			LocalID *string `json:"localId"`
		} `json:"messages"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.Messages == nil {
		writeErr(w, http.StatusBadRequest, "messages is required (an array of 1 to 100 {content, localId})")
		return
	}
	msgs := *req.Messages
	if len(msgs) < 1 || len(msgs) > 100 {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("messages must hold 1 to 100 items, got %d", len(msgs)))
		return
	}
	in := make([]store.NewMessage, len(msgs))
	for i, m := range msgs {
		if m.Content == nil || m.LocalID == nil || *m.LocalID == "" {
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("messages[%d]: content and localId (non-empty) are required strings", i))
			return
		}
		in[i] = store.NewMessage{LocalID: *m.LocalID, Content: *m.Content}
	}
	sid := r.PathValue("id")
	// Appending (which allocates the message and update seqs) and the
	// fan-out keep the account's seq order (order.go).
	res, err := s.appendOrdered(r.Context(), acct, sid, in)
	if err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	created := make(map[string]bool, len(res.Created))
	for _, m := range res.Created {
		created[m.ID] = true
	}
	out := make([]wire.MessageRef, len(res.Rows))
	for i, m := range res.Rows {
		out[i] = wire.MessageRef{ID: m.ID, Seq: m.Seq, LocalID: m.LocalID, New: created[m.ID], CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
}

// getMessages: GET /v3/sessions/:id/messages?after_seq=N|before_seq=N&limit=1..500
// → {messages, hasMore}; after_seq (default 0) ascending, before_seq descending.
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	after, hasAfter, err := intParam(q, "after_seq", 0, 1<<53)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	before, hasBefore, err := intParam(q, "before_seq", 1, 1<<53)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if hasAfter && hasBefore {
		writeErr(w, http.StatusBadRequest, "after_seq and before_seq are mutually exclusive")
		return
	}
	limit, ok, err := intParam(q, "limit", 1, 500)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if !ok {
		limit = 100
	}
	p := store.Page{After: after, Limit: int(limit)}
	if hasBefore {
		p = store.Page{Before: before, Limit: int(limit)}
	}
	list, more, err := s.st.Messages(r.Context(), acct, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	out := make([]wire.Message, len(list))
	for i, m := range list {
		out[i] = toWireMessage(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out, "hasMore": more})
}

// ---- machines ----

// postMachine: POST /v1/machines {id, metadata, daemonState?, dataEncryptionKey?}
// → {machine}; an existing id is returned unchanged.
func (s *Server) postMachine(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		ID                *string `json:"id"`
		Metadata          *string `json:"metadata"`
		DaemonState       *string `json:"daemonState"`
		DataEncryptionKey *string `json:"dataEncryptionKey"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.ID == nil || *req.ID == "" || req.Metadata == nil {
		writeErr(w, http.StatusBadRequest, "id (non-empty) and metadata are required strings")
		return
	}
	m, created, err := s.st.GetOrCreateMachine(r.Context(), acct, store.NewMachine{ID: *req.ID, Metadata: *req.Metadata, DaemonState: req.DaemonState, DataEncryptionKey: req.DataEncryptionKey}, s.nowMs())
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if created {
		s.emitUpdate(r.Context(), acct, wire.BodyNewMachine{T: "new-machine", MachineID: m.ID, Seq: m.Seq, Metadata: m.Metadata, MetadataVersion: m.MetadataVersion,
			DaemonState: m.DaemonState, DaemonStateVersion: m.DaemonStateVersion, DataEncryptionKey: m.DataEncryptionKey, Active: m.Active,
			ActiveAt: m.ActiveAt, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}, roomUserScoped(acct))
		md := m.Metadata
		s.emitUpdate(r.Context(), acct, wire.BodyUpdateMachine{T: "update-machine", MachineID: m.ID, Metadata: &wire.Versioned{Value: &md, Version: m.MetadataVersion}},
			roomMachine(acct, m.ID), roomUserScoped(acct))
	}
	writeJSON(w, http.StatusOK, map[string]any{"machine": toWireMachine(m, false)})
}

// getMachines: GET /v1/machines → a bare array of machines (with seq).
func (s *Server) getMachines(w http.ResponseWriter, r *http.Request, acct string) {
	list, err := s.st.Machines(r.Context(), acct)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	out := make([]wire.Machine, len(list))
	for i, m := range list {
		out[i] = toWireMachine(m, true)
	}
	writeJSON(w, http.StatusOK, out)
}

// getMachine: GET /v1/machines/:id → {machine} or 404 "Machine not found".
func (s *Server) getMachine(w http.ResponseWriter, r *http.Request, acct string) {
	m, err := s.st.Machine(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err, "Machine not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"machine": toWireMachine(m, true)})
}

// ---- the reference app's social and account routes ----

// getFriends: GET /v1/friends → {friends:[]}: this relay has no friends.
func getFriends(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, http.StatusOK, map[string]any{"friends": []any{}})
}

// getAccountSettings: GET /v1/account/settings → {settings:null,
// settingsVersion:0}: this relay keeps no app settings (the reference app
// then keeps its own on the device).
func getAccountSettings(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, http.StatusOK, map[string]any{"settings": nil, "settingsVersion": 0})
}

// getAccountProfile: GET /v1/account/profile → {id, timestamp (Unix ms),
// firstName, lastName, username, avatar, github: null, connectedServices:
// []}: the account id and nothing else, as the reference relay answers
// for an account without a name or a connected service.
func (s *Server) getAccountProfile(w http.ResponseWriter, _ *http.Request, acct string) {
	writeJSON(w, http.StatusOK, map[string]any{
		"id": acct, "timestamp": s.cfg.Now().UnixMilli(),
		"firstName": nil, "lastName": nil, "username": nil, "avatar": nil, "github": nil,
		"connectedServices": []any{},
	})
}

// getArtifacts: GET /v1/artifacts → []: this relay stores no artifacts.
func getArtifacts(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, http.StatusOK, []any{})
}

// getFeed: GET /v1/feed[?before&after&limit] → {items:[], hasMore:false}:
// this relay writes no feed.
func getFeed(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, http.StatusOK, map[string]any{"items": []any{}, "hasMore": false})
}

// ---- push ----

// getPushTokens: GET /v1/push-tokens → {tokens:[{id, token, createdAt, updatedAt}]}.
func (s *Server) getPushTokens(w http.ResponseWriter, r *http.Request, acct string) {
	list, err := s.st.PushTokens(r.Context(), acct)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	type tok struct {
		ID        string `json:"id"`
		Token     string `json:"token"`
		CreatedAt int64  `json:"createdAt"`
		UpdatedAt int64  `json:"updatedAt"`
	}
	out := make([]tok, len(list))
	for i, t := range list {
		out[i] = tok{t.ID, t.Token, t.CreatedAt, t.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

// postPushToken: POST /v1/push-tokens {token} → {success:true}.
func (s *Server) postPushToken(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		Token *string `json:"token"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.Token == nil || *req.Token == "" {
		writeErr(w, http.StatusBadRequest, "token is a required string")
		return
	}
	if err := s.st.AddPushToken(r.Context(), acct, *req.Token, s.nowMs()); err != nil {
		s.fail(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// deletePushToken: DELETE /v1/push-tokens/:token → {success:true}.
func (s *Server) deletePushToken(w http.ResponseWriter, r *http.Request, acct string) {
	if err := s.st.RemovePushToken(r.Context(), acct, r.PathValue("token")); err != nil {
		s.fail(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// postPushEvent: POST /v1/sessions/:id/push-event {kind, title, body,
// data?, sealed?} → {success: true, result, tokens, delivered, reason?}.
// The session's sockets and the apps get ephemeral session-event; then the
// device pushes go out (push.go): result "no_tokens" when the account has
// no Expo token nor Web Push subscription, "sent" when a push service took
// at least one, else "failed" with the reason. sealed is the CLI's
// ciphertext of the event (base64, at most maxSealedPush characters),
// forwarded only to Web Push.
func (s *Server) postPushEvent(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		Kind   *string        `json:"kind"`
		Title  *string        `json:"title"`
		Body   *string        `json:"body"`
		Data   map[string]any `json:"data"`
		Sealed *string        `json:"sealed"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	switch {
	case req.Kind == nil || (*req.Kind != "done" && *req.Kind != "permission" && *req.Kind != "question"):
		writeErr(w, http.StatusBadRequest, `kind must be "done", "permission" or "question"`)
		return
	case req.Title == nil || len([]rune(*req.Title)) < 1 || len([]rune(*req.Title)) > 200:
		writeErr(w, http.StatusBadRequest, "title must be a string of 1 to 200 characters")
		return
	case req.Body == nil || len([]rune(*req.Body)) < 1 || len([]rune(*req.Body)) > 500:
		writeErr(w, http.StatusBadRequest, "body must be a string of 1 to 500 characters")
		return
	case req.Sealed != nil && !validSealed(*req.Sealed):
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("sealed must be base64 of at most %d characters", maxSealedPush))
		return
	}
	sid := r.PathValue("id")
	if _, err := s.st.Session(r.Context(), acct, sid); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	s.emitEphemeral(acct, wire.SessionEvent{Type: "session-event", SessionID: sid, Kind: *req.Kind, Title: *req.Title, Body: *req.Body, Timestamp: s.nowMs()},
		roomSession(acct, sid), roomUserScoped(acct))
	ev := pushEvent{account: acct, session: sid, kind: *req.Kind, body: *req.Body}
	if req.Sealed != nil {
		ev.sealed = *req.Sealed
	}
	out := s.push.deliver(r.Context(), ev)
	res := map[string]any{"success": true, "tokens": out.targets, "delivered": out.delivered}
	switch {
	case out.targets == 0 && out.reason == "":
		res["result"] = "no_tokens"
	case out.delivered > 0:
		res["result"] = "sent"
	default:
		res["result"] = "failed"
	}
	if out.reason != "" {
		res["reason"] = out.reason
	}
	writeJSON(w, http.StatusOK, res)
}
