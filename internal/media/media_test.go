package media

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

// lossless1x1WebP is a 1×1 lossless WebP image.
const lossless1x1WebP = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="

func testImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x * 20), uint8(y * 30), 100, 255})
		}
	}
	return img
}

// PNG, JPEG and GIF of a 6×4 image, encoded by the standard library.
func fixtures(t testing.TB) map[string][]byte {
	img := testImage(6, 4)
	var p, j, g bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, img, nil); err != nil {
		t.Fatal(err)
	}
	webp, _ := base64.StdEncoding.DecodeString(lossless1x1WebP)
	return map[string][]byte{"png": p.Bytes(), "jpeg": j.Bytes(), "gif": g.Bytes(), "webp": webp}
}

func TestInspect(t *testing.T) {
	fx := fixtures(t)
	for _, c := range []struct {
		name    string
		data    []byte
		claimed string
		mime    string
		w, h    int
		err     error
	}{
		{"png", fx["png"], "image/png", "image/png", 6, 4, nil},
		{"png unclaimed", fx["png"], "", "image/png", 6, 4, nil},
		{"png as octet-stream", fx["png"], "application/octet-stream", "image/png", 6, 4, nil},
		{"jpeg", fx["jpeg"], "image/jpeg", "image/jpeg", 6, 4, nil},
		{"gif", fx["gif"], "image/gif", "image/gif", 6, 4, nil},
		{"webp", fx["webp"], "image/webp", "image/webp", 1, 1, nil},
		{"png named jpeg", fx["png"], "image/jpeg", "", 0, 0, ErrMismatch},
		{"text named png", []byte("hello"), "image/png", "", 0, 0, ErrMismatch},
		{"truncated png", fx["png"][:len(fx["png"])-20], "image/png", "", 0, 0, ErrBadImage},
		{"truncated jpeg", fx["jpeg"][:len(fx["jpeg"])/2], "", "", 0, 0, ErrBadImage},
		{"png header only", fx["png"][:30], "", "", 0, 0, ErrBadImage},
		{"truncated webp", fx["webp"][:24], "", "", 0, 0, ErrBadImage},
		{"text", []byte("hello\n"), "", "text/plain", 0, 0, nil},
		{"markdown", []byte("# hi\n"), "text/markdown", "text/markdown", 0, 0, nil},
		{"not utf-8", []byte("caf\xe9 \x01\x02"), "text/plain", "application/octet-stream", 0, 0, nil},
		{"pdf", []byte("%PDF-1.4\n..."), "application/pdf", "application/pdf", 0, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Inspect(c.data, c.claimed)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("Inspect = %+v, %v; want %v", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Mime != c.mime || got.Width != c.w || got.Height != c.h {
				t.Errorf("Inspect = %q %dx%d, want %q %dx%d", got.Mime, got.Width, got.Height, c.mime, c.w, c.h)
			}
			if (c.w > 0) != (got.Thumbhash != "") {
				t.Errorf("Thumbhash = %q for %dx%d", got.Thumbhash, c.w, c.h)
			}
		})
	}
}

func TestInspectHugeCanvas(t *testing.T) {
	// A PNG header claiming 100000×100000 pixels.
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(1, 1)); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	copy(data[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})
	if _, err := Inspect(data, ""); !errors.Is(err, ErrBadImage) {
		t.Fatalf("Inspect(huge) = %v, want ErrBadImage", err)
	}
}

func TestTypeByName(t *testing.T) {
	for name, want := range map[string]string{"a.PNG": "image/png", "b.jpg": "image/jpeg", "c.txt": "text/plain", "d": ""} {
		if got := TypeByName(name); got != want {
			t.Errorf("TypeByName(%q) = %q, want %q", name, got, want)
		}
	}
}

func FuzzInspect(f *testing.F) {
	for _, b := range fixtures(f) {
		f.Add(b, "")
		f.Add(b[:len(b)/2], "image/png")
	}
	f.Add([]byte("hello"), "text/plain")
	f.Add([]byte{}, "image/gif")
	f.Fuzz(func(t *testing.T, data []byte, claimed string) {
		info, err := Inspect(data, claimed)
		if err != nil {
			if !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrBadImage) {
				t.Fatalf("error %v is neither ErrMismatch nor ErrBadImage", err)
			}
			return
		}
		if info.Mime == "" {
			t.Fatal("no type")
		}
		if info.IsImage() && (info.Width < 1 || info.Height < 1) {
			t.Fatalf("image %dx%d", info.Width, info.Height)
		}
	})
}
