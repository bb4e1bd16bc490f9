// Content encryption, byte-compatible with the CLI's crypto package
// (docs/ARCHITECTURE.md, section "The web app"): legacy NaCl secretbox under
// the account secret, dataKey AES-256-GCM under a per-session key wrapped for
// the account's content key pair, the HMAC-SHA512 key tree, the pairing
// response, the backup key and the sign-in challenge. NaCl comes from the
// vendored tweetnacl (globalThis.nacl); AES-GCM, HMAC and SHA from WebCrypto.

const nacl = () => {
  const n = globalThis.nacl;
  if (!n) throw new Error("tweetnacl is not loaded");
  return n;
};
const subtle = () => globalThis.crypto.subtle;
const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/** CryptoError is every refusal of this module; reason is one of
 * "truncated", "auth_failed", "unsupported_version", "bad_length", "bad_encoding". */
export class CryptoError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = "CryptoError";
    this.reason = reason;
  }
}

// ---- encodings ----

/** b64decode reads standard or URL-safe base64, padded or not. */
export function b64decode(s) {
  if (typeof s !== "string") throw new CryptoError("bad_encoding", "base64: not a string");
  let t = s.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  if (!/^[A-Za-z0-9+/]*$/.test(t) || t.length % 4 === 1) throw new CryptoError("bad_encoding", "base64: invalid characters or length");
  t += "===".slice((t.length + 3) % 4);
  const bin = atob(t);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** b64encode writes standard padded base64 (what the relay and the CLI write). */
export function b64encode(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** b64url writes RFC 4648 base64url without padding (the pairing link's key). */
export function b64url(bytes) {
  return b64encode(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

export const encodeUtf8 = (s) => utf8.encode(s);
export const decodeUtf8 = (b) => fromUtf8.decode(b);

export function randomBytes(n) {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  return b;
}

// ---- backup key: RFC 4648 base32, groups of 5 joined by '-' ----

const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const SEPARATORS = new Set([" ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "-", "\u2010", "\u2011", "\u2013", "\u2014", ".", "_", "/", '"', "'", "`", "="]);

/** parseBackupKey reads a backup key as `happy auth backup` prints it, with the
 * CLI's tolerance (case, separators, look-alike digits 0 1 8 9) and its
 * refusals (any other character, not exactly 52 base32 characters). */
export function parseBackupKey(s) {
  let clean = "";
  let i = 0;
  for (const ch of String(s)) {
    let c = ch;
    if (c >= "a" && c <= "z") c = c.toUpperCase();
    else if (c === "0") c = "O";
    else if (c === "1") c = "I";
    else if (c === "8") c = "B";
    else if (c === "9") c = "G";
    if ((c >= "A" && c <= "Z") || (c >= "2" && c <= "7")) clean += c;
    else if (!SEPARATORS.has(ch)) throw new CryptoError("bad_encoding", `backup key: unexpected character at position ${i}`);
    i++;
  }
  if (clean.length !== 52) throw new CryptoError("bad_length", `backup key: ${clean.length} base32 characters, want 52`);
  const out = new Uint8Array(32);
  let bits = 0, acc = 0, o = 0;
  for (const c of clean) {
    acc = (acc << 5) | B32.indexOf(c);
    bits += 5;
    if (bits >= 8 && o < 32) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

/** formatBackupKey is the inverse of parseBackupKey (canonical form). */
export function formatBackupKey(secret) {
  let s = "", bits = 0, acc = 0;
  for (const b of secret) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) { bits -= 5; s += B32[(acc >> bits) & 31]; }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) s += B32[(acc << (5 - bits)) & 31];
  return s.match(/.{1,5}/g).join("-");
}

// ---- key tree ----

async function hmacSha512(key, data) {
  const k = await subtle().importKey("raw", key, { name: "HMAC", hash: "SHA-512" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", k, data));
}

/** deriveKey walks the HMAC-SHA512 key tree: I = HMAC(usage+" Master Seed",
 * master), then I = HMAC(I[32:], 0x00 || elem) per path element; returns I[:32]. */
export async function deriveKey(master, usage, path) {
  let state = await hmacSha512(utf8.encode(usage + " Master Seed"), master);
  for (const elem of path) state = await hmacSha512(state.slice(32), concat(new Uint8Array([0]), utf8.encode(elem)));
  return state.slice(0, 32);
}

/** boxPublicKey is X25519(secret, base point), as nacl.box.keyPair.fromSecretKey. */
export const boxPublicKey = (secret) => nacl().box.keyPair.fromSecretKey(secret).publicKey;

/** boxKeyPairFromSeed is libsodium's crypto_box_seed_keypair: sk = SHA-512(seed)[:32]. */
export function boxKeyPairFromSeed(seed) {
  const secretKey = nacl().hash(seed).slice(0, 32);
  return { publicKey: boxPublicKey(secretKey), secretKey };
}

/** contentKeyPair is the account's content box key pair (it unwraps dataKey session keys). */
export async function contentKeyPair(accountSecret) {
  return boxKeyPairFromSeed(await deriveKey(accountSecret, "Happy EnCoder", ["content"]));
}

function openBox(bundle, recipientSecret, what) {
  if (bundle.length < 32 + 24 + 16) throw new CryptoError("truncated", `${what}: ${bundle.length} bytes`);
  const out = nacl().box.open(bundle.subarray(56), bundle.subarray(32, 56), bundle.subarray(0, 32), recipientSecret);
  if (!out) throw new CryptoError("auth_failed", `${what}: authentication failed`);
  return out;
}

/** unwrapDataKey opens 0x00 | ephemeralPublicKey(32) | nonce(24) | box(key32), 105 bytes. */
export function unwrapDataKey(bundle, contentSecretKey) {
  if (bundle.length === 0) throw new CryptoError("truncated", "wrapped data key: empty");
  if (bundle[0] !== 0) throw new CryptoError("unsupported_version", `wrapped data key: version byte ${bundle[0]}`);
  if (bundle.length < 105) throw new CryptoError("truncated", `wrapped data key of ${bundle.length} bytes (want 105)`);
  if (bundle.length > 105) throw new CryptoError("bad_length", `wrapped data key of ${bundle.length} bytes (want 105)`);
  return openBox(bundle.subarray(1), contentSecretKey, "wrapped data key");
}

/** openPairingResponse opens the approving device's bundle with the terminal
 * (here: browser) secret: {variant:"legacy", secret} or {variant:"dataKey", contentPublicKey}. */
export function openPairingResponse(bundle, terminalSecret) {
  if (bundle.length > 137) throw new CryptoError("bad_length", `pairing response of ${bundle.length} bytes (at most 137)`);
  const plain = openBox(bundle, terminalSecret, "pairing response");
  if (plain.length === 32) return { variant: "legacy", secret: plain };
  if (plain.length === 33 && plain[0] === 0) return { variant: "dataKey", contentPublicKey: plain.slice(1) };
  // A proven answer (crypto.ProvePairingResponse): a terminal's, read here for tests.
  if (plain.length === 64) return { variant: "legacy", secret: plain.slice(0, 32), proof: plain.slice(32) };
  if (plain.length === 65 && plain[0] === 1) return { variant: "dataKey", contentPublicKey: plain.slice(1, 33), proof: plain.slice(33) };
  if (plain.length === 33 || plain.length === 65) throw new CryptoError("unsupported_version", `pairing response: payload tag ${plain[0]}`);
  throw new CryptoError("bad_length", `pairing response: payload of ${plain.length} bytes, want 32, 33, 64 or 65`);
}

/** openSealedToken opens the relay's sealedToken (ephemeralPublicKey(32) |
 * nonce(24) | box(token)) with the pairing request's secret key, as
 * crypto.OpenSealedToken: the token is 1 to 4096 bytes of printable ASCII. */
export function openSealedToken(bundle, secret) {
  if (bundle.length > 72 + 4096) throw new CryptoError("bad_length", `sealed token of ${bundle.length} bytes (at most ${72 + 4096})`);
  const plain = openBox(bundle, secret, "sealed token");
  if (plain.length === 0 || plain.some((b) => b < 0x21 || b > 0x7e)) throw new CryptoError("bad_encoding", "sealed token: not printable ASCII");
  return String.fromCharCode(...plain);
}

/** signChallenge signs with the account's Ed25519 key (seed = account secret). */
export function authKeyPair(accountSecret) {
  return nacl().sign.keyPair.fromSeed(accountSecret);
}

/** authRequest builds the body of POST /v1/auth: {publicKey, challenge, signature}. */
export function authRequest(accountSecret, challenge = randomBytes(32)) {
  const kp = authKeyPair(accountSecret);
  return {
    publicKey: b64encode(kp.publicKey),
    challenge: b64encode(challenge),
    signature: b64encode(nacl().sign.detached(challenge, kp.secretKey)),
  };
}

// ---- ciphers ----

/** legacyCipher: nonce(24) | secretbox(plaintext) under a 32-byte key.
 * blobCipher() is the cipher of the reference clients' attachments of a
 * legacy session: secretbox under deriveKey(secret, "Happy Blobs", ["master"])
 * (crypto.AccountBlobKey). */
export function legacyCipher(key) {
  let blob;
  return {
    variant: "legacy",
    blobCipher: async () => (blob ??= legacyCipher(await deriveKey(key, "Happy Blobs", ["master"]))),
    async seal(plain) {
      const nonce = randomBytes(24);
      return concat(nonce, nacl().secretbox(plain, nonce, key));
    },
    async open(bundle) {
      if (bundle.length < 40) throw new CryptoError("truncated", `legacy bundle of ${bundle.length} bytes (need at least 40)`);
      const out = nacl().secretbox.open(bundle.subarray(24), bundle.subarray(0, 24), key);
      if (!out) throw new CryptoError("auth_failed", "legacy bundle: authentication failed");
      return out;
    },
  };
}

/** dataKeyCipher: 0x00 | nonce(12) | AES-256-GCM ciphertext | tag(16).
 * blobCipher() is secretbox under deriveKey(key, "Happy Blobs", ["session"])
 * (crypto.SessionBlobKey), the reference clients' attachment cipher. */
export function dataKeyCipher(key) {
  let k, blob;
  const imported = () => (k ??= subtle().importKey("raw", key, "AES-GCM", false, ["encrypt", "decrypt"]));
  return {
    variant: "dataKey",
    blobCipher: async () => (blob ??= legacyCipher(await deriveKey(key, "Happy Blobs", ["session"]))),
    async seal(plain) {
      const nonce = randomBytes(12);
      const ct = new Uint8Array(await subtle().encrypt({ name: "AES-GCM", iv: nonce }, await imported(), plain));
      return concat(new Uint8Array([0]), nonce, ct);
    },
    async open(bundle) {
      if (bundle.length === 0) throw new CryptoError("truncated", "dataKey bundle: empty");
      if (bundle[0] !== 0) throw new CryptoError("unsupported_version", `dataKey bundle: version byte ${bundle[0]}`);
      if (bundle.length < 29) throw new CryptoError("truncated", `dataKey bundle of ${bundle.length} bytes (need at least 29)`);
      try {
        return new Uint8Array(await subtle().decrypt({ name: "AES-GCM", iv: bundle.subarray(1, 13) }, await imported(), bundle.subarray(13)));
      } catch {
        throw new CryptoError("auth_failed", "dataKey bundle: authentication failed");
      }
    },
  };
}

/** sessionCipher is the cipher of one relay session from its dataEncryptionKey
 * (base64, or null/"" for a legacy session sealed under the account secret). */
export async function sessionCipher(accountSecret, dataEncryptionKey) {
  if (!dataEncryptionKey) return legacyCipher(accountSecret);
  const { secretKey } = await contentKeyPair(accountSecret);
  return dataKeyCipher(unwrapDataKey(b64decode(dataEncryptionKey), secretKey));
}

/** openJSON decrypts a base64 bundle and parses its JSON. */
export async function openJSON(cipher, b64) {
  const plain = await cipher.open(b64decode(b64));
  try {
    return JSON.parse(decodeUtf8(plain));
  } catch {
    throw new CryptoError("bad_encoding", "decrypted payload is not JSON");
  }
}

/** sealJSON encrypts a JSON value and returns the base64 bundle. */
export async function sealJSON(cipher, value) {
  return b64encode(await cipher.seal(encodeUtf8(JSON.stringify(value))));
}

// ---- terminal pairing: code, key, response (crypto.PairingCode, relay.ParseTerminalKey, crypto.SealPairingResponse) ----

/** pairingCode is the terminal key's fingerprint as `happy auth login`
 * shows it: the first 10 RFC 4648 base32 characters of SHA-256(publicKey),
 * "XXXXX-XXXXX" (WebCrypto SHA-256). */
export async function pairingCode(publicKey) {
  const sum = new Uint8Array(await subtle().digest("SHA-256", publicKey));
  let s = "", bits = 0, acc = 0;
  for (const b of sum.subarray(0, 7)) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) { bits -= 5; s += B32[(acc >> bits) & 31]; }
    acc &= (1 << bits) - 1;
  }
  return s.slice(0, 5) + "-" + s.slice(5, 10);
}

/** parsePairingCode normalises a typed code as crypto.ParsePairingCode does:
 * case ignored, spaces, tabs and dashes dropped, 0/1/8 read as O/I/B; any
 * other character is bad_encoding, another length than 10 bad_length. */
export function parsePairingCode(s) {
  const out = normaliseCode(s, 10);
  if (out.length !== 10) throw new CryptoError("bad_length", `pairing code: ${out.length} characters, want 10`);
  return out.slice(0, 5) + "-" + out.slice(5);
}

/** normaliseCode reads a typed code as parsePairingCode does, up to max characters. */
function normaliseCode(s, max) {
  let out = "";
  for (const ch of String(s)) {
    if (ch === " " || ch === "-" || ch === "\t") continue;
    let c = ch >= "a" && ch <= "z" ? ch.toUpperCase() : ch;
    c = { 0: "O", 1: "I", 8: "B" }[c] ?? c;
    if (!((c >= "A" && c <= "Z") || (c >= "2" && c <= "7"))) throw new CryptoError("bad_encoding", `pairing code: ${JSON.stringify(ch)} is not a base32 character`);
    if (out.length === max) throw new CryptoError("bad_length", `pairing code: more than ${max} characters`);
    out += c;
  }
  return out;
}

const group5 = (s) => s.match(/.{1,5}/g)?.join("-") ?? "";

/** parseFullPairingCode splits a typed code as crypto.ParseFullPairingCode
 * does: {code: "XXXXX-XXXXX", secret: "SSSSS-SSSSS"}, secret "" for the
 * 10-character short form; another length is bad_length. */
export function parseFullPairingCode(s) {
  const out = normaliseCode(s, 20);
  if (out.length === 10) return { code: group5(out), secret: "" };
  if (out.length === 20) return { code: group5(out.slice(0, 10)), secret: group5(out.slice(10)) };
  throw new CryptoError("bad_length", `pairing code: ${out.length} characters, want 10 or 20`);
}

/** parsePairingSecret normalises a pairing secret as crypto.ParsePairingSecret:
 * exactly 10 base32 characters, "SSSSS-SSSSS". */
export function parsePairingSecret(s) {
  const out = normaliseCode(s, 10);
  if (out.length !== 10) throw new CryptoError("bad_length", `pairing secret: ${out.length} characters, want 10`);
  return group5(out);
}

/** pairingProof is crypto.PairingProof: HMAC-SHA256 keyed by the 10
 * characters of the pairing secret over "happy-pairing-proof-v1" | the
 * terminal's public key | body (the payload without the proof). */
export async function pairingProof(secret, terminalPublicKey, body) {
  const k = await subtle().importKey("raw", utf8.encode(parsePairingSecret(secret).replace("-", "")), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", k, concat(utf8.encode("happy-pairing-proof-v1"), terminalPublicKey, body)));
}

/** provePairingResponse returns resp ({variant, secret | contentPublicKey})
 * with the proof that the approver saw the terminal's pairing secret, as
 * crypto.ProvePairingResponse: sealPairingResponse then writes the proven
 * payload (64 bytes legacy, 0x01 | key | proof dataKey). */
export async function provePairingResponse(resp, secret, terminalPublicKey) {
  const body = pairingBody({ ...resp, proof: new Uint8Array(32) });
  return { ...resp, proof: await pairingProof(secret, terminalPublicKey, body) };
}

/** pairingBody is the payload without a proof: the account secret, or a tag
 * (0x00, 0x01 when resp has a proof) and the content public key. */
function pairingBody(resp) {
  if (resp.variant === "legacy" && resp.secret?.length === 32) return resp.secret;
  if (resp.variant === "dataKey" && resp.contentPublicKey?.length === 32) return concat(new Uint8Array([resp.proof ? 1 : 0]), resp.contentPublicKey);
  throw new CryptoError("unsupported_version", `pairing response: variant ${resp.variant} without its 32-byte key`);
}

/** parseTerminalKey reads the terminal's public key from what `happy auth
 * login` shows besides the code: happy://terminal?<base64url>, a web link
 * …#key=<base64url>, or the bare key (base64url or standard base64). */
export function parseTerminalKey(s) {
  return parseTerminalLink(s).key;
}

/** parseTerminalLink is parseTerminalKey that also reads the pairing secret
 * of happy's approve link, happy://terminal?<base64url>&secret=SSSSS-SSSSS,
 * as relay.ParseTerminalLink: {key, secret}, secret "" for the other forms. */
export function parseTerminalLink(s) {
  let key = String(s).trim(), secret = "";
  if (key.startsWith("happy://terminal?")) {
    const [k, ...rest] = key.slice("happy://terminal?".length).split("&");
    key = k;
    if (rest.length > 0) {
      const part = rest.join("&");
      if (!part.startsWith("secret=")) throw new CryptoError("bad_encoding", "terminal link: unknown part after the key");
      secret = parsePairingSecret(part.slice("secret=".length));
    }
  } else if (key.includes("#key=")) key = key.split("#key=")[1].split("&")[0];
  const raw = b64decode(key);
  if (raw.length !== 32) throw new CryptoError("bad_length", `terminal key of ${raw.length} bytes, want 32`);
  return { key: raw, secret };
}

/** sealPairingResponse seals the approval for a terminal's public key as
 * crypto.SealPairingResponse does: ephemeralPublicKey(32) | nonce(24) |
 * box(payload), payload the account secret (legacy, 32 bytes) or 0x00 |
 * content public key (dataKey, 33 bytes); with resp.proof
 * (provePairingResponse) the secret | proof (64 bytes) or 0x01 | key |
 * proof (65 bytes). ephemeralSecret and nonce are drawn fresh unless given
 * (tests pin them). */
export function sealPairingResponse(resp, terminalPublicKey, ephemeralSecret = randomBytes(32), nonce = randomBytes(24)) {
  if (resp.proof !== undefined && resp.proof?.length !== 32) throw new CryptoError("bad_length", "pairing response: proof is not 32 bytes");
  const body = pairingBody(resp);
  const payload = resp.proof ? concat(body, resp.proof) : body;
  if (terminalPublicKey?.length !== 32) throw new CryptoError("bad_length", "pairing response: terminal key is not 32 bytes");
  const box = nacl().box(payload, nonce, terminalPublicKey, ephemeralSecret);
  return concat(boxPublicKey(ephemeralSecret), nonce, box);
}
