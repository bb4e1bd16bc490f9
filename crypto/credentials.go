package crypto

import (
	"bytes"
	"crypto/ed25519"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// CredentialsFileName is the name of the credential file in the happy home folder, the
// same as the reference CLI's.
const CredentialsFileName = "access.key"

// maxCredentialsFile bounds what LoadCredentials reads; a real file is a few hundred bytes.
const maxCredentialsFile = 64 << 10

// Credentials is the content of access.key: the relay token and the keys this machine
// encrypts with. Two shapes exist, as in the reference CLI:
//
//   - legacy: {"secret": b64(accountSecret), "token": …}. Everything is sealed with
//     NaCl secretbox under the account secret.
//   - dataKey: {"encryption": {"publicKey": b64(contentPublicKey), "machineKey":
//     b64(machineKey)}, "token": …}. Each session gets a fresh AES-256-GCM key, wrapped
//     for the content public key; the machine's own state uses machineKey.
//
// A dataKey file may also carry "accountSecret" (b64) when this machine owns the account
// (a local account on its own relay): then it can open any session's wrapped key and
// read sessions back. The field is deliberately not named "secret": the reference CLI
// reads any file with "secret" as legacy. A file with both "secret" and "encryption"
// (written by some reference builds, which provision a machine key next to the legacy
// secret) is legacy, as the reference reads it; its "encryption" part is kept and
// written back unchanged. Its "publicKey" is not checked against the secret: the
// reference takes it from a separate setup step and never derives or compares it. (An
// "accountSecret", which only this package writes, is checked; see Validate.)
//
// All base64 is standard and padded; every key is 32 bytes. fmt, encoding/json and
// loggers see a redacted summary (String, GoString, Format, MarshalJSON), never the
// token or a key; the file shape comes only from Encode and Save.
type Credentials struct {
	// Token is the relay bearer token; opaque, never empty.
	Token string
	// Variant is VariantLegacy or VariantDataKey: how this machine encrypts.
	Variant Variant
	// AccountSecret is the 32-byte account master secret: required for VariantLegacy
	// ("secret"), optional for VariantDataKey ("accountSecret"); nil when absent.
	AccountSecret *[32]byte
	// DataKey holds the "encryption" object: required for VariantDataKey, optional for
	// VariantLegacy; nil when absent.
	DataKey *DataKeyMaterial
}

// DataKeyMaterial is access.key's "encryption" object.
type DataKeyMaterial struct {
	// ContentPublicKey is the account's content box public key ("publicKey"); every
	// session data key is wrapped for it (WrapDataKey).
	ContentPublicKey [32]byte
	// MachineKey is this machine's AES-256-GCM key ("machineKey") for its own metadata
	// and daemon state.
	MachineKey [32]byte
}

// NewLegacyCredentials returns legacy credentials: everything sealed under the account
// secret.
func NewLegacyCredentials(token string, accountSecret [32]byte) *Credentials {
	return &Credentials{Token: token, Variant: VariantLegacy, AccountSecret: &accountSecret}
}

// NewDataKeyCredentials returns dataKey credentials of a machine paired through the app
// (no account secret): sessions are readable only through keys this machine made.
func NewDataKeyCredentials(token string, contentPublicKey, machineKey [32]byte) *Credentials {
	return &Credentials{Token: token, Variant: VariantDataKey,
		DataKey: &DataKeyMaterial{ContentPublicKey: contentPublicKey, MachineKey: machineKey}}
}

// NewAccountCredentials returns dataKey credentials for a machine that owns the account
// secret (a local account): the content public key is derived from the secret
// (ContentKeyPair), the machine key is fresh from crypto/rand (or WithRandom), and the
// secret is kept. It fails only when the random source fails.
func NewAccountCredentials(token string, accountSecret [32]byte, opts ...Option) (*Credentials, error) {
	o := applyOptions(opts)
	var machineKey [32]byte
	if err := readRandom(o.random, machineKey[:], "machine key"); err != nil {
		return nil, err
	}
	public, _ := ContentKeyPair(accountSecret)
	c := NewDataKeyCredentials(token, public, machineKey)
	c.AccountSecret = &accountSecret
	return c, nil
}

// CredentialsFromPairing turns an opened pairing response and the token the relay
// returned with it into credentials, as the reference CLI does after `happy auth`:
// legacy keeps the account secret; dataKey keeps the content public key and draws a
// fresh machine key (crypto/rand, or WithRandom). Errors wrap ErrBadCredentials (empty
// token, unknown variant) or come from the random source.
func CredentialsFromPairing(token string, resp PairingResponse, opts ...Option) (*Credentials, error) {
	if token == "" {
		return nil, fmt.Errorf("crypto: credentials from pairing: empty token: %w", ErrBadCredentials)
	}
	switch resp.Variant {
	case VariantLegacy:
		return NewLegacyCredentials(token, resp.Secret), nil
	case VariantDataKey:
		o := applyOptions(opts)
		var machineKey [32]byte
		if err := readRandom(o.random, machineKey[:], "machine key"); err != nil {
			return nil, err
		}
		return NewDataKeyCredentials(token, resp.ContentPublicKey, machineKey), nil
	default:
		return nil, fmt.Errorf("crypto: credentials from pairing: variant %s: %w", resp.Variant, ErrBadCredentials)
	}
}

// Validate reports whether c can be saved and used: a non-empty token; legacy with an
// account secret; dataKey with the encryption object; and, for dataKey credentials that
// also hold the account secret ("accountSecret"), that the content public key is the
// one derived from it (ContentKeyPair), since sessions wrapped for one must open with
// the other. A legacy file's "encryption" object is not checked against its secret: the
// reference CLI fills it from a separate setup step and never compares them. Errors wrap
// ErrBadCredentials.
func (c *Credentials) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("crypto: credentials: %w", err)
	}
	return nil
}

