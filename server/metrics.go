package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are what GET /metrics serves (Prometheus text format), one
// registry per Server. Names and labels:
//
//   - happy_relay_http_requests_total{route, code}: requests answered, by
//     route pattern ("POST /v3/sessions/{id}/messages"; "other" for
//     unrouted paths) and status code;
//   - happy_relay_http_request_duration_seconds{route}: their latency,
//     without the long-lived ones (Socket.IO and message streams);
//   - happy_relay_sockets: Socket.IO connections open now;
//   - happy_relay_message_streams: message streams open now;
//   - happy_relay_updates_total: updates sent (each once, whatever the
//     number of sockets);
//   - happy_relay_fanout_backlog_bytes: bytes of frames waiting for slow
//     sockets now; happy_relay_fanout_held_updates: updates held for
//     their predecessors from other instances now;
//   - happy_relay_store_errors_total{kind}: failed store calls answered
//     as unavailable (503) or internal (500);
//   - happy_relay_refusals_total{reason}: what the limits and rules
//     refused (limits.go, auth.go, events.go): slow_body, connections,
//     rate_auth, rate_account, rate_pairing, rate_lookup, rate_session,
//     challenge_used, challenge_window, rpc_scope, rpc_held;
//   - happy_relay_limit{limit}: the configured limits (seconds, bytes a
//     second, counts; 0 for a limit that is off);
//   - happy_relay_push_sent_total{service}, happy_relay_push_errors_total{service,
//     reason}, happy_relay_push_removed_total{service}: device pushes of
//     push-events, service "expo" or "webpush" (push.go);
//   - happy_relay_bus_publish_errors_total, happy_relay_bus_received_total,
//     happy_relay_bus_gaps_total: the bus between instances;
//   - Go runtime and process collectors.
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	updates          prometheus.Counter
	storeErrors      *prometheus.CounterVec
	busPublishErrors prometheus.Counter
	refusals         *prometheus.CounterVec
	sockets          atomic.Int64
}

// refusalReasons are the labels of happy_relay_refusals_total.
var refusalReasons = []string{"slow_body", "connections", "rate_auth", "rate_account", "rate_pairing", "rate_lookup", "rate_session",
	"challenge_used", "challenge_window", "rpc_scope", "rpc_held"}

// refused counts one refusal of reason (a label of
// happy_relay_refusals_total).
func (m *metrics) refused(reason string) { m.refusals.WithLabelValues(reason).Inc() }

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "happy_relay_http_requests_total", Help: "HTTP requests answered, by route and status code."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "happy_relay_http_request_duration_seconds", Help: "HTTP request latency by route (long-lived routes excluded).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"})
	m.updates = prometheus.NewCounter(prometheus.CounterOpts{Name: "happy_relay_updates_total", Help: "Updates sent to sockets (once per update)."})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "happy_relay_store_errors_total", Help: "Failed store calls, by kind (full, unavailable, internal)."}, []string{"kind"})
	m.busPublishErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "happy_relay_bus_publish_errors_total", Help: "Messages the bus failed to publish to the other instances."})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "happy_relay_refusals_total", Help: "Requests, connections and registrations refused by the relay's limits and rules, by reason."}, []string{"reason"})
	for _, r := range refusalReasons {
		m.refusals.WithLabelValues(r) // shown at 0 until the first refusal
	}
	m.reg.MustRegister(m.requests, m.latency, m.updates, m.storeErrors, m.busPublishErrors, m.refusals,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	counter := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
	}
	limits := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "happy_relay_limit", Help: "The relay's configured limits (seconds, bytes a second, counts; 0: off)."}, []string{"limit"})
	m.reg.MustRegister(limits)
	for name, v := range s.cfg.limitValues() {
		limits.WithLabelValues(name).Set(v)
	}
	gauge("happy_relay_sockets", "Socket.IO connections open now.", func() float64 { return float64(m.sockets.Load()) })
	gauge("happy_relay_message_streams", "Message streams open now.", func() float64 { return float64(s.streams.open.Load()) })
	gauge("happy_relay_fanout_backlog_bytes", "Bytes of frames waiting for slow sockets now.", func() float64 { return float64(s.backlogBytes()) })
	gauge("happy_relay_fanout_held_updates", "Updates held for their predecessors from other instances now.", func() float64 {
		if s.cl == nil {
			return 0
		}
		return float64(s.cl.seqr.depth())
	})
	counter("happy_relay_bus_received_total", "Messages received from the other instances.", func() float64 {
		if s.cl == nil {
			return 0
		}
		return float64(s.cl.received.Load())
	})
	counter("happy_relay_bus_gaps_total", "Times an update's predecessor never arrived within the reorder wait.", func() float64 {
		if s.cl == nil {
			return 0
		}
		return float64(s.cl.seqr.gaps.Load())
	})
	return m
}

// backlogBytes sums the frames queued on every live websocket.
func (s *Server) backlogBytes() int64 {
	if s.ws == nil {
		return 0
	}
	return s.ws.Backlog()
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument counts and times each request by the route pattern the mux
// chose (it sets r.Pattern on the request it is given).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "other"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		if !strings.HasPrefix(route, "/v1/updates") && !strings.HasSuffix(route, "/stream") {
			m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}
	})
}

// statusWriter remembers the status code; it keeps Flush and Hijack
// (message streams and websockets need them).
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError flushes and reports a failed write (http.ResponseController
// uses it: a message stream's write deadline must surface).
func (w *statusWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack implements http.Hijacker (a websocket upgrade).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("server: response cannot be hijacked")
	}
	w.code = http.StatusSwitchingProtocols
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
