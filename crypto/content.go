package crypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"io"

	"golang.org/x/crypto/nacl/secretbox"
)

// Variant names a content-encryption scheme of the reference clients.
type Variant uint8

const (
	// VariantLegacy is NaCl secretbox under the account secret; bundle nonce(24) | box.
	VariantLegacy Variant = iota + 1
	// VariantDataKey is AES-256-GCM under a per-session key; bundle
	// 0x00 | nonce(12) | ciphertext | tag(16).
	VariantDataKey
)

// String returns the reference clients' name of the variant: "legacy" or "dataKey"
// ("unknown(N)" for anything else).
func (v Variant) String() string {
	switch v {
	case VariantLegacy:
		return "legacy"
	case VariantDataKey:
		return "dataKey"
	default:
		return fmt.Sprintf("unknown(%d)", uint8(v))
	}
}

// Sizes of the bundle layouts, in bytes.
const (
	KeySize            = 32                                       // every symmetric key, box key and account secret
	LegacyNonceSize    = 24                                       // secretbox nonce
	LegacyOverhead     = LegacyNonceSize + secretbox.Overhead     // nonce + Poly1305 tag = 40
	DataKeyNonceSize   = 12                                       // AES-GCM nonce
	DataKeyTagSize     = 16                                       // AES-GCM tag
	DataKeyOverhead    = 1 + DataKeyNonceSize + DataKeyTagSize    // version + nonce + tag = 29
	dataKeyVersionByte = 0x00                                     // the only dataKey bundle version
	dataKeyHeaderSize  = 1 + DataKeyNonceSize                     // version + nonce
	maxPlaintextForGCM = (1<<32-2)*aes.BlockSize - DataKeyTagSize // AES-GCM's own limit
)

// Cipher seals and opens the opaque strings of one relay session (or machine, or
// attachment). Plaintext is the JSON value's bytes (UTF-8); bundles are the raw bytes
// that the relay stores base64-encoded. A Cipher holds no mutable state and is safe for
// concurrent use as long as its random source is: crypto/rand is; a WithRandom reader
// must be safe for concurrent Read calls if the Cipher is shared between goroutines.
// fmt and encoding/json show a redacted summary ("Cipher{variant=legacy key=redacted}"),
// never the key.
type Cipher interface {
	// Seal encrypts plaintext with a fresh random nonce and returns the bundle. It fails
	// only when the random source fails, the plaintext exceeds the AEAD's limit
	// (ErrBadLength), or the runtime refuses AES-GCM (see NewDataKeyCipher).
	Seal(plaintext []byte) ([]byte, error)
	// Open authenticates and decrypts a bundle. Errors wrap ErrTruncated,
	// ErrUnsupportedVersion (dataKey only) or ErrAuthFailed. On success the result is
	// non-nil, even for an empty plaintext.
	//
	// The two variants cannot tell each other's bundles apart reliably. A dataKey
	// Cipher given a legacy bundle reads the first byte of its random nonce as the
	// version byte: ErrUnsupportedVersion 255 times in 256, ErrAuthFailed when that byte
	// is 0x00. A legacy Cipher given a dataKey bundle always gives ErrAuthFailed (or
	// ErrTruncated when short). So ErrUnsupportedVersion from a dataKey Cipher may mean
	// "wrong variant", not "newer format".
	Open(bundle []byte) ([]byte, error)
	// Variant tells which layout Seal writes and Open expects.
	Variant() Variant
}

// Option adjusts a constructor of this package. The only option today is WithRandom.
type Option func(*options)

type options struct {
	random io.Reader
}

// WithRandom makes the constructed value draw nonces, ephemeral keys and fresh keys
// from r instead of crypto/rand. Meant for deterministic tests only: a reader that
// repeats itself reuses nonces and destroys confidentiality. A Cipher keeps r and reads
// it on every Seal, so if the Cipher is used from several goroutines, r must be safe
// for concurrent use (crypto/rand.Reader is; most test readers are not). A failing r
// makes the operation fail with r's error wrapped (no sentinel). A nil r is ignored.
func WithRandom(r io.Reader) Option {
	return func(o *options) {
		if r != nil {
			o.random = r
		}
	}
}

