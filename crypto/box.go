package crypto

import (
	"crypto/sha512"
	"fmt"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
)

// Sizes of the box bundles, in bytes.
const (
	BoxNonceSize       = 24                                // NaCl box nonce
	boxHeader          = KeySize + BoxNonceSize            // ephemeralPublicKey | nonce
	boxMinBundle       = boxHeader + box.Overhead          // header + Poly1305 tag = 72
	wrappedSize        = 1 + boxMinBundle + KeySize        // 0x00 | header | box(32-byte key) = 105
	wrapVersion        = 0x00                              // the only wrapped-key bundle version
	pairingV2Tag       = 0x00                              // first byte of a dataKey pairing payload
	pairingV2ProvenTag = 0x01                              // first byte of a proven dataKey pairing payload
	pairingV1Len       = KeySize                           // legacy payload: the account secret
	pairingV2Len       = 1 + KeySize                       // dataKey payload: 0x00 | content public key
	pairingV1ProvenLen = pairingV1Len + PairingProofSize   // account secret | proof
	pairingV2ProvenLen = pairingV2Len + PairingProofSize   // 0x01 | content public key | proof
	maxPairing         = boxMinBundle + pairingV2ProvenLen // longest pairing bundle we accept = 137
)

// BoxPublicKey returns the Curve25519 public key of a NaCl box secret key, as
// tweetnacl's nacl.box.keyPair.fromSecretKey does (the secret is used as the scalar
// directly, clamped by X25519). The terminal pairing key pair is (BoxPublicKey(s), s)
// for a random 32-byte s.
func BoxPublicKey(secret [32]byte) [32]byte {
	var public [32]byte
	pub, err := curve25519.X25519(secret[:], curve25519.Basepoint)
	if err != nil {
		// X25519 fails only on a low-order point result, which the base point cannot
		// give for any scalar; keep the zero key so the box simply never opens.
		return public
	}
	copy(public[:], pub)
	return public
}

// BoxKeyPairFromSeed is libsodium's crypto_box_seed_keypair, which the reference
// clients use for the content key pair: secret = SHA-512(seed)[0:32], public =
// BoxPublicKey(secret). (tweetnacl has no such function; the reference reproduces it.)
func BoxKeyPairFromSeed(seed [32]byte) (public, secret [32]byte) {
	digest := sha512.Sum512(seed[:])
	copy(secret[:], digest[:32])
	return BoxPublicKey(secret), secret
}

// NewBoxKeyPair draws a random 32-byte box secret (from crypto/rand, or WithRandom)
// and returns it with its public key: the terminal's pairing key pair.
func NewBoxKeyPair(opts ...Option) (public, secret [32]byte, err error) {
	o := applyOptions(opts)
	if err := readRandom(o.random, secret[:], "box secret key"); err != nil {
		return public, secret, err
	}
	return BoxPublicKey(secret), secret, nil
}

// sealBox writes prefix | ephemeralPublicKey(32) | nonce(24) | box(msg) with the given
// ephemeral secret and nonce: the reference's "encrypt for public key" layout.
func sealBox(prefix []byte, msg []byte, recipient, ephemeralSecret *[32]byte, nonce *[24]byte) []byte {
	ephemeralPublic := BoxPublicKey(*ephemeralSecret)
	out := make([]byte, 0, len(prefix)+boxHeader+box.Overhead+len(msg))
	out = append(out, prefix...)
	out = append(out, ephemeralPublic[:]...)
	out = append(out, nonce[:]...)
	return box.Seal(out, msg, nonce, recipient, ephemeralSecret)
}

// openBox opens ephemeralPublicKey(32) | nonce(24) | box(msg) with the recipient's
// secret key. what names the bundle in errors, which carry no package prefix.
func openBox(bundle []byte, recipientSecret *[32]byte, what string) ([]byte, error) {
	if len(bundle) < boxMinBundle {
		return nil, fmt.Errorf("open %s of %d bytes (need at least %d): %w",
			what, len(bundle), boxMinBundle, ErrTruncated)
	}
	var ephemeralPublic [32]byte
	var nonce [24]byte
	copy(ephemeralPublic[:], bundle[:KeySize])
	copy(nonce[:], bundle[KeySize:boxHeader])
	out := make([]byte, 0, len(bundle)-boxMinBundle)
	out, ok := box.Open(out, bundle[boxHeader:], &nonce, &ephemeralPublic, recipientSecret)
	if !ok {
		return nil, fmt.Errorf("open %s: %w", what, ErrAuthFailed)
	}
	return out, nil
}

