package crypto

import (
	"bytes"
	"fmt"
	"testing"
)

// Throughput of both content variants at message-sized (1 KiB) and large (1 MiB)
// plaintexts; b.SetBytes makes `go test -bench` report MB/s. AES-GCM should run at
// hardware speed (hundreds of MB/s to GB/s); secretbox is pure software.

var benchSizes = []int{1 << 10, 1 << 20}

func benchCiphers() []Cipher {
	return []Cipher{NewLegacyCipher(testKey("bench")), NewDataKeyCipher(testKey("bench"))}
}

func BenchmarkSeal(b *testing.B) {
	for _, c := range benchCiphers() {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", c.Variant(), sizeName(size)), func(b *testing.B) {
				plain := bytes.Repeat([]byte{'x'}, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Seal(plain); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, c := range benchCiphers() {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", c.Variant(), sizeName(size)), func(b *testing.B) {
				bundle, err := c.Seal(bytes.Repeat([]byte{'x'}, size))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Open(bundle); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkWrapDataKey is the per-session cost of a new dataKey session (one X25519
// key generation, one box).
func BenchmarkWrapDataKey(b *testing.B) {
	pk, _ := ContentKeyPair(testKey("account"))
	key := testKey("data")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := WrapDataKey(key, pk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnwrapDataKey is the cost of reopening a session's key.
func BenchmarkUnwrapDataKey(b *testing.B) {
	pk, sk := ContentKeyPair(testKey("account"))
	wrapped, err := WrapDataKey(testKey("data"), pk)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnwrapDataKey(wrapped, sk); err != nil {
			b.Fatal(err)
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
