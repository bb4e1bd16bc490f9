// Package crypto is happy's end-to-end encryption, byte-compatible with the reference
// clients (the happy mobile/web app and the happy CLI, which use tweetnacl and
// node:crypto). The relay only ever stores what this package produces.
//
// # Content encryption
//
// Every opaque string the relay stores (session metadata, agent state, messages, RPC
// params and results) is base64 of a bundle sealed by a [Cipher]. There are two
// variants, chosen per account and session:
//
//   - legacy ([NewLegacyCipher]): NaCl secretbox (XSalsa20-Poly1305) under the 32-byte
//     account secret. Bundle: nonce(24) | secretbox(plaintext) (16-byte tag first).
//   - dataKey ([NewDataKeyCipher]): AES-256-GCM under a random 32-byte key per session.
//     Bundle: 0x00 | nonce(12) | ciphertext | tag(16). Any other first byte is refused
//     with [ErrUnsupportedVersion].
//
// Nonces are drawn fresh from crypto/rand for every bundle (the same keys are used by
// several devices at once, so counters could collide; random nonces cannot, within the
// 2^32-bundles-per-key bound of a 96-bit random nonce).
//
// # Keys
//
// A dataKey session's key travels to the relay wrapped for the account's content
// public key ([WrapDataKey], [UnwrapDataKey]): 0x00 | ephemeralPublicKey(32) | nonce(24)
// | box(key), a NaCl box from a fresh ephemeral key pair (not libsodium's sealed-box
// format). The content key pair comes from the account secret through the HMAC-SHA512
// key tree ([DeriveKey], [ContentKeyPair]); attachment ("blob") keys come from the same
// tree ([SessionBlobKey], [AccountBlobKey]).
//
// # Auth and pairing
//
// The account authenticates with an Ed25519 signature over a random 32-byte challenge
// ([AuthKeyPair], [SignChallenge], [NewAuthRequest]). A terminal pairs with the app
// through a box key pair from a random secret ([BoxPublicKey]) and the app's sealed
// response ([OpenPairingResponse], [SealPairingResponse]); [PairingCode] is the short
// fingerprint of the terminal's key that another terminal types to approve it.
//
// # Credentials
//
// [Credentials] reads and writes the reference CLI's access.key file in both shapes.
//
// # Errors
//
// Bad input never panics: every open/decode function given bad input returns an error
// wrapping one of the sentinels ([ErrAuthFailed], [ErrUnsupportedVersion],
// [ErrTruncated], [ErrBadEncoding], [ErrBadLength], [ErrBadCredentials],
// [ErrNoAccountSecret]) and says what was being done, under a single "crypto:" prefix.
// Failures of the random source, of the runtime's AES-GCM (a FIPS 140-only build) and
// of the file system wrap the underlying error instead, without a sentinel (see the
// sentinels' doc). Error strings never contain key material or plaintext, and every
// type holding a secret key prints redacted through fmt and encoding/json.
//
// Values hold no mutable state and are safe for concurrent use, except that a random
// source given with [WithRandom] is read concurrently if the value is shared.
//
// Formats and derivations follow the reference relay contract ("Auth" and "Encryption
// of opaque strings") and are checked against vectors computed with tweetnacl 1.0.3
// and node:crypto (testdata/vectors.json).
package crypto
