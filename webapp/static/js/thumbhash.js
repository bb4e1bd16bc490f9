// ThumbHash (Evan Wallace's published algorithm), as internal/thumbhash
// implements it in Go: an image's placeholder in about 25 bytes. decode
// renders a hash as RGBA pixels (at most 32 on the longer side), encode
// hashes RGBA pixels of an image at most 100×100. The web app's tests check
// both against the Go package's output.

export class ThumbHashError extends Error {
  constructor(message) {
    super(message);
    this.name = "ThumbHashError";
  }
}

const acCount = (nx, ny) => {
  let n = 0;
  for (let cy = 0; cy < ny; cy++) for (let cx = cy ? 0 : 1; cx * ny < nx * (ny - cy); cx++) n++;
  return n;
};

function header(hash) {
  if (!(hash instanceof Uint8Array) || hash.length < 5) throw new ThumbHashError(`thumbhash: ${hash?.length ?? 0} bytes, want at least 5`);
  const h24 = hash[0] | (hash[1] << 8) | (hash[2] << 16);
  const h16 = hash[3] | (hash[4] << 8);
  const hasAlpha = (h24 >> 23) !== 0;
  const landscape = (h16 >> 15) !== 0;
  const big = hasAlpha ? 5 : 7;
  const hd = {
    lDC: (h24 & 63) / 63, pDC: ((h24 >> 6) & 63) / 31.5 - 1, qDC: ((h24 >> 12) & 63) / 31.5 - 1,
    lScale: ((h24 >> 18) & 31) / 31, pScale: ((h16 >> 3) & 63) / 63, qScale: ((h16 >> 9) & 63) / 63,
    hasAlpha, landscape,
    lx: Math.max(3, landscape ? big : h16 & 7), ly: Math.max(3, landscape ? h16 & 7 : big),
    aDC: 1, aScale: 0, acStart: 5,
  };
  if (hasAlpha) {
    if (hash.length < 6) throw new ThumbHashError(`thumbhash: ${hash.length} bytes, want at least 6 with alpha`);
    hd.aDC = (hash[5] & 15) / 15;
    hd.aScale = (hash[5] >> 4) / 15;
    hd.acStart = 6;
  }
  const count = acCount(hd.lx, hd.ly) + 2 * acCount(3, 3) + (hasAlpha ? acCount(5, 5) : 0);
  const need = hd.acStart + ((count + 1) >> 1);
  if (hash.length < need) throw new ThumbHashError(`thumbhash: ${hash.length} bytes, its header needs ${need}`);
  return hd;
}

/** aspectRatio is the approximate width/height of the hashed image. */
export function aspectRatio(hash) {
  const hd = header(hash);
  const side = hash[3] & 7;
  const lx = hd.landscape ? hd.lx : side;
  const ly = hd.landscape ? side : hd.ly;
  if (ly === 0) throw new ThumbHashError("thumbhash: zero side");
  return lx / ly;
}

/** decode renders a hash: {w, h, rgba: Uint8Array} (non-premultiplied, row by row). Throws ThumbHashError. */
export function decode(hash) {
  const hd = header(hash);
  const ratio = aspectRatio(hash);
  if (!(ratio > 0)) throw new ThumbHashError("thumbhash: zero side");
  const { lx, ly, hasAlpha } = hd;
  let index = 0;
  const channel = (nx, ny, scale) => {
    const ac = [];
    for (let cy = 0; cy < ny; cy++) {
      for (let cx = cy ? 0 : 1; cx * ny < nx * (ny - cy); cx++, index++) {
        ac.push((((hash[hd.acStart + (index >> 1)] >> ((index & 1) << 2)) & 15) / 7.5 - 1) * scale);
      }
    }
    return ac;
  };
  const lAC = channel(lx, ly, hd.lScale);
  const pAC = channel(3, 3, hd.pScale * 1.25);
  const qAC = channel(3, 3, hd.qScale * 1.25);
  const aAC = hasAlpha ? channel(5, 5, hd.aScale) : null;
  const w = Math.round(ratio > 1 ? 32 : 32 * ratio);
  const h = Math.round(ratio > 1 ? 32 / ratio : 32);
  const rgba = new Uint8Array(w * h * 4);
  const fx = [], fy = [];
  const clamp = (v) => Math.max(0, 255 * Math.min(1, v));
  for (let y = 0, i = 0; y < h; y++) {
    for (let x = 0; x < w; x++, i += 4) {
      let l = hd.lDC, p = hd.pDC, q = hd.qDC, a = hd.aDC;
      for (let cx = 0, n = Math.max(lx, hasAlpha ? 5 : 3); cx < n; cx++) fx[cx] = Math.cos(Math.PI / w * (x + 0.5) * cx);
      for (let cy = 0, n = Math.max(ly, hasAlpha ? 5 : 3); cy < n; cy++) fy[cy] = Math.cos(Math.PI / h * (y + 0.5) * cy);
      for (let cy = 0, j = 0; cy < ly; cy++) {
        for (let cx = cy ? 0 : 1, fy2 = fy[cy] * 2; cx * ly < lx * (ly - cy); cx++, j++) l += lAC[j] * fx[cx] * fy2;
      }
      for (let cy = 0, j = 0; cy < 3; cy++) {
        for (let cx = cy ? 0 : 1, fy2 = fy[cy] * 2; cx < 3 - cy; cx++, j++) {
          const f = fx[cx] * fy2;
          p += pAC[j] * f;
          q += qAC[j] * f;
        }
      }
      if (aAC) {
        for (let cy = 0, j = 0; cy < 5; cy++) {
          for (let cx = cy ? 0 : 1, fy2 = fy[cy] * 2; cx < 5 - cy; cx++, j++) a += aAC[j] * fx[cx] * fy2;
        }
      }
      const b = l - 2 / 3 * p;
      const r = (3 * l - b + q) / 2;
      const g = r - q;
      rgba[i] = clamp(r);
      rgba[i + 1] = clamp(g);
      rgba[i + 2] = clamp(b);
      rgba[i + 3] = clamp(a);
    }
  }
  return { w, h, rgba };
}

