package server

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/server/store"
)

// Web Push (RFC 8030) to the web app's service worker, its messages
// encrypted for the browser (RFC 8291, aes128gcm) and signed with the
// relay's VAPID key (RFC 8292). The relay's part: a P-256 VAPID key made
// on first start, the account's subscriptions (routes below, the store's
// web_push_subscriptions), and one message per subscription for each
// push-event whose payload is {v, sessionId, kind, sealed}: sealed is the
// CLI's ciphertext, which the relay cannot open (docs/ARCHITECTURE.md,
// "Push events").

// vapidFile is the VAPID key's file in the data folder: the base64url text
// of the 32-byte P-256 private scalar.
const vapidFile = "vapid.key"

// DefaultWebPushServices are the push services a subscription's endpoint
// may name when Config.WebPushServices is nil: the browsers' own (Chrome,
// Edge and most others through FCM; Firefox; Safari; Windows).
var DefaultWebPushServices = []string{"fcm.googleapis.com", "*.push.services.mozilla.com", "*.push.apple.com", "*.notify.windows.com"}

const (
	// maxWebPushSubscriptions is how many subscriptions one account may
	// hold (a browser that forgets its own is removed once its push
	// service answers 404 or 410).
	maxWebPushSubscriptions = 50
	// maxEndpoint bounds a subscription's endpoint URL.
	maxEndpoint = 2048
	// webPushTTL is how long a push service keeps a message for a browser
	// that is offline (RFC 8030 TTL).
	webPushTTL = time.Hour
	// webPushAnswerLimit bounds the answer body the relay reads (and
	// drops) from a push service.
	webPushAnswerLimit = 64 << 10
)

// vapidKeys is the relay's VAPID key pair: private is the 32-byte P-256
// scalar, public the 65-byte uncompressed point.
type vapidKeys struct {
	private, public []byte
}

// publicB64 is the public key as the browser's applicationServerKey takes
// it: base64url without padding.
func (k vapidKeys) publicB64() string { return base64.RawURLEncoding.EncodeToString(k.public) }

// newVAPID draws a fresh key pair.
func newVAPID() (vapidKeys, error) {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return vapidKeys{}, fmt.Errorf("server: create VAPID key: %w", err)
	}
	return vapidKeys{private: key.Bytes(), public: key.PublicKey().Bytes()}, nil
}

// ErrBadVAPID is returned for a VAPID key (file or database row) that is
// not a P-256 private scalar.
var ErrBadVAPID = errors.New("server: malformed VAPID key")

// vapidFromScalar checks a private scalar and derives the public key.
func vapidFromScalar(scalar []byte) (vapidKeys, error) {
	key, err := ecdh.P256().NewPrivateKey(scalar)
	if err != nil {
		return vapidKeys{}, fmt.Errorf("%w: %w", ErrBadVAPID, err)
	}
	return vapidKeys{private: key.Bytes(), public: key.PublicKey().Bytes()}, nil
}

// parseVAPID reads vapid.key: base64url of the scalar, white space around
// it allowed.
func parseVAPID(b []byte) (vapidKeys, error) {
	scalar, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(string(b)), "="))
	if err != nil {
		return vapidKeys{}, fmt.Errorf("%w: %w", ErrBadVAPID, err)
	}
	return vapidFromScalar(scalar)
}

// loadOrCreateVAPID reads the key at path, or makes one and writes it
// there (0600); created says which.
func loadOrCreateVAPID(path string) (vapidKeys, bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k, perr := parseVAPID(b)
		if perr != nil {
			return vapidKeys{}, false, fmt.Errorf("server: VAPID key %s: %w", path, perr)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return vapidKeys{}, false, fmt.Errorf("server: read VAPID key: %w", err)
	}
	k, err := newVAPID()
	if err != nil {
		return vapidKeys{}, false, err
	}
	f, err := private.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY)
	if err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: create VAPID key: %w", err)
	}
	if _, err := f.WriteString(base64.RawURLEncoding.EncodeToString(k.private) + "\n"); err != nil {
		_ = f.Close()
		return vapidKeys{}, false, fmt.Errorf("server: write VAPID key: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return vapidKeys{}, false, fmt.Errorf("server: sync VAPID key: %w", err)
	}
	if err := f.Close(); err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: close VAPID key: %w", err)
	}
	return k, true, nil
}

