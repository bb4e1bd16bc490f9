// Package media checks the bytes of an attachment before happy uploads it
// or hands it to an agent (docs/ARCHITECTURE.md, section "Attachments"):
// the MIME type is sniffed from the bytes (net/http.DetectContentType), an
// image is checked against its own header and decoded whole (PNG, JPEG,
// GIF, WebP), and a type the name or the sender claims that the bytes
// contradict is refused.
package media

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // registers GIF with image.Decode
	_ "image/jpeg"
	_ "image/png"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	_ "golang.org/x/image/webp" // registers WebP with image.Decode

	"github.com/happy-dev/happy/internal/thumbhash"
)

// ErrMismatch is returned (wrapped) when the claimed type of a file is not
// what its bytes are: an image name or MIME type on bytes of another kind,
// or one image format named for another.
var ErrMismatch = errors.New("media: the file's type does not match its bytes")

// ErrBadImage is returned (wrapped) for bytes that start like an image but
// do not decode: truncated, or with a corrupt header.
var ErrBadImage = errors.New("media: the image does not decode")

// MaxPixels bounds the images Inspect decodes (width × height, 50
// megapixels), so a small file claiming a huge canvas is refused before
// its pixels are allocated.
const MaxPixels = 50_000_000

// Info is what Inspect found.
type Info struct {
	// Mime is the type of the bytes, without parameters ("image/png",
	// "text/plain" (valid UTF-8), "application/pdf",
	// "application/octet-stream", …).
	Mime string
	// Width and Height are the image's size in pixels (0 for other files).
	Width, Height int
	// Thumbhash is the base64 ThumbHash of an image ("" for other files).
	Thumbhash string
}

// IsImage reports whether the type is one of the images Inspect decodes.
func (i Info) IsImage() bool { return imageFormats[i.Mime] != "" }

// imageFormats are the image types checked, with image.Decode's format name.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// Inspect sniffs data and checks it against claimed, the type given by the
// sender or by the file name's extension ("" when neither says anything).
// An image (by its bytes) must decode whole; a claimed image type on bytes
// of another type, or a claimed image format other than the bytes', is
// ErrMismatch. A text type claimed for valid UTF-8 is kept (sniffing only
// says "text/plain"); otherwise the sniffed type wins.
func Inspect(data []byte, claimed string) (Info, error) {
	claimed = baseType(claimed)
	sniffed := baseType(http.DetectContentType(data))
	info := Info{Mime: sniffed}
	if format := imageFormats[sniffed]; format != "" {
		if claimed != "" && claimed != sniffed && claimed != "application/octet-stream" {
			return Info{}, fmt.Errorf("%w: claimed %s, the bytes are %s", ErrMismatch, claimed, sniffed)
		}
		cfg, got, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil || got != format {
			return Info{}, fmt.Errorf("%w: %s header: %v", ErrBadImage, sniffed, err)
		}
		if cfg.Width < 1 || cfg.Height < 1 || cfg.Width*cfg.Height > MaxPixels {
			return Info{}, fmt.Errorf("%w: %dx%d pixels (at most %d)", ErrBadImage, cfg.Width, cfg.Height, MaxPixels)
		}
		img, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			return Info{}, fmt.Errorf("%w: %s: %v", ErrBadImage, sniffed, err)
		}
		info.Width, info.Height = cfg.Width, cfg.Height
		if th, err := thumbhash.FromImage(img); err == nil {
			info.Thumbhash = base64.StdEncoding.EncodeToString(th)
		}
		return info, nil
	}
	if strings.HasPrefix(claimed, "image/") {
		return Info{}, fmt.Errorf("%w: claimed %s, the bytes are %s", ErrMismatch, claimed, sniffed)
	}
	if sniffed == "text/plain" {
		if !utf8.Valid(data) {
			info.Mime = "application/octet-stream"
		} else if claimed != "" && IsText(claimed) {
			info.Mime = claimed
		}
	}
	return info, nil
}

// TypeByName is the MIME type of a file name's extension, "" when unknown.
func TypeByName(name string) string {
	return baseType(mime.TypeByExtension(strings.ToLower(path.Ext(name))))
}

// IsText reports whether a type is text an agent can read as such: text/*,
// JSON, XML, YAML, JavaScript.
func IsText(t string) bool {
	t = baseType(t)
	switch t {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/javascript", "application/toml":
		return true
	}
	return strings.HasPrefix(t, "text/")
}

// baseType is a MIME type without parameters, lower case ("" stays "").
func baseType(t string) string {
	t, _, _ = strings.Cut(t, ";")
	return strings.ToLower(strings.TrimSpace(t))
}
