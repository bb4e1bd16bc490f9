// The relay's wire, as the CLI's relay package speaks it: HTTP JSON routes
// with a bearer token, Socket.IO v4 at /v1/updates (user-scoped), session
// RPCs "<sessionId>:<method>" with encrypted params and results, prompts as
// canonical user messages. docs/ARCHITECTURE.md, "The control plane".

import * as c from "./crypto.js";

export class RelayError extends Error {
  /** status is the HTTP status (0: no answer); unreachable is true when
   * the relay could not be reached at all (the message says so in words a
   * person can act on: unreachableMessage). */
  constructor(status, message, unreachable = false) {
    super(message);
    this.name = "RelayError";
    this.status = status;
    this.unreachable = unreachable;
  }
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\]|::1)$/i;

/** unreachableMessage says that the relay at base does not answer and what
 * to check. pageHost is the host name the page was loaded from: a relay on
 * a loopback address seen from a page that is not gets a note that such an
 * address names the device itself (a phone cannot reach a computer's). */
export function unreachableMessage(base, pageHost = globalThis.location?.hostname ?? "") {
  let msg = `Can't reach the relay at ${base}. Is it running? Start it with "happy server" on its computer, or check that this device can reach that address.`;
  let host = "";
  try { host = new URL(base).hostname; } catch { /* not a URL: no note */ }
  if (host && LOOPBACK.test(host) && !LOOPBACK.test(pageHost)) {
    msg += ` ${host} is the device the page runs on: from a phone, use an address of the computer that runs the relay.`;
  }
  return msg;
}

/** routeMissing tells a relay without a route (404, 405 or 501) from other refusals. */
export const routeMissing = (e) => e instanceof RelayError && [404, 405, 501].includes(e.status);

/** RpcError is a refusal of a session RPC; stale is true when the call no
 * longer waits (someone else answered first). */
export class RpcError extends Error {
  constructor(message) {
    super(message);
    this.name = "RpcError";
    this.stale = /waits for|not waiting|stale answer/i.test(message);
  }
}

export class Relay {
  /** base is the relay's base URL without a trailing slash; token may be "". */
  constructor(base, token = "") {
    this.base = base.replace(/\/+$/, "");
    this.token = token;
  }