// vapidKey loads the relay's VAPID key. Relays sharing a PostgreSQL
// database share it too (a subscription is bound to the key it was made
// with, and any of them may send): the database's relay_secret row
// "vapid", created on first start from the data folder's vapid.key when
// there is one, else at random. Alone, the data folder's vapid.key.
func (s *Server) vapidKey(ctx context.Context) (k vapidKeys, from string, created bool, err error) {
	local := filepath.Join(s.cfg.DataDir, vapidFile)
	p, ok := s.st.(pooler)
	if !ok {
		k, created, err = loadOrCreateVAPID(local)
		return k, local, created, err
	}
	from = "database"
	b, rerr := os.ReadFile(local)
	switch {
	case rerr == nil:
		if k, err = parseVAPID(b); err != nil {
			return vapidKeys{}, "", false, fmt.Errorf("server: VAPID key %s: %w", local, err)
		}
		from = "database, from " + local
	case errors.Is(rerr, os.ErrNotExist):
		if k, err = newVAPID(); err != nil {
			return vapidKeys{}, "", false, err
		}
	default:
		return vapidKeys{}, "", false, fmt.Errorf("server: read VAPID key: %w", rerr)
	}
	k, created, err = sharedVAPID(ctx, p.Pool(), k)
	return k, from, created, err
}

// sharedVAPID returns the database's VAPID key, storing candidate as it
// when there is none yet (relay_secret, secret.go's table and lock).
func sharedVAPID(ctx context.Context, pool *pgxpool.Pool, candidate vapidKeys) (vapidKeys, bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: shared VAPID key: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, secretLock); err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: shared VAPID key: %w", err)
	}
	if _, err := tx.Exec(ctx, secretSchema); err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: shared VAPID key: create table: %w", err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO relay_secret (name, seed) VALUES ('vapid', $1) ON CONFLICT (name) DO NOTHING`, candidate.private)
	if err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: shared VAPID key: %w", err)
	}
	var scalar []byte
	if err := tx.QueryRow(ctx, `SELECT seed FROM relay_secret WHERE name = 'vapid'`).Scan(&scalar); err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: shared VAPID key: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: shared VAPID key: %w", err)
	}
	k, err := vapidFromScalar(scalar)
	if err != nil {
		return vapidKeys{}, false, fmt.Errorf("server: the database's VAPID key: %w", err)
	}
	return k, tag.RowsAffected() == 1, nil
}

// webPushSubject is the VAPID "sub" claim: Config.WebPushSubject, else the
// relay's public URL when it is https, else a mailto: address that names
// nobody (push services want one, and may refuse a relay whose messages
// misbehave without a way to reach its operator: set --web-push-subject).
func (s *Server) webPushSubject() string {
	if s.cfg.WebPushSubject != "" {
		return s.cfg.WebPushSubject
	}
	if strings.HasPrefix(s.cfg.PublicURL, "https://") {
		return s.cfg.PublicURL
	}
	return "mailto:relay@happy.invalid"
}

// webPushSender sends one Web Push message: payload encrypted for sub
// (RFC 8291) and posted to its endpoint with a VAPID signature (RFC 8292),
// urgency "high" or "normal" (RFC 8030). It returns the push service's
// HTTP status, or an error when no answer came (or the message could not be
// made: a subscription whose keys are not a P-256 point and a 16-byte
// secret).
type webPushSender interface {
	Send(ctx context.Context, sub store.WebPushSubscription, payload []byte, urgency string) (int, error)
}

// libWebPush is webPushSender with github.com/SherClockHolmes/webpush-go,
// which pads every message to one 4096-byte record (so its length tells
// nothing either). Its elliptic-curve code uses crypto/elliptic's
// deprecated functions, which still work; it ignores VapidExpiration (its
// JWTs last 12 hours).
type libWebPush struct {
	client  *http.Client
	keys    vapidKeys
	subject string
}

