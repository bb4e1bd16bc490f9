package crypto

import "errors"

// Sentinel errors. Every error this package returns wraps exactly one of them (test
// with errors.Is) and adds what was being done; none of them carries key material.
var (
	// ErrAuthFailed: the bundle did not authenticate — wrong key, wrong variant, or
	// altered bytes. Also returned by VerifyChallenge for a bad signature.
	ErrAuthFailed = errors.New("authentication failed (wrong key, wrong variant or altered data)")

	// ErrUnsupportedVersion: the bundle's version byte (or payload tag) is not one this
	// package knows; only 0x00 exists today.
	ErrUnsupportedVersion = errors.New("unsupported version byte")

	// ErrTruncated: the bundle is shorter than its fixed header and tag.
	ErrTruncated = errors.New("truncated input")

	// ErrBadEncoding: text that should be base64, base64url or a backup key is not.
	ErrBadEncoding = errors.New("bad encoding")

	// ErrBadLength: a decoded key, signature or payload has the wrong number of bytes.
	ErrBadLength = errors.New("wrong length")

	// ErrBadCredentials: an access.key file (or a Credentials value about to be saved)
	// is malformed: not JSON, missing token, no usable key fields, bad key sizes.
	ErrBadCredentials = errors.New("malformed credentials")

	// ErrNoAccountSecret: the operation needs the 32-byte account secret and these
	// credentials do not hold it (a dataKey machine paired through the app).
	ErrNoAccountSecret = errors.New("account secret not available on this machine")
)
