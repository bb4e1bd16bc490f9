package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/happy-dev/happy/webapp"
)

// ServeWebApp serves the web app's files (webapp.Handler: the app's
// Content-Security-Policy lets the page connect to relays, base URLs) on l
// until ctx ends, then shuts down within 5 seconds; happy web runs it for
// a relay that does not serve the app itself. It returns nil after ctx
// ended, or the listener's error.
func ServeWebApp(ctx context.Context, l net.Listener, files fs.FS, relays []string) error {
	hs := &http.Server{Handler: webapp.Handler(files, relays), ReadHeaderTimeout: 30 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	})
	defer stop()
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("app: serve web app on %s: %w", l.Addr(), err)
	}
	return nil
}
