package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/happy-dev/happy/crypto"
)

// Pairing beyond the reference's QR code (docs/ARCHITECTURE.md, section
// "Pairing"): a short code typed on the approving terminal, the browser
// pairing link, and token revocation. The code lookup and the revocation
// are routes of happy's own relay only.

// Code is the short pairing code of the request (crypto.PairingCode of its
// public key), "XXXXX-XXXXX".
func (p *PairingRequest) Code() string { return crypto.PairingCode(p.PublicKey) }

// PendingPairing is one open request the relay returned for a code.
type PendingPairing struct {
	// PublicKey is the terminal's box public key.
	PublicKey [32]byte
	// SupportsV2 tells whether the terminal accepts the dataKey answer.
	SupportsV2 bool
	// CreatedAt and ExpiresAt are Unix milliseconds (the relay's clock).
	CreatedAt, ExpiresAt int64
}

// routeMissing reports whether err is the answer of a relay without the
// route (404, 405 or 501).
func routeMissing(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed || se.Status == http.StatusNotImplemented)
}

// LookupPairing is GET /v1/auth/request/lookup?code= (with the token): the
// open requests the relay says have pairing code code. It does not check
// the keys (ApproveByCode does). Errors: ErrRouteUnsupported on a relay
// without the route, ErrProtocol for a malformed answer, the usual
// StatusError sentinels otherwise.
func (a *API) LookupPairing(ctx context.Context, code string) ([]PendingPairing, error) {
	var out json.RawMessage
	err := a.do(ctx, http.MethodGet, "/v1/auth/request/lookup", url.Values{"code": {code}}, nil, &out)
	if routeMissing(err) {
		return nil, fmt.Errorf("relay: %s has no pairing code lookup (GET /v1/auth/request/lookup: %v): %w", a.base, err, ErrRouteUnsupported)
	}
	if err != nil {
		return nil, err
	}
	return decodeLookup(out)
}

