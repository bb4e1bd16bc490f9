package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/server/servertest"
)

// api is a tiny JSON client for one account of a test relay.
type api struct {
	t     testing.TB
	base  string
	token string
}

func newAPI(t testing.TB, r *servertest.Relay) api {
	t.Helper()
	return api{t: t, base: r.URL, token: servertest.NewAccount(t, r.URL).Token}
}

// raw sends body (a []byte is sent as is, anything else as JSON) and returns
// the status and the response bytes.
func (a api) raw(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatalf("request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// do is raw plus JSON decoding of the answer into a generic value.
func (a api) do(method, path string, body any) (int, any) {
	a.t.Helper()
	st, b := a.raw(method, path, body)
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		a.t.Fatalf("%s %s: status %d, body %q is not JSON: %v", method, path, st, b, err)
	}
	return st, v
}

// must is do that fails the test unless the status is want.
func (a api) must(want int, method, path string, body any) map[string]any {
	a.t.Helper()
	st, v := a.do(method, path, body)
	if st != want {
		a.t.Fatalf("%s %s: status %d, want %d; body %v", method, path, st, want, v)
	}
	m, _ := v.(map[string]any)
	return m
}

func obj(t testing.TB, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("want an object, got %T %v", v, v)
	}
	return m
}

func arr(t testing.TB, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("want an array, got %T %v", v, v)
	}
	return a
}

func eq(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %#v, want %#v", what, got, want)
	}
}

// keys returns the sorted key set of m as a slice.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (a api) createSession(tag, metadata string) map[string]any {
	a.t.Helper()
	return obj(a.t, a.must(200, "POST", "/v1/sessions", map[string]any{"tag": tag, "metadata": metadata, "agentState": nil, "dataEncryptionKey": nil})["session"])
}

func (a api) postMessages(sid string, msgs ...[2]string) []any {
	a.t.Helper()
	list := make([]map[string]string, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]string{"localId": m[0], "content": m[1]}
	}
	return arr(a.t, a.must(200, "POST", "/v3/sessions/"+sid+"/messages", map[string]any{"messages": list})["messages"])
}
