// Package thumbhash implements ThumbHash (Evan Wallace's published
// algorithm, the reference JavaScript implementation in the npm package
// "thumbhash" 0.1): a compact (at most 25 bytes) placeholder of an image,
// base64-encoded in seed-000 photo events and in a file part's source
// (docs/ARCHITECTURE.md, section "Attachments"). testdata/vectors.json pins
// Encode and Decode to the reference's outputs.
package thumbhash

import (
	"errors"
	"fmt"
	"image"
	"math"
)

// MaxSide is the largest width or height Encode takes (the reference's
// limit); FromImage scales an image down to fit first.
const MaxSide = 100

// ErrInvalid is returned (wrapped) for a hash Decode cannot read.
var ErrInvalid = errors.New("thumbhash: invalid hash")

// round is JavaScript's Math.round (halves go up), which the reference uses.
func round(x float64) float64 { return math.Floor(x + 0.5) }

// Encode returns the ThumbHash of a w×h image given as non-premultiplied
// RGBA bytes, row by row (len(rgba) == w*h*4). w and h are 1…MaxSide.
func Encode(w, h int, rgba []byte) ([]byte, error) {
	if w < 1 || h < 1 || w > MaxSide || h > MaxSide {
		return nil, fmt.Errorf("thumbhash: %dx%d does not fit in %dx%d", w, h, MaxSide, MaxSide)
	}
	if len(rgba) != w*h*4 {
		return nil, fmt.Errorf("thumbhash: %d bytes of pixels for %dx%d, want %d", len(rgba), w, h, w*h*4)
	}
	n := w * h
	var avgR, avgG, avgB, avgA float64
	for i, j := 0, 0; i < n; i, j = i+1, j+4 {
		alpha := float64(rgba[j+3]) / 255
		avgR += alpha / 255 * float64(rgba[j])
		avgG += alpha / 255 * float64(rgba[j+1])
		avgB += alpha / 255 * float64(rgba[j+2])
		avgA += alpha
	}
	if avgA > 0 {
		avgR /= avgA
		avgG /= avgA
		avgB /= avgA
	}
	hasAlpha := avgA < float64(n)
	lLimit := 7.0
	if hasAlpha {
		lLimit = 5
	}
	mx := float64(max(w, h))
	lx := max(1, int(round(lLimit*float64(w)/mx)))
	ly := max(1, int(round(lLimit*float64(h)/mx)))
	l, p, q, a := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, j := 0, 0; i < n; i, j = i+1, j+4 {
		alpha := float64(rgba[j+3]) / 255
		r := avgR*(1-alpha) + alpha/255*float64(rgba[j])
		g := avgG*(1-alpha) + alpha/255*float64(rgba[j+1])
		b := avgB*(1-alpha) + alpha/255*float64(rgba[j+2])
		l[i] = (r + g + b) / 3
		p[i] = (r+g)/2 - b
		q[i] = r - g
		a[i] = alpha
	}
	encode := func(ch []float64, nx, ny int) (dc float64, ac []float64, scale float64) {
		fx := make([]float64, w)
		for cy := 0; cy < ny; cy++ {
			for cx := 0; cx*ny < nx*(ny-cy); cx++ {
				f := 0.0
				for x := 0; x < w; x++ {
					fx[x] = math.Cos(math.Pi / float64(w) * float64(cx) * (float64(x) + 0.5))
				}
				for y := 0; y < h; y++ {
					fy := math.Cos(math.Pi / float64(h) * float64(cy) * (float64(y) + 0.5))
					for x := 0; x < w; x++ {
						f += ch[x+y*w] * fx[x] * fy
					}
				}
				f /= float64(n)
				if cx > 0 || cy > 0 {
					ac = append(ac, f)
					scale = math.Max(scale, math.Abs(f))
				} else {
					dc = f
				}
			}
		}
		if scale > 0 {
			for i := range ac {
				ac[i] = 0.5 + 0.5/scale*ac[i]
			}
		}
		return dc, ac, scale
	}
	lDC, lAC, lScale := encode(l, max(3, lx), max(3, ly))
	pDC, pAC, pScale := encode(p, 3, 3)
	qDC, qAC, qScale := encode(q, 3, 3)
	var aDC, aScale float64
	var aAC []float64
	if hasAlpha {
		aDC, aAC, aScale = encode(a, 5, 5)
	}
	isLandscape := w > h
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	header24 := int(round(63*lDC)) | int(round(31.5+31.5*pDC))<<6 | int(round(31.5+31.5*qDC))<<12 |
		int(round(31*lScale))<<18 | b2i(hasAlpha)<<23
	side := lx
	if isLandscape {
		side = ly
	}
	header16 := side | int(round(63*pScale))<<3 | int(round(63*qScale))<<9 | b2i(isLandscape)<<15
	hash := []byte{byte(header24), byte(header24 >> 8), byte(header24 >> 16), byte(header16), byte(header16 >> 8)}
	acStart := 5
	chans := [][]float64{lAC, pAC, qAC}
	if hasAlpha {
		acStart = 6
		hash = append(hash, byte(int(round(15*aDC))|int(round(15*aScale))<<4))
		chans = append(chans, aAC)
	}
	idx := 0
	for _, ac := range chans {
		for _, f := range ac {
			k := acStart + idx>>1
			for len(hash) <= k {
				hash = append(hash, 0)
			}
			hash[k] |= byte(int(round(15*f)) << ((idx & 1) << 2))
			idx++
		}
	}
	return hash, nil
}

