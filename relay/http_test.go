package relay

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// roundTrip answers every request with a fixed status and body, without a network.
type roundTrip struct {
	status int
	body   string
	seen   []*http.Request
	bodies []string
}

func (r *roundTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
	}
	r.seen = append(r.seen, req)
	r.bodies = append(r.bodies, string(b))
	return &http.Response{StatusCode: r.status, Body: io.NopCloser(strings.NewReader(r.body)), Header: http.Header{}, Request: req}, nil
}

func newTestAPI(t *testing.T, rt http.RoundTripper) *API {
	t.Helper()
	a, err := NewAPI(HTTPConfig{BaseURL: "http://relay.test:3005/", Token: "tok", ClientName: "cli/test", HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   error
		msg    string
	}{
		{401, `{"error":"Invalid token"}`, ErrUnauthorized, "GET /v1/sessions: HTTP 401: Invalid token"},
		{403, `{}`, ErrUnauthorized, "GET /v1/sessions: HTTP 403: {}"},
		{404, `{"error":"Session not found"}`, ErrNotFound, "GET /v1/sessions: HTTP 404: Session not found"},
		{400, `{"message":"bad"}`, ErrRejected, "GET /v1/sessions: HTTP 400: bad"},
		{413, ``, ErrRejected, "GET /v1/sessions: HTTP 413"},
		{429, `slow down`, ErrUnavailable, "GET /v1/sessions: HTTP 429: slow down"},
		{500, `<html>`, ErrUnavailable, "GET /v1/sessions: HTTP 500: <html>"},
		{503, `{"error":{"x":1}}`, ErrUnavailable, `GET /v1/sessions: HTTP 503: {"error":{"x":1}}`},
	} {
		api := newTestAPI(t, &roundTrip{status: tc.status, body: tc.body})
		_, err := api.ListSessions(context.Background())
		var se *StatusError
		if !errors.As(err, &se) || !errors.Is(err, tc.want) {
			t.Fatalf("%d: err = %v", tc.status, err)
		}
		if se.Error() != tc.msg {
			t.Fatalf("%d: message %q, want %q", tc.status, se.Error(), tc.msg)
		}
	}
}

func TestRequestShapes(t *testing.T) {
	rt := &roundTrip{status: 200, body: `{"session":{"id":"s1","seq":4,"metadata":"bWV0YQ==","metadataVersion":1,"agentState":null,"agentStateVersion":0,"dataEncryptionKey":"AA==","active":true,"activeAt":5,"createdAt":6,"updatedAt":7}}`}
	api := newTestAPI(t, rt)
	dek := "AA=="
	s, err := api.CreateSession(context.Background(), SessionCreate{Tag: "t-1", Metadata: "bWV0YQ==", DataEncryptionKey: &dek})
	if err != nil {
		t.Fatal(err)
	}
	want := SessionInfo{ID: "s1", Seq: 4, Metadata: "bWV0YQ==", MetadataVersion: 1, DataEncryptionKey: &dek, Active: true, ActiveAt: 5, CreatedAt: 6, UpdatedAt: 7}
	if s.ID != want.ID || s.Seq != want.Seq || s.AgentState != nil || *s.DataEncryptionKey != dek || s.CreatedAt != 6 || s.UpdatedAt != 7 || !s.Active {
		t.Fatalf("got %+v", s)
	}
	req := rt.seen[0]
	if req.Method != "POST" || req.URL.String() != "http://relay.test:3005/v1/sessions" {
		t.Fatalf("request %s %s", req.Method, req.URL)
	}
	if req.Header.Get("Authorization") != "Bearer tok" || req.Header.Get("X-Happy-Client") != "cli/test" || req.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", req.Header)
	}
	if rt.bodies[0] != `{"tag":"t-1","metadata":"bWV0YQ==","agentState":null,"dataEncryptionKey":"AA=="}` {
		t.Fatalf("body %s", rt.bodies[0])
	}
}

func TestFetchMessagesQueryAndOrder(t *testing.T) {
	rt := &roundTrip{status: 200, body: `{"messages":[{"id":"m3","seq":3,"content":{"t":"encrypted","c":"YQ=="},"localId":"r.1","createdAt":1,"updatedAt":1},{"id":"m4","seq":4,"content":{"t":"encrypted","c":"Yg=="},"localId":null,"createdAt":2,"updatedAt":2}],"hasMore":true}`}
	api := newTestAPI(t, rt)
	p, err := api.FetchMessages(context.Background(), "s/1", 2, 9999)
	if err != nil {
		t.Fatal(err)
	}
	if rt.seen[0].URL.String() != "http://relay.test:3005/v3/sessions/s%2F1/messages?after_seq=2&limit=500" {
		t.Fatalf("url %s", rt.seen[0].URL)
	}
	if !p.HasMore || len(p.Messages) != 2 || p.Messages[0].LocalIDOrEmpty() != "r.1" || p.Messages[1].LocalID != nil || p.Messages[1].Content.C != "Yg==" {
		t.Fatalf("page %+v", p)
	}
	// A seq that does not ascend past after_seq breaks the contract.
	rt.body = `{"messages":[{"id":"m2","seq":2,"content":{"t":"encrypted","c":""}}],"hasMore":false}`
	if _, err := api.FetchMessages(context.Background(), "s", 2, 10); !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v", err)
	}
}

