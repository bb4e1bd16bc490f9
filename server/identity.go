package server

import (
	"encoding/base64"
	"net"
	"net/http"

	"github.com/happy-dev/happy/internal/relayid"
)

// getIdentity: GET /v1/happy/identity?nonce=<base64url, 16 to 64 bytes>
// (this relay only) → {address, proof}: address is this relay's side of
// the connection (host:port), proof is relayid.Proof under the identity
// key of the data folder (relayid.File), base64url. A client of the home
// whose data folder this is checks it before it trusts the relay on the
// default loopback address (docs/ARCHITECTURE.md, "Relay default"). 400
// {error} for a missing or malformed nonce.
func (s *Server) getIdentity(w http.ResponseWriter, r *http.Request) {
	nonce, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("nonce"))
	if err != nil || len(nonce) < relayid.MinNonce || len(nonce) > relayid.MaxNonce {
		writeErr(w, http.StatusBadRequest, "nonce must be 16 to 64 bytes in base64url without padding")
		return
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		writeErr(w, http.StatusInternalServerError, "the relay does not know its own address on this connection")
		return
	}
	a := addr.String()
	writeJSON(w, http.StatusOK, relayid.Answer{Address: a, Proof: base64.RawURLEncoding.EncodeToString(relayid.Proof(s.identity, nonce, a))})
}
