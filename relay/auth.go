package relay

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/happy-dev/happy/crypto"
)

// CreateAccount signs in with accountSecret (POST /v1/auth with a signed
// challenge; the relay creates the account on first use, so this both
// creates a new account and restores one from its backup key) and returns
// dataKey credentials that keep the secret (crypto.NewAccountCredentials):
// this machine can then read every session of the account.
//
// The challenge carries the time it was drawn (NewTimedAuthRequest): happy's
// relay accepts it once and only near its own clock, and forgets it after
// that window. When the relay says this machine's clock is outside its
// window, a plain random challenge (the reference clients') is signed
// instead: the relay accepts that once too, and keeps its record for good.
func CreateAccount(ctx context.Context, api *API, accountSecret [32]byte) (*crypto.Credentials, error) {
	req, err := NewTimedAuthRequest(accountSecret, time.Now())
	if err != nil {
		return nil, err
	}
	token, err := api.AuthChallenge(ctx, req)
	var se *StatusError
	if errors.As(err, &se) && se.Status == 401 && strings.HasPrefix(se.Message, challengeWindowRefusal) {
		if req, err = crypto.NewAuthRequest(accountSecret); err != nil {
			return nil, fmt.Errorf("relay: sign auth challenge: %w", err)
		}
		token, err = api.AuthChallenge(ctx, req)
	}
	if err != nil {
		return nil, fmt.Errorf("relay: sign in: %w", err)
	}
	creds, err := crypto.NewAccountCredentials(token, accountSecret)
	if err != nil {
		return nil, fmt.Errorf("relay: credentials: %w", err)
	}
	return creds, nil
}

// Timed sign-in challenges: challengeMagic (8 bytes), the Unix time in
// milliseconds (8 bytes, big-endian) and 16 random bytes, 32 bytes like
// the reference clients' random challenge. happy's relay checks the time
// against its window (server.ChallengeMagic, server/auth.go); other relays
// take it as any challenge.
const challengeMagic = "happy-c1"

// challengeWindowRefusal starts happy's relay's 401 text for a timed
// challenge outside its window.
const challengeWindowRefusal = "Challenge time outside the relay's window"

// NewTimedAuthRequest is the body of POST /v1/auth for the account of
// accountSecret, signing a timed challenge drawn at now. It fails only
// when the random source fails.
func NewTimedAuthRequest(accountSecret [32]byte, now time.Time) (crypto.AuthRequest, error) {
	ch := make([]byte, crypto.ChallengeSize)
	copy(ch, challengeMagic)
	binary.BigEndian.PutUint64(ch[len(challengeMagic):], uint64(now.UnixMilli()))
	if _, err := rand.Read(ch[len(challengeMagic)+8:]); err != nil {
		return crypto.AuthRequest{}, fmt.Errorf("relay: draw auth challenge: %w", err)
	}
	pub, priv := crypto.AuthKeyPair(accountSecret)
	sig, err := crypto.SignChallenge(priv, ch)
	if err != nil {
		return crypto.AuthRequest{}, fmt.Errorf("relay: sign auth challenge: %w", err)
	}
	return crypto.AuthRequest{PublicKey: crypto.EncodeBase64(pub), Challenge: crypto.EncodeBase64(ch), Signature: crypto.EncodeBase64(sig)}, nil
}

// PairingRequest is an open terminal pairing request: the terminal's box
// key pair, the pairing secret it shows only to the person, and the links
// another device uses to approve it.
type PairingRequest struct {
	PublicKey [32]byte
	secret    [32]byte
	// pairingSecret is "SSSSS-SSSSS" (crypto.NewPairingSecret); it never
	// reaches the relay.
	pairingSecret string
}

// AppLink is the link the happy app scans: "happy://terminal?<base64url(publicKey)>",
// the reference format (it cannot carry the pairing secret).
func (p *PairingRequest) AppLink() string {
	return "happy://terminal?" + crypto.EncodeBase64URL(p.PublicKey[:])
}

// ApproveLink is the happy-specific link `happy auth approve` takes on a
// relay without code lookup: AppLink with the pairing secret,
// "happy://terminal?<base64url(publicKey)>&secret=SSSSS-SSSSS"
// (ParseTerminalLink).
func (p *PairingRequest) ApproveLink() string {
	return p.AppLink() + "&secret=" + p.pairingSecret
}

// FullCode is the code typed on the approving device:
// "XXXXX-XXXXX-SSSSS-SSSSS", the relay's lookup code (Code) and the
// pairing secret (crypto.FullPairingCode).
func (p *PairingRequest) FullCode() string {
	return crypto.FullPairingCode(p.PublicKey, p.pairingSecret)
}

// NewPairingRequest draws a fresh terminal box key pair and pairing secret.
func NewPairingRequest() (*PairingRequest, error) {
	pub, sec, err := crypto.NewBoxKeyPair()
	if err != nil {
		return nil, fmt.Errorf("relay: pairing key: %w", err)
	}
	ps, err := crypto.NewPairingSecret()
	if err != nil {
		return nil, fmt.Errorf("relay: pairing secret: %w", err)
	}
	return &PairingRequest{PublicKey: pub, secret: sec, pairingSecret: ps}, nil
}

// DefaultPairPoll is how often WaitApproved asks the relay (the reference
// CLI polls every second).
const DefaultPairPoll = time.Second

// ErrUnprovenPairing: the answer to a pairing request carries no proof that
// its sender saw the pairing secret (the reference app's answer, or one a
// relay or another account made), and the caller did not accept it.
var ErrUnprovenPairing = errors.New("answered without proof that the approver saw the full pairing code")

// ErrWrongPairingProof: the answer to a pairing request carries a proof that
// does not match this request's pairing secret, key and payload: the
// approval did not come from a device that saw the terminal's code.
var ErrWrongPairingProof = errors.New("the approval did not come from a device that saw this terminal's code")