func TestSendMessagesReceipts(t *testing.T) {
	rt := &roundTrip{status: 200, body: `{"messages":[{"id":"a","seq":7,"localId":"r.1","createdAt":1,"updatedAt":1}]}`}
	api := newTestAPI(t, rt)
	msgs := []OutgoingMessage{{Content: "YQ==", LocalID: "r.1"}}
	got, err := api.SendMessages(context.Background(), "s", msgs)
	if err != nil || len(got) != 1 || got[0].Seq != 7 || got[0].LocalIDOrEmpty() != "r.1" || got[0].New {
		t.Fatalf("got %+v %v", got, err)
	}
	if rt.bodies[0] != `{"messages":[{"content":"YQ==","localId":"r.1"}]}` {
		t.Fatalf("body %s", rt.bodies[0])
	}
	msgs = append(msgs, OutgoingMessage{Content: "Yg==", LocalID: "r.2"})
	if _, err := api.SendMessages(context.Background(), "s", msgs); !errors.Is(err, ErrProtocol) {
		t.Fatalf("missing receipt: %v", err)
	}
	if _, err := api.SendMessages(context.Background(), "s", nil); !errors.Is(err, ErrRejected) {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := api.SendMessages(context.Background(), "s", make([]OutgoingMessage, 101)); !errors.Is(err, ErrRejected) {
		t.Fatalf("oversize batch: %v", err)
	}
}

func TestRequestTimeoutIsUnavailable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	api, err := NewAPI(HTTPConfig{BaseURL: srv.URL, RequestTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = api.Health(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestRefusedConnectionIsUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	api, err := NewAPI(HTTPConfig{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Health(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestCallerCancelIsNotUnavailable(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	api, _ := NewAPI(HTTPConfig{BaseURL: srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled while the request waits for its answer.
	go func() { <-arrived; cancel() }()
	err := api.Health(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestAuthRequestStates(t *testing.T) {
	for _, tc := range []struct {
		body string
		want AuthRequestState
		err  error
	}{
		{`{"state":"requested"}`, AuthRequestState{State: "requested"}, nil},
		{`{"state":"authorized","token":"t","response":"cg=="}`, AuthRequestState{State: "authorized", Token: "t", Response: "cg=="}, nil},
		{`{"state":"authorized","token":"t"}`, AuthRequestState{}, ErrProtocol},
		{`{"state":"weird"}`, AuthRequestState{}, ErrProtocol},
		{`[]`, AuthRequestState{}, ErrProtocol},
	} {
		rt := &roundTrip{status: 200, body: tc.body}
		api := newTestAPI(t, rt)
		got, err := api.AuthRequest(context.Background(), []byte{1, 2, 3})
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Fatalf("%s: err = %v", tc.body, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%s: got %+v %v", tc.body, got, err)
		}
		var sent map[string]any
		_ = json.Unmarshal([]byte(rt.bodies[0]), &sent)
		if sent["publicKey"] != "AQID" || sent["supportsV2"] != true {
			t.Fatalf("sent %v", sent)
		}
	}
}

func TestBadBaseURL(t *testing.T) {
	if _, err := NewAPI(HTTPConfig{BaseURL: "relay.test"}); err == nil {
		t.Fatal("accepted a URL without scheme")
	}
}

// FuzzFetchMessagesAnswer feeds arbitrary answer bodies to the message page
// decoder: it must return a typed error or a page whose seqs ascend.
func FuzzFetchMessagesAnswer(f *testing.F) {
	f.Add(200, []byte(`{"messages":[{"id":"m","seq":1,"content":{"t":"encrypted","c":"YQ=="},"localId":"x"}],"hasMore":false}`))
	f.Add(200, []byte(`{"messages":null}`))
	f.Add(500, []byte(`{"error":"boom"}`))
	f.Add(200, []byte(`{"messages":[{"seq":"1"}]}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		api := newTestAPI(t, &roundTrip{status: status, body: string(body)})
		p, err := api.FetchMessages(context.Background(), "s", 0, 10)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrUnavailable) &&
				!errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		last := int64(0)
		for _, m := range p.Messages {
			if m.Seq <= last {
				t.Fatalf("seq %d after %d accepted", m.Seq, last)
			}
			last = m.Seq
		}
	})
}