// header is what the first bytes of a hash say.
type header struct {
	lDC, pDC, qDC, lScale, pScale, qScale, aDC, aScale float64
	hasAlpha, landscape                                bool
	lx, ly                                             int
	acStart                                            int
	need                                               int // bytes the hash must have
}

func readHeader(hash []byte) (header, error) {
	if len(hash) < 5 {
		return header{}, fmt.Errorf("%w: %d bytes, want at least 5", ErrInvalid, len(hash))
	}
	h24 := int(hash[0]) | int(hash[1])<<8 | int(hash[2])<<16
	h16 := int(hash[3]) | int(hash[4])<<8
	var h header
	h.lDC = float64(h24&63) / 63
	h.pDC = float64((h24>>6)&63)/31.5 - 1
	h.qDC = float64((h24>>12)&63)/31.5 - 1
	h.lScale = float64((h24>>18)&31) / 31
	h.hasAlpha = h24>>23 != 0
	h.pScale = float64((h16>>3)&63) / 63
	h.qScale = float64((h16>>9)&63) / 63
	h.landscape = h16>>15 != 0
	big := 7
	if h.hasAlpha {
		big = 5
	}
	if h.landscape {
		h.lx, h.ly = max(3, big), max(3, h16&7)
	} else {
		h.lx, h.ly = max(3, h16&7), max(3, big)
	}
	h.aDC, h.acStart = 1, 5
	if h.hasAlpha {
		if len(hash) < 6 {
			return header{}, fmt.Errorf("%w: %d bytes, want at least 6 with alpha", ErrInvalid, len(hash))
		}
		h.aDC = float64(hash[5]&15) / 15
		h.aScale = float64(hash[5]>>4) / 15
		h.acStart = 6
	}
	count := acCount(h.lx, h.ly) + 2*acCount(3, 3)
	if h.hasAlpha {
		count += acCount(5, 5)
	}
	h.need = h.acStart + (count+1)/2
	if len(hash) < h.need {
		return header{}, fmt.Errorf("%w: %d bytes, its header needs %d", ErrInvalid, len(hash), h.need)
	}
	return h, nil
}

func acCount(nx, ny int) int {
	n := 0
	for cy := 0; cy < ny; cy++ {
		start := 0
		if cy == 0 {
			start = 1
		}
		for cx := start; cx*ny < nx*(ny-cy); cx++ {
			n++
		}
	}
	return n
}

// AspectRatio is the approximate width/height of the hashed image. Errors
// wrap ErrInvalid for a hash shorter than its header says.
func AspectRatio(hash []byte) (float64, error) {
	h, err := readHeader(hash)
	if err != nil {
		return 0, err
	}
	lx, ly := h.lx, h.ly
	// The reference reads the raw 3-bit side, not the one clamped to 3.
	side := int(hash[3] & 7)
	if h.landscape {
		ly = side
	} else {
		lx = side
	}
	if ly == 0 {
		return 0, fmt.Errorf("%w: zero side", ErrInvalid)
	}
	return float64(lx) / float64(ly), nil
}

