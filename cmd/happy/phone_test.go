//go:build unix

package main

import (
	"strings"
	"testing"
	"time"
)

func TestPhoneReach(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want reach
		host string
	}{
		{"https://relay.example.com", reachPhone, "relay.example.com"},
		{"https://relay.example.com:8443/", reachPhone, "relay.example.com:8443"},
		{"https://192.168.1.5:3005", reachPhone, "192.168.1.5:3005"},
		{"http://127.0.0.1:3005", reachLoopback, "127.0.0.1:3005"},
		{"http://127.0.0.2:3005", reachLoopback, "127.0.0.2:3005"},
		{"https://127.0.0.1:3005", reachLoopback, "127.0.0.1:3005"},
		{"http://localhost:3005", reachLoopback, "localhost:3005"},
		{"http://app.localhost", reachLoopback, "app.localhost"},
		{"http://[::1]:3005", reachLoopback, "[::1]:3005"},
		{"http://192.168.1.5:3005", reachPlainHTTP, "192.168.1.5:3005"},
		{"http://relay.example.com", reachPlainHTTP, "relay.example.com"},
		{"http://0.0.0.0:3005", reachPlainHTTP, "0.0.0.0:3005"},
	} {
		if got, host := phoneReach(tc.url); got != tc.want || host != tc.host {
			t.Errorf("phoneReach(%q) = %v %q, want %v %q", tc.url, got, host, tc.want, tc.host)
		}
	}
}

const keepPrivate = "It works once, within a few minutes. Until it is used, whoever has it can read every session of the account: keep it private.\n"

// TestWebLinkOutput: happy web shows a QR code only for a link a phone
// can open, an https page beyond this machine; a loopback page is for a
// browser on this machine, and a plain http page on the network cannot
// run the app anywhere (no WebCrypto).
func TestWebLinkOutput(t *testing.T) {
	const key = "#pair=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	var qr strings.Builder
	showQR(&qr, "https://relay.example.com/"+key)
	for _, tc := range []struct {
		name, link, relay string
		trusted           bool
		want              string
	}{
		{"https", "https://relay.example.com/" + key, "https://relay.example.com", true,
			"Open this link in a browser to pair it with your account (scan the code with a phone):\n\n" + qr.String() +
				"\n    https://relay.example.com/" + key + "\n\n" + keepPrivate},
		{"loopback relay", "http://127.0.0.1:3005/" + key, "http://127.0.0.1:3005", true,
			"Open this link in a browser on this machine to pair it with your account:\n\n" +
				"    http://127.0.0.1:3005/" + key + "\n\n" + keepPrivate +
				"No QR code: 127.0.0.1:3005 is this machine's loopback address, which a phone cannot reach (on a phone it is the phone itself). " +
				"For a phone, the relay needs an https address the phone can reach: happy server --domain NAME on a machine with a DNS name, a tunnel (Tailscale, Cloudflare Tunnel) or an https reverse proxy; see \"From your phone\" in happy's README.\n"},
		{"app served here for an https relay", "http://127.0.0.1:41000/" + key + "&relay=https%3A%2F%2Frelay.example.com", "https://relay.example.com", false,
			"Open this link in a browser on this machine to pair it with your account:\n\n" +
				"    http://127.0.0.1:41000/" + key + "&relay=https%3A%2F%2Frelay.example.com\n\n" + keepPrivate +
				"No QR code: the link opens the web app that happy web serves on 127.0.0.1:41000, this machine's loopback address, which a phone cannot reach. " +
				"For a phone, declare https://relay.example.com yours (\"trustedWebRelay\" in settings.json) and run happy web again: the link then opens that relay's own web app.\n"},
		{"plain http on the network", "http://192.168.1.5:3005/" + key, "http://192.168.1.5:3005", true,
			"Open this link in a browser to pair it with your account:\n\n" +
				"    http://192.168.1.5:3005/" + key + "\n\n" + keepPrivate +
				"No QR code: the link is plain http on 192.168.1.5:3005, and browsers give the web app WebCrypto, which it decrypts with, only on https pages and on their own machine's loopback address: there it cannot sign in. " +
				"Serve the relay over https: happy server --domain NAME on a machine with a DNS name, a tunnel (Tailscale, Cloudflare Tunnel) or an https reverse proxy; see \"From your phone\" in happy's README.\n"},
	} {
		var b strings.Builder
		printWebLink(&b, tc.link, tc.relay, tc.trusted)
		if b.String() != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, b.String(), tc.want)
		}
	}
}