func randomEphemeral(opts []Option, what string) (secret [32]byte, nonce [24]byte, err error) {
	o := applyOptions(opts)
	if err = readRandom(o.random, secret[:], what+" ephemeral key"); err != nil {
		return
	}
	err = readRandom(o.random, nonce[:], what+" nonce")
	return
}

// WrapDataKey seals a session's (or machine's) 32-byte data key for the account's
// content public key, giving the dataEncryptionKey the relay stores:
// 0x00 | ephemeralPublicKey(32) | nonce(24) | box(key) — 105 bytes. The ephemeral key
// pair and nonce are fresh from crypto/rand (or WithRandom). This is a NaCl box from an
// ephemeral key pair, not libsodium's sealed-box format. It fails only when the random
// source fails.
func WrapDataKey(key [32]byte, contentPublicKey [32]byte, opts ...Option) ([]byte, error) {
	ephemeralSecret, nonce, err := randomEphemeral(opts, "data key wrap")
	if err != nil {
		return nil, err
	}
	return sealBox([]byte{wrapVersion}, key[:], &contentPublicKey, &ephemeralSecret, &nonce), nil
}

// WrapDataKeyWith is WrapDataKey with a caller-chosen ephemeral secret and nonce, for
// deterministic tests. Never reuse an ephemeral secret and nonce pair.
func WrapDataKeyWith(key, contentPublicKey, ephemeralSecret [32]byte, nonce [24]byte) []byte {
	return sealBox([]byte{wrapVersion}, key[:], &contentPublicKey, &ephemeralSecret, &nonce)
}

// UnwrapDataKey opens a dataEncryptionKey bundle (see WrapDataKey) with the account's
// content secret key (from ContentKeyPair). Errors wrap ErrUnsupportedVersion (first
// byte not 0x00), ErrTruncated (shorter than 105 bytes), ErrBadLength (longer) or
// ErrAuthFailed (wrong key or altered bundle).
func UnwrapDataKey(bundle []byte, contentSecretKey [32]byte) ([32]byte, error) {
	key, err := unwrapDataKey(bundle, &contentSecretKey)
	if err != nil {
		return key, fmt.Errorf("crypto: %w", err)
	}
	return key, nil
}

// unwrapDataKey is UnwrapDataKey without the package prefix on the error.
func unwrapDataKey(bundle []byte, contentSecretKey *[32]byte) ([32]byte, error) {
	var key [32]byte
	if len(bundle) == 0 {
		return key, fmt.Errorf("open wrapped data key of 0 bytes: %w", ErrTruncated)
	}
	if bundle[0] != wrapVersion {
		return key, fmt.Errorf("open wrapped data key: version byte 0x%02x: %w", bundle[0], ErrUnsupportedVersion)
	}
	if len(bundle) < wrappedSize {
		return key, fmt.Errorf("open wrapped data key of %d bytes (want %d): %w", len(bundle), wrappedSize, ErrTruncated)
	}
	if len(bundle) > wrappedSize {
		return key, fmt.Errorf("open wrapped data key of %d bytes (want %d): %w", len(bundle), wrappedSize, ErrBadLength)
	}
	plain, err := openBox(bundle[1:], contentSecretKey, "wrapped data key")
	if err != nil {
		return key, err
	}
	copy(key[:], plain)
	return key, nil
}

// PairingResponse is what the app sends a terminal that asked to be paired (the
// `response` of the terminal auth flow), after OpenPairingResponse.
type PairingResponse struct {
	// Variant is VariantLegacy (payload = the 32-byte account secret) or VariantDataKey
	// (payload = 0x00 | the account's 32-byte content public key).
	Variant Variant
	// Secret is the account secret; set for VariantLegacy only.
	Secret [32]byte
	// ContentPublicKey is the account's content public key; set for VariantDataKey only.
	ContentPublicKey [32]byte
	// Proven tells the payload carries Proof: the approver showed it saw the terminal's
	// pairing secret (ProvePairingResponse, CheckProof). The reference app's answers
	// never do.
	Proven bool
	// Proof is HMAC-SHA256 keyed by the pairing secret (PairingProof); set when Proven.
	Proof [PairingProofSize]byte
}

// body is the payload without its proof: the account secret (legacy), or a tag
// (0x00, or 0x01 when proven) and the content public key (dataKey). It fails for an
// unknown Variant.
func (r PairingResponse) body() ([]byte, error) {
	switch r.Variant {
	case VariantLegacy:
		return append([]byte(nil), r.Secret[:]...), nil
	case VariantDataKey:
		tag := byte(pairingV2Tag)
		if r.Proven {
			tag = pairingV2ProvenTag
		}
		return append([]byte{tag}, r.ContentPublicKey[:]...), nil
	default:
		return nil, fmt.Errorf("variant %s: %w", r.Variant, ErrUnsupportedVersion)
	}
}

