// Package evilrelay is a malicious relay for tests: a reverse proxy on
// 127.0.0.1 in front of a real relay (an in-process happy server, see
// server/servertest) that does what the threat model lets a relay operator,
// or anyone holding an account's bearer token, do (docs/ARCHITECTURE.md,
// "Trust"): drop, reorder and replay rows, strip fields from answers,
// answer with another session, and store rows of its own under localIds a
// client is about to use.
//
// Every plain HTTP request goes through the proxy's rules, in the order
// they were added, and then to the real relay. A Rule is a function of the
// request and of the rest of the chain (Next): it may change the request,
// answer it itself, refuse it, or change the answer it got. The Socket.IO
// websocket (/v1/updates) and the message stream (…/messages/stream) are
// passed through untouched.
//
//	r := servertest.Start(t)
//	p := evilrelay.Start(t, r.URL, evilrelay.StripSessionKey())
//	// point the client at p.URL instead of r.URL
//
// The package knows the relay contract's wire shapes and nothing else of
// happy: it imports no domain package.
package evilrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxBody bounds a request or answer the proxy buffers (the relay's own
// limit on a post is 8 MiB; a page of 500 rows stays far below this).
const maxBody = 64 << 20

// Request is one HTTP request on its way to the relay. Rules may change
// any field before they pass it on.
type Request struct {
	Method string
	// Path is the URL path, e.g. "/v3/sessions/cm123/messages".
	Path   string
	Query  url.Values
	Header http.Header
	// Body is the whole request body (nil when there is none).
	Body []byte

	vars map[string]string // the path segments On's pattern named
}

// Response is an answer to a Request: from the relay, or made by a rule.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON returns a Response with status and v encoded as its JSON body.
func JSON(status int, v any) *Response {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"evilrelay: encode answer"}`)
		status = http.StatusInternalServerError
	}
	return &Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}
}

// Next hands a request to the rest of the chain: the next rule, and after
// the last one the real relay.
type Next func(*Request) (*Response, error)

// Rule handles one request. It returns the answer the client gets; an
// error closes the client's connection without an answer (a dropped
// request, as a relay that goes away mid-request).
type Rule func(req *Request, next Next) (*Response, error)

// ErrDrop, returned by a rule, drops the request: the client's connection
// is closed without an answer.
var ErrDrop = errors.New("evilrelay: request dropped")

// Exchange is what the proxy saw of one request that went through the
// rules: for assertions on what a client asked.
type Exchange struct {
	Method, Path string
	Query        url.Values
	// Status is the answer's status (0 when the request was dropped).
	Status int
}

// Proxy is a running malicious relay. Its methods are safe for concurrent
// use.
type Proxy struct {
	// URL is the base URL clients use, e.g. "http://127.0.0.1:41234".
	URL string
	// Target is the real relay's base URL.
	Target string

	hc   *http.Client
	pass *httputil.ReverseProxy

	mu    sync.Mutex
	rules []Rule
	token string
	seen  []Exchange
}

// Start runs a proxy in front of the relay at target (a base URL) with
// rules, until the test ends.
func Start(t testing.TB, target string, rules ...Rule) *Proxy {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil || tu.Host == "" {
		t.Fatalf("evilrelay: target %q is not a base URL", target)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("evilrelay: listen: %v", err)
	}
	def, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		t.Fatalf("evilrelay: http.DefaultTransport is a %T, not an *http.Transport", http.DefaultTransport)
	}
	tr := def.Clone()
	p := &Proxy{URL: "http://" + l.Addr().String(), Target: strings.TrimRight(target, "/"),
		hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, rules: rules}
	p.pass = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(tu); r.Out.Host = tu.Host },
		FlushInterval: -1,
		Transport:     tr,
		ErrorLog:      nil,
	}
	srv := &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		tr.CloseIdleConnections()
	})
	return p
}

// Use adds rules after the ones already in place.
func (p *Proxy) Use(rules ...Rule) {
	p.mu.Lock()
	p.rules = append(p.rules, rules...)
	p.mu.Unlock()
}

// Reset removes every rule: the proxy passes everything on unchanged.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.rules = nil
	p.mu.Unlock()
}

// Token is the last bearer token a client sent through the proxy ("" when
// none yet): what an operator, or a thief of the token, holds.
func (p *Proxy) Token() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.token
}

// Seen lists the requests that went through the rules so far, oldest
// first.
func (p *Proxy) Seen() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Exchange(nil), p.seen...)
}

// passThrough reports whether r goes to the relay untouched: websocket
// upgrades and the streamed message route.
func passThrough(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" || strings.HasSuffix(r.URL.Path, "/messages/stream")
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		p.mu.Lock()
		p.token = tok
		p.mu.Unlock()
	}
	if passThrough(r) {
		p.pass.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, `{"error":"evilrelay: read request"}`, http.StatusBadRequest)
		return
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	if len(body) == 0 {
		req.Body = nil
	}
	p.mu.Lock()
	rules := append([]Rule(nil), p.rules...)
	p.mu.Unlock()
	resp, err := chain(rules, p.Forward)(req)
	ex := Exchange{Method: req.Method, Path: req.Path, Query: req.Query}
	if err == nil && resp != nil {
		ex.Status = resp.Status
	}
	p.mu.Lock()
	p.seen = append(p.seen, ex)
	p.mu.Unlock()
	if err != nil || resp == nil {
		// A drop: the connection closes without an answer.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, herr := hj.Hijack(); herr == nil {
				_ = c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, vs := range resp.Header {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// chain builds the Next that runs rules in order and then last.
func chain(rules []Rule, last Next) Next {
	next := last
	for i := len(rules) - 1; i >= 0; i-- {
		rule, after := rules[i], next
		next = func(r *Request) (*Response, error) { return rule(r, after) }
	}
	return next
}

// Forward sends req to the real relay, bypassing every rule, and returns
// its answer.
func (p *Proxy) Forward(req *Request) (*Response, error) {
	u := p.Target + req.Path
	if len(req.Query) > 0 {
		u += "?" + req.Query.Encode()
	}
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	out, err := http.NewRequest(req.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("evilrelay: %s %s: %w", req.Method, req.Path, err)
	}
	for k, vs := range req.Header {
		switch strings.ToLower(k) {
		case "content-length", "connection", "accept-encoding", "host":
			continue
		}
		out.Header[k] = vs
	}
	resp, err := p.hc.Do(out)
	if err != nil {
		return nil, fmt.Errorf("evilrelay: %s %s: %w", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("evilrelay: %s %s: read answer: %w", req.Method, req.Path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header.Clone(), Body: b}, nil
}

// Call is a request of the attacker's own, with the last token a client
// sent (Token), straight to the real relay: in is encoded as the JSON body
// (none when nil) and a 2xx answer decoded into out (when not nil). A
// non-2xx answer is an error naming the status and body.
func (p *Proxy) Call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	req := &Request{Method: method, Path: path, Query: query, Header: http.Header{}}
	if tok := p.Token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("evilrelay: %s %s: encode: %w", method, path, err)
		}
		req.Body = b
		req.Header.Set("Content-Type", "application/json")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, err := p.Forward(req)
	if err != nil {
		return err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return fmt.Errorf("evilrelay: %s %s: status %d: %s", method, path, resp.Status, resp.Body)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("evilrelay: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}