  async call(method, path, body) {
    const headers = { Accept: "application/json" };
    if (this.token) headers.Authorization = "Bearer " + this.token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let resp;
    try {
      resp = await fetch(this.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "omit", cache: "no-store" });
    } catch {
      throw new RelayError(0, unreachableMessage(this.base), true);
    }
    let data = null;
    try { data = await resp.json(); } catch { /* not JSON */ }
    if (!resp.ok) throw new RelayError(resp.status, data?.error ? String(data.error) : `${method} ${path}: HTTP ${resp.status}`);
    return data;
  }

  /**
   * pair collects the answer of a pairing request that happy web approved
   * before it printed the link: one POST /v1/auth/request, which must say
   * authorized, with the token sealed for the request's key (sealedToken,
   * happy's relay) or in plain (token, the reference relay), and the sealed
   * response. Anything else means the link was used already or expired
   * (our relay answers a request until it is collected, within minutes), so
   * it fails at once.
   */
  async pair(publicKey) {
    const r = await this.call("POST", "/v1/auth/request", { publicKey: c.b64encode(publicKey), supportsV2: true });
    if (r?.state === "authorized" && typeof r.response === "string" && (typeof r.sealedToken === "string" || typeof r.token === "string")) return r;
    if (r?.state === "authorized") throw new RelayError(0, "POST /v1/auth/request: authorized without token or response");
    throw new RelayError(0, "this pairing link was used already or has expired (a link works once, within 5 minutes); run `happy web` again");
  }

  /** collected is POST /v1/auth/request/collected {publicKey} with the token
   * the answer carried (happy's relay only): the relay forgets the answered
   * request, which spends the link. */
  async collected(publicKey) {
    await this.call("POST", "/v1/auth/request/collected", { publicKey: c.b64encode(publicKey) });
  }

  /** signIn signs the challenge with the account key (POST /v1/auth) and returns the token. */
  async signIn(accountSecret) {
    const r = await this.call("POST", "/v1/auth", c.authRequest(accountSecret));
    if (!r?.token) throw new RelayError(0, "the relay gave no token");
    return r.token;
  }

  async sessions() {
    return (await this.call("GET", "/v1/sessions"))?.sessions ?? [];
  }

  /** archive is POST /v1/sessions/:id/archive: the relay marks the session
   * inactive (app.Archive writes the metadata first). */
  async archive(sid) {
    await this.call("POST", `/v1/sessions/${encodeURIComponent(sid)}/archive`, {});
  }

  /** deleteSession is DELETE /v1/sessions/:id: the session and all its
   * messages are gone from the relay. */
  async deleteSession(sid) {
    await this.call("DELETE", `/v1/sessions/${encodeURIComponent(sid)}`);
  }

  /** messages returns every row after afterSeq, oldest first: [{seq, content:{c}}]. */
  async messages(sid, afterSeq = 0) {
    const out = [];
    for (;;) {
      const r = await this.call("GET", `/v3/sessions/${encodeURIComponent(sid)}/messages?after_seq=${afterSeq}&limit=500`);
      const page = r?.messages ?? [];
      out.push(...page);
      if (page.length) afterSeq = page[page.length - 1].seq;
      if (!r?.hasMore || !page.length) return out;
    }
  }

  /** raw sends bytes to (or reads bytes from) a URL, which must be on this
   * relay: the bearer token goes nowhere else. Returns the answer's bytes. */
  async raw(method, url, body) {
    if (!String(url).startsWith(this.base + "/")) throw new RelayError(0, `attachment URL ${String(url).slice(0, 80)} is not on the relay ${this.base}`);
    const headers = {};
    if (this.token) headers.Authorization = "Bearer " + this.token;
    if (body) headers["Content-Type"] = "application/octet-stream";
    let resp;
    try {
      resp = await fetch(url, { method, headers, body, credentials: "omit", cache: "no-store" });
    } catch {
      throw new RelayError(0, unreachableMessage(this.base), true);
    }
    const bytes = new Uint8Array(await resp.arrayBuffer());
    if (!resp.ok) {
      let msg = `${method} ${url.slice(this.base.length)}: HTTP ${resp.status}`;
      try { msg = JSON.parse(new TextDecoder().decode(bytes)).error || msg; } catch { /* not JSON */ }
      throw new RelayError(resp.status, msg);
    }
    return bytes;
  }

  /** uploadBlob stores sealed bytes as a blob of the session
   * (request-upload {filename, size} → {ref, uploadUrl, method}, then the
   * PUT) and returns its ref, "sessions/<sid>/attachments/<file>". */
  async uploadBlob(sid, filename, sealed) {
    const path = `/v1/sessions/${encodeURIComponent(sid)}/attachments/request-upload`;
    const up = await this.call("POST", path, { filename, size: sealed.length });
    if (typeof up?.ref !== "string" || typeof up?.uploadUrl !== "string") throw new RelayError(0, `POST ${path}: the answer has no ref or uploadUrl`);
    await this.raw(up.method || "PUT", up.uploadUrl, sealed);
    return up.ref;
  }

  /** downloadBlob fetches a blob's sealed bytes (request-download {ref} → {downloadUrl}, then a GET). */
  async downloadBlob(sid, ref) {
    const path = `/v1/sessions/${encodeURIComponent(sid)}/attachments/request-download`;
    const down = await this.call("POST", path, { ref });
    if (typeof down?.downloadUrl !== "string") throw new RelayError(0, `POST ${path}: the answer has no downloadUrl`);
    return this.raw("GET", down.downloadUrl);
  }

  async sendMessages(sid, messages) {
    return this.call("POST", `/v3/sessions/${encodeURIComponent(sid)}/messages`, { messages });
  }

  /** postPrompt stores a prompt's row ({content, localId}) and returns the
   * relay's receipt for it ({seq, localId, new}). A post the relay does not
   * confirm (unreachable, 408, 429, 5xx) is made again after each of waits
   * (ms) with the very same row, never a new prompt: a row the first post
   * stored after all comes back as the relay's answer (and a session refuses
   * a copy as replayed). A row already stored under the localId must hold
   * this content, or the prompt is refused as not stored. When the relay
   * never confirms, the error says the prompt may have been stored. As the
   * CLI's app.SendPrompt. */
  async postPrompt(sid, row, waits = [250, 1000, 2000]) {
    for (let attempt = 0; ; attempt++) {
      let r;
      try {
        r = await this.sendMessages(sid, [row]);
      } catch (e) {
        const unsure = e instanceof RelayError && (e.unreachable || e.status === 408 || e.status === 429 || e.status >= 500);
        if (!unsure) throw e;
        if (attempt === waits.length) {
          throw new RelayError(e.status, `The relay did not confirm the prompt (${e.message}); it may have been stored: look at the session before sending it again.`, e.unreachable);
        }
        await new Promise((res) => setTimeout(res, waits[attempt]));
        continue;
      }
      const m = (r?.messages ?? []).find((x) => x?.localId === row.localId);
      if (!m || !(m.seq > 0)) throw new RelayError(0, `POST /v3/sessions/${sid}/messages: no receipt for ${row.localId}`);
      if (m.new === false) {
        const page = await this.call("GET", `/v3/sessions/${encodeURIComponent(sid)}/messages?after_seq=${m.seq - 1}&limit=1`);
        const got = page?.messages?.[0];
        if (!got || got.seq !== m.seq || got.content?.c !== row.content) {
          throw new RelayError(0, `The relay holds another row under ${row.localId}: the prompt was not stored.`);
        }
      }
      return m;
    }
  }

  /** lookupPairing is GET /v1/auth/request/lookup?code= (happy's relay only):
   * [{publicKey: Uint8Array(32), supportsV2, createdAt, expiresAt}] as the
   * relay claims them (the caller checks each key's code). */
  async lookupPairing(code) {
    const r = await this.call("GET", "/v1/auth/request/lookup?code=" + encodeURIComponent(code));
    if (!Array.isArray(r?.requests)) throw new RelayError(0, "GET /v1/auth/request/lookup: the answer has no requests list");
    return r.requests.map((q, i) => {
      let key;
      try { key = c.b64decode(q?.publicKey ?? ""); } catch { key = null; }
      if (!key || key.length !== 32) throw new RelayError(0, `GET /v1/auth/request/lookup: requests[${i}].publicKey is not a 32-byte key`);
      return { publicKey: key, supportsV2: q.supportsV2 === true, createdAt: q.createdAt ?? 0, expiresAt: q.expiresAt ?? 0 };
    });
  }

  /** pairingStatus is GET /v1/auth/request/status?publicKey=: {status:"not_found"|"pending"|"authorized", supportsV2}. */
  async pairingStatus(publicKey) {
    return this.call("GET", "/v1/auth/request/status?publicKey=" + encodeURIComponent(c.b64encode(publicKey)));
  }

  /** authResponse is POST /v1/auth/response {publicKey, response} (standard base64 of both). */
  async authResponse(publicKey, bundle) {
    const r = await this.call("POST", "/v1/auth/response", { publicKey: c.b64encode(publicKey), response: c.b64encode(bundle) });
    if (r?.success !== true) throw new RelayError(0, "POST /v1/auth/response: the relay did not say success");
  }

  /** revoke is POST /v1/auth/revoke (happy's relay only): every token of the account stops working. */
  async revoke() {
    const r = await this.call("POST", "/v1/auth/revoke", {});
    if (r?.success !== true) throw new RelayError(0, "POST /v1/auth/revoke: the relay did not say success");
    return { generation: r.generation, disconnected: r.disconnected };
  }

  /** machines is GET /v1/machines: [{id, metadata, metadataVersion, daemonState, daemonStateVersion, dataEncryptionKey, active, activeAt, …}]. */
  async machines() {
    const r = await this.call("GET", "/v1/machines");
    if (!Array.isArray(r)) throw new RelayError(0, "GET /v1/machines: the answer is not a list");
    return r;
  }

  /** vapidPublicKey is GET /v1/web-push/vapid-public-key (happy's relay
   * only): the key a browser subscribes with, as bytes (65, a P-256 point). */
  async vapidPublicKey() {
    const r = await this.call("GET", "/v1/web-push/vapid-public-key");
    const key = typeof r?.publicKey === "string" ? c.b64decode(r.publicKey) : null;
    if (!key || key.length !== 65) throw new RelayError(0, "GET /v1/web-push/vapid-public-key: the answer has no 65-byte publicKey");
    return key;
  }

  /** subscribePush is POST /v1/web-push/subscriptions with a
   * PushSubscription's toJSON() ({endpoint, keys: {p256dh, auth}}). */
  async subscribePush(sub) {
    const r = await this.call("POST", "/v1/web-push/subscriptions", { endpoint: sub.endpoint, keys: { p256dh: sub.keys?.p256dh, auth: sub.keys?.auth } });
    if (r?.success !== true) throw new RelayError(0, "POST /v1/web-push/subscriptions: the relay did not say success");
  }

  /** unsubscribePush is DELETE /v1/web-push/subscriptions {endpoint}. */
  async unsubscribePush(endpoint) {
    await this.call("DELETE", "/v1/web-push/subscriptions", { endpoint });
  }

  /** socket opens the user-scoped Socket.IO connection (receives every update of the account; liveText asks the relay for the text-delta ephemerals main.js folds in). */
  socket() {
    const io = globalThis.io;
    if (!io) throw new Error("socket.io-client is not loaded");
    return io(this.base, { path: "/v1/updates", transports: ["websocket"], auth: { token: this.token, clientType: "user-scoped", liveText: true }, reconnectionDelayMax: 5000 });
  }
}

