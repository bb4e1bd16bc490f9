//go:build unix

package main

import (
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"strings"
	"time"

	"github.com/happy-dev/happy/internal/settings"
)

// reach is who can use a URL: what decides whether happy shows a QR code
// for a phone (docs/ARCHITECTURE.md, "Reaching the relay").
type reach int

const (
	// reachPhone: https on an address beyond this machine. Whether the
	// phone's network reaches it is the person's setup; the page gets
	// WebCrypto.
	reachPhone reach = iota
	// reachLoopback: this machine's loopback address (localhost, 127/8,
	// ::1): on a phone it names the phone.
	reachLoopback
	// reachPlainHTTP: plain http beyond loopback. Browsers give WebCrypto,
	// which the web app decrypts with, only to secure contexts (https, or
	// the loopback address of the browser's own machine), so the web app
	// cannot work there, on a phone or anywhere.
	reachPlainHTTP
)

func (r reach) String() string {
	return [...]string{"phone", "loopback", "plain-http"}[r]
}

// phoneReach classifies the URL u and returns its host[:port] (u itself
// when it does not parse, which is then plain http for all purposes).
func phoneReach(u string) (reach, string) {
	p, err := neturl.Parse(u)
	if err != nil || p.Host == "" {
		return reachPlainHTTP, u
	}
	host := strings.ToLower(p.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return reachLoopback, p.Host
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return reachLoopback, p.Host
	}
	if p.Scheme == "https" {
		return reachPhone, p.Host
	}
	return reachPlainHTTP, p.Host
}

// phoneWays are the ways to give a phone a relay it can use.
const phoneWays = `happy server --domain NAME on a machine with a DNS name, a tunnel (Tailscale, Cloudflare Tunnel) or an https reverse proxy; see "From your phone" in happy's README`

// webCryptoWhy is why a plain http page on the network cannot run the web
// app.
const webCryptoWhy = "browsers give the web app WebCrypto, which it decrypts with, only on https pages and on their own machine's loopback address"

// printWebLink prints happy web's pairing link: with a QR code ("scan the
// code with a phone") only when a phone can open it (an https page beyond
// this machine), else the link alone and why there is no code. relay is
// the relay the page talks to; trusted says the link opens that relay's
// own web app (else happy web serves the app itself).
func printWebLink(w io.Writer, link, relay string, trusted bool) {
	r, host := phoneReach(link)
	switch r {
	case reachPhone:
		fmt.Fprintln(w, "Open this link in a browser to pair it with your account (scan the code with a phone):")
		fmt.Fprintln(w)
		showQR(w, link)
		fmt.Fprintf(w, "\n    %s\n\n", link)
		fmt.Fprint(w, keepLinkPrivate)
	case reachLoopback:
		fmt.Fprintln(w, "Open this link in a browser on this machine to pair it with your account:")
		fmt.Fprintf(w, "\n    %s\n\n", link)
		fmt.Fprint(w, keepLinkPrivate)
		if rr, _ := phoneReach(relay); !trusted && rr == reachPhone {
			fmt.Fprintf(w, "No QR code: the link opens the web app that happy web serves on %s, this machine's loopback address, which a phone cannot reach. "+
				"For a phone, declare %s yours (\"trustedWebRelay\" in settings.json) and run happy web again: the link then opens that relay's own web app.\n", host, relay)
			return
		}
		fmt.Fprintf(w, "No QR code: %s is this machine's loopback address, which a phone cannot reach (on a phone it is the phone itself). "+
			"For a phone, the relay needs an https address the phone can reach: %s.\n", host, phoneWays)
	default:
		fmt.Fprintln(w, "Open this link in a browser to pair it with your account:")
		fmt.Fprintf(w, "\n    %s\n\n", link)
		fmt.Fprint(w, keepLinkPrivate)
		fmt.Fprintf(w, "No QR code: the link is plain http on %s, and %s: there it cannot sign in. Serve the relay over https: %s.\n", host, webCryptoWhy, phoneWays)
	}
}

const keepLinkPrivate = "It works once, within a few minutes. Until it is used, whoever has it can read every session of the account: keep it private.\n"

// printTerminalPairing prints what happy auth login shows while it waits:
// the QR code of the terminal's reference link (appLink) for the happy app
// only when the relay is https beyond this machine (a phone can reach it),
// else why not and happy's own link (approveLink, with the pairing
// secret); the full pairing code for another terminal always. The code and
// approveLink carry the pairing secret: only an approval made with them
// pairs without asking (docs/ARCHITECTURE.md, section "Pairing").
func printTerminalPairing(w io.Writer, relay, appLink, approveLink, code string, timeout time.Duration) {
	switch r, _ := phoneReach(relay); r {
	case reachPhone:
		fmt.Fprintln(w, "Scan this code with the happy app on a device logged in to your account:")
		fmt.Fprintln(w)
		showQR(w, appLink)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "or open this link on that device:\n\n    %s\n\n", appLink)
		fmt.Fprintln(w, "(The app's approval cannot prove it saw this screen: this terminal then shows the account and asks you to confirm it is yours.)")
		fmt.Fprintln(w)
	case reachLoopback:
		fmt.Fprintf(w, "No QR code: the relay %s is on this machine's loopback address, which a phone cannot reach. "+
			"For a phone, the relay needs an https address the phone can reach: %s.\n\n", relay, phoneWays)
		fmt.Fprintf(w, "Approve this machine from another terminal with its link:\n\n    happy auth approve '%s'\n\n", approveLink)
	default:
		fmt.Fprintf(w, "No QR code: the relay %s is plain http: the happy app's token would cross the network in clear text, and %s, so it cannot approve from a phone's browser either. Serve the relay over https: %s.\n\n", relay, webCryptoWhy, phoneWays)
		fmt.Fprintf(w, "Approve this machine from another terminal with its link:\n\n    happy auth approve '%s'\n\n", approveLink)
	}
	fmt.Fprintf(w, "or run this on a machine logged in to the account (or type the code in the web app's Devices page):\n\n    happy auth approve %s\n\n"+
		"Only the whole code proves the approval comes from someone who sees this screen: keep it to yourself.\nWaiting for approval (up to %s)…\n", code, timeout)
}

// untrustedRelayNote is what happy web says when it serves the web app
// itself for the relay url, which this home has not declared its own: why,
// and how to use the relay's own app (settingsPath is the settings file).
// A plain http relay beyond this machine must get https first: its own web
// app runs in no browser of another machine.
func untrustedRelayNote(url, settingsPath string) string {
	why := fmt.Sprintf("The web app comes from happy web itself, not from %s: a relay's web app runs with the account's keys, so it must be trusted like this CLI. ", url)
	if r, _ := phoneReach(url); r == reachPlainHTTP {
		return why + fmt.Sprintf("That relay is plain http beyond this machine, where browsers give the web app no WebCrypto, which it decrypts with: "+
			"to use a relay's own app, give it an https address first (%s), then set %q to that https address in %s.\n", phoneWays, settings.KeyTrustedWebRelay, settingsPath)
	}
	return why + fmt.Sprintf("To use that relay's own app, declare it yours: set %q to %q in %s.\n", settings.KeyTrustedWebRelay, url, settingsPath)
}
