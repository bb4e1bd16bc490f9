package crypto

import "errors"

// Sentinel errors. Every error caused by the input (a bundle, a base64 string, a backup
// key, an access.key file, a credentials value, a private key) wraps exactly one of
// them; test with errors.Is. Each adds what was being done, and none of them carries key
// material or plaintext.
//
// Three kinds of failure come from outside the input and wrap the underlying error
// instead, with no sentinel:
//   - the random source (crypto/rand, or the WithRandom reader) failing in Seal, the
//     Wrap*, New*KeyPair, New*Credentials, CredentialsFromPairing, NewSession,
//     MachineEncryption and NewAuthRequest functions;
//   - the runtime refusing AES-GCM with caller-chosen nonces (a FIPS 140-only build):
//     the dataKey Cipher's Seal and Open, SealDataKeyWithNonce;
//   - the file system in LoadCredentials and Credentials.Save (a missing file satisfies
//     errors.Is(err, fs.ErrNotExist)).
var (
	// ErrAuthFailed: the bundle did not authenticate — wrong key, wrong variant, or
	// altered bytes. Also returned by VerifyChallenge for a bad signature. A legacy
	// bundle given to a dataKey Cipher gives this error when its random nonce happens
	// to start with 0x00 (1 time in 256), ErrUnsupportedVersion otherwise.
	ErrAuthFailed = errors.New("authentication failed (wrong key, wrong variant or altered data)")

	// ErrUnsupportedVersion: the bundle's version byte (or payload tag) is not one this
	// package knows; only 0x00 exists today. It can also mean the wrong variant: a
	// legacy bundle starts with its random secretbox nonce, so a dataKey Cipher given
	// one sees an unknown version byte 255 times in 256 (and ErrAuthFailed otherwise).
	// Callers that may hold either kind of bundle should treat both errors alike.
	ErrUnsupportedVersion = errors.New("unsupported version byte (or a bundle of the other variant)")

	// ErrTruncated: the bundle is shorter than its fixed header and tag.
	ErrTruncated = errors.New("truncated input")

	// ErrBadEncoding: text that should be base64, base64url or a backup key is not.
	ErrBadEncoding = errors.New("bad encoding")

	// ErrBadLength: a decoded key, signature or payload has the wrong number of bytes,
	// or a private key given to SignChallenge is neither 64 nor 32 bytes.
	ErrBadLength = errors.New("wrong length")

	// ErrBadCredentials: an access.key file (or a Credentials value about to be saved)
	// is malformed: not JSON, over 64 KiB, missing token, no usable key fields, bad
	// base64, bad key sizes. Decoding problems inside the file are reported through this
	// sentinel alone (not also ErrBadEncoding or ErrBadLength).
	ErrBadCredentials = errors.New("malformed credentials")

	// ErrNoAccountSecret: the operation needs the 32-byte account secret and these
	// credentials do not hold it (a dataKey machine paired through the app).
	ErrNoAccountSecret = errors.New("account secret not available on this machine")

	// ErrPairingProof: a pairing response carries no proof, or one that does not match
	// the terminal's pairing secret, public key and payload (PairingResponse.CheckProof).
	ErrPairingProof = errors.New("pairing proof does not match")
)