/** encode hashes a w×h image (1…100 each) given as RGBA bytes. Throws ThumbHashError. */
export function encode(w, h, rgba) {
  if (!(w >= 1 && h >= 1 && w <= 100 && h <= 100) || rgba.length !== w * h * 4) throw new ThumbHashError(`thumbhash: ${w}×${h} with ${rgba.length} bytes does not fit 100×100 RGBA`);
  const n = w * h;
  let avgR = 0, avgG = 0, avgB = 0, avgA = 0;
  for (let i = 0, j = 0; i < n; i++, j += 4) {
    const alpha = rgba[j + 3] / 255;
    avgR += alpha / 255 * rgba[j];
    avgG += alpha / 255 * rgba[j + 1];
    avgB += alpha / 255 * rgba[j + 2];
    avgA += alpha;
  }
  if (avgA) { avgR /= avgA; avgG /= avgA; avgB /= avgA; }
  const hasAlpha = avgA < n;
  const lLimit = hasAlpha ? 5 : 7;
  const lx = Math.max(1, Math.round(lLimit * w / Math.max(w, h)));
  const ly = Math.max(1, Math.round(lLimit * h / Math.max(w, h)));
  const L = new Float64Array(n), P = new Float64Array(n), Q = new Float64Array(n), A = new Float64Array(n);
  for (let i = 0, j = 0; i < n; i++, j += 4) {
    const alpha = rgba[j + 3] / 255;
    const r = avgR * (1 - alpha) + alpha / 255 * rgba[j];
    const g = avgG * (1 - alpha) + alpha / 255 * rgba[j + 1];
    const b = avgB * (1 - alpha) + alpha / 255 * rgba[j + 2];
    L[i] = (r + g + b) / 3;
    P[i] = (r + g) / 2 - b;
    Q[i] = r - g;
    A[i] = alpha;
  }
  const channel = (ch, nx, ny) => {
    let dc = 0, scale = 0;
    const ac = [], fx = new Float64Array(w);
    for (let cy = 0; cy < ny; cy++) {
      for (let cx = 0; cx * ny < nx * (ny - cy); cx++) {
        let f = 0;
        for (let x = 0; x < w; x++) fx[x] = Math.cos(Math.PI / w * cx * (x + 0.5));
        for (let y = 0; y < h; y++) {
          const fy = Math.cos(Math.PI / h * cy * (y + 0.5));
          for (let x = 0; x < w; x++) f += ch[x + y * w] * fx[x] * fy;
        }
        f /= n;
        if (cx || cy) { ac.push(f); scale = Math.max(scale, Math.abs(f)); } else dc = f;
      }
    }
    if (scale) for (let i = 0; i < ac.length; i++) ac[i] = 0.5 + 0.5 / scale * ac[i];
    return [dc, ac, scale];
  };
  const [lDC, lAC, lScale] = channel(L, Math.max(3, lx), Math.max(3, ly));
  const [pDC, pAC, pScale] = channel(P, 3, 3);
  const [qDC, qAC, qScale] = channel(Q, 3, 3);
  const [aDC, aAC, aScale] = hasAlpha ? channel(A, 5, 5) : [0, [], 0];
  const landscape = w > h;
  const round = Math.round;
  const h24 = round(63 * lDC) | (round(31.5 + 31.5 * pDC) << 6) | (round(31.5 + 31.5 * qDC) << 12) | (round(31 * lScale) << 18) | ((hasAlpha ? 1 : 0) << 23);
  const h16 = (landscape ? ly : lx) | (round(63 * pScale) << 3) | (round(63 * qScale) << 9) | ((landscape ? 1 : 0) << 15);
  const out = [h24 & 255, (h24 >> 8) & 255, h24 >> 16, h16 & 255, h16 >> 8];
  const acStart = hasAlpha ? 6 : 5;
  if (hasAlpha) out.push(round(15 * aDC) | (round(15 * aScale) << 4));
  let index = 0;
  for (const ac of hasAlpha ? [lAC, pAC, qAC, aAC] : [lAC, pAC, qAC]) {
    for (const f of ac) {
      const at = acStart + (index >> 1);
      out[at] = (out[at] ?? 0) | (round(15 * f) << ((index & 1) << 2));
      index++;
    }
  }
  return new Uint8Array(out);
}
