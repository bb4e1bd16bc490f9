package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"
)

func TestWebAppHandler(t *testing.T) {
	files := fstest.MapFS{
		"index.html":     {Data: []byte("<p>app</p>")},
		"assets/app.js":  {Data: []byte("console.log(1)")},
		"assets/app.css": {Data: []byte("p{}")},
	}
	h := WebAppHandler(files)
	cases := []struct {
		method, path string
		status       int
		body, ctype  string
	}{
		{"GET", "/", 200, "<p>app</p>", "text/html; charset=utf-8"},
		{"GET", "/index.html", 200, "<p>app</p>", "text/html; charset=utf-8"},
		{"GET", "/sessions/abc", 200, "<p>app</p>", "text/html; charset=utf-8"},
		{"GET", "/assets/app.js", 200, "console.log(1)", "text/javascript; charset=utf-8"},
		{"GET", "/assets/missing.js", 404, "404 page not found\n", "text/plain; charset=utf-8"},
		{"GET", "/../../etc/passwd", 200, "<p>app</p>", "text/html; charset=utf-8"}, // cleaned to /etc/passwd, an app route
		{"GET", "/../index.html.bak", 404, "404 page not found\n", "text/plain; charset=utf-8"},
		{"HEAD", "/", 200, "", "text/html; charset=utf-8"},
		{"POST", "/", 405, "method not allowed\n", "text/plain; charset=utf-8"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status || rec.Body.String() != c.body || rec.Header().Get("Content-Type") != c.ctype {
			t.Errorf("%s %s = %d %q %q, want %d %q %q", c.method, c.path, rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"), c.status, c.body, c.ctype)
		}
		if rec.Header().Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s: no Referrer-Policy", c.method, c.path)
		}
	}
	rec := httptest.NewRecorder()
	WebAppHandler(fstest.MapFS{}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 404 || rec.Body.String() != "this build has no web app (index.html missing)\n" {
		t.Errorf("empty fs: %d %q", rec.Code, rec.Body.String())
	}
}

func TestServeWebApp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWebApp(ctx, l, fstest.MapFS{"index.html": {Data: []byte("hi")}}) }()
	resp, err := http.Get("http://" + l.Addr().String() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hi" {
		t.Fatalf("GET /x = %d %q", resp.StatusCode, b)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
