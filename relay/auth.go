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
// key pair and the link another device scans to approve it.
type PairingRequest struct {
	PublicKey [32]byte
	secret    [32]byte
}

// AppLink is the link the happy app scans: "happy://terminal?<base64url(publicKey)>".
func (p *PairingRequest) AppLink() string {
	return "happy://terminal?" + crypto.EncodeBase64URL(p.PublicKey[:])
}

// NewPairingRequest draws a fresh terminal box key pair.
func NewPairingRequest() (*PairingRequest, error) {
	pub, sec, err := crypto.NewBoxKeyPair()
	if err != nil {
		return nil, fmt.Errorf("relay: pairing key: %w", err)
	}
	return &PairingRequest{PublicKey: pub, secret: sec}, nil
}

// DefaultPairPoll is how often WaitApproved asks the relay (the reference
// CLI polls every second).
const DefaultPairPoll = time.Second

// WaitApproved opens the pairing request on the relay (POST
// /v1/auth/request) and polls it every poll (DefaultPairPoll when zero)
// until another device approved it, then opens the sealed token and
// response (collect) and returns the credentials (legacy or dataKey, as the
// approving device chose; see crypto.CredentialsFromPairing). Transient
// relay errors are retried; it returns when ctx ends (the caller's
// timeout).
func (p *PairingRequest) WaitApproved(ctx context.Context, api *API, poll time.Duration) (*crypto.Credentials, error) {
	if poll <= 0 {
		poll = DefaultPairPoll
	}
	for {
		st, err := api.AuthRequest(ctx, p.PublicKey[:])
		switch {
		case err == nil && st.State == "authorized":
			return collect(ctx, api, st, p.PublicKey, p.secret)
		case err != nil && !errors.Is(err, ErrUnavailable):
			return nil, fmt.Errorf("relay: pairing: %w", err)
		}
		if !sleep(ctx, poll) {
			return nil, fmt.Errorf("relay: pairing not approved: %w", ctx.Err())
		}
	}
}

// ApproveTerminal is the approving device's side of pairing: it answers
// the request of terminalPublicKey (POST /v1/auth/response, with creds'
// token) with the account's content public key (dataKey pairing, the
// reference app's V2), or with the account secret when legacy is true.
// Both need the account secret on this machine (crypto.ErrNoAccountSecret).
func ApproveTerminal(ctx context.Context, api *API, creds *crypto.Credentials, terminalPublicKey [32]byte, legacy bool) error {
	if creds == nil || creds.AccountSecret == nil {
		return fmt.Errorf("relay: approve terminal: %w", crypto.ErrNoAccountSecret)
	}
	resp := crypto.PairingResponse{Variant: crypto.VariantDataKey}
	if legacy {
		resp = crypto.PairingResponse{Variant: crypto.VariantLegacy, Secret: *creds.AccountSecret}
	} else {
		resp.ContentPublicKey, _ = crypto.ContentKeyPair(*creds.AccountSecret)
	}
	bundle, err := crypto.SealPairingResponse(resp, terminalPublicKey)
	if err != nil {
		return fmt.Errorf("relay: approve terminal: %w", err)
	}
	return api.WithToken(creds.Token).AuthResponse(ctx, terminalPublicKey[:], bundle)
}

// collect opens an authorized answer of the request of publicKey with its
// secret key: the token (AuthRequestState.OpenToken: sealed on happy's
// relay, plain on the reference relay) and the sealed response. When the
// token was sealed it tells the relay the answer was collected
// (API.PairingCollected), so it is not sent again; that call's failure
// changes nothing for the caller (the request expires anyway).
func collect(ctx context.Context, api *API, st AuthRequestState, publicKey, secret [32]byte) (*crypto.Credentials, error) {
	token, err := st.OpenToken(secret)
	if err != nil {
		return nil, err
	}
	bundle, err := crypto.DecodeBase64(st.Response)
	if err != nil {
		return nil, fmt.Errorf("relay: pairing response: %w", err)
	}
	resp, err := crypto.OpenPairingResponse(bundle, secret)
	if err != nil {
		return nil, fmt.Errorf("relay: pairing response: %w", err)
	}
	creds, err := crypto.CredentialsFromPairing(token, resp)
	if err != nil {
		return nil, err
	}
	if st.SealedToken != "" {
		_ = api.WithToken(token).PairingCollected(ctx, publicKey[:])
	}
	return creds, nil
}