func applyOptions(opts []Option) options {
	o := options{random: rand.Reader}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

func readRandom(r io.Reader, dst []byte, what string) error {
	if _, err := io.ReadFull(r, dst); err != nil {
		return fmt.Errorf("crypto: read random %s: %w", what, err)
	}
	return nil
}

// NewLegacyCipher returns the legacy Cipher: NaCl secretbox (XSalsa20-Poly1305) with
// key = the 32-byte account secret (or a blob key, see NewBlobCipher). Bundle layout
// nonce(24) | secretbox(plaintext), as tweetnacl's secretbox writes it.
func NewLegacyCipher(key [32]byte, opts ...Option) Cipher {
	o := applyOptions(opts)
	return &legacyCipher{key: key, random: o.random}
}

type legacyCipher struct {
	key    [32]byte
	random io.Reader
}

func (c *legacyCipher) Variant() Variant { return VariantLegacy }

func (c *legacyCipher) Seal(plaintext []byte) ([]byte, error) {
	var nonce [LegacyNonceSize]byte
	if err := readRandom(c.random, nonce[:], "secretbox nonce"); err != nil {
		return nil, err
	}
	return sealLegacy(&c.key, &nonce, plaintext), nil
}

func (c *legacyCipher) Open(bundle []byte) ([]byte, error) {
	return openLegacy(&c.key, bundle)
}

func sealLegacy(key *[32]byte, nonce *[LegacyNonceSize]byte, plaintext []byte) []byte {
	out := make([]byte, LegacyNonceSize, LegacyOverhead+len(plaintext))
	copy(out, nonce[:])
	return secretbox.Seal(out, plaintext, nonce, key)
}

func openLegacy(key *[32]byte, bundle []byte) ([]byte, error) {
	if len(bundle) < LegacyOverhead {
		return nil, fmt.Errorf("crypto: open legacy bundle of %d bytes (need at least %d): %w",
			len(bundle), LegacyOverhead, ErrTruncated)
	}
	var nonce [LegacyNonceSize]byte
	copy(nonce[:], bundle[:LegacyNonceSize])
	out := make([]byte, 0, len(bundle)-LegacyOverhead)
	out, ok := secretbox.Open(out, bundle[LegacyNonceSize:], &nonce, key)
	if !ok {
		return nil, fmt.Errorf("crypto: open legacy bundle: %w", ErrAuthFailed)
	}
	return out, nil
}

// SealLegacyWithNonce seals plaintext under key with the given nonce and returns
// nonce(24) | secretbox(plaintext). It exists for interoperability vectors and
// deterministic tests; production code uses a Cipher, which draws a fresh nonce. Never
// use one nonce twice with the same key.
func SealLegacyWithNonce(key [32]byte, nonce [24]byte, plaintext []byte) []byte {
	return sealLegacy(&key, &nonce, plaintext)
}

// NewDataKeyCipher returns the dataKey Cipher: AES-256-GCM with a 32-byte session (or
// machine) key. Bundle layout 0x00 | nonce(12) | ciphertext | tag(16), as the reference
// clients write it with node:crypto. Open refuses any first byte other than 0x00 with
// ErrUnsupportedVersion. (Should the runtime refuse AES-GCM with caller-chosen nonces,
// as a FIPS-140-only build does, Seal and Open return that error.)
func NewDataKeyCipher(key [32]byte, opts ...Option) Cipher {
	o := applyOptions(opts)
	aead, err := newGCM(&key)
	return &dataKeyCipher{aead: aead, err: err, random: o.random, key: key}
}

func newGCM(key *[32]byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("crypto: AES-256 key schedule: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("crypto: AES-GCM: %w", err)
	}
	return aead, nil
}

type dataKeyCipher struct {
	aead   cipher.AEAD // nil when err is set
	err    error
	random io.Reader
	key    [32]byte // for BlobCipherOf
}

func (c *dataKeyCipher) Variant() Variant { return VariantDataKey }

func (c *dataKeyCipher) Seal(plaintext []byte) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	var nonce [DataKeyNonceSize]byte
	if err := readRandom(c.random, nonce[:], "AES-GCM nonce"); err != nil {
		return nil, err
	}
	return sealDataKey(c.aead, &nonce, plaintext)
}