// TestTerminalPairingOutput: happy auth login shows the QR code for the
// happy app only when the relay is https beyond this machine; the code and
// the link for another terminal are always there.
func TestTerminalPairingOutput(t *testing.T) {
	const link, code = "happy://terminal?AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "ABCDE-FGHIJ-KLMNO-PQRST"
	const approveLink = link + "&secret=KLMNO-PQRST"
	var qr strings.Builder
	showQR(&qr, link)
	approve := "or run this on a machine logged in to the account (or type the code in the web app's Devices page):\n\n    happy auth approve " + code + "\n\n" +
		"Only the whole code proves the approval comes from someone who sees this screen: keep it to yourself.\nWaiting for approval (up to 10m0s)…\n"
	for _, tc := range []struct{ relay, want string }{
		{"https://relay.example.com", "Scan this code with the happy app on a device logged in to your account:\n\n" + qr.String() +
			"\nor open this link on that device:\n\n    " + link + "\n\n" +
			"(The app's approval cannot prove it saw this screen: this terminal then shows the account and asks you to confirm it is yours.)\n\n" + approve},
		{"http://127.0.0.1:3005", "No QR code: the relay http://127.0.0.1:3005 is on this machine's loopback address, which a phone cannot reach. " +
			"For a phone, the relay needs an https address the phone can reach: happy server --domain NAME on a machine with a DNS name, a tunnel (Tailscale, Cloudflare Tunnel) or an https reverse proxy; see \"From your phone\" in happy's README.\n\n" +
			"Approve this machine from another terminal with its link:\n\n    happy auth approve '" + approveLink + "'\n\n" + approve},
		{"http://192.168.1.5:3005", "No QR code: the relay http://192.168.1.5:3005 is plain http: the happy app's token would cross the network in clear text, and browsers give the web app WebCrypto, which it decrypts with, only on https pages and on their own machine's loopback address, so it cannot approve from a phone's browser either. " +
			"Serve the relay over https: happy server --domain NAME on a machine with a DNS name, a tunnel (Tailscale, Cloudflare Tunnel) or an https reverse proxy; see \"From your phone\" in happy's README.\n\n" +
			"Approve this machine from another terminal with its link:\n\n    happy auth approve '" + approveLink + "'\n\n" + approve},
	} {
		var b strings.Builder
		printTerminalPairing(&b, tc.relay, link, approveLink, code, 10*time.Minute)
		if b.String() != tc.want {
			t.Errorf("relay %s:\n got %q\nwant %q", tc.relay, b.String(), tc.want)
		}
	}
}

// TestUntrustedRelayNote: happy web serving the app itself says why and
// how to use the relay's own app instead; for a plain http relay beyond
// this machine it does not send the person to declare an address whose web
// app no browser of another machine can run, but to give the relay https
// first.
func TestUntrustedRelayNote(t *testing.T) {
	const settingsPath = "/home/u/.happy/settings.json"
	why := func(url string) string {
		return "The web app comes from happy web itself, not from " + url + ": a relay's web app runs with the account's keys, so it must be trusted like this CLI. "
	}
	for _, tc := range []struct{ relay, want string }{
		{"https://relay.example.com", why("https://relay.example.com") + "To use that relay's own app, declare it yours: set \"trustedWebRelay\" to \"https://relay.example.com\" in " + settingsPath + ".\n"},
		{"http://127.0.0.1:3006", why("http://127.0.0.1:3006") + "To use that relay's own app, declare it yours: set \"trustedWebRelay\" to \"http://127.0.0.1:3006\" in " + settingsPath + ".\n"},
		{"http://192.168.1.5:3005", why("http://192.168.1.5:3005") + "That relay is plain http beyond this machine, where browsers give the web app no WebCrypto, which it decrypts with: " +
			"to use a relay's own app, give it an https address first (happy server --domain NAME on a machine with a DNS name, a tunnel (Tailscale, Cloudflare Tunnel) or an https reverse proxy; see \"From your phone\" in happy's README), " +
			"then set \"trustedWebRelay\" to that https address in " + settingsPath + ".\n"},
	} {
		if got := untrustedRelayNote(tc.relay, settingsPath); got != tc.want {
			t.Errorf("relay %s:\n got %q\nwant %q", tc.relay, got, tc.want)
		}
	}
}
