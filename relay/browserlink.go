package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/happy-dev/happy/crypto"
)

// BrowserPairing is what a browser pairing link carries
// (docs/ARCHITECTURE.md, section "Pairing"): the X25519 box secret key of a
// pairing request that was opened and approved for the browser, and, when
// the page is not served by the relay itself, the relay's URL. It prints
// with the secret redacted.
type BrowserPairing struct {
	// Secret is the 32-byte box secret key; its public key
	// (crypto.BoxPublicKey) is the pairing request's.
	Secret [32]byte
	// Relay is the relay's base URL (http or https); empty means the
	// relay that serves the page.
	Relay string
}

// String describes p without its secret.
func (p BrowserPairing) String() string {
	if p.Relay == "" {
		return "BrowserPairing{secret: [redacted]}"
	}
	return fmt.Sprintf("BrowserPairing{secret: [redacted], relay: %s}", p.Relay)
}

// GoString is String, so %#v does not print the secret either.
func (p BrowserPairing) GoString() string { return p.String() }

// ErrBadLink: a browser pairing link that does not have the shape
// BrowserLink gives.
var ErrBadLink = errors.New("not a browser pairing link")

// BrowserLink builds the link a browser opens to pair:
//
//	<webBase>/#pair=<base64url of the 32-byte secret, no padding>[&relay=<query-escaped relay URL>]
//
// webBase is the URL the web app is served at (http or https, no query or
// fragment; a trailing slash is dropped). Everything after '#' stays in the
// browser: no server sees the secret. p.Relay, when set, must be an
// absolute http or https URL. Errors wrap ErrBadLink.
func BrowserLink(webBase string, p BrowserPairing) (string, error) {
	u, err := url.Parse(webBase)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(webBase, "#") {
		return "", fmt.Errorf("relay: browser link: web app URL %q must be an http(s) URL without query or fragment: %w", webBase, ErrBadLink)
	}
	link := strings.TrimSuffix(webBase, "/") + "/#pair=" + crypto.EncodeBase64URL(p.Secret[:])
	if p.Relay != "" {
		if err := checkRelayURL(p.Relay); err != nil {
			return "", err
		}
		link += "&relay=" + url.QueryEscape(p.Relay)
	}
	return link, nil
}

func checkRelayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("relay: browser link: relay %q must be an absolute http(s) URL without fragment or user: %w", cut(s, 80), ErrBadLink)
	}
	return nil
}

// ParseBrowserLink reads a link built by BrowserLink (the whole link, or
// only its fragment, with or without '#'). The fragment holds '&'-separated
// key=value pairs: pair (required, exactly 43 base64url characters, a
// 32-byte key) and relay (optional, query-escaped absolute http(s) URL),
// each at most once; any other key, an empty or repeated one, or bad
// escaping is refused. Errors wrap ErrBadLink (and crypto's sentinel for a
// bad key) and never quote the secret.
func ParseBrowserLink(link string) (BrowserPairing, error) {
	var p BrowserPairing
	frag := link
	if i := strings.IndexByte(link, '#'); i >= 0 {
		frag = link[i+1:]
	} else if strings.Contains(link, "://") {
		frag = ""
	}
	if frag == "" {
		return p, fmt.Errorf("relay: browser link: no fragment: %w", ErrBadLink)
	}
	var havePair, haveRelay bool
	for i, kv := range strings.Split(frag, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("relay: browser link: part %d has no '=': %w", i+1, ErrBadLink)
		}
		switch k {
		case "pair":
			if havePair {
				return p, fmt.Errorf("relay: browser link: pair given twice: %w", ErrBadLink)
			}
			havePair = true
			if len(v) != 43 {
				return p, fmt.Errorf("relay: browser link: pair of %d characters, want 43: %w", len(v), ErrBadLink)
			}
			raw, err := crypto.DecodeBase64URL(v)
			if err != nil || len(raw) != 32 {
				return p, fmt.Errorf("relay: browser link: pair is not base64url of 32 bytes: %w", ErrBadLink)
			}
			p.Secret = [32]byte(raw)
		case "relay":
			if haveRelay {
				return p, fmt.Errorf("relay: browser link: relay given twice: %w", ErrBadLink)
			}
			haveRelay = true
			r, err := url.QueryUnescape(v)
			if err != nil {
				return p, fmt.Errorf("relay: browser link: relay: %v: %w", err, ErrBadLink)
			}
			if err := checkRelayURL(r); err != nil {
				return p, err
			}
			p.Relay = r
		default:
			return p, fmt.Errorf("relay: browser link: unknown part %q: %w", cut(k, 20), ErrBadLink)
		}
	}
	if !havePair {
		return p, fmt.Errorf("relay: browser link: no pair: %w", ErrBadLink)
	}
	return p, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// PairBrowser is the logged-in side of browser pairing: it draws a fresh
// box key pair, opens a pairing request for its public key (POST
// /v1/auth/request) and approves it at once with the legacy answer (the
// account secret: the browser reads every session of the account), so the
// holder of the returned secret collects the token and the answer with one
// POST /v1/auth/request. creds must hold the account secret
// (crypto.ErrNoAccountSecret).
func PairBrowser(ctx context.Context, api *API, creds *crypto.Credentials) (BrowserPairing, error) {
	if creds == nil || creds.AccountSecret == nil {
		return BrowserPairing{}, fmt.Errorf("relay: pair browser: %w", crypto.ErrNoAccountSecret)
	}
	pub, sec, err := crypto.NewBoxKeyPair()
	if err != nil {
		return BrowserPairing{}, fmt.Errorf("relay: pair browser: %w", err)
	}
	st, err := api.AuthRequest(ctx, pub[:])
	if err != nil {
		return BrowserPairing{}, fmt.Errorf("relay: pair browser: open request: %w", err)
	}
	if st.State != "requested" {
		return BrowserPairing{}, fmt.Errorf("relay: pair browser: a fresh key's request is %q: %w", st.State, ErrProtocol)
	}
	if err := ApproveTerminal(ctx, api, creds, pub, "", true); err != nil {
		return BrowserPairing{}, fmt.Errorf("relay: pair browser: %w", err)
	}
	return BrowserPairing{Secret: sec}, nil
}

// CollectBrowserPairing is what the browser does with a link's secret
// (Go, for tests and tools): one POST /v1/auth/request with the secret's
// public key; an authorized answer is opened with the secret (token and
// response, then the relay is told it was collected, which spends the
// link) and returned as credentials. A request the relay does not hold as answered (expired,
// already collected, never approved) is ErrNoPendingPairing.
func CollectBrowserPairing(ctx context.Context, api *API, p BrowserPairing) (*crypto.Credentials, error) {
	pub := crypto.BoxPublicKey(p.Secret)
	st, err := api.AuthRequest(ctx, pub[:])
	if err != nil {
		return nil, err
	}
	if st.State != "authorized" {
		return nil, fmt.Errorf("relay: browser pairing: the link was used already or expired: %w", ErrNoPendingPairing)
	}
	creds, _, err := collect(ctx, api, st, pub, p.Secret)
	if err != nil {
		return nil, fmt.Errorf("relay: browser pairing: %w", err)
	}
	return creds, nil
}
