// Attachments: files of a prompt and images of tool results, stored on the
// relay as encrypted blobs (docs/ARCHITECTURE.md, section "Attachments").
// A file is checked by its bytes (never by the type the browser claims),
// sealed with the session's record cipher and uploaded first; the prompt
// then references it with a file part, as `happy send --file` writes one.
// Reading: a blob is fetched and opened with the session's cipher, or with
// its blob key when the part's source says key "blob" (the reference app's
// files), and shown through an object URL.

import * as c from "./crypto.js";
import * as thumbhash from "./thumbhash.js";

/** MAX_ATTACHMENT is the largest file, in bytes: the relay's 10 MiB per
 * encrypted blob less the larger cipher overhead (40 bytes), as
 * app.MaxAttachmentSize. */
export const MAX_ATTACHMENT = 10 * 1024 * 1024 - 40;

/** IMAGE_TYPES are the images an agent takes inline. */
export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

export class AttachError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = "AttachError";
    this.reason = reason; // "too_large" | "unsupported" | "bad_image" | "upload" | "unavailable"
  }
}

const TEXT_TYPES = { md: "text/markdown", markdown: "text/markdown", json: "application/json", yaml: "application/yaml", yml: "application/yaml",
  xml: "application/xml", toml: "application/toml", csv: "text/csv", html: "text/html", css: "text/css", js: "application/javascript" };

const startsWith = (b, sig, at = 0) => b.length >= at + sig.length && sig.every((v, i) => b[at + i] === v);
const ascii = (s) => [...s].map((ch) => ch.charCodeAt(0));

/**
 * sniff is the type of a file by its bytes: one of IMAGE_TYPES by magic
 * number, a text type for UTF-8 without binary control bytes in its first
 * 512 bytes (the name's extension picks markdown, JSON and the like, else
 * text/plain), or "" for anything else.
 */
export function sniff(bytes, name = "") {
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return "image/jpeg";
  if (startsWith(bytes, ascii("GIF87a")) || startsWith(bytes, ascii("GIF89a"))) return "image/gif";
  if (startsWith(bytes, ascii("RIFF")) && startsWith(bytes, ascii("WEBPVP"), 8)) return "image/webp";
  for (const b of bytes.subarray(0, 512)) {
    if (b <= 0x08 || b === 0x0b || (b >= 0x0e && b <= 0x1a) || (b >= 0x1c && b <= 0x1f)) return "";
  }
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return "";
  }
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase() ?? "";
  return TEXT_TYPES[ext] ?? "text/plain";
}

const fmtBytes = (n) => n.toLocaleString("en-US");

/**
 * inspectFile reads a picked File and checks it: at most MAX_ATTACHMENT
 * bytes (checked before it is read), an image or text by its bytes, an
 * image decodable whole (with its width, height and a ThumbHash). Returns
 * {name, mime, bytes, width?, height?, thumbhash?}; throws AttachError.
 */
export async function inspectFile(file) {
  const name = file.name || "attachment";
  if (file.size > MAX_ATTACHMENT) throw new AttachError("too_large", `${name} is ${fmtBytes(file.size)} bytes; an attachment is at most ${fmtBytes(MAX_ATTACHMENT)} bytes`);
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (bytes.length > MAX_ATTACHMENT) throw new AttachError("too_large", `${name} is ${fmtBytes(bytes.length)} bytes; an attachment is at most ${fmtBytes(MAX_ATTACHMENT)} bytes`);
  const mime = sniff(bytes, name);
  if (!mime) throw new AttachError("unsupported", `${name}: only images (PNG, JPEG, GIF, WebP) and text files can be attached, and its bytes are neither`);
  const out = { name, mime, bytes, sha256: await digest(bytes) };
  if (IMAGE_TYPES.includes(mime)) Object.assign(out, await imageInfo(bytes, mime, name));
  return out;
}

// imageInfo decodes an image whole: {width, height, thumbhash}.
async function imageInfo(bytes, mime, name) {
  let bmp;
  try {
    bmp = await createImageBitmap(new Blob([bytes], { type: mime }));
  } catch (e) {
    throw new AttachError("bad_image", `${name}: the ${mime} image does not decode (${e.message})`);
  }
  const info = { width: bmp.width, height: bmp.height };
  try {
    const s = Math.min(1, 100 / Math.max(bmp.width, bmp.height));
    const w = Math.max(1, Math.round(bmp.width * s)), h = Math.max(1, Math.round(bmp.height * s));
    const canvas = new OffscreenCanvas(w, h);
    const g = canvas.getContext("2d");
    g.drawImage(bmp, 0, 0, w, h);
    info.thumbhash = c.b64encode(thumbhash.encode(w, h, g.getImageData(0, 0, w, h).data));
  } catch { /* no placeholder; the image still goes */ }
  bmp.close?.();
  return info;
}

