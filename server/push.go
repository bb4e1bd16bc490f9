package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/happy-dev/happy/server/store"
)

// Device pushes of a session's push-event (docs/ARCHITECTURE.md, "Push
// events"): to the account's Expo push tokens (the reference app) through
// Expo's push API, and to the account's Web Push subscriptions (happy's web
// app) through their push services (webpush.go). Neither third party gets
// anything of the session in clear: Expo gets a fixed title per kind, the
// session folder's last name that happy's CLI sends (a fixed text for an
// event from another CLI, whose body is the session title), and the session
// id; a push service gets only the ciphertext the CLI sealed with the
// session's key, the session id and the kind.

// DefaultExpoPushURL is Expo's push API, `happy server --expo-push-url`'s
// default.
const DefaultExpoPushURL = "https://exp.host/--/api/v2/push/send"

// DefaultPushTimeout is Config.PushTimeout's default.
const DefaultPushTimeout = 10 * time.Second

const (
	// expoBatch is the most messages one request to Expo carries (its
	// documented limit).
	expoBatch = 100
	// maxSealedPush is the longest sealed part of a push-event (base64
	// characters): with the session id and kind it must fit one Web Push
	// record of 4096 bytes (RFC 8291) with its 86-byte header, 16-byte tag
	// and padding delimiter.
	maxSealedPush = 3000
	// expoAnswerLimit bounds the body of Expo's answer the relay reads.
	expoAnswerLimit = 1 << 20
)

// pushTitles are the notification titles per kind, the reference CLI's.
var pushTitles = map[string]string{
	"done":       "It's ready!",
	"permission": "Permission request",
	"question":   "Clarification needed",
}

// pushFixedBody is the Expo body of a push-event without a sealed part:
// one from a CLI that sends the session title as its body.
const pushFixedBody = "A session needs you"

// expoTokenPattern matches what Expo accepts as a push token (its SDK's
// isExpoPushToken): ExponentPushToken[…], ExpoPushToken[…] or a bare UUID.
var expoTokenPattern = regexp.MustCompile(`^(Expo(nent)?PushToken\[.+\]|[a-zA-Z0-9]{8}-[a-zA-Z0-9]{4}-[a-zA-Z0-9]{4}-[a-zA-Z0-9]{4}-[a-zA-Z0-9]{12})$`)

// expoErrors are the ticket errors counted under their own name in
// happy_relay_push_errors_total; any other is "other".
var expoErrors = map[string]bool{"DeviceNotRegistered": true, "MessageTooBig": true, "MessageRateExceeded": true,
	"MismatchSenderId": true, "InvalidCredentials": true}

// pushEvent is one push-event to deliver: the account, the relay session,
// the kind, the body the CLI sent and its sealed part ("" without one).
type pushEvent struct {
	account, session, kind, body, sealed string
}

// pushOutcome is what became of a push-event's device pushes: targets are
// the account's Expo tokens and Web Push subscriptions, delivered those the
// service accepted; reason says why some were not.
type pushOutcome struct {
	targets, delivered int
	reason             string
}

// pusher delivers the device pushes of push-events and counts them.
type pusher struct {
	s       *Server
	expoURL string // "" off
	client  *http.Client
	web     webPushSender
	vapid   vapidKeys
	sent    *prometheus.CounterVec // {service}
	errs    *prometheus.CounterVec // {service, reason}
	removed *prometheus.CounterVec // {service}
}

// newPusher builds the relay's pusher and registers its counters on reg:
// happy_relay_push_sent_total{service}, happy_relay_push_errors_total{service,
// reason} and happy_relay_push_removed_total{service}, service "expo" or
// "webpush".
func newPusher(s *Server, reg *prometheus.Registry, vapid vapidKeys) *pusher {
	client := &http.Client{
		// A push service answers itself; a redirect would make the relay
		// post to wherever the answer points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	p := &pusher{s: s, expoURL: s.cfg.ExpoPushURL, client: client, vapid: vapid,
		sent:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "happy_relay_push_sent_total", Help: "Device pushes the push service accepted, by service (expo, webpush)."}, []string{"service"}),
		errs:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "happy_relay_push_errors_total", Help: "Device pushes that failed, by service and reason."}, []string{"service", "reason"}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "happy_relay_push_removed_total", Help: "Expo tokens and Web Push subscriptions removed because their service said they are gone."}, []string{"service"}),
	}
	p.web = &libWebPush{client: client, keys: vapid, subject: s.webPushSubject()}
	for _, svc := range []string{"expo", "webpush"} {
		p.sent.WithLabelValues(svc)
		p.removed.WithLabelValues(svc)
	}
	reg.MustRegister(p.sent, p.errs, p.removed)
	return p
}

// failed counts one failed push of service for reason and logs it.
func (p *pusher) failed(service, reason string, err error) {
	p.errs.WithLabelValues(service, reason).Inc()
	p.s.log.Warn().Err(err).Str("service", service).Str("reason", reason).Msg("device push not delivered")
}

// deliver sends ev's device pushes within Config.PushTimeout: Expo and Web
// Push at the same time. A failure is counted, logged and said in the
// outcome's reason; it is never an error of the push-event.
func (p *pusher) deliver(ctx context.Context, ev pushEvent) pushOutcome {
	ctx, cancel := context.WithTimeout(ctx, p.s.cfg.PushTimeout)
	defer cancel()
	var out pushOutcome
	toks, err := p.s.st.PushTokens(ctx, ev.account)
	if err != nil {
		p.failed("expo", "store", err)
		out.reason = "push tokens unreadable"
	}
	subs, err := p.s.st.WebPushSubscriptions(ctx, ev.account)
	if err != nil {
		p.failed("webpush", "store", err)
		out.reason = "web push subscriptions unreadable"
	}
	out.targets = len(toks) + len(subs)
	var wg sync.WaitGroup
	var expo, web pushOutcome
	if len(toks) > 0 {
		wg.Go(func() { expo = p.expo(ctx, ev, toks) })
	}
	if len(subs) > 0 {
		wg.Go(func() { web = p.webPush(ctx, ev, subs) })
	}
	wg.Wait()
	out.delivered = expo.delivered + web.delivered
	for _, r := range []string{expo.reason, web.reason} {
		if r != "" && out.reason == "" {
			out.reason = r
		}
	}
	return out
}