// Send implements webPushSender.
func (l *libWebPush) Send(ctx context.Context, sub store.WebPushSubscription, payload []byte, urgency string) (int, error) {
	subject := strings.TrimPrefix(l.subject, "mailto:") // the library adds it back to anything but an https URL
	// The library appends its padding to the message's own array: give it
	// a copy without spare capacity, never the caller's (shared) slice.
	msg := make([]byte, len(payload))
	copy(msg, payload)
	resp, err := webpush.SendNotificationWithContext(ctx, msg,
		&webpush.Subscription{Endpoint: sub.Endpoint, Keys: webpush.Keys{Auth: sub.Auth, P256dh: sub.P256dh}},
		&webpush.Options{HTTPClient: l.client, Subscriber: subject, TTL: int(webPushTTL / time.Second), Urgency: webpush.Urgency(urgency),
			VAPIDPublicKey: l.keys.publicB64(), VAPIDPrivateKey: base64.RawURLEncoding.EncodeToString(l.keys.private)})
	if err != nil {
		return 0, fmt.Errorf("web push to %s: %w", endpointHost(sub.Endpoint), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webPushAnswerLimit))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// endpointHost names an endpoint in logs by its host (the path is the
// browser's capability).
func endpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(bad URL)"
	}
	return u.Host
}

// webPushPayload is what a push service carries to the service worker:
// the relay session id and kind in clear (the relay knows them anyway) and
// the CLI's sealed part as it came.
type webPushPayload struct {
	V         int    `json:"v"`
	SessionID string `json:"sessionId"`
	Kind      string `json:"kind"`
	Sealed    string `json:"sealed,omitempty"`
}

// webPush sends ev to every Web Push subscription of the account, all at
// once, and removes a subscription whose push service answers 404 or 410.
func (p *pusher) webPush(ctx context.Context, ev pushEvent, subs []store.WebPushSubscription) pushOutcome {
	payload, err := json.Marshal(webPushPayload{V: 1, SessionID: ev.session, Kind: ev.kind, Sealed: ev.sealed})
	if err != nil {
		return pushOutcome{reason: "web push payload: " + err.Error()}
	}
	urgency := "high"
	if ev.kind == "done" {
		urgency = "normal"
	}
	var mu sync.Mutex
	var out pushOutcome
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Go(func() {
			status, err := p.web.Send(ctx, sub, payload, urgency)
			reason := ""
			switch {
			case err != nil:
				reason = "network"
				p.failed("webpush", reason, err)
			case status >= 200 && status < 300:
				p.sent.WithLabelValues("webpush").Inc()
			case status == http.StatusNotFound || status == http.StatusGone:
				reason = "gone"
				p.errs.WithLabelValues("webpush", reason).Inc()
				if err := p.s.st.RemoveWebPushSubscription(ctx, ev.account, sub.Endpoint); err != nil {
					p.s.log.Warn().Err(err).Msg("a push service said a subscription is gone; it was not removed")
					break
				}
				p.removed.WithLabelValues("webpush").Inc()
				p.s.log.Info().Str("service", endpointHost(sub.Endpoint)).Int("status", status).Msg("web push subscription removed: its push service says it is gone")
			case status == http.StatusTooManyRequests || status >= 500:
				reason = "unavailable"
				p.failed("webpush", reason, fmt.Errorf("%s answered %d", endpointHost(sub.Endpoint), status))
			default:
				reason = "rejected"
				p.failed("webpush", reason, fmt.Errorf("%s answered %d", endpointHost(sub.Endpoint), status))
			}
			mu.Lock()
			defer mu.Unlock()
			if reason == "" {
				out.delivered++
			} else if out.reason == "" && reason != "gone" {
				out.reason = "web push failed (" + reason + ")"
			}
		})
	}
	wg.Wait()
	return out
}

// ---- routes ----

// getVAPIDPublicKey: GET /v1/web-push/vapid-public-key → {publicKey}: the
// key a browser subscribes with (applicationServerKey), base64url.
func (s *Server) getVAPIDPublicKey(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"publicKey": s.push.vapid.publicB64()})
}

// webPushBody is the body of the subscription routes: a
// PushSubscription's toJSON() (expirationTime and anything else ignored).
type webPushBody struct {
	Endpoint *string `json:"endpoint"`
	Keys     *struct {
		P256dh *string `json:"p256dh"`
		Auth   *string `json:"auth"`
	} `json:"keys"`
}

// decodeKey reads a subscription key: base64url (the browser's form) or
// standard base64, padded or not.
func decodeKey(s string) ([]byte, error) {
	t := strings.TrimRight(s, "=")
	if b, err := base64.RawURLEncoding.DecodeString(t); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(t)
}