/** controlEnvelope seals nothing itself: it is the plaintext of a control
 * input (docs/ARCHITECTURE.md, "Trust"), bound to its target (a relay
 * session id or a machine id) and method ("prompt" for a prompt row), with a
 * unique id (16 random bytes as 32 hex digits) and its issue time (Unix ms):
 * {happyControl: 1, id, target, method, iat, params?}. The receiver refuses
 * it a second time, for another target or method, or when it is old. */
export function controlEnvelope(target, method, params, now = Date.now(), rnd = c.randomBytes(16)) {
  const env = { happyControl: 1, id: c.hex(rnd), target, method, iat: now };
  if (params !== undefined) env.params = params;
  return env;
}

/** openAnswer returns the result of a sealed control answer
 * {happyControl: 1, re, result?, error?, reason?} bound to the request id;
 * it throws RpcError for the callee's error, and for an answer that is not
 * bound to this request (replayed or made up by the relay, or an older
 * happy) — never taking it for success. */
export function openAnswer(method, out, id) {
  if (out && typeof out === "object" && out.happyControl === 1 && out.re === id) {
    if (typeof out.error === "string" && out.error) throw new RpcError(out.reason ? `${out.error} (${out.reason})` : out.error);
    return out.result ?? null;
  }
  // An error sent before the envelope could be read is shown; a control
  // answer for another call (the relay replaying an earlier one) is not.
  if (out && typeof out === "object" && out.happyControl === undefined && typeof out.error === "string" && out.error) throw new RpcError(`${method}: ${out.error}`);
  throw new RpcError(`${method}: the answer is not bound to this call (replayed or forged by the relay, or an older happy): it may or may not have been acted on`);
}