// validate is Validate without the package prefix on the error.
func (c *Credentials) validate() error {
	if c == nil {
		return fmt.Errorf("nil: %w", ErrBadCredentials)
	}
	if c.Token == "" {
		return fmt.Errorf("empty token: %w", ErrBadCredentials)
	}
	switch c.Variant {
	case VariantLegacy:
		if c.AccountSecret == nil {
			return fmt.Errorf("legacy without an account secret: %w", ErrBadCredentials)
		}
	case VariantDataKey:
		if c.DataKey == nil {
			return fmt.Errorf("dataKey without encryption keys: %w", ErrBadCredentials)
		}
		if c.AccountSecret != nil {
			public, _ := ContentKeyPair(*c.AccountSecret)
			if subtle.ConstantTimeCompare(public[:], c.DataKey.ContentPublicKey[:]) != 1 {
				return fmt.Errorf(`"accountSecret" does not match "encryption.publicKey": %w`, ErrBadCredentials)
			}
		}
	default:
		return fmt.Errorf("variant %s: %w", c.Variant, ErrBadCredentials)
	}
	return nil
}

// credentialsFile is the JSON shape of access.key as Encode writes it. Field order
// follows the reference files: {secret, token} and {encryption, token}. Parsing does not
// use it (see ParseCredentials).
type credentialsFile struct {
	Secret        *string         `json:"secret,omitempty"`
	Encryption    *encryptionFile `json:"encryption,omitempty"`
	AccountSecret *string         `json:"accountSecret,omitempty"`
	Token         *string         `json:"token"`
}

type encryptionFile struct {
	PublicKey  *string `json:"publicKey"`
	MachineKey *string `json:"machineKey"`
}

// ParseCredentials decodes the bytes of an access.key file (either shape, see
// Credentials), at most 64 KiB. It reads the file as the reference CLI does (JSON.parse
// and a schema of exact, case-sensitive field names): "Token" or "SECRET" are not
// "token" or "secret"; of duplicate fields the last wins; fields it does not know are
// ignored, at the top level and inside "encryption"; null counts as absent. Key fields
// must be standard base64 with '=' padding and no line breaks or spaces (as the
// reference's schema requires), each decoding to 32 bytes.
//
// Errors wrap ErrBadCredentials and name the field at fault, never its value: over 64
// KiB, not a JSON object, missing or empty token, a field of the wrong JSON type,
// neither "secret" nor "encryption", "encryption" without both keys, bad base64, a key
// that is not 32 bytes, "accountSecret" next to "secret" or without "encryption", an
// "accountSecret" that does not match "encryption.publicKey" (see Validate).
func ParseCredentials(data []byte) (*Credentials, error) {
	c, err := parseCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("crypto: parse credentials: %w", err)
	}
	return c, nil
}

