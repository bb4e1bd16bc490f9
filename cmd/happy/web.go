//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/embedded"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/webapp"
)

// webAppFiles are the web app's static files that happy web serves when
// the relay it pairs with does not serve them (--relay); tests swap them.
var webAppFiles = webapp.Files()

type webOptions struct {
	relay  string
	listen string
}

// newWebCmd builds `happy web` (and its alias `happy auth pair-browser`,
// use naming the command): a one-time link that pairs a browser with the
// account.
func newWebCmd(f *factory, use string) *cobra.Command {
	var o webOptions
	cmd := &cobra.Command{
		Use:   use,
		Short: "Pair a browser with this account: print a one-time web app link (a QR code when a phone can open it)",
		Long: `Pair a browser with the account of this machine (which must hold the account
secret): happy opens a pairing request for a fresh key, approves it at once
with the account secret, and prints the link

  <web app URL>/#pair=<the key's secret>

Opening it in a browser pairs the browser: the web app posts the key's public
half to the relay once, receives the token and the sealed account secret,
and can then read every session of the account. The part after '#' never
leaves the browser. The link works once, and only for a few minutes (5 on
happy's own relay); keep it private until then.

The page that opens the link receives the account secret, so the link
goes to the web app a relay serves (at its root) only when that relay is
one this machine runs, trusted like this CLI: the built-in relay of this
home (which proves it is), or the relay you declared yours in settings.json:

  "trustedWebRelay": "https://relay.example"

For any other relay (or another one named with --relay URL), and for a
trusted relay that serves no web app (no HTML page at its root, as the
reference relay without its web build), happy web serves the app itself on
a loopback port (--listen) until interrupted, and the link names the
relay: http://127.0.0.1:PORT/#pair=…&relay=<URL>.

The QR code is shown only for a link a phone can open: an https page
beyond this machine. A loopback page is for a browser on this machine, and
a plain http page on the network gets no WebCrypto from browsers, which
the app needs; happy says so and names the ways to https (the README's
"From your phone").`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWeb(ctx, f, o, webAppFiles)
		},
	}
	cmd.Flags().StringVar(&o.relay, "relay", "", "the relay the browser talks to (default: this machine's); unless it is trusted, happy web serves the app itself")
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:0", "where happy web serves the web app when it does (host:port)")
	return cmd
}

func sameURL(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/"))
}

// webRelayTrusted says whether happy web may hand the pairing link to the
// web app the relay at url serves (docs/ARCHITECTURE.md, "The web app"):
// JavaScript from that relay receives the account secret, so it must come
// from a process this person runs: the relay of this home on loopback
// (proved as embedded.Verify proves it), or the relay named by
// trustedWebRelay in settings.json. Any other relay only gets the app that
// happy web serves itself. A malformed trustedWebRelay is an error.
func webRelayTrusted(ctx context.Context, h home.Dir, url string) (bool, error) {
	st, err := settings.Load(h.Settings())
	if err != nil {
		return false, err
	}
	own, err := st.TrustedWebRelay()
	if err != nil {
		return false, fmt.Errorf("%w (in %s)", err, h.Settings())
	}
	if own != "" && sameURL(own, url) {
		return true, nil
	}
	u, err := neturl.Parse(url)
	if err != nil || u.Scheme != "http" {
		return false, nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return false, nil
	}
	return embedded.Verify(ctx, h, url) == nil, nil
}

// relayServesWebApp says whether the relay at url answers GET / with an
// HTML page (the web app the pairing link opens). A relay without one (our
// relay started without an app, the reference relay without its web
// build) answers 404 or a plain-text greeting there, and a link to it
// would be dead. An unreachable relay, or no answer within 5 s, counts as
// no app.
func relayServesWebApp(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return resp.StatusCode == http.StatusOK && ct == "text/html"
}

func runWeb(ctx context.Context, f *factory, o webOptions, files fs.FS) error {
	if o.relay != "" {
		// Refuse a relay URL the link cannot carry before anything is approved.
		if _, err := relay.BrowserLink("http://127.0.0.1", relay.BrowserPairing{Relay: o.relay}); err != nil {
			return &usageError{err: fmt.Errorf("--relay: %w", err)}
		}
	}
	h, err := f.home()
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	creds, api, url, err := accountAPI(ctx, f, o.relay, "pairing a browser")
	if err != nil {
		return err
	}
	defer api.CloseIdleConnections()
	trusted, err := webRelayTrusted(ctx, h, url)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	// A trusted relay that serves no web app would make the link a dead
	// one: happy web serves the app then, as for any other relay (with or
	// without --relay, which may name the configured relay).
	appLess := trusted && !relayServesWebApp(ctx, url)
	if appLess {
		trusted = false
	}
	var l net.Listener
	if !trusted {
		if l, err = net.Listen("tcp", o.listen); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("web app: listen on %s: %w", o.listen, err)}
		}
		defer l.Close()
	}
	p, err := relay.PairBrowser(ctx, api, creds)
	switch {
	case errors.Is(err, relay.ErrUnauthorized) && o.relay != "":
		return &exitError{code: exitRelay, err: fmt.Errorf("the relay %s refuses this machine's token: happy web pairs a browser with the account this machine is logged in to, on its relay (%w)", url, err)}
	case err != nil:
		return &exitError{code: exitRelay, err: err}
	}
	webBase := url
	if !trusted {
		webBase = "http://" + l.Addr().String()
		p.Relay = url
	}
	link, err := relay.BrowserLink(webBase, p)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	w := f.stdout
	printWebLink(w, link, url, trusted)
	pub := crypto.BoxPublicKey(p.Secret)
	if _, err := api.LookupPairing(ctx, crypto.PairingCode(pub)); errors.Is(err, relay.ErrRouteUnsupported) {
		fmt.Fprintf(f.stderr, "happy: warning: %s does not look like happy's own relay: the reference relay never expires a pairing request and hands its answer to every caller, so this link stays usable, more than once, until the browser has used it\n", url)
	}
	if trusted {
		return nil
	}
	switch {
	case appLess:
		fmt.Fprintf(w, "The relay %s serves no web app, so happy web serves it.\n", url)
	case o.relay == "":
		fmt.Fprint(w, untrustedRelayNote(url, h.Settings()))
	}
	fmt.Fprintf(w, "Serving the web app at %s/ for the relay %s; stop with Ctrl-C.\n", webBase, url)
	if err := app.ServeWebApp(ctx, l, files, []string{url}); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}