// Decode renders a hash as non-premultiplied RGBA bytes, row by row, at most
// 32 pixels on its longer side (as the reference's thumbHashToRGBA). Errors
// wrap ErrInvalid: a hash shorter than its header says, or a zero side.
func Decode(hash []byte) (w, h int, rgba []byte, err error) {
	hd, err := readHeader(hash)
	if err != nil {
		return 0, 0, nil, err
	}
	ratio, err := AspectRatio(hash)
	if err != nil {
		return 0, 0, nil, err
	}
	if ratio == 0 {
		return 0, 0, nil, fmt.Errorf("%w: zero side", ErrInvalid)
	}
	idx := 0
	channel := func(nx, ny int, scale float64) []float64 {
		var ac []float64
		for cy := 0; cy < ny; cy++ {
			start := 0
			if cy == 0 {
				start = 1
			}
			for cx := start; cx*ny < nx*(ny-cy); cx++ {
				v := (hash[hd.acStart+idx>>1] >> ((idx & 1) << 2)) & 15
				ac = append(ac, (float64(v)/7.5-1)*scale)
				idx++
			}
		}
		return ac
	}
	lAC := channel(hd.lx, hd.ly, hd.lScale)
	pAC := channel(3, 3, hd.pScale*1.25)
	qAC := channel(3, 3, hd.qScale*1.25)
	var aAC []float64
	if hd.hasAlpha {
		aAC = channel(5, 5, hd.aScale)
	}
	if ratio > 1 {
		w, h = 32, int(round(32/ratio))
	} else {
		w, h = int(round(32*ratio)), 32
	}
	rgba = make([]byte, w*h*4)
	nfx, nfy := max(hd.lx, 3), max(hd.ly, 3)
	if hd.hasAlpha {
		nfx, nfy = max(hd.lx, 5), max(hd.ly, 5)
	}
	fx, fy := make([]float64, nfx), make([]float64, nfy)
	clamp := func(v float64) byte { return byte(math.Max(0, 255*math.Min(1, v))) }
	for y, i := 0, 0; y < h; y++ {
		for x := 0; x < w; x, i = x+1, i+4 {
			l, p, q, a := hd.lDC, hd.pDC, hd.qDC, hd.aDC
			for cx := range fx {
				fx[cx] = math.Cos(math.Pi / float64(w) * (float64(x) + 0.5) * float64(cx))
			}
			for cy := range fy {
				fy[cy] = math.Cos(math.Pi / float64(h) * (float64(y) + 0.5) * float64(cy))
			}
			for cy, j := 0, 0; cy < hd.ly; cy++ {
				start := 0
				if cy == 0 {
					start = 1
				}
				fy2 := fy[cy] * 2
				for cx := start; cx*hd.ly < hd.lx*(hd.ly-cy); cx, j = cx+1, j+1 {
					l += lAC[j] * fx[cx] * fy2
				}
			}
			for cy, j := 0, 0; cy < 3; cy++ {
				start := 0
				if cy == 0 {
					start = 1
				}
				fy2 := fy[cy] * 2
				for cx := start; cx < 3-cy; cx, j = cx+1, j+1 {
					f := fx[cx] * fy2
					p += pAC[j] * f
					q += qAC[j] * f
				}
			}
			if hd.hasAlpha {
				for cy, j := 0, 0; cy < 5; cy++ {
					start := 0
					if cy == 0 {
						start = 1
					}
					fy2 := fy[cy] * 2
					for cx := start; cx < 5-cy; cx, j = cx+1, j+1 {
						a += aAC[j] * fx[cx] * fy2
					}
				}
			}
			b := l - 2.0/3.0*p
			r := (3*l - b + q) / 2
			g := r - q
			rgba[i], rgba[i+1], rgba[i+2], rgba[i+3] = clamp(r), clamp(g), clamp(b), clamp(a)
		}
	}
	return w, h, rgba, nil
}

// FromImage scales img down to fit MaxSide×MaxSide (box average, keeping the
// aspect ratio) and returns its ThumbHash. An empty image is an error.
func FromImage(img image.Image) ([]byte, error) {
	b := img.Bounds()
	sw, sh := b.Dx(), b.Dy()
	if sw < 1 || sh < 1 {
		return nil, fmt.Errorf("thumbhash: empty %dx%d image", sw, sh)
	}
	w, h := sw, sh
	if w > MaxSide || h > MaxSide {
		if w >= h {
			w, h = MaxSide, max(1, int(round(float64(sh)*MaxSide/float64(sw))))
		} else {
			w, h = max(1, int(round(float64(sw)*MaxSide/float64(sh)))), MaxSide
		}
	}
	rgba := make([]byte, 0, w*h*4)
	for y := 0; y < h; y++ {
		y0, y1 := b.Min.Y+y*sh/h, b.Min.Y+max((y+1)*sh/h, y*sh/h+1)
		for x := 0; x < w; x++ {
			x0, x1 := b.Min.X+x*sw/w, b.Min.X+max((x+1)*sw/w, x*sw/w+1)
			var r, g, bl, a, n uint64
			for yy := y0; yy < y1; yy++ {
				for xx := x0; xx < x1; xx++ {
					cr, cg, cb, ca := img.At(xx, yy).RGBA() // premultiplied, 16-bit
					r, g, bl, a, n = r+uint64(cr), g+uint64(cg), bl+uint64(cb), a+uint64(ca), n+1
				}
			}
			if a == 0 {
				rgba = append(rgba, 0, 0, 0, 0)
				continue
			}
			// Un-premultiply the averages.
			rgba = append(rgba, byte(r*255/a), byte(g*255/a), byte(bl*255/a), byte(a/n>>8))
		}
	}
	return Encode(w, h, rgba)
}
