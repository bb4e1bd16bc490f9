package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strings"
	"time"
)

// WebAppHandler serves the static files of a web app from files (an fs.FS
// whose root holds index.html): GET and HEAD only (405 otherwise), a file
// for a path that names one, index.html for "/" and for any path whose
// last element has no extension (the app's own routes), 404 for a missing
// file with an extension. Answers carry no-referrer, nosniff and a
// frame-ancestors 'none' policy; index.html is never cached (it is what a
// new version changes).
func WebAppHandler(files fs.FS) http.Handler {
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "frame-ancestors 'none'")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name != "" && name != "index.html" {
			if st, err := fs.Stat(files, name); err == nil && !st.IsDir() {
				fileServer.ServeHTTP(w, r)
				return
			}
			if path.Ext(name) != "" {
				http.NotFound(w, r)
				return
			}
		}
		b, err := fs.ReadFile(files, "index.html")
		if err != nil {
			http.Error(w, "this build has no web app (index.html missing)", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b)
	})
}

// ServeWebApp serves WebAppHandler(files) on l until ctx ends, then shuts
// down within 5 seconds. It returns nil after ctx ended, or the listener's
// error.
func ServeWebApp(ctx context.Context, l net.Listener, files fs.FS) error {
	hs := &http.Server{Handler: WebAppHandler(files), ReadHeaderTimeout: 30 * time.Second}
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
