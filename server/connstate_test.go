package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestCloseDoesNotWaitForUnusedConnections: a connection that never sent a
// request (a browser's preconnect) does not hold Close up: it is closed at
// shutdown. net/http counts such a connection as busy for its first five
// seconds, as long as Close's own shutdown timeout, so before, Close
// failed with "context deadline exceeded" and left it open.
func TestCloseDoesNotWaitForUnusedConnections(t *testing.T) {
	for _, name := range []string{"silent", "half a request line"} {
		t.Run(name, func(t *testing.T) {
			srv, l := newLocal(t)
			served := make(chan error, 1)
			go func() { served <- srv.Serve(context.Background(), l) }()
			unused, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer unused.Close()
			if name != "silent" {
				if _, err := io.WriteString(unused, "GET /rea"); err != nil {
					t.Fatal(err)
				}
			}
			// The accept loop takes connections in order: once a later
			// one is answered, the unused one has been accepted.
			resp, err := http.Get("http://" + l.Addr().String() + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()

			if err := srv.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := <-served; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			_ = unused.SetReadDeadline(time.Now().Add(time.Minute))
			n, err := unused.Read(make([]byte, 64))
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("read on the unused connection after Close: %d bytes, %v; want it closed", n, err)
			}
		})
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read" && !op.Timeout()
}