// WaitApproved opens the pairing request on the relay (POST
// /v1/auth/request) and polls it every poll (DefaultPairPoll when zero)
// until another device approved it, then opens the sealed token and
// response (collect) and returns the credentials (legacy or dataKey, as the
// approving device chose; see crypto.CredentialsFromPairing). Transient
// relay errors are retried; it returns when ctx ends (the caller's
// timeout).
//
// An answer is taken as it is only when it proves its sender saw the
// pairing secret (crypto.PairingResponse.CheckProof); a wrong proof is
// ErrWrongPairingProof (wrapping crypto.ErrPairingProof). An answer without
// proof is passed to unproven, which returns nil to accept it (the person
// confirmed the account is theirs) or an error, returned as it is; a nil
// unproven refuses it with ErrUnprovenPairing. Either error names the
// answering account (AccountID); nothing is accepted silently.
func (p *PairingRequest) WaitApproved(ctx context.Context, api *API, poll time.Duration, unproven func(*crypto.Credentials) error) (*crypto.Credentials, error) {
	if poll <= 0 {
		poll = DefaultPairPoll
	}
	for {
		st, err := api.AuthRequest(ctx, p.PublicKey[:])
		switch {
		case err == nil && st.State == "authorized":
			creds, resp, err := collect(ctx, api, st, p.PublicKey, p.secret)
			if err != nil {
				return nil, err
			}
			return p.checkProof(creds, resp, unproven)
		case err != nil && !errors.Is(err, ErrUnavailable):
			return nil, fmt.Errorf("relay: pairing: %w", err)
		}
		if !sleep(ctx, poll) {
			return nil, fmt.Errorf("relay: pairing not approved: %w", ctx.Err())
		}
	}
}

// checkProof is WaitApproved's check of an opened answer.
func (p *PairingRequest) checkProof(creds *crypto.Credentials, resp crypto.PairingResponse, unproven func(*crypto.Credentials) error) (*crypto.Credentials, error) {
	if !resp.Proven {
		if unproven == nil {
			return nil, fmt.Errorf("relay: account %s %w", AccountID(creds), ErrUnprovenPairing)
		}
		if err := unproven(creds); err != nil {
			return nil, err
		}
		return creds, nil
	}
	if err := resp.CheckProof(p.pairingSecret, p.PublicKey); err != nil {
		return nil, fmt.Errorf("relay: refused the answer of account %s: %w (%w)", AccountID(creds), ErrWrongPairingProof, err)
	}
	return creds, nil
}

// ApproveTerminal is the approving device's side of pairing: it answers
// the request of terminalPublicKey (POST /v1/auth/response, with creds'
// token) with the account's content public key (dataKey pairing, the
// reference app's V2), or with the account secret when legacy is true.
// With the terminal's pairing secret ("SSSSS-SSSSS", any spelling
// crypto.ParsePairingSecret takes) the answer carries the proof that this
// device saw it (crypto.ProvePairingResponse); with "" it carries none, as
// the reference app's, and the terminal asks its person before taking it.
// Both need the account secret on this machine (crypto.ErrNoAccountSecret);
// a malformed pairing secret is its parse error.
func ApproveTerminal(ctx context.Context, api *API, creds *crypto.Credentials, terminalPublicKey [32]byte, pairingSecret string, legacy bool) error {
	if creds == nil || creds.AccountSecret == nil {
		return fmt.Errorf("relay: approve terminal: %w", crypto.ErrNoAccountSecret)
	}
	resp := crypto.PairingResponse{Variant: crypto.VariantDataKey}
	if legacy {
		resp = crypto.PairingResponse{Variant: crypto.VariantLegacy, Secret: *creds.AccountSecret}
	} else {
		resp.ContentPublicKey, _ = crypto.ContentKeyPair(*creds.AccountSecret)
	}
	if pairingSecret != "" {
		var err error
		if resp, err = crypto.ProvePairingResponse(resp, pairingSecret, terminalPublicKey); err != nil {
			return fmt.Errorf("relay: approve terminal: %w", err)
		}
	}
	bundle, err := crypto.SealPairingResponse(resp, terminalPublicKey)
	if err != nil {
		return fmt.Errorf("relay: approve terminal: %w", err)
	}
	return api.WithToken(creds.Token).AuthResponse(ctx, terminalPublicKey[:], bundle)
}

// collect opens an authorized answer of the request of publicKey with its
// secret key: the token (AuthRequestState.OpenToken: sealed on happy's
// relay, plain on the reference relay) and the sealed response, returned
// with the credentials for the caller's check of its proof. When the
// token was sealed it tells the relay the answer was collected
// (API.PairingCollected), so it is not sent again; that call's failure
// changes nothing for the caller (the request expires anyway).
func collect(ctx context.Context, api *API, st AuthRequestState, publicKey, secret [32]byte) (*crypto.Credentials, crypto.PairingResponse, error) {
	var none crypto.PairingResponse
	token, err := st.OpenToken(secret)
	if err != nil {
		return nil, none, err
	}
	bundle, err := crypto.DecodeBase64(st.Response)
	if err != nil {
		return nil, none, fmt.Errorf("relay: pairing response: %w", err)
	}
	resp, err := crypto.OpenPairingResponse(bundle, secret)
	if err != nil {
		return nil, none, fmt.Errorf("relay: pairing response: %w", err)
	}
	creds, err := crypto.CredentialsFromPairing(token, resp)
	if err != nil {
		return nil, none, err
	}
	if st.SealedToken != "" {
		_ = api.WithToken(token).PairingCollected(ctx, publicKey[:])
	}
	return creds, resp, nil
}
