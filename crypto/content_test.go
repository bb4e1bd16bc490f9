package crypto

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// detReader is a deterministic byte stream (SHA-256 in counter mode over a label),
// for WithRandom in tests.
type detReader struct {
	label   string
	counter uint64
	buf     []byte
}

func newDetReader(label string) *detReader { return &detReader{label: label} }

func (r *detReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.buf) == 0 {
			var ctr [8]byte
			binary.BigEndian.PutUint64(ctr[:], r.counter)
			r.counter++
			sum := sha256.Sum256(append([]byte(r.label), ctr[:]...))
			r.buf = sum[:]
		}
		c := copy(p[n:], r.buf)
		r.buf = r.buf[c:]
		n += c
	}
	return n, nil
}

// failingReader fails every read, to prove randomness failures surface as errors.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy source down") }

func testKey(label string) [32]byte { return sha256.Sum256([]byte(label)) }

func ciphers() []Cipher {
	return []Cipher{NewLegacyCipher(testKey("k")), NewDataKeyCipher(testKey("k"))}
}

func TestCipherRoundTrip(t *testing.T) {
	for _, c := range ciphers() {
		for _, size := range []int{0, 1, 15, 16, 17, 1024, 1 << 20} {
			t.Run(fmt.Sprintf("%s/%d", c.Variant(), size), func(t *testing.T) {
				plain := bytes.Repeat([]byte{'x'}, size)
				bundle, err := c.Seal(plain)
				if err != nil {
					t.Fatal(err)
				}
				wantLen := size + LegacyOverhead
				if c.Variant() == VariantDataKey {
					wantLen = size + DataKeyOverhead
					if bundle[0] != 0x00 {
						t.Errorf("version byte 0x%02x", bundle[0])
					}
				}
				if len(bundle) != wantLen {
					t.Errorf("bundle of %d bytes, want %d", len(bundle), wantLen)
				}
				got, err := c.Open(bundle)
				if err != nil {
					t.Fatal(err)
				}
				if got == nil || !bytes.Equal(got, plain) {
					t.Errorf("round trip of %d bytes gave %d bytes (nil=%v)", size, len(got), got == nil)
				}
			})
		}
	}
}

func TestVariantString(t *testing.T) {
	cases := map[Variant]string{VariantLegacy: "legacy", VariantDataKey: "dataKey", 0: "unknown(0)", 9: "unknown(9)"}
	for v, want := range cases {
		if got := v.String(); got != want {
			t.Errorf("Variant(%d).String() = %q, want %q", uint8(v), got, want)
		}
	}
}

func TestSealUsesFreshNonces(t *testing.T) {
	for _, c := range ciphers() {
		seen := map[string]bool{}
		nonceLen := LegacyNonceSize
		offset := 0
		if c.Variant() == VariantDataKey {
			nonceLen, offset = DataKeyNonceSize, 1
		}
		for i := 0; i < 1000; i++ {
			b, err := c.Seal([]byte("{}"))
			if err != nil {
				t.Fatal(err)
			}
			nonce := string(b[offset : offset+nonceLen])
			if seen[nonce] {
				t.Fatalf("%s: nonce repeated after %d seals", c.Variant(), i)
			}
			seen[nonce] = true
		}
	}
}