// decodeLookup reads the answer of GET /v1/auth/request/lookup:
// {requests:[{publicKey (base64 of 32 bytes), supportsV2, createdAt,
// expiresAt}]}. Anything else is ErrProtocol.
func decodeLookup(b []byte) ([]PendingPairing, error) {
	var out struct {
		Requests *[]struct {
			PublicKey  string `json:"publicKey"`
			SupportsV2 bool   `json:"supportsV2"`
			CreatedAt  int64  `json:"createdAt"`
			ExpiresAt  int64  `json:"expiresAt"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("relay: GET /v1/auth/request/lookup: decode answer: %w: %v", ErrProtocol, err)
	}
	if out.Requests == nil {
		return nil, fmt.Errorf("relay: GET /v1/auth/request/lookup: no requests list: %w", ErrProtocol)
	}
	list := make([]PendingPairing, 0, len(*out.Requests))
	for i, r := range *out.Requests {
		raw, err := crypto.DecodeBase64(r.PublicKey)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("relay: GET /v1/auth/request/lookup: requests[%d].publicKey is not a 32-byte key: %w", i, ErrProtocol)
		}
		list = append(list, PendingPairing{PublicKey: [32]byte(raw), SupportsV2: r.SupportsV2, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt})
	}
	return list, nil
}

// ErrNoPendingPairing: no open request has the code (typed wrong, expired,
// or already approved).
var ErrNoPendingPairing = errors.New("no open pairing request with this code")

// ErrShortPairingCode: a pairing code was typed without its pairing secret
// (the 10-character form, "XXXXX-XXXXX"), which proves nothing to the
// terminal; the full code is "XXXXX-XXXXX-SSSSS-SSSSS".
var ErrShortPairingCode = errors.New("pairing code without its secret part")

// ErrLegacyOnly: the open request says its terminal takes only the legacy
// answer (the account secret), which was not asked for. An old client says
// so, and so may a relay that edits the lookup's supportsV2: the approver
// decides (legacy) instead of being downgraded without a word.
var ErrLegacyOnly = errors.New("the terminal says it takes only the account secret (legacy)")

// ApproveByCode approves the terminal that shows the full pairing code
// code ("XXXXX-XXXXX-SSSSS-SSSSS", any spelling
// crypto.ParseFullPairingCode accepts): it asks the relay for the open
// requests of the first half (the key's fingerprint; the secret half never
// leaves this machine), checks itself that each key's code is that half (a
// key that does not match is refused with ErrFingerprint: the relay cannot
// substitute its own key), and answers the one match with ApproveTerminal
// and the proof of the secret half (dataKey, or legacy when legacy is
// set). It returns the approved key. Errors: a parse error of the code,
// ErrShortPairingCode (nothing asked), ErrRouteUnsupported (the reference
// relay), ErrNoPendingPairing, ErrLegacyOnly (the request says the
// terminal takes only the account secret and legacy is not set: nothing
// sent), and ApproveTerminal's.
func ApproveByCode(ctx context.Context, api *API, creds *crypto.Credentials, code string, legacy bool) ([32]byte, error) {
	norm, secret, err := crypto.ParseFullPairingCode(code)
	if err != nil {
		return [32]byte{}, err
	}
	if secret == "" {
		return [32]byte{}, fmt.Errorf("relay: pairing code %s: %w", norm, ErrShortPairingCode)
	}
	if creds == nil || creds.AccountSecret == nil {
		return [32]byte{}, fmt.Errorf("relay: approve terminal: %w", crypto.ErrNoAccountSecret)
	}
	list, err := api.WithToken(creds.Token).LookupPairing(ctx, norm)
	if err != nil {
		return [32]byte{}, err
	}
	if len(list) == 0 {
		return [32]byte{}, fmt.Errorf("relay: pairing code %s: %w", norm, ErrNoPendingPairing)
	}
	var match *PendingPairing
	for i := range list {
		got := crypto.PairingCode(list[i].PublicKey)
		if got != norm {
			return [32]byte{}, fmt.Errorf("relay: the relay answered code %s with a key whose code is %s; nothing approved: %w", norm, got, ErrFingerprint)
		}
		if match != nil && match.PublicKey != list[i].PublicKey {
			return [32]byte{}, fmt.Errorf("relay: pairing code %s names %d different open requests; approve with the full link instead: %w", norm, len(list), ErrFingerprint)
		}
		match = &list[i]
	}
	if !legacy && !match.SupportsV2 {
		// The relay says what the terminal takes, and a relay that turned
		// this into false would be handed the widest access unasked.
		return [32]byte{}, fmt.Errorf("relay: pairing code %s: %w", norm, ErrLegacyOnly)
	}
	if err := ApproveTerminal(ctx, api, creds, match.PublicKey, secret, legacy); err != nil {
		return [32]byte{}, err
	}
	return match.PublicKey, nil
}

// ParseTerminalKey reads the terminal's public key from what `happy auth
// login` shows besides the code: the link happy://terminal?<base64url>
// (with or without its &secret=), the web link
// …/terminal/connect#key=<base64url>, or the bare key in base64url or
// standard base64. Errors wrap crypto.ErrBadEncoding or
// crypto.ErrBadLength.
func ParseTerminalKey(s string) ([32]byte, error) {
	key, _, err := ParseTerminalLink(s)
	return key, err
}

// ParseTerminalLink is ParseTerminalKey that also reads the pairing secret
// of happy's approve link (PairingRequest.ApproveLink):
// happy://terminal?<base64url>&secret=SSSSS-SSSSS gives the key and
// "SSSSS-SSSSS"; every other form gives an empty secret. Errors wrap
// crypto.ErrBadEncoding or crypto.ErrBadLength, for the key or the secret
// (also a link with any other part after the key).
func ParseTerminalLink(s string) (key [32]byte, secret string, err error) {
	s = strings.TrimSpace(s)
	text := s
	switch {
	case strings.HasPrefix(s, "happy://terminal?"):
		text = strings.TrimPrefix(s, "happy://terminal?")
		var rest string
		var found bool
		if text, rest, found = strings.Cut(text, "&"); found {
			value, ok := strings.CutPrefix(rest, "secret=")
			if !ok {
				return key, "", fmt.Errorf("relay: terminal link: unknown part %q after the key: %w", cutText(rest, 20), crypto.ErrBadEncoding)
			}
			if secret, err = crypto.ParsePairingSecret(value); err != nil {
				return key, "", fmt.Errorf("relay: terminal link: %w", err)
			}
		}
	case strings.Contains(s, "#key="):
		_, text, _ = strings.Cut(s, "#key=")
		text, _, _ = strings.Cut(text, "&")
	}
	raw, err := crypto.DecodeBase64URL(text)
	if err != nil {
		raw, err = crypto.DecodeBase64(text)
	}
	if err != nil {
		return key, "", fmt.Errorf("relay: terminal key: %w", err)
	}
	if len(raw) != 32 {
		return key, "", fmt.Errorf("relay: terminal key of %d bytes, want 32: %w", len(raw), crypto.ErrBadLength)
	}
	return [32]byte(raw), secret, nil
}

// cutText returns at most n bytes of s, with "…" when it was longer.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Revocation is the answer of POST /v1/auth/revoke.
type Revocation struct {
	// Generation is the account's new token generation.
	Generation int64 `json:"generation"`
	// Disconnected is how many of the account's sockets the relay closed.
	Disconnected int `json:"disconnected"`
}

// RevokeTokens is POST /v1/auth/revoke (with the token): every token of
// the account stops working, this one included. ErrRouteUnsupported on a
// relay without the route (the reference relay cannot revoke tokens).
func (a *API) RevokeTokens(ctx context.Context) (Revocation, error) {
	var out struct {
		Success bool `json:"success"`
		Revocation
	}
	err := a.do(ctx, http.MethodPost, "/v1/auth/revoke", nil, map[string]any{}, &out)
	if routeMissing(err) {
		return Revocation{}, fmt.Errorf("relay: %s cannot revoke tokens (POST /v1/auth/revoke: %v): %w", a.base, err, ErrRouteUnsupported)
	}
	if err != nil {
		return Revocation{}, err
	}
	if !out.Success || out.Generation < 1 {
		return Revocation{}, fmt.Errorf("relay: POST /v1/auth/revoke: success %v, generation %d: %w", out.Success, out.Generation, ErrProtocol)
	}
	return out.Revocation, nil
}