// expoMessage is one message of Expo's push API.
type expoMessage struct {
	To    string   `json:"to"`
	Title string   `json:"title"`
	Body  string   `json:"body"`
	Data  expoData `json:"data"`
	Sound string   `json:"sound"`
}

// expoData is the data of an Expo message: what the reference app opens.
type expoData struct {
	SessionID string `json:"sessionId"`
	Kind      string `json:"kind"`
	URL       string `json:"url"`
}

// expoTicket is Expo's answer for one message.
type expoTicket struct {
	Status  string `json:"status"`
	ID      string `json:"id"`
	Message string `json:"message"`
	Details struct {
		Error string `json:"error"`
	} `json:"details"`
}

// expo sends ev to the account's Expo tokens, in batches of expoBatch, and
// removes a token whose ticket says DeviceNotRegistered.
func (p *pusher) expo(ctx context.Context, ev pushEvent, toks []store.PushToken) pushOutcome {
	var out pushOutcome
	if p.expoURL == "" {
		out.reason = "Expo push is not configured on this relay"
		return out
	}
	body := ev.body
	if ev.sealed == "" {
		body = pushFixedBody
	}
	data := expoData{SessionID: ev.session, Kind: ev.kind, URL: "/session/" + ev.session}
	var msgs []expoMessage
	for _, t := range toks {
		if !expoTokenPattern.MatchString(t.Token) {
			p.failed("expo", "invalid_token", fmt.Errorf("push token %.24q… is not an Expo push token", t.Token))
			continue
		}
		msgs = append(msgs, expoMessage{To: t.Token, Title: pushTitles[ev.kind], Body: body, Data: data, Sound: "default"})
	}
	for start := 0; start < len(msgs); start += expoBatch {
		batch := msgs[start:min(start+expoBatch, len(msgs))]
		tickets, err := p.expoBatch(ctx, batch)
		if err != nil {
			p.errs.WithLabelValues("expo", "request").Add(float64(len(batch)))
			p.s.log.Warn().Err(err).Int("messages", len(batch)).Msg("Expo push not delivered")
			out.reason = "Expo push failed: " + err.Error()
			continue
		}
		for i, tk := range tickets {
			switch {
			case tk.Status == "ok":
				out.delivered++
				p.sent.WithLabelValues("expo").Inc()
			case tk.Details.Error == "DeviceNotRegistered":
				p.errs.WithLabelValues("expo", "DeviceNotRegistered").Inc()
				if err := p.s.st.RemovePushToken(ctx, ev.account, batch[i].To); err != nil {
					p.s.log.Warn().Err(err).Msg("Expo said a device is not registered; its token was not removed")
					continue
				}
				p.removed.WithLabelValues("expo").Inc()
			default:
				reason := tk.Details.Error
				if !expoErrors[reason] {
					reason = "other"
				}
				p.failed("expo", reason, fmt.Errorf("the Expo ticket is %s: %s (%s)", tk.Status, tk.Message, tk.Details.Error))
				out.reason = "Expo refused a push: " + tk.Message
			}
		}
	}
	return out
}

// expoBatch posts one batch and returns one ticket per message. Errors: the
// request failed, Expo answered another status than 200, or its answer is
// not {data: [ticket…]} with one ticket per message.
func (p *pusher) expoBatch(ctx context.Context, batch []expoMessage) ([]expoTicket, error) {
	b, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("encode Expo messages: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.expoURL, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("the Expo request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post to Expo: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, expoAnswerLimit))
	if err != nil {
		return nil, fmt.Errorf("read Expo's answer: %w", err)
	}
	var answer struct {
		Data   []expoTicket `json:"data"`
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	jerr := json.Unmarshal(raw, &answer)
	if resp.StatusCode != http.StatusOK {
		if jerr == nil && len(answer.Errors) > 0 {
			return nil, fmt.Errorf("the Expo push API answered %d: %s: %s", resp.StatusCode, answer.Errors[0].Code, answer.Errors[0].Message)
		}
		return nil, fmt.Errorf("the Expo push API answered %d", resp.StatusCode)
	}
	if jerr != nil {
		return nil, fmt.Errorf("the Expo push API's answer is not JSON: %w", jerr)
	}
	if len(answer.Data) != len(batch) {
		return nil, fmt.Errorf("the Expo push API answered %d tickets for %d messages", len(answer.Data), len(batch))
	}
	return answer.Data, nil
}

// getPushStatus answers GET /v1/push/status → {expo: {configured, tokens},
// webPush: {subscriptions}}: which device pushes this relay sends for the
// account (`happy doctor`).
func (s *Server) getPushStatus(w http.ResponseWriter, r *http.Request, acct string) {
	toks, err := s.st.PushTokens(r.Context(), acct)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	subs, err := s.st.WebPushSubscriptions(r.Context(), acct)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"expo":    map[string]any{"configured": s.cfg.ExpoPushURL != "", "tokens": len(toks)},
		"webPush": map[string]any{"subscriptions": len(subs)},
	})
}

// validSealed reports whether s is a push-event's sealed part: 1 to
// maxSealedPush characters of standard base64.
func validSealed(s string) bool {
	if s == "" || len(s) > maxSealedPush {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}
