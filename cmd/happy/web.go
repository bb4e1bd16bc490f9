//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
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
		Short: "Pair a browser with this account: print (and show as a QR code) a one-time web app link",
		Long: `Pair a browser with the account of this machine (which must hold the account
secret): happy opens a pairing request for a fresh key, approves it at once
with the account secret, and prints the link

  <web app URL>/#pair=<the key's secret>

Opening it in a browser pairs the browser: the web app posts the key's public
half to the relay once, receives the token and the sealed account secret,
and can then read every session of the account. The part after '#' never
leaves the browser. The link works once, and only for a few minutes (5 on
happy's own relay); keep it private until then.

The web app is served by happy's own relay at its root. With --relay URL
(a relay that does not serve the app, or serves it elsewhere), happy web
serves the app itself on a loopback port until interrupted, and the link
names the relay: …/#pair=…&relay=<URL>.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWeb(ctx, f, o, webAppFiles)
		},
	}
	cmd.Flags().StringVar(&o.relay, "relay", "", "the relay the browser talks to, when it is not the one serving the web app (happy web then serves the app itself)")
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:0", "with --relay: where happy web serves the web app (host:port)")
	return cmd
}

// configuredURL is the relay URL of the settings, without starting the
// embedded relay.
func configuredURL(f *factory) string {
	h, err := f.home()
	if err != nil {
		return ""
	}
	st, err := settings.Load(h.Settings())
	if err != nil {
		return ""
	}
	u, _, err := settings.ServerURL(f.getenv, st)
	if err != nil {
		return ""
	}
	return u
}

func sameURL(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/"))
}

func runWeb(ctx context.Context, f *factory, o webOptions, files fs.FS) error {
	other := o.relay
	if other != "" && sameURL(other, configuredURL(f)) {
		other = "" // the relay this machine uses serves the app
	}
	if other != "" {
		// Refuse a relay URL the link cannot carry before anything is approved.
		if _, err := relay.BrowserLink("http://127.0.0.1", relay.BrowserPairing{Relay: other}); err != nil {
			return &usageError{err: fmt.Errorf("--relay: %w", err)}
		}
	}
	creds, api, url, err := accountAPI(ctx, f, other, "pairing a browser")
	if err != nil {
		return err
	}
	defer api.CloseIdleConnections()
	var l net.Listener
	if other != "" {
		if l, err = net.Listen("tcp", o.listen); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("web app: listen on %s: %w", o.listen, err)}
		}
		defer l.Close()
	}
	p, err := relay.PairBrowser(ctx, api, creds)
	switch {
	case errors.Is(err, relay.ErrUnauthorized) && other != "":
		return &exitError{code: exitRelay, err: fmt.Errorf("the relay %s refuses this machine's token: happy web pairs a browser with the account this machine is logged in to, on its relay (%w)", url, err)}
	case err != nil:
		return &exitError{code: exitRelay, err: err}
	}
	webBase := url
	if other != "" {
		webBase = "http://" + l.Addr().String()
		p.Relay = url
	}
	link, err := relay.BrowserLink(webBase, p)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	w := f.stdout
	fmt.Fprintln(w, "Open this link in the browser to pair it with your account (scan the code with a phone):")
	fmt.Fprintln(w)
	showQR(w, link)
	fmt.Fprintf(w, "\n    %s\n\n", link)
	fmt.Fprintln(w, "It works once, within a few minutes. Until it is used, whoever has it can read every session of the account: keep it private.")
	pub := crypto.BoxPublicKey(p.Secret)
	if _, err := api.LookupPairing(ctx, crypto.PairingCode(pub)); errors.Is(err, relay.ErrRouteUnsupported) {
		fmt.Fprintf(f.stderr, "happy: warning: %s does not look like happy's own relay: the reference relay never expires a pairing request and hands its answer to every caller, so this link stays usable, more than once, until the browser has used it\n", url)
	}
	if other == "" {
		return nil
	}
	fmt.Fprintf(w, "Serving the web app at %s/ for the relay %s; stop with Ctrl-C.\n", webBase, url)
	if err := app.ServeWebApp(ctx, l, files, []string{url}); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}