func (c *dataKeyCipher) Open(bundle []byte) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	return openDataKey(c.aead, bundle)
}

func sealDataKey(aead cipher.AEAD, nonce *[DataKeyNonceSize]byte, plaintext []byte) ([]byte, error) {
	if uint64(len(plaintext)) > maxPlaintextForGCM {
		return nil, fmt.Errorf("crypto: seal dataKey bundle: plaintext of %d bytes exceeds AES-GCM's limit: %w",
			len(plaintext), ErrBadLength)
	}
	out := make([]byte, dataKeyHeaderSize, DataKeyOverhead+len(plaintext))
	out[0] = dataKeyVersionByte
	copy(out[1:], nonce[:])
	return aead.Seal(out, nonce[:], plaintext, nil), nil
}

func openDataKey(aead cipher.AEAD, bundle []byte) ([]byte, error) {
	if len(bundle) == 0 {
		return nil, fmt.Errorf("crypto: open dataKey bundle of 0 bytes: %w", ErrTruncated)
	}
	if bundle[0] != dataKeyVersionByte {
		return nil, fmt.Errorf("crypto: open dataKey bundle: version byte 0x%02x: %w", bundle[0], ErrUnsupportedVersion)
	}
	if len(bundle) < DataKeyOverhead {
		return nil, fmt.Errorf("crypto: open dataKey bundle of %d bytes (need at least %d): %w",
			len(bundle), DataKeyOverhead, ErrTruncated)
	}
	nonce := bundle[1:dataKeyHeaderSize]
	out := make([]byte, 0, len(bundle)-DataKeyOverhead)
	out, err := aead.Open(out, nonce, bundle[dataKeyHeaderSize:], nil)
	if err != nil {
		return nil, fmt.Errorf("crypto: open dataKey bundle: %w", ErrAuthFailed)
	}
	return out, nil
}

// SealDataKeyWithNonce seals plaintext under key with the given nonce and returns
// 0x00 | nonce(12) | ciphertext | tag(16). For interoperability vectors and
// deterministic tests; production code uses a Cipher. Never use one nonce twice with
// the same key: AES-GCM loses both confidentiality and integrity.
func SealDataKeyWithNonce(key [32]byte, nonce [12]byte, plaintext []byte) ([]byte, error) {
	aead, err := newGCM(&key)
	if err != nil {
		return nil, err
	}
	return sealDataKey(aead, &nonce, plaintext)
}

// NewBlobCipher returns the Cipher for attachment bytes: the reference clients seal
// attachments with NaCl secretbox (the legacy layout) under a blob key from
// SessionBlobKey or AccountBlobKey, whatever the session's own variant.
func NewBlobCipher(blobKey [32]byte, opts ...Option) Cipher {
	return NewLegacyCipher(blobKey, opts...)
}

// BlobCipherOf returns the blob Cipher (NewBlobCipher) of the session whose
// record cipher is c: SessionBlobKey of a dataKey session's key, or
// AccountBlobKey of the account secret a legacy cipher holds. It is how the
// reference clients' attachments of a session are opened. Errors:
// ErrUnsupportedVersion for a Cipher this package did not make.
func BlobCipherOf(c Cipher, opts ...Option) (Cipher, error) {
	switch c := c.(type) {
	case *dataKeyCipher:
		return NewBlobCipher(SessionBlobKey(c.key), opts...), nil
	case *legacyCipher:
		return NewBlobCipher(AccountBlobKey(c.key), opts...), nil
	default:
		return nil, fmt.Errorf("crypto: no blob key for a %T cipher: %w", c, ErrUnsupportedVersion)
	}
}