// parseCredentials is ParseCredentials without the package prefix on the error.
func parseCredentials(data []byte) (*Credentials, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrBadCredentials)...)
	}
	if len(data) > maxCredentialsFile {
		return nil, bad("larger than %d bytes", maxCredentialsFile)
	}
	top, err := jsonObject(data)
	if err != nil {
		return nil, bad("%v", err)
	}
	token, err := jsonStringField(top, "token", "")
	if err != nil {
		return nil, bad("%v", err)
	}
	if token == nil || *token == "" {
		return nil, bad(`field "token": missing or empty`)
	}
	secretText, err := jsonStringField(top, "secret", "")
	if err != nil {
		return nil, bad("%v", err)
	}
	accountText, err := jsonStringField(top, "accountSecret", "")
	if err != nil {
		return nil, bad("%v", err)
	}
	c := &Credentials{Token: *token}
	if raw, ok := top["encryption"]; ok && !isJSONNull(raw) {
		encryption, err := jsonObject(raw)
		if err != nil {
			return nil, bad(`field "encryption": %v`, err)
		}
		publicText, err := jsonStringField(encryption, "publicKey", "encryption.")
		if err != nil {
			return nil, bad("%v", err)
		}
		machineText, err := jsonStringField(encryption, "machineKey", "encryption.")
		if err != nil {
			return nil, bad("%v", err)
		}
		if publicText == nil || machineText == nil {
			return nil, bad(`field "encryption": needs both "publicKey" and "machineKey"`)
		}
		public, err := decodeFileKey(*publicText, "encryption.publicKey")
		if err != nil {
			return nil, bad("%v", err)
		}
		machine, err := decodeFileKey(*machineText, "encryption.machineKey")
		if err != nil {
			return nil, bad("%v", err)
		}
		c.DataKey = &DataKeyMaterial{ContentPublicKey: public, MachineKey: machine}
	}
	switch {
	case secretText != nil && accountText != nil:
		return nil, bad(`both "secret" and "accountSecret"`)
	case secretText != nil:
		secret, err := decodeFileKey(*secretText, "secret")
		if err != nil {
			return nil, bad("%v", err)
		}
		c.Variant, c.AccountSecret = VariantLegacy, &secret
	case c.DataKey != nil:
		c.Variant = VariantDataKey
		if accountText != nil {
			secret, err := decodeFileKey(*accountText, "accountSecret")
			if err != nil {
				return nil, bad("%v", err)
			}
			c.AccountSecret = &secret
		}
	case accountText != nil:
		return nil, bad(`"accountSecret" without "encryption"`)
	default:
		return nil, bad(`neither "secret" nor "encryption"`)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// jsonObject decodes a JSON object into its members, keyed by exact name (the last of
// duplicate names wins, as with JSON.parse). Errors describe the problem without
// quoting the input.
func jsonObject(data []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, errors.New(describeJSONError(err))
	}
	if obj == nil { // the input was null
		return nil, errors.New("not a JSON object (found null)")
	}
	return obj, nil
}

// jsonStringField reads member name of obj as a string; nil when absent or null.
// Errors name the field as parent+name.
func jsonStringField(obj map[string]json.RawMessage, name, parent string) (*string, error) {
	raw, ok := obj[name]
	if !ok || isJSONNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return nil, fmt.Errorf("field %q: not a JSON string (found %s)", parent+name, typ.Value)
		}
		return nil, fmt.Errorf("field %q: not a JSON string", parent+name)
	}
	return &s, nil
}

func isJSONNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// describeJSONError says what is wrong with the JSON without quoting it (a syntax error
// message would show the offending character, which may be part of a key).
func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("not a JSON object (found %s)", typ.Value)
	default:
		return "not valid JSON"
	}
}

