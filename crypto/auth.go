package crypto

import (
	"crypto/ed25519"
	"fmt"
)

// ChallengeSize is the length of the random auth challenge the reference clients sign.
const ChallengeSize = 32

// AuthKeyPair returns the account's Ed25519 key pair: the 32-byte account secret is the
// Ed25519 seed (tweetnacl's nacl.sign.keyPair.fromSeed). The public key identifies the
// account to the relay (POST /v1/auth). The private key is 64 bytes (seed | public).
func AuthKeyPair(accountSecret [32]byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(accountSecret[:])
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	copy(pub, priv[ed25519.SeedSize:])
	return pub, priv
}

// SignChallenge returns the 64-byte detached Ed25519 signature of challenge
// (tweetnacl's nacl.sign.detached). priv is the 64-byte private key from AuthKeyPair; a
// 32-byte seed is accepted too. Any other length is an error wrapping ErrBadLength with
// a nil signature (never a panic, never an empty success).
func SignChallenge(priv ed25519.PrivateKey, challenge []byte) ([]byte, error) {
	switch len(priv) {
	case ed25519.PrivateKeySize:
		return ed25519.Sign(priv, challenge), nil
	case ed25519.SeedSize:
		return ed25519.Sign(ed25519.NewKeyFromSeed(priv), challenge), nil
	default:
		return nil, fmt.Errorf("crypto: sign challenge: private key of %d bytes, want %d (or a %d-byte seed): %w",
			len(priv), ed25519.PrivateKeySize, ed25519.SeedSize, ErrBadLength)
	}
}

// VerifyChallenge checks a detached Ed25519 signature, as the relay does for POST
// /v1/auth. Errors wrap ErrBadLength (public key not 32 bytes, signature not 64 bytes)
// or ErrAuthFailed (the signature does not verify).
func VerifyChallenge(publicKey, challenge, signature []byte) error {
	if len(publicKey) != ed25519.PublicKeySize {
		return fmt.Errorf("crypto: verify challenge: public key of %d bytes, want %d: %w",
			len(publicKey), ed25519.PublicKeySize, ErrBadLength)
	}
	if len(signature) != ed25519.SignatureSize {
		return fmt.Errorf("crypto: verify challenge: signature of %d bytes, want %d: %w",
			len(signature), ed25519.SignatureSize, ErrBadLength)
	}
	if !ed25519.Verify(ed25519.PublicKey(publicKey), challenge, signature) {
		return fmt.Errorf("crypto: verify challenge: %w", ErrAuthFailed)
	}
	return nil
}

// AuthRequest is the body of POST /v1/auth: {publicKey, challenge, signature}, each
// standard padded base64 (publicKey 32 bytes, challenge 32 bytes, signature 64 bytes).
type AuthRequest struct {
	PublicKey string `json:"publicKey"`
	Challenge string `json:"challenge"`
	Signature string `json:"signature"`
}

// NewAuthRequest draws a random 32-byte challenge (crypto/rand, or WithRandom) and signs
// it with the account's auth key, giving the body of POST /v1/auth. It fails only when
// the random source fails.
func NewAuthRequest(accountSecret [32]byte, opts ...Option) (AuthRequest, error) {
	o := applyOptions(opts)
	challenge := make([]byte, ChallengeSize)
	if err := readRandom(o.random, challenge, "auth challenge"); err != nil {
		return AuthRequest{}, err
	}
	pub, priv := AuthKeyPair(accountSecret)
	// priv is always 64 bytes here, so signing cannot fail.
	sig := ed25519.Sign(priv, challenge)
	return AuthRequest{
		PublicKey: EncodeBase64(pub),
		Challenge: EncodeBase64(challenge),
		Signature: EncodeBase64(sig),
	}, nil
}
