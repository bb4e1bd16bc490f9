// Package webapp holds happy's own web app: static files (HTML, CSS, plain ES
// modules and two vendored libraries) that a browser loads from `happy
// server` and that read and control sessions the way the CLI does, with the
// account secret kept in the browser. docs/ARCHITECTURE.md, section "The web
// app", has the approach; this package only embeds the files.
package webapp

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Files returns the app's files rooted at the app's base URL: index.html,
// app.css, js/*.js and lib/<library>-<version>/… (each library with its
// LICENSE; not vendor/, whose subfolders cmd/go leaves out of a module
// zip, so `go install …@latest` would build an app without them). The file
// system is read-only and safe for concurrent use.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// fs.Sub fails only for an invalid path; "static" is valid.
		panic(err)
	}
	return sub
}
