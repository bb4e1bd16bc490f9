package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/server/servertest"
)

// The terminal's check of the pairing proof (docs/ARCHITECTURE.md, section
// "Pairing"): only an answer from a device that saw the full code pairs
// without asking.

// TestWaitApprovedRefusesAnotherAccount is the hijack: another account (or
// the relay's operator, who sees every pending key) answers the request
// first with its own account and without the pairing secret. The terminal
// does not take it silently: without an unproven callback it is refused,
// naming the account; the callback sees the account and decides.
func TestWaitApprovedRefusesAnotherAccount(t *testing.T) {
	url := servertest.Start(t).URL
	api := testAPI(t, url)
	attacker := newAccount(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		unproven func(*crypto.Credentials) error
		want     error
	}{
		{"no callback", nil, ErrUnprovenPairing},
		{"the person says no", func(c *crypto.Credentials) error {
			if AccountID(c) != AccountID(attacker) {
				t.Errorf("asked about %s, want %s", AccountID(c), AccountID(attacker))
			}
			return errDeclined
		}, errDeclined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := NewPairingRequest()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := api.AuthRequest(ctx, req.PublicKey[:]); err != nil {
				t.Fatal(err)
			}
			// It looks the short code up and answers with its own account.
			found, err := api.WithToken(attacker.Token).LookupPairing(ctx, req.Code())
			if err != nil || len(found) != 1 {
				t.Fatalf("lookup %v, %v", found, err)
			}
			if err := ApproveTerminal(ctx, api, attacker, found[0].PublicKey, "", false); err != nil {
				t.Fatal(err)
			}
			creds, err := req.WaitApproved(ctx, api, 10*time.Millisecond, tc.unproven)
			if creds != nil || !errors.Is(err, tc.want) {
				t.Fatalf("WaitApproved = %v, %v; want %v", creds, err, tc.want)
			}
			if tc.unproven == nil && err.Error() != "relay: account "+AccountID(attacker)+" answered without proof that the approver saw the full pairing code" {
				t.Fatalf("error %q", err)
			}
		})
	}
}

var errDeclined = errors.New("declined")

// answeringRelay serves one authorized answer for every poll: the token
// sealed for the request and bundle as the response.
func answeringRelay(t *testing.T, req *PairingRequest, bundle []byte) *API {
	t.Helper()
	sealed, err := crypto.SealToken("tok.en.sig", req.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/auth/request" {
			fmt.Fprint(w, `{"success":true}`)
			return
		}
		fmt.Fprintf(w, `{"state":"authorized","sealedToken":%q,"response":%q}`, crypto.EncodeBase64(sealed), crypto.EncodeBase64(bundle))
	}))
	t.Cleanup(srv.Close)
	return testAPI(t, srv.URL)
}

// TestWaitApprovedChecksTheProof: an answer whose proof was made with
// another secret, or for another request, or copied onto another payload,
// is refused whatever the unproven callback says; the right proof pairs
// without asking.
func TestWaitApprovedChecksTheProof(t *testing.T) {
	req, err := NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	account := crypto.PairingResponse{Variant: crypto.VariantDataKey, ContentPublicKey: [32]byte{4}}
	prove := func(secret string, key [32]byte) crypto.PairingResponse {
		r, err := crypto.ProvePairingResponse(account, secret, key)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	wrongSecret, _ := crypto.NewPairingSecret()
	moved := prove(req.pairingSecret, req.PublicKey)
	moved.ContentPublicKey = [32]byte{5}
	asked := 0
	ask := func(*crypto.Credentials) error { asked++; return nil }
	for _, tc := range []struct {
		name string
		resp crypto.PairingResponse
		want error
	}{
		{"the right proof", prove(req.pairingSecret, req.PublicKey), nil},
		{"another secret", prove(wrongSecret, req.PublicKey), ErrWrongPairingProof},
		{"the proof of another request", prove(other.pairingSecret, other.PublicKey), ErrWrongPairingProof},
		{"the proof of this request on the secret of another", prove(req.pairingSecret, other.PublicKey), ErrWrongPairingProof},
		{"the proof moved to another payload", moved, ErrWrongPairingProof},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bundle, err := crypto.SealPairingResponse(tc.resp, req.PublicKey)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			creds, err := req.WaitApproved(ctx, answeringRelay(t, req, bundle), 10*time.Millisecond, ask)
			if tc.want == nil {
				if err != nil || creds.DataKey == nil || creds.DataKey.ContentPublicKey != [32]byte{4} || creds.Token != "tok.en.sig" {
					t.Fatalf("= %v, %v", creds, err)
				}
				return
			}
			if creds != nil || !errors.Is(err, tc.want) || !errors.Is(err, crypto.ErrPairingProof) {
				t.Fatalf("= %v, %v; want %v", creds, err, tc.want)
			}
			if !strings.Contains(err.Error(), "the approval did not come from a device that saw this terminal's code") {
				t.Fatalf("error %q", err)
			}
		})
	}
	if asked != 0 {
		t.Fatalf("the person was asked %d times about proven answers", asked)
	}
}
