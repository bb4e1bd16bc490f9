// Generates vectors.json from the reference JavaScript implementation
// (npm package "thumbhash"). Not run by the tests; run it by hand:
//   npm install thumbhash && node gen.mjs > vectors.json
import { rgbaToThumbHash, thumbHashToRGBA, thumbHashToApproximateAspectRatio } from 'thumbhash'

// Deterministic pixel patterns (no randomness), so the Go test rebuilds the
// same input from the name and size.
function pixels(kind, w, h) {
  const out = new Uint8Array(w * h * 4)
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    const i = (y * w + x) * 4
    const v = (x * 7 + y * 13) % 256
    switch (kind) {
      case 'solid': out.set([200, 30, 90, 255], i); break
      case 'gradient': out.set([(x * 255 / Math.max(1, w - 1)) | 0, (y * 255 / Math.max(1, h - 1)) | 0, 128, 255], i); break
      case 'stripes': out.set([v, 255 - v, (x & 4) ? 255 : 0, 255], i); break
      case 'alpha': out.set([v, (x * 3) % 256, (y * 5) % 256, (x + y) % 256], i); break
      case 'clear': out.set([10, 20, 30, 0], i); break
    }
  }
  return out
}

const cases = [
  ['solid', 1, 1], ['solid', 8, 8], ['gradient', 100, 75], ['gradient', 30, 100],
  ['stripes', 64, 64], ['stripes', 100, 10], ['alpha', 50, 80], ['alpha', 100, 100], ['clear', 4, 4],
]
const vectors = cases.map(([kind, w, h]) => {
  const hash = rgbaToThumbHash(w, h, pixels(kind, w, h))
  const dec = thumbHashToRGBA(hash)
  return {
    kind, w, h,
    hash: Buffer.from(hash).toString('base64'),
    ratio: thumbHashToApproximateAspectRatio(hash),
    decoded: { w: dec.w, h: dec.h, rgba: Buffer.from(dec.rgba).toString('base64') },
  }
})
console.log(JSON.stringify(vectors, null, 1))