// decodeFileKey decodes a key field of access.key: standard base64 with '=' padding,
// nothing else (no line breaks, spaces or missing padding, which DecodeBase64 would
// forgive), holding exactly 32 bytes. The unused low bits of the last character are not
// checked, as the reference (Node's Buffer) does not check them. Errors name the field.
func decodeFileKey(s, field string) ([32]byte, error) {
	var key [32]byte
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return key, fmt.Errorf("field %q: bad base64: line break at byte %d", field, i)
	}
	if len(s)%4 != 0 {
		return key, fmt.Errorf("field %q: bad base64: %d characters, want a multiple of 4 (padded standard base64)", field, len(s))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// CorruptInputError carries only an offset.
		return key, fmt.Errorf("field %q: bad base64: %v", field, err)
	}
	if len(b) != KeySize {
		return key, fmt.Errorf("field %q: %d bytes, want %d", field, len(b), KeySize)
	}
	copy(key[:], b)
	return key, nil
}

// Encode returns the access.key bytes for c: JSON indented by two spaces, like the
// reference CLI writes it, with the shape chosen by c.Variant (see Credentials). Errors
// wrap ErrBadCredentials (see Validate).
func (c *Credentials) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	str := func(b []byte) *string { s := EncodeBase64(b); return &s }
	f := credentialsFile{Token: &c.Token}
	if c.DataKey != nil {
		f.Encryption = &encryptionFile{
			PublicKey:  str(c.DataKey.ContentPublicKey[:]),
			MachineKey: str(c.DataKey.MachineKey[:]),
		}
	}
	if c.AccountSecret != nil {
		if c.Variant == VariantLegacy {
			f.Secret = str(c.AccountSecret[:])
		} else {
			f.AccountSecret = str(c.AccountSecret[:])
		}
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("crypto: encode credentials: %w", err)
	}
	return out, nil
}

// LoadCredentials reads and parses an access.key file (see ParseCredentials). A missing
// file gives an error satisfying errors.Is(err, fs.ErrNotExist) (not logged in); other
// file-system errors are wrapped as they come, without a sentinel; a file over 64 KiB
// or malformed gives ErrBadCredentials, e.g. `crypto: load credentials <path>: field
// "secret": bad base64: …: malformed credentials`.
func LoadCredentials(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		// *fs.PathError names the path itself.
		return nil, fmt.Errorf("crypto: load credentials: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCredentialsFile+1))
	if err != nil {
		return nil, fmt.Errorf("crypto: load credentials: %w", err)
	}
	c, err := parseCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("crypto: load credentials %s: %w", path, err)
	}
	return c, nil
}

