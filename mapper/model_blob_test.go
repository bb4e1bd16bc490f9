package mapper

import (
	"errors"
	"testing"
)

func TestBlobSourceVerify(t *testing.T) {
	data := []byte("the picture's bytes")
	for _, c := range []struct {
		name string
		src  BlobSource
		in   []byte
		ok   bool
	}{
		{"digest matches", BlobSource{Type: "blob", Size: int64(len(data)), SHA256: BlobDigest(data)}, data, true},
		{"digest of other bytes", BlobSource{Type: "blob", Size: int64(len(data)), SHA256: BlobDigest([]byte("other"))}, data, false},
		{"same size, other bytes", BlobSource{Type: "blob", Size: int64(len(data)), SHA256: BlobDigest(data)}, []byte("the picture's bytez"), false},
		{"no digest, size matches", BlobSource{Type: "blob", Size: int64(len(data)), Key: BlobKeyReference}, data, true},
		{"no digest, size differs", BlobSource{Type: "blob", Size: 3, Key: BlobKeyReference}, data, false},
		{"empty blob", BlobSource{Type: "blob", SHA256: BlobDigest(nil)}, nil, true},
	} {
		err := c.src.Verify(c.in)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBlobMismatch)) {
			t.Errorf("%s: Verify = %v, want ok %v", c.name, err, c.ok)
		}
	}
	if got, want := BlobDigest([]byte("abc")), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="; got != want {
		t.Errorf("BlobDigest(abc) = %s, want %s", got, want)
	}
}