func TestSealWithInjectedRandom(t *testing.T) {
	key := testKey("k")
	for _, mk := range []func(...Option) Cipher{
		func(o ...Option) Cipher { return NewLegacyCipher(key, o...) },
		func(o ...Option) Cipher { return NewDataKeyCipher(key, o...) },
	} {
		a, err := mk(WithRandom(newDetReader("r"))).Seal([]byte(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := mk(WithRandom(newDetReader("r"))).Seal([]byte(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("same injected stream gave different bundles")
		}
		// The injected nonce is the stream's first bytes.
		first := make([]byte, 24)
		newDetReader("r").Read(first)
		c := mk()
		off := 0
		n := LegacyNonceSize
		if c.Variant() == VariantDataKey {
			off, n = 1, DataKeyNonceSize
		}
		if !bytes.Equal(a[off:off+n], first[:n]) {
			t.Errorf("%s: nonce %x, want the stream's %x", c.Variant(), a[off:off+n], first[:n])
		}
		if _, err := mk(WithRandom(failingReader{})).Seal([]byte("{}")); err == nil || !strings.Contains(err.Error(), "entropy source down") {
			t.Errorf("%s: failing random source gave %v", c.Variant(), err)
		}
		// A nil option and a nil reader are ignored.
		if _, err := mk(nil, WithRandom(nil)).Seal([]byte("{}")); err != nil {
			t.Errorf("nil options: %v", err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	key := testKey("k")
	other := testKey("other")
	legacy := SealLegacyWithNonce(key, [24]byte{7}, []byte(`{"x":1,"pad":"long enough for both layouts"}`))
	dataKey, err := SealDataKeyWithNonce(key, [12]byte{7}, []byte(`{"x":1,"pad":"long enough for both layouts"}`))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		return c
	}
	versioned := func(v byte) []byte { c := bytes.Clone(dataKey); c[0] = v; return c }
	cases := []struct {
		name   string
		cipher Cipher
		bundle []byte
		want   error
	}{
		{"legacy empty", NewLegacyCipher(key), nil, ErrTruncated},
		{"legacy nonce only", NewLegacyCipher(key), legacy[:24], ErrTruncated},
		{"legacy one short of tag", NewLegacyCipher(key), legacy[:LegacyOverhead-1], ErrTruncated},
		{"legacy tag without ciphertext", NewLegacyCipher(key), legacy[:LegacyOverhead], ErrAuthFailed},
		{"legacy truncated ciphertext", NewLegacyCipher(key), legacy[:len(legacy)-1], ErrAuthFailed},
		{"legacy wrong key", NewLegacyCipher(other), legacy, ErrAuthFailed},
		{"legacy flipped nonce", NewLegacyCipher(key), flip(legacy, 0), ErrAuthFailed},
		{"legacy flipped tag", NewLegacyCipher(key), flip(legacy, 30), ErrAuthFailed},
		{"legacy flipped ciphertext", NewLegacyCipher(key), flip(legacy, len(legacy)-1), ErrAuthFailed},
		{"legacy given a dataKey bundle", NewLegacyCipher(key), dataKey, ErrAuthFailed},
		{"dataKey empty", NewDataKeyCipher(key), []byte{}, ErrTruncated},
		{"dataKey version only", NewDataKeyCipher(key), []byte{0}, ErrTruncated},
		{"dataKey one short", NewDataKeyCipher(key), dataKey[:DataKeyOverhead-1], ErrTruncated},
		{"dataKey version 1", NewDataKeyCipher(key), versioned(1), ErrUnsupportedVersion},
		{"dataKey version 0xff", NewDataKeyCipher(key), versioned(0xff), ErrUnsupportedVersion},
		{"dataKey bad version and short", NewDataKeyCipher(key), []byte{2, 0}, ErrUnsupportedVersion},
		{"dataKey wrong key", NewDataKeyCipher(other), dataKey, ErrAuthFailed},
		{"dataKey flipped nonce", NewDataKeyCipher(key), flip(dataKey, 1), ErrAuthFailed},
		{"dataKey flipped tag", NewDataKeyCipher(key), flip(dataKey, len(dataKey)-1), ErrAuthFailed},
		{"dataKey truncated tag", NewDataKeyCipher(key), dataKey[:len(dataKey)-1], ErrAuthFailed},
		{"dataKey given a legacy bundle", NewDataKeyCipher(key), append([]byte{0}, legacy...), ErrAuthFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cipher.Open(tc.bundle)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if got != nil {
				t.Errorf("result %q alongside an error", got)
			}
			if !strings.HasPrefix(err.Error(), "crypto: open "+tc.cipher.Variant().String()+" bundle") {
				t.Errorf("error %q does not say what was being done", err)
			}
		})
	}
}

func TestErrorsCarryNoKeyMaterial(t *testing.T) {
	key := testKey("secret-material")
	bundle := SealLegacyWithNonce(key, [24]byte{1}, []byte("{}"))
	_, err := NewLegacyCipher(testKey("other")).Open(bundle)
	for _, forbidden := range []string{
		EncodeBase64(key[:]), fmt.Sprintf("%x", key[:]), EncodeBase64(bundle), fmt.Sprintf("%x", bundle[:8]),
	} {
		if strings.Contains(err.Error(), forbidden) {
			t.Errorf("error %q contains key or bundle bytes", err)
		}
	}
}

func TestCipherConcurrentUse(t *testing.T) {
	for _, c := range ciphers() {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					plain := []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))
					b, err := c.Seal(plain)
					if err != nil {
						errs <- err
						return
					}
					got, err := c.Open(b)
					if err != nil || !bytes.Equal(got, plain) {
						errs <- fmt.Errorf("round trip %s: %v", plain, err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", c.Variant(), err)
		}
	}
}

func TestBlobCipherAndKeys(t *testing.T) {
	sessionKey := testKey("session")
	secret := testKey("account")
	if SessionBlobKey(sessionKey) != DeriveKey(sessionKey[:], "Happy Blobs", "session") {
		t.Error("SessionBlobKey is not DeriveKey(key, Happy Blobs, session)")
	}
	if AccountBlobKey(secret) != DeriveKey(secret[:], "Happy Blobs", "master") {
		t.Error("AccountBlobKey is not DeriveKey(secret, Happy Blobs, master)")
	}
	if SessionBlobKey(sessionKey) == sessionKey || AccountBlobKey(secret) == secret {
		t.Error("blob key equals its parent")
	}
	blobKey := SessionBlobKey(sessionKey)
	c := NewBlobCipher(blobKey, WithRandom(newDetReader("blob")))
	if c.Variant() != VariantLegacy {
		t.Errorf("blob cipher variant %s, want legacy (secretbox)", c.Variant())
	}
	raw := []byte{0, 1, 2, 0xff, 0xfe}
	b, err := c.Seal(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Attachments are plain secretbox bundles under the blob key.
	if got, err := NewLegacyCipher(blobKey).Open(b); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("blob opened as legacy: %x, %v", got, err)
	}
}

// BlobCipherOf finds the blob key of a session from its record cipher:
// SessionBlobKey of a dataKey session's key, AccountBlobKey of the legacy
// account secret; the bundles it seals open as secretbox under that key.
func TestBlobCipherOf(t *testing.T) {
	sessionKey, secret := testKey("session"), testKey("account")
	for _, tc := range []struct {
		name   string
		record Cipher
		want   [32]byte
	}{
		{"dataKey", NewDataKeyCipher(sessionKey), SessionBlobKey(sessionKey)},
		{"legacy", NewLegacyCipher(secret), AccountBlobKey(secret)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bc, err := BlobCipherOf(tc.record)
			if err != nil {
				t.Fatal(err)
			}
			raw := []byte("\x89PNG blob")
			b, err := bc.Seal(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := NewLegacyCipher(tc.want).Open(b); err != nil || !bytes.Equal(got, raw) {
				t.Errorf("opened under the expected blob key: %q, %v", got, err)
			}
			if _, err := tc.record.Open(b); err == nil {
				t.Error("the record cipher opens a blob bundle")
			}
		})
	}
	if _, err := BlobCipherOf(nil); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("BlobCipherOf(nil): %v, want ErrUnsupportedVersion", err)
	}
}

// TestLegacyBundleOpenedAsDataKey pins what a dataKey Cipher says about a legacy bundle
// (the caller chose the wrong variant): the bundle starts with the random secretbox
// nonce, so for 255 of 256 first bytes the answer is ErrUnsupportedVersion, and for a
// first byte of 0x00 it is ErrAuthFailed. Both sentinels say so in their text.
func TestLegacyBundleOpenedAsDataKey(t *testing.T) {
	key := testKey("k")
	dk := NewDataKeyCipher(key)
	plain := []byte(`{"x":1}`)
	cases := []struct {
		name  string
		first byte
		want  error
		msg   string
	}{
		{"nonce starts 0x00", 0x00, ErrAuthFailed,
			"crypto: open dataKey bundle: authentication failed (wrong key, wrong variant or altered data)"},
		{"nonce starts 0x01", 0x01, ErrUnsupportedVersion,
			"crypto: open dataKey bundle: version byte 0x01: unsupported version byte (or a bundle of the other variant)"},
		{"nonce starts 0xa7", 0xa7, ErrUnsupportedVersion,
			"crypto: open dataKey bundle: version byte 0xa7: unsupported version byte (or a bundle of the other variant)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bundle := SealLegacyWithNonce(key, [24]byte{tc.first, 9, 9}, plain)
			got, err := dk.Open(bundle)
			if got != nil || !errors.Is(err, tc.want) || err.Error() != tc.msg {
				t.Fatalf("got %q, %v; want %q", got, err, tc.msg)
			}
		})
	}
	// Over every first byte: exactly one gives ErrAuthFailed, the rest ErrUnsupportedVersion.
	counts := map[error]int{}
	for b := 0; b < 256; b++ {
		_, err := dk.Open(SealLegacyWithNonce(key, [24]byte{byte(b)}, plain))
		switch {
		case errors.Is(err, ErrAuthFailed):
			counts[ErrAuthFailed]++
		case errors.Is(err, ErrUnsupportedVersion):
			counts[ErrUnsupportedVersion]++
		default:
			t.Fatalf("first byte 0x%02x: %v", b, err)
		}
	}
	if counts[ErrAuthFailed] != 1 || counts[ErrUnsupportedVersion] != 255 {
		t.Errorf("outcomes %v, want 1 ErrAuthFailed and 255 ErrUnsupportedVersion", counts)
	}
}