// checkEndpoint refuses an endpoint that is not an https URL of one of the
// allowed push services (Config.WebPushServices): the relay posts to it,
// so an account must not be able to point the relay at any address. Plain
// http is taken only for a loopback address that is listed (tests).
func (s *Server) checkEndpoint(raw string) error {
	services := s.cfg.WebPushServices
	if services == nil {
		services = DefaultWebPushServices
	}
	refuse := fmt.Errorf("endpoint must be an https URL of a known push service (%s)", strings.Join(services, ", "))
	if len(raw) > maxEndpoint {
		return fmt.Errorf("endpoint is longer than %d characters", maxEndpoint)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return refuse
	}
	host := strings.ToLower(u.Hostname())
	allowed := false
	for _, svc := range services {
		svc = strings.ToLower(svc)
		if host == svc || (strings.HasPrefix(svc, "*.") && strings.HasSuffix(host, svc[1:])) {
			allowed = true
			break
		}
	}
	if !allowed {
		return refuse
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
			return nil
		}
	}
	return refuse
}

// readWebPushBody reads a subscription; withKeys (a new one) checks its
// endpoint and keys.
func (s *Server) readWebPushBody(w http.ResponseWriter, r *http.Request, withKeys bool) (store.WebPushSubscription, error) {
	var req webPushBody
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return store.WebPushSubscription{}, err
	}
	bad := func(msg string) error { return &httpError{status: http.StatusBadRequest, msg: msg} }
	if req.Endpoint == nil || *req.Endpoint == "" {
		return store.WebPushSubscription{}, bad("endpoint is a required string")
	}
	sub := store.WebPushSubscription{Endpoint: *req.Endpoint}
	if !withKeys {
		return sub, nil // any endpoint may go
	}
	if err := s.checkEndpoint(sub.Endpoint); err != nil {
		return sub, bad(err.Error())
	}
	if req.Keys == nil || req.Keys.P256dh == nil || req.Keys.Auth == nil {
		return sub, bad("keys.p256dh and keys.auth are required strings")
	}
	pub, err := decodeKey(*req.Keys.P256dh)
	if err != nil {
		return sub, bad("keys.p256dh is not base64url")
	}
	if _, err := ecdh.P256().NewPublicKey(pub); err != nil {
		return sub, bad("keys.p256dh is not a P-256 public key (65-byte uncompressed point)")
	}
	auth, err := decodeKey(*req.Keys.Auth)
	if err != nil || len(auth) != 16 {
		return sub, bad("keys.auth must be base64url of 16 bytes")
	}
	sub.P256dh = base64.RawURLEncoding.EncodeToString(pub)
	sub.Auth = base64.RawURLEncoding.EncodeToString(auth)
	return sub, nil
}

// postWebPushSubscription: POST /v1/web-push/subscriptions {endpoint,
// keys: {p256dh, auth}} → {success: true}. The same endpoint again
// replaces its keys. Refused (400): an endpoint that is not an https URL
// of an allowed push service, keys that are not a P-256 point and a
// 16-byte secret, a 51st subscription.
func (s *Server) postWebPushSubscription(w http.ResponseWriter, r *http.Request, acct string) {
	sub, err := s.readWebPushBody(w, r, true)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	list, err := s.st.WebPushSubscriptions(r.Context(), acct)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	known := false
	for _, x := range list {
		known = known || x.Endpoint == sub.Endpoint
	}
	if !known && len(list) >= maxWebPushSubscriptions {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("this account has %d web push subscriptions, the most a relay keeps: turn notifications off on a browser you no longer use", len(list)))
		return
	}
	if err := s.st.AddWebPushSubscription(r.Context(), acct, sub, s.nowMs()); err != nil {
		s.fail(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

// deleteWebPushSubscription: DELETE /v1/web-push/subscriptions with the
// body of POST (keys not needed) or ?endpoint=URL → {success: true}, also
// when the account had no such subscription.
func (s *Server) deleteWebPushSubscription(w http.ResponseWriter, r *http.Request, acct string) {
	endpoint := r.URL.Query().Get("endpoint")
	if endpoint == "" {
		sub, err := s.readWebPushBody(w, r, false)
		if err != nil {
			s.fail(w, r, err, "")
			return
		}
		endpoint = sub.Endpoint
	}
	if err := s.st.RemoveWebPushSubscription(r.Context(), acct, endpoint); err != nil {
		s.fail(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}