// payload is what SealPairingResponse seals: the body, then the proof when Proven.
func (r PairingResponse) payload() ([]byte, error) {
	b, err := r.body()
	if err != nil || !r.Proven {
		return b, err
	}
	return append(b, r.Proof[:]...), nil
}

// decodePairingPayload reads an opened pairing payload: 32 bytes (legacy), 33 bytes
// 0x00 | key (dataKey), 64 bytes secret | proof (proven legacy), 65 bytes 0x01 | key |
// proof (proven dataKey). Errors (no package prefix) wrap ErrUnsupportedVersion (a
// 33- or 65-byte payload with another tag) or ErrBadLength (any other size).
func decodePairingPayload(plain []byte) (PairingResponse, error) {
	var resp PairingResponse
	switch {
	case len(plain) == pairingV1Len:
		resp.Variant = VariantLegacy
		copy(resp.Secret[:], plain)
	case len(plain) == pairingV2Len && plain[0] == pairingV2Tag:
		resp.Variant = VariantDataKey
		copy(resp.ContentPublicKey[:], plain[1:])
	case len(plain) == pairingV1ProvenLen:
		resp.Variant, resp.Proven = VariantLegacy, true
		copy(resp.Secret[:], plain)
		copy(resp.Proof[:], plain[pairingV1Len:])
	case len(plain) == pairingV2ProvenLen && plain[0] == pairingV2ProvenTag:
		resp.Variant, resp.Proven = VariantDataKey, true
		copy(resp.ContentPublicKey[:], plain[1:pairingV2Len])
		copy(resp.Proof[:], plain[pairingV2Len:])
	case len(plain) == pairingV2Len || len(plain) == pairingV2ProvenLen:
		return PairingResponse{}, fmt.Errorf("open pairing response: payload tag 0x%02x for %d bytes: %w", plain[0], len(plain), ErrUnsupportedVersion)
	default:
		return PairingResponse{}, fmt.Errorf("open pairing response: payload of %d bytes, want %d, %d, %d or %d: %w",
			len(plain), pairingV1Len, pairingV2Len, pairingV1ProvenLen, pairingV2ProvenLen, ErrBadLength)
	}
	return resp, nil
}

// OpenPairingResponse opens the app's pairing bundle ephemeralPublicKey(32) | nonce(24)
// | box(payload) with the terminal's box secret (the random secret whose BoxPublicKey
// the terminal showed). A 32-byte payload is the legacy account secret; a 33-byte payload
// starting 0x00 is the dataKey content public key; a 64-byte payload is the account
// secret and a proof, a 65-byte payload starting 0x01 the content public key and a
// proof (Proven; check it with CheckProof). Errors wrap ErrTruncated, ErrAuthFailed,
// ErrUnsupportedVersion (33 or 65 bytes with another first byte) or ErrBadLength (any
// other payload size).
func OpenPairingResponse(bundle []byte, terminalSecret [32]byte) (PairingResponse, error) {
	if len(bundle) > maxPairing {
		return PairingResponse{}, fmt.Errorf("crypto: open pairing response of %d bytes (at most %d): %w", len(bundle), maxPairing, ErrBadLength)
	}
	plain, err := openBox(bundle, &terminalSecret, "pairing response")
	if err != nil {
		return PairingResponse{}, fmt.Errorf("crypto: %w", err)
	}
	resp, err := decodePairingPayload(plain)
	if err != nil {
		return PairingResponse{}, fmt.Errorf("crypto: %w", err)
	}
	return resp, nil
}

// SealPairingResponse is the app side of pairing: it seals resp for the terminal's box
// public key as ephemeralPublicKey(32) | nonce(24) | box(payload), with a fresh
// ephemeral key pair and nonce (crypto/rand, or WithRandom). Used by tests and by a
// local account that pairs its own terminal. A Proven resp (ProvePairingResponse)
// carries its proof in the longer payloads OpenPairingResponse reads. It fails for an
// unknown Variant or when the random source fails.
func SealPairingResponse(resp PairingResponse, terminalPublicKey [32]byte, opts ...Option) ([]byte, error) {
	payload, err := resp.payload()
	if err != nil {
		return nil, fmt.Errorf("crypto: seal pairing response: %w", err)
	}
	ephemeralSecret, nonce, err := randomEphemeral(opts, "pairing response")
	if err != nil {
		return nil, err
	}
	return sealBox(nil, payload, &terminalPublicKey, &ephemeralSecret, &nonce), nil
}