// Save writes c to path atomically with mode 0600: it writes a temporary file in the
// same folder (creating the folder with mode 0700 if needed), syncs it, renames it over
// path and syncs the folder, so a crash leaves either the old file or the new one.
// Errors wrap ErrBadCredentials (see Validate) or the file system's error.
func (c *Credentials) Save(path string) error {
	data, err := c.Encode()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("crypto: save credentials: create folder: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("crypto: save credentials: create temporary file: %w", err)
	}
	tmpName := tmp.Name()
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("crypto: save credentials: chmod temporary file: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("crypto: save credentials: write temporary file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("crypto: save credentials: sync temporary file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("crypto: save credentials: close temporary file: %w", err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("crypto: save credentials: rename into place: %w", err)
	}
	done = true
	if runtime.GOOS != "windows" {
		d, err := os.Open(dir)
		if err != nil {
			return fmt.Errorf("crypto: save credentials: open folder to sync: %w", err)
		}
		defer d.Close()
		if err := d.Sync(); err != nil {
			return fmt.Errorf("crypto: save credentials: sync folder: %w", err)
		}
	}
	return nil
}

// SessionEncryption is what a relay session (or machine) needs to encrypt: its Cipher,
// the wrapped key to register with the relay, and the raw key to keep.
type SessionEncryption struct {
	// Cipher seals and opens the session's opaque strings.
	Cipher Cipher
	// DataEncryptionKey is the wrapped data key (WrapDataKey) to send as the session's
	// or machine's `dataEncryptionKey`; nil for legacy (send null).
	DataEncryptionKey []byte
	// Key is the raw 32-byte data key (dataKey only, nil for legacy). Keep it (with the
	// session's local state) to reopen the session without the account secret.
	Key *[32]byte
}

// DataEncryptionKeyBase64 returns the `dataEncryptionKey` field as the relay expects
// it: base64 of the wrapped key, or nil (JSON null) for legacy.
func (s *SessionEncryption) DataEncryptionKeyBase64() *string {
	if s == nil || s.DataEncryptionKey == nil {
		return nil
	}
	v := EncodeBase64(s.DataEncryptionKey)
	return &v
}

// NewSession prepares the encryption of a new relay session. Legacy: the account
// secret's secretbox Cipher and no data key. dataKey: a fresh random 32-byte key
// (crypto/rand, or WithRandom), its AES-GCM Cipher, and the key wrapped for the content
// public key. Errors wrap ErrBadCredentials or come from the random source.
func (c *Credentials) NewSession(opts ...Option) (*SessionEncryption, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Variant == VariantLegacy {
		return &SessionEncryption{Cipher: NewLegacyCipher(*c.AccountSecret, opts...)}, nil
	}
	o := applyOptions(opts)
	var key [32]byte
	if err := readRandom(o.random, key[:], "session key"); err != nil {
		return nil, err
	}
	return c.encryptionWithKey(key, opts)
}

// MachineEncryption is the encryption of this machine's own relay record (metadata,
// daemon state). Legacy: the account secret's Cipher. dataKey: the machine key's Cipher
// and the machine key wrapped for the content public key (fresh wrapping each call).
func (c *Credentials) MachineEncryption(opts ...Option) (*SessionEncryption, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Variant == VariantLegacy {
		return &SessionEncryption{Cipher: NewLegacyCipher(*c.AccountSecret, opts...)}, nil
	}
	return c.encryptionWithKey(c.DataKey.MachineKey, opts)
}

func (c *Credentials) encryptionWithKey(key [32]byte, opts []Option) (*SessionEncryption, error) {
	wrapped, err := WrapDataKey(key, c.DataKey.ContentPublicKey, opts...)
	if err != nil {
		return nil, err
	}
	return &SessionEncryption{Cipher: NewDataKeyCipher(key, opts...), DataEncryptionKey: wrapped, Key: &key}, nil
}

// OpenSession returns the Cipher of an existing session from its `dataEncryptionKey` as
// the relay returns it (standard base64; "" for null). "" means a legacy session, sealed
// under the account secret; otherwise the wrapped key is opened with the content secret
// key derived from the account secret. Either way the account secret is needed: without
// it the error wraps ErrNoAccountSecret (the caller must use the raw key it kept from
// NewSession). Other errors wrap ErrBadEncoding or those of UnwrapDataKey.
func (c *Credentials) OpenSession(dataEncryptionKey string, opts ...Option) (Cipher, error) {
	if c == nil || c.AccountSecret == nil {
		return nil, fmt.Errorf("crypto: open session key: %w", ErrNoAccountSecret)
	}
	if dataEncryptionKey == "" {
		return NewLegacyCipher(*c.AccountSecret, opts...), nil
	}
	wrapped, err := decodeBase64(dataEncryptionKey, base64.StdEncoding, base64.RawStdEncoding, "base64")
	if err != nil {
		return nil, fmt.Errorf("crypto: open session key: %w", err)
	}
	_, contentSecret := ContentKeyPair(*c.AccountSecret)
	key, err := unwrapDataKey(wrapped, &contentSecret)
	if err != nil {
		return nil, fmt.Errorf("crypto: open session key: %w", err)
	}
	return NewDataKeyCipher(key, opts...), nil
}

// NewAuthRequest builds the body of POST /v1/auth from the account secret (see the
// package function NewAuthRequest). Errors wrap ErrNoAccountSecret when this machine
// does not hold the secret.
func (c *Credentials) NewAuthRequest(opts ...Option) (AuthRequest, error) {
	if c == nil || c.AccountSecret == nil {
		return AuthRequest{}, fmt.Errorf("crypto: auth request: %w", ErrNoAccountSecret)
	}
	return NewAuthRequest(*c.AccountSecret, opts...)
}

// AuthKeyPair returns the account's Ed25519 key pair (see the package function
// AuthKeyPair). Errors wrap ErrNoAccountSecret when this machine does not hold the secret.
func (c *Credentials) AuthKeyPair() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	if c == nil || c.AccountSecret == nil {
		return nil, nil, fmt.Errorf("crypto: auth key pair: %w", ErrNoAccountSecret)
	}
	pub, priv := AuthKeyPair(*c.AccountSecret)
	return pub, priv, nil
}