/** callRPC calls "<sid>:<method>" (a session's, or a machine's with its id and cipher)
 * with params sealed in a control envelope by the cipher, and returns the
 * result of the session's answer bound to it (openAnswer). */
export async function callRPC(sock, cipher, sid, method, params, timeoutMs = 40000) {
  const env = controlEnvelope(sid, method, params ?? {});
  const sealed = await c.sealJSON(cipher, env);
  let ack;
  try {
    ack = await sock.timeout(timeoutMs).emitWithAck("rpc-call", { method: `${sid}:${method}`, params: sealed });
  } catch {
    throw new RpcError(`${method}: no answer from the session within ${timeoutMs / 1000} s`);
  }
  if (!ack?.ok) throw new RpcError(`${method}: ${ack?.error ?? "refused"}`);
  if (typeof ack.result !== "string" || !ack.result) throw new RpcError(`${method}: the session sent no result`);
  return openAnswer(method, await c.openJSON(cipher, ack.result), env.id);
}

/** promptEnvelope builds the user message a prompt is written as (version 1),
 * filed under rootSessionID, as app.SendFiles writes it: the text part (left
 * out when there is no text but files), then one file part per uploaded file
 * ({mime, filename, url, source}, uploadFile's result) after it. */
export function promptEnvelope(rootSessionID, text, now = Date.now(), rnd = c.randomBytes(6), files = []) {
  const id = "msg_" + String(now).padStart(13, "0") + c.hex(rnd);
  const parts = [];
  if (text !== "" || files.length === 0) parts.push({ id: "prt_" + id.slice(4), sessionID: rootSessionID, messageID: id, type: "text", text });
  files.forEach((f, i) => {
    const part = { id: "prt_" + id.slice(4) + String(i + 1).padStart(2, "0"), sessionID: rootSessionID, messageID: id, type: "file", mime: f.mime, url: f.url };
    if (f.filename) part.filename = f.filename;
    if (f.source) part.source = f.source;
    parts.push(part);
  });
  return {
    id,
    env: {
      kind: "message", version: 1,
      info: { id, sessionID: rootSessionID, role: "user", time: { created: now }, agent: "build", model: { providerID: "", modelID: "" } },
      parts,
    },
  };
}

/** parsePairLink reads "#pair=<b64url secret>[&relay=<url>]" from a location hash. */
export function parsePairLink(hash, origin) {
  if (!hash.startsWith("#pair=")) return null;
  const params = new URLSearchParams(hash.slice(1));
  const secret = c.b64decode(params.get("pair") ?? "");
  if (secret.length !== 32) throw new c.CryptoError("bad_length", `pairing key of ${secret.length} bytes, want 32`);
  const relay = params.get("relay") || origin;
  if (!/^https?:\/\//i.test(relay)) throw new c.CryptoError("bad_encoding", "the relay of the link is not an http(s) URL");
  return { secret, relay: relay.replace(/\/+$/, "") };
}