/** digest is mapper.BlobDigest: standard base64 of the bytes' SHA-256. */
export async function digest(bytes) {
  return c.b64encode(new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", bytes)));
}

/**
 * blobMismatch checks a blob's plaintext against its part's source, as
 * mapper.BlobSource.Verify: its SHA-256 when the source has one (happy's
 * own blobs), else its size. Returns null when it matches, else why not.
 */
export async function blobMismatch(src, bytes) {
  if (typeof src?.sha256 === "string" && src.sha256 !== "") {
    if ((await digest(bytes)) === src.sha256) return null;
    return "its bytes are not the ones the message references (replaced or damaged on the relay)";
  }
  if (typeof src?.size === "number" && src.size !== bytes.length) {
    return `it is ${fmtBytes(bytes.length)} bytes and the message says ${fmtBytes(src.size)} (replaced or damaged on the relay)`;
  }
  return null;
}

/** blobSource is the file part's source (mapper.BlobSource, same key order). */
export function blobSource(f) {
  const s = { type: "blob", size: f.bytes.length };
  if (f.sha256) s.sha256 = f.sha256;
  if (f.width && f.height) { s.width = f.width; s.height = f.height; }
  if (f.thumbhash) s.thumbhash = f.thumbhash;
  return s;
}

/**
 * uploadFile seals an inspected file with the session's cipher and stores
 * it on the relay (request-upload, then PUT of the ciphertext, as
 * relay.API.UploadAttachment). Returns the prompt's file part fields
 * {mime, filename, url: ref, source}. Throws AttachError.
 */
export async function uploadFile(relay, cipher, sid, f) {
  const sealed = await cipher.seal(f.bytes);
  let ref;
  try {
    ref = await relay.uploadBlob(sid, f.name, sealed);
  } catch (e) {
    throw new AttachError(e.status === 413 ? "too_large" : "upload", `${f.name}: not uploaded: ${e.message}`);
  }
  return { mime: f.mime, filename: f.name, url: ref, source: blobSource(f) };
}

/** isBlobRef is relay.IsAttachmentRef: "sessions/<sid>/attachments/<file>". */
export function isBlobRef(u) {
  const m = /^sessions\/([^/]+)\/attachments\/([^/]+)$/.exec(String(u ?? ""));
  return !!m;
}

/** blobCipher is the cipher that opens a part's blob: the session's, or its
 * blob key's for a source with key "blob" (crypto.BlobCipherOf). */
export async function blobCipher(cipher, part) {
  return part?.source?.key === "blob" ? cipher.blobCipher() : cipher;
}

/**
 * Blobs fetches and decrypts a session's blobs once each and keeps them as
 * object URLs: get(part) → Promise<{url, bytes, mime}>, and state(part) →
 * the settled {url, mime} or {error}, or null while pending.
 */
export class Blobs {
  constructor(relay, cipher, sid) {
    Object.assign(this, { relay, cipher, sid, cache: new Map() });
  }

  get(part) {
    const ref = part?.url;
    let e = this.cache.get(ref);
    if (!e) {
      e = { done: null, promise: this.load(part).then((v) => (e.done = v), (err) => { e.done = { error: err.message }; throw err; }) };
      this.cache.set(ref, e);
    }
    return e.promise;
  }

  state(part) {
    return this.cache.get(part?.url)?.done ?? null;
  }

  async load(part) {
    if (!isBlobRef(part?.url)) throw new AttachError("unavailable", `not an attachment reference: ${String(part?.url).slice(0, 80)}`);
    let sealed;
    try {
      sealed = await this.relay.downloadBlob(this.sid, part.url);
    } catch (e) {
      throw new AttachError("unavailable", e.status === 404 || e.status === 400 ? "the relay does not have it" : e.message);
    }
    let bytes;
    try {
      bytes = await (await blobCipher(this.cipher, part)).open(sealed);
    } catch (e) {
      throw new AttachError("unavailable", `it does not decrypt with this session's key (${e.message})`);
    }
    if (part?.source?.type === "blob") {
      const why = await blobMismatch(part.source, bytes);
      if (why) throw new AttachError("unavailable", why);
    }
    const mime = sniff(bytes, part.filename) || "application/octet-stream";
    return { url: URL.createObjectURL(new Blob([bytes], { type: mime })), bytes, mime };
  }

  /** close revokes every object URL. */
  close() {
    for (const e of this.cache.values()) if (e.done?.url) URL.revokeObjectURL(e.done.url);
    this.cache.clear();
  }
}

/** placeholder draws a ThumbHash (base64) on a canvas, or returns null for
 * a missing or broken hash. */
export function placeholder(b64) {
  if (!b64) return null;
  try {
    const img = thumbhash.decode(c.b64decode(b64));
    const canvas = document.createElement("canvas");
    canvas.width = img.w;
    canvas.height = img.h;
    canvas.getContext("2d").putImageData(new ImageData(new Uint8ClampedArray(img.rgba), img.w, img.h), 0, 0);
    return canvas;
  } catch {
    return null;
  }
}
