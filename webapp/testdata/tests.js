// Unit tests of the web app's own logic, run in a real browser by
// webapp_test.go. Results go to window.__results = {done, passed, failures:[{name, message}]}.

import * as c from "/app/js/crypto.js";
import { Reducer, receipt, blockedTools, sessionState, lifecycleState, turnOpen, sessionTitle, pathBase, isLive, findChild, stoppedView, INTERRUPTED_TOOL, INTERRUPTED_MESSAGE } from "/app/js/reduce.js";
import { renderMarkdown, safeHref } from "/app/js/markdown.js";
import * as r from "/app/js/render.js";
import { controlEnvelope, openAnswer, parsePairLink, promptEnvelope, unreachableMessage, Relay, RpcError, RelayError } from "/app/js/api.js";
import { archiveSession, archiveFields, deleteSession, lastActivity, resumeTarget, recentFolders, updateSessionMetadata, SessionActionError, RUNNING_MESSAGE, MAX_CAS_ATTEMPTS } from "/app/js/sessions.js";
import { approveTerminal, ApproveError, revokeEverywhere, openMachine, spawnParams, readSpawnReply, spawnSession, daemonNotRunning } from "/app/js/devices.js";
import * as th from "/app/js/thumbhash.js";
import { readPushData, openDetail, notificationFor, pushSupport, GENERIC_BODY } from "/app/js/notify.js";
import { sniff, inspectFile, uploadFile, Blobs, blobSource, isBlobRef, MAX_ATTACHMENT, AttachError, digest } from "/app/js/attach.js";
import { secureContextProblem } from "/app/js/secure.js";

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

class Fail extends Error {}
function eq(got, want, what = "value") {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) throw new Fail(`${what}: got ${g}, want ${w}`);
}
function ok(cond, what) {
  if (!cond) throw new Fail(what);
}
async function rejects(p, reason, what) {
  try {
    await p;
  } catch (e) {
    if (e.reason !== reason) throw new Fail(`${what}: refused with ${e.reason} (${e.message}), want ${reason}`);
    return;
  }
  throw new Fail(`${what}: accepted, want a refusal (${reason})`);
}
const html = (node) => node.outerHTML;

const vectors = await (await fetch("/vectors.json")).json();
const fx = await (await fetch("/fixtures.json")).json();
const b64 = c.b64decode;

// ---- crypto: the CLI's vectors ----

test("secretbox vectors open to their plaintext", async () => {
  ok(vectors.secretbox.length >= 5, "secretbox vectors present");
  for (const [i, v] of vectors.secretbox.entries()) {
    const plain = await c.legacyCipher(b64(v.keyB64)).open(b64(v.bundleB64));
    eq(c.decodeUtf8(plain), v.plaintextJSON, `secretbox[${i}]`);
  }
});

test("aesgcm vectors open to their plaintext", async () => {
  ok(vectors.aesgcm.length >= 5, "aesgcm vectors present");
  for (const [i, v] of vectors.aesgcm.entries()) {
    const plain = await c.dataKeyCipher(b64(v.keyB64)).open(b64(v.bundleB64));
    eq(c.decodeUtf8(plain), v.plaintextJSON, `aesgcm[${i}]`);
  }
});

test("wrapped data key vectors: content key pair and unwrap", async () => {
  for (const [i, v] of vectors.boxBundle.entries()) {
    const secret = b64(v.accountSecretB64);
    eq(c.b64encode(await c.deriveKey(secret, "Happy EnCoder", ["content"])), v.contentKeySeedB64, `boxBundle[${i}] content seed`);
    const kp = await c.contentKeyPair(secret);
    eq(c.b64encode(kp.secretKey), v.recipientSecretKeyB64, `boxBundle[${i}] content secret key`);
    eq(c.b64encode(kp.publicKey), v.recipientPublicKeyB64, `boxBundle[${i}] content public key`);
    eq(c.b64encode(c.unwrapDataKey(b64(v.dataEncryptionKeyB64), kp.secretKey)), v.dataKeyB64, `boxBundle[${i}] data key`);
    const sc = await c.sessionCipher(secret, v.dataEncryptionKeyB64);
    eq(sc.variant, "dataKey", `boxBundle[${i}] session cipher variant`);
  }
});

test("deriveKey, libsodium seed key pair, signature, base64url and backup key vectors", async () => {
  for (const [i, v] of vectors.deriveKey.entries()) eq(c.hex(await c.deriveKey(c.encodeUtf8(v.seedUTF8), v.usage, v.path)), v.keyHex, `deriveKey[${i}]`);
  for (const [i, v] of vectors.libsodiumPublicKey.entries()) {
    const kp = c.boxKeyPairFromSeed(b64(v.seedB64));
    eq([c.b64encode(kp.secretKey), c.b64encode(kp.publicKey)], [v.boxSecretKeyB64, v.publicKeyB64], `libsodiumPublicKey[${i}]`);
  }
  for (const [i, v] of vectors.sign.entries()) {
    const req = c.authRequest(b64(v.seedB64), b64(v.challengeB64));
    eq([req.publicKey, req.challenge, req.signature], [v.publicKeyB64, v.challengeB64, v.signatureB64], `sign[${i}]`);
  }
  for (const [i, v] of vectors.base64url.entries()) {
    const bytes = new Uint8Array((v.hex.match(/../g) || []).map((x) => parseInt(x, 16)));
    eq([c.b64encode(bytes), c.b64url(bytes), c.hex(b64(v.base64url)), c.hex(b64(v.base64))], [v.base64, v.base64url, v.hex, v.hex], `base64url[${i}]`);
  }
  for (const [i, v] of vectors.backupKey.entries()) {
    eq(c.b64encode(c.parseBackupKey(v.backupKey)), v.secretB64, `backupKey[${i}] parse`);
    eq(c.formatBackupKey(b64(v.secretB64)), v.backupKey, `backupKey[${i}] format`);
    eq(c.b64encode(c.parseBackupKey(v.backupKey.toLowerCase().replace(/-/g, " "))), v.secretB64, `backupKey[${i}] tolerant parse`);
  }
});

test("backup key refusals", async () => {
  await rejects(Promise.resolve().then(() => c.parseBackupKey("AAAA")), "bad_length", "short key");
  await rejects(Promise.resolve().then(() => c.parseBackupKey("RVUWY-NMN2H-CFNDJ-PMSEN-4QPJT-B27UV-LOCFT-23ESL-ZG622-DUHTI-A!")), "bad_encoding", "bad character");
});

test("ciphers refuse tampered, truncated and unknown-version bundles", async () => {
  const key = c.randomBytes(32);
  for (const cipher of [c.legacyCipher(key), c.dataKeyCipher(key)]) {
    const sealed = await cipher.seal(c.encodeUtf8('{"a":1}'));
    eq(c.decodeUtf8(await cipher.open(sealed)), '{"a":1}', `${cipher.variant} round trip`);
    const bad = sealed.slice();
    bad[bad.length - 1] ^= 1;
    await rejects(cipher.open(bad), "auth_failed", `${cipher.variant} tampered`);
    await rejects(cipher.open(sealed.slice(0, 10)), "truncated", `${cipher.variant} truncated`);
  }
  const sealed = await c.dataKeyCipher(key).seal(c.encodeUtf8("{}"));
  sealed[0] = 1;
  await rejects(c.dataKeyCipher(key).open(sealed), "unsupported_version", "dataKey version byte");
  await rejects(Promise.resolve().then(() => c.unwrapDataKey(new Uint8Array(104), key)), "truncated", "short wrapped key");
  await rejects(Promise.resolve().then(() => c.unwrapDataKey(new Uint8Array([1, ...new Uint8Array(104)]), key)), "unsupported_version", "wrapped key version");
});

// ---- crypto: what Go's crypto package writes now ----

test("pairing responses sealed by Go open as crypto.OpenPairingResponse does", async () => {
  const secret = b64(fx.terminalSecret);
  eq(c.b64encode(c.boxPublicKey(secret)), fx.terminalPublic, "terminal public key");
  const legacy = c.openPairingResponse(b64(fx.pairingLegacy), secret);
  eq([legacy.variant, c.b64encode(legacy.secret)], ["legacy", fx.accountSecret], "legacy pairing");
  const dk = c.openPairingResponse(b64(fx.pairingDataKey), secret);
  eq([dk.variant, c.b64encode(dk.contentPublicKey)], ["dataKey", fx.contentPublic], "dataKey pairing");
  await rejects(Promise.resolve().then(() => c.openPairingResponse(b64(fx.pairingLegacy), c.randomBytes(32))), "auth_failed", "wrong terminal secret");
});

test("a token sealed by Go opens as crypto.OpenSealedToken does", async () => {
  const secret = b64(fx.terminalSecret);
  eq(c.openSealedToken(b64(fx.sealedToken), secret), "eyJhbGciOiJFZERTQSJ9.e30.c2ln", "sealed token");
  await rejects(Promise.resolve().then(() => c.openSealedToken(b64(fx.sealedToken), c.randomBytes(32))), "auth_failed", "another key");
  await rejects(Promise.resolve().then(() => c.openSealedToken(b64(fx.sealedToken).slice(0, 71), secret)), "truncated", "truncated");
  await rejects(Promise.resolve().then(() => c.openSealedToken(b64(fx.pairingLegacy), secret)), "bad_encoding", "a pairing response is not a token");
  await rejects(Promise.resolve().then(() => c.openSealedToken(new Uint8Array(72 + 4097), secret)), "bad_length", "oversized");
});

test("session rows sealed by Go decrypt (legacy and dataKey) and the browser's seal opens back", async () => {
  const secret = b64(fx.accountSecret);
  for (const row of fx.rows) {
    const cipher = await c.sessionCipher(secret, row.dataEncryptionKey);
    eq(cipher.variant, row.variant, "variant");
    eq(await c.openJSON(cipher, row.content), JSON.parse(row.plaintext), `${row.variant} row`);
    const again = await c.sealJSON(cipher, { x: "é" });
    eq(await c.openJSON(cipher, again), { x: "é" }, `${row.variant} seal/open`);
  }
  eq(c.b64encode(c.parseBackupKey(fx.backupKey)), fx.accountSecret, "backup key from Go");
});

// ---- reduction ----

const msg = (id, version, parts, extra = {}) => JSON.stringify({ kind: "message", version, info: { id, sessionID: extra.sid ?? "ses_root", role: extra.role ?? "assistant", time: { created: 1 } }, parts });
const ses = (id, version, extra = {}) => JSON.stringify({ kind: "session", version, session: { id, title: extra.title ?? id, ...extra } });
const textPart = (id, text) => ({ id, type: "text", text });
// ownId is the localId a writer stores a row under ("<record id>.<version>",
// "legacy:<envelope id>.1"; "" for a row that is no record); put adds a row
// under it, as the relay hands the writer's own rows over.
function ownId(text) {
  let e;
  try { e = JSON.parse(text); } catch { return ""; }
  if (e === null || typeof e !== "object") return "";
  const rec = { message: e.info?.id, session: e.session?.id, todos: "todos:" + e.sessionID, dropped: "dropped:" + e.sessionID }[e.kind];
  if (rec !== undefined) return rec + "." + e.version;
  if (e.role === "session" && typeof e.content?.id === "string") return "legacy:" + e.content.id + ".1";
  return "";
}
const put = (rd, seq, text) => rd.add(seq, ownId(text), text);
const toolPart = (id, status, extra = {}) => ({ id, type: "tool", callID: "call_" + id, tool: extra.tool ?? "bash", state: { status, input: extra.input ?? { command: "ls" }, ...extra.state } });

test("the highest version of a record wins, whatever the arrival order", async () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  put(rd, 2, msg("msg_a", 3, [textPart("p1", "three")]));
  put(rd, 3, msg("msg_a", 1, [textPart("p1", "one")]));
  put(rd, 4, msg("msg_a", 2, [textPart("p1", "two")]));
  put(rd, 5, ses("ses_root", 2, { title: "named" }));
  put(rd, 6, ses("ses_root", 1, { title: "old" }));
  const t = rd.transcript();
  eq(t.messages.map((m) => m.parts[0].text), ["three"], "message text");
  eq(t.session.title, "named", "session title");
  eq(rd.lastSeq, 6, "lastSeq");
});

test("live text deltas extend the stored part; gaps wait for the stored version", () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  put(rd, 2, msg("msg_a", 1, [textPart("p1", "he")]));
  const d = (offset, delta) => ({ messageId: "msg_a", partId: "p1", offset, delta });
  eq(rd.applyDelta(d(2, "llo")), "applied", "in order");
  eq(rd.applyDelta(d(2, "llo")), "duplicate", "repeated");
  eq(rd.applyDelta(d(9, "x")), "gap", "past the end");
  eq(rd.applyDelta(d(4, "o 😀")), "applied", "overlap adds its tail");
  eq(rd.applyDelta(d(8, "!")), "applied", "offsets in UTF-16 units");
  eq(rd.applyDelta(d(1, "zz")), "conflict", "other text");
  eq(rd.applyDelta({ messageId: "msg_b", partId: "p1", offset: 0, delta: "x" }), "gap", "message not stored yet");
  eq(rd.applyDelta({ messageId: "msg_a", partId: "p1", offset: -1, delta: "x" }), "invalid", "bad offset");
  eq(rd.transcript().messages[0].parts[0].text, "hello 😀!", "live text");
  put(rd, 3, msg("msg_a", 2, [textPart("p1", "hello")]));
  eq(rd.transcript().messages[0].parts[0].text, "hello 😀!", "an older stored version keeps the live text");
  put(rd, 4, msg("msg_a", 3, [textPart("p1", "rewritten")]));
  eq(rd.transcript().messages[0].parts[0].text, "rewritten", "a differing stored version wins");
});

test("messages are ordered by the seq of their first version; children nest; todos and dropped are per session", async () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  put(rd, 2, msg("msg_b", 1, [textPart("p", "b")], { role: "user" }));
  put(rd, 3, msg("msg_a", 1, [textPart("p", "a")]));
  put(rd, 4, msg("msg_b", 2, [textPart("p", "b2")], { role: "user" }));
  put(rd, 5, ses("ses_child", 1, { parentID: "ses_root" }));
  put(rd, 6, msg("msg_c", 1, [textPart("p", "child")], { sid: "ses_child" }));
  put(rd, 7, JSON.stringify({ kind: "todos", version: 1, sessionID: "ses_root", todos: [{ content: "x", status: "pending", priority: "high" }] }));
  put(rd, 8, JSON.stringify({ kind: "todos", version: 2, sessionID: "ses_root", todos: [{ content: "x", status: "completed", priority: "high" }] }));
  put(rd, 9, JSON.stringify({ kind: "dropped", version: 1, sessionID: "ses_child", dropped: [{ source: "claude-jsonl", reason: "unknown_type" }] }));
  const t = rd.transcript();
  eq(t.messages.map((m) => m.info.id), ["msg_b", "msg_a"], "order");
  eq(t.messages[0].parts[0].text, "b2", "patched in place");
  eq(t.children.map((ch) => ch.session.id), ["ses_child"], "children");
  eq(t.children[0].messages[0].parts[0].text, "child", "child message");
  eq(t.children[0].dropped, [{ source: "claude-jsonl", reason: "unknown_type" }], "child dropped");
  eq(t.todos, [{ content: "x", status: "completed", priority: "high" }], "todos");
  eq(findChild(t, "ses_child").session.id, "ses_child", "findChild");
});

test("unreadable rows become dropped entries with reasons", async () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  put(rd, 2, "{not json");
  put(rd, 3, "[1]");
  put(rd, 4, '{"role":"user","content":{"type":"text","text":"hi"}}');
  put(rd, 12, '{"role":"session","content":{"id":"p","time":1,"role":"agent","turn":"m","ev":{"t":"turn-start"}}}');
  put(rd, 5, '{"role":"agent"}');
  put(rd, 6, '{"kind":"message","version":0}');
  put(rd, 7, '{"kind":"weird","version":1}');
  put(rd, 8, '{"kind":"message","version":1,"info":{"id":"","role":"user","sessionID":"ses_root"},"parts":[]}');
  put(rd, 9, '{"kind":"todos","version":1,"sessionID":"ses_root","todos":[{"status":"done"}]}');
  put(rd, 10, msg("msg_o", 1, [], { sid: "ses_nobody" }));
  rd.addFailure(11, "decrypt_failed", "authentication failed");
  const t = rd.transcript();
  eq(t.dropped.map((d) => [d.line, d.reason]), [[2, "unparseable_json"], [3, "not_an_object"], [5, "unknown_type"], [6, "invalid_field"], [7, "unknown_type"], [8, "invalid_field"], [9, "invalid_field"], [11, "decrypt_failed"], [10, "orphan"]], "dropped");
  eq(rd.legacy, 2, "legacy prompts and envelopes counted");
});

test("a row stored under another localId than its record version's is refused (wrong_localid)", async () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  const first = msg("msg_a", 1, [textPart("p1", "first")]);
  put(rd, 2, first);
  put(rd, 3, msg("msg_a", 2, [textPart("p1", "second")]));
  // The relay stores version 1's ciphertext again under higher localIds,
  // under another record's, and without one.
  rd.add(4, "msg_a.9", first);
  rd.add(5, "msg_z.1", first);
  rd.add(6, undefined, first);
  const todos = JSON.stringify({ kind: "todos", version: 1, sessionID: "ses_root", todos: [] });
  rd.add(7, "todos:ses_other.1", todos);
  const legacy = '{"role":"session","content":{"id":"prt_1","time":1,"role":"agent","turn":"m","ev":{"t":"turn-start"}}}';
  rd.add(8, "legacy:prt_2.1", legacy);
  rd.add(9, "legacy:prt_1.1", legacy);
  rd.add(10, "f3c1a2b4-uuid", '{"role":"user","content":{"type":"text","text":"from the reference app"}}');
  const t = rd.transcript();
  eq(t.messages.map((m) => m.parts[0].text), ["second"], "the writer's last version stays");
  eq(t.dropped.map((d) => [d.line, d.reason, d.detail]), [
    [4, "wrong_localid", 'stored under localId "msg_a.9", but it is msg_a version 1'],
    [5, "wrong_localid", 'stored under localId "msg_z.1", but it is msg_a version 1'],
    [6, "wrong_localid", 'stored under localId "", but it is msg_a version 1'],
    [7, "wrong_localid", 'stored under localId "todos:ses_other.1", but it is todos:ses_root version 1'],
    [8, "wrong_localid", 'stored under localId "legacy:prt_2.1", but it is the legacy envelope "prt_1"'],
  ], "refused");
  eq(rd.legacy, 2, "the legacy envelope under its own localId and the reference app's prompt are counted");
});

test("blocked tools and session states", async () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  put(rd, 2, msg("msg_a", 1, [toolPart("t1", "blocked", { state: { block: { type: "permission", id: "b", permission: "bash", patterns: ["ls"] } } }), toolPart("t2", "running")]));
  eq(blockedTools(rd.transcript()).map((p) => p.callID), ["call_t1"], "blocked");
  const now = 1_000_000;
  const info = { activeAt: now - 1000, createdAt: 0 };
  eq(sessionState(info, { lifecycleState: "running" }, now), "running", "running, nothing known yet");
  eq(sessionState(info, { lifecycleState: "running" }, now, { waiting: true, thinking: true }), "waiting", "waiting wins over thinking");
  eq(sessionState(info, {}, now, { thinking: true }), "thinking", "thinking");
  eq(sessionState(info, {}, now, { thinking: false }), "idle", "the heartbeat says no turn runs: idle");
  eq(sessionState(info, {}, now, { thinking: false, turnOpen: true }), "idle", "the heartbeat wins over the transcript");
  eq(sessionState(info, {}, now, { turnOpen: true }), "thinking", "no heartbeat yet, a turn under way");
  eq(sessionState(info, {}, now, { turnOpen: false }), "idle", "no heartbeat yet, the last turn done");
  eq(sessionState(info, { lifecycleState: "ended" }, now, { waiting: true }), "ended", "ended");
  eq(sessionState(info, { lifecycleState: "archived" }, now), "archived", "archived");
  eq(sessionState({ activeAt: now - 90_001, createdAt: 0 }, { lifecycleState: "running" }, now, { thinking: false }), "stale", "stale after 90 s");
  eq(sessionState({ activeAt: now - 90_001, createdAt: 0 }, { lifecycleState: "running", lifecycleStateSince: now - 5 }, now), "running", "lifecycleStateSince counts");
  eq(["running", "idle", "thinking", "waiting", "ended", "archived", "stale"].map(isLive), [true, true, true, true, false, false, false], "live states");
});

test("a session nothing runs shows its open tools and unfinished message as interrupted, without changing the transcript", async () => {
  const rd = new Reducer();
  put(rd, 1, ses("ses_root", 1));
  put(rd, 2, msg("msg_a", 1, [textPart("x", "Building."), toolPart("t1", "running"), toolPart("t2", "blocked", { state: { block: { type: "permission", id: "b", permission: "bash", patterns: ["rm x"] } } }), toolPart("t3", "completed", { state: { output: "ok" } })]));
  put(rd, 3, ses("ses_kid", 1, { parentID: "ses_root" }));
  put(rd, 4, msg("msg_k", 1, [toolPart("k1", "pending")], { sid: "ses_kid" }));
  put(rd, 5, msg("msg_done", 1, [textPart("y", "Done.")]).replace('"time":{"created":1}', '"time":{"created":1,"completed":2},"finish":"stop"'));
  const t = rd.transcript();
  const before = JSON.stringify(t);
  const v = stoppedView(t);
  eq(JSON.stringify(t), before, "the transcript is unchanged");
  const tools = (tr) => tr.messages.flatMap((m) => m.parts.filter((p) => p.type === "tool").map((p) => [p.callID, p.state.status, p.state.was ?? null]));
  eq(tools(v), [["call_t1", "interrupted", "running"], ["call_t2", "interrupted", "blocked"], ["call_t3", "completed", null]], "root tools");
  eq(v.children.map(tools), [[["call_k1", "interrupted", "pending"]]], "child tools");
  eq(v.messages.map((m) => [m.info.id, m.info.interrupted ?? false]), [["msg_a", true], ["msg_done", false]], "unfinished message");
  eq(v.messages[1], t.messages[1], "a finished message is shared, not copied");
  eq(blockedTools(v).length, 0, "nothing waits for a person any more");
  const el = r.renderTranscript(v);
  const badges = [...el.querySelectorAll('[data-part="tool"]')].map((n) => [n.dataset.callId, n.dataset.status, n.querySelector(".badge").textContent]);
  eq(badges.slice(0, 3), [["call_t1", "interrupted", INTERRUPTED_TOOL], ["call_t2", "interrupted", INTERRUPTED_TOOL], ["call_t3", "completed", "completed"]], "badges");
  eq(INTERRUPTED_TOOL, "interrupted (its happy stopped)", "happy log's words (export.InterruptedTool)");
  eq(el.querySelector('[data-call-id="call_t2"] .resolved').textContent, "was waiting for permission: bash", "the wait it was in");
  eq(el.querySelector('[data-call-id="call_t2"] button'), null, "no controls");
  eq([...el.querySelectorAll('[data-part="interrupted"]')].map((n) => [n.closest("article").dataset.message, n.textContent]), [["msg_a", INTERRUPTED_MESSAGE]], "the message's line");
});

// refView is what the web app shows of a transcript, for comparing its
// projection of a reference session with the CLI's.
function refView(t) {
  const sorted = (v) => Array.isArray(v) ? v.map(sorted) : v !== null && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v;
  return {
    session: { id: t.session.id, title: t.session.title ?? "", parentID: t.session.parentID ?? "" },
    messages: t.messages.map((m) => ({
      id: m.info.id, role: m.info.role, parentID: m.info.parentID ?? "", finish: m.info.finish ?? "", completed: m.info.time?.completed ?? null,
      parts: m.parts.map((p) => ({ id: p.id, type: p.type, text: p.text ?? null, synthetic: p.synthetic ?? false, mime: p.mime ?? null, url: p.url ?? null,
        tool: p.tool ?? null, callID: p.callID ?? null, status: p.state?.status ?? null, input: sorted(p.state?.input ?? null), output: p.state?.output ?? null,
        error: p.state?.error ?? null, title: p.state?.title || null, child: p.state?.metadata?.sessionId ?? null,
        decision: p.state?.block?.decision ?? null, blockReason: p.state?.block?.reason ?? null, blockID: p.state?.block?.id ?? null,
        patterns: p.state?.block?.patterns?.length ? p.state.block.patterns : null, providerTool: p.metadata?.providerTool ?? null })),
    })),
    children: t.children.map(refView),
    dropped: t.dropped.map((d) => [d.line ?? 0, d.kind ?? "", d.reason, d.detail ?? ""]),
  };
}

test("a reference session's rows are projected as the CLI projects them (session/refimport)", async () => {
  ok(fx.refimport.length >= 4, "the importer's cases are present");
  for (const c of fx.refimport) {
    const rd = new Reducer(c.root);
    for (const r of c.rows) rd.add(r.seq, r.localId, r.text);
    rd.setAgentState(c.agentState);
    ok(rd.imported(), `${c.name}: read as a reference session`);
    eq(refView(rd.transcript()), refView(c.want), c.name);
    const el = r.renderTranscript(rd.transcript());
    const first = c.want.messages[0]?.parts[0]?.text ?? "";
    ok(first === "" || el.textContent.includes(first.split("\n")[0]), `${c.name}: the pane shows the first prompt`);
    eq(el.querySelectorAll('[data-part="tool"]').length, c.want.messages.flatMap((m) => m.parts).filter((p) => p.type === "tool").length, `${c.name}: the pane shows every tool`);
  }
  const rd = new Reducer({ id: "s1", directory: "/w" });
  rd.add(1, "legacy:e1.1", JSON.stringify({ role: "session", content: { id: "e1", time: 1, role: "user", ev: { t: "text", text: "hi" } } }));
  rd.add(2, "s1.1", JSON.stringify({ kind: "session", version: 1, session: { id: "s1", title: "t" } }));
  eq([rd.imported(), rd.transcript().messages.length, rd.legacy], [false, 0, 1], "with canonical records the legacy rows are companions");
  eq([sessionTitle({ path: "/w/proj" }, "Fix it"), sessionTitle({ path: "/w/proj", summary: { text: "Named" } }, "Fix it"), sessionTitle({ path: "/w/proj" }, " ")],
    ["Fix it", "Named", "proj"], "an untitled reference session is titled by its first prompt");
});

test("lifecycle states and titles are those of happy sessions (app.State, Opened.Title)", async () => {
  for (const [i, v] of fx.states.entries()) eq(lifecycleState(v.info, v.metadata, v.now), v.want, `states[${i}] ${JSON.stringify(v.metadata)}`);
  for (const [i, v] of fx.titles.entries()) eq(sessionTitle(v.metadata), v.want, `titles[${i}] ${JSON.stringify(v.metadata)}`);
  eq(fx.titles.map((v) => v.want).slice(0, 3), ["fix the login page", "project", "project"], "the Go side's titles");
  eq([pathBase(""), pathBase("/"), pathBase("a/b//"), pathBase("x")], [".", "/", "b", "x"], "pathBase");
});

test("a turn is open while its prompt waits or its answer is not complete", async () => {
  const t = (messages) => ({ messages });
  const u = { info: { id: "u", role: "user", sessionID: "s" }, parts: [] };
  const a = (time, error) => ({ info: { id: "a", role: "assistant", sessionID: "s", time, ...(error ? { error } : {}) }, parts: [] });
  eq([turnOpen(t([])), turnOpen(t([u])), turnOpen(t([u, a({ created: 1 })])), turnOpen(t([u, a({ created: 1, completed: 2 })])), turnOpen(t([u, a({ created: 1 }, { name: "x" })])), turnOpen(null)],
    [false, true, true, false, false, false], "turnOpen");
});

// ---- Markdown ----

test("markdown escapes everything and links only safe URLs", async () => {
  const cases = [
    ["<script>alert(1)</script>", '<div class="md"><p>&lt;script&gt;alert(1)&lt;/script&gt;</p></div>'],
    ['<img src=x onerror="alert(1)">', '<div class="md"><p>&lt;img src=x onerror="alert(1)"&gt;</p></div>'],
    ["[x](javascript:alert(1))", '<div class="md"><p>[x](javascript:alert(1))</p></div>'],
    ["[x](https://a.example/?q=<b>)", '<div class="md"><p>[x](https://a.example/?q=&lt;b&gt;)</p></div>'],
    ["[docs](https://a.example/d)", '<div class="md"><p><a href="https://a.example/d" rel="noopener noreferrer nofollow" target="_blank">docs</a></p></div>'],
    ["```html\n<b>&amp;</b>\n```", '<div class="md"><pre><code data-lang="html">&lt;b&gt;&amp;amp;&lt;/b&gt;</code></pre></div>'],
    ["`<i>`", '<div class="md"><p><code>&lt;i&gt;</code></p></div>'],
    ["**bold** and *it* and _it2_ and ~~no~~ and snake_case_name", '<div class="md"><p><strong>bold</strong> and <em>it</em> and <em>it2</em> and <del>no</del> and snake_case_name</p></div>'],
    ["# Title\n\n- a\n- b <c>\n\n1. one\n2. two", '<div class="md"><h3>Title</h3><ul><li>a</li><li>b &lt;c&gt;</li></ul><ol><li>one</li><li>two</li></ol></div>'],
    ["> quoted\n\n---\nline1\nline2", '<div class="md"><blockquote><p>quoted</p></blockquote><hr><p>line1<br>line2</p></div>'],
    ["see https://x.example/a.", '<div class="md"><p>see <a href="https://x.example/a" rel="noopener noreferrer nofollow" target="_blank">https://x.example/a</a>.</p></div>'],
    ["[https://a.example **b**](https://c.example)", '<div class="md"><p><a href="https://c.example" rel="noopener noreferrer nofollow" target="_blank">https://a.example <strong>b</strong></a></p></div>'],
    ["Done. Created `hello.txt` with \"hello world\".", '<div class="md"><p>Done. Created <code>hello.txt</code> with "hello world".</p></div>'],
  ];
  for (const [src, want] of cases) eq(html(renderMarkdown(src)), want, JSON.stringify(src));
  eq([safeHref("https://a"), safeHref("mailto:a@b"), safeHref("javascript:x"), safeHref("data:text/html,x"), safeHref("//evil")], ["https://a", "mailto:a@b", "", "", ""], "safeHref");
  const div = renderMarkdown("<b onclick=x>hi</b>");
  eq(div.querySelectorAll("b").length, 0, "no element from input");
});

// ---- rendering ----

test("each part type renders, unknown ones visibly", async () => {
  const parts = [
    { type: "text", text: "hello *you*" },
    { type: "reasoning", text: "thinking hard", time: { start: 1 } },
    { type: "file", mime: "image/png", filename: "a.png", url: "data:," },
    { type: "step-start" },
    { type: "step-finish", reason: "stop", cost: 0.0023, tokens: { input: 4600, output: 45, reasoning: 0, cache: { read: 4200, write: 400 } } },
    { type: "step-finish", reason: "length", cost: 0.0023, tokens: { input: 4600, output: 45, reasoning: 0, cache: { read: 4200, write: 400 } } },
    { type: "subtask", prompt: "p", description: "find things", agent: "explore" },
    { type: "agent", name: "build" },
    { type: "snapshot", snapshot: "abc" },
    { type: "patch", hash: "h1", files: ["a.go", "b.go"] },
    { type: "compaction", auto: true },
    { type: "retry", attempt: 2, error: { message: "overloaded" }, time: { created: 1 } },
    { type: "future-thing" },
  ];
  const got = parts.map((p) => { const n = r.renderPart(p); return n ? [n.dataset.part, n.textContent] : null; });
  eq(got, [
    ["text", "hello you"],
    ["reasoning", "reasoningthinking hard"],
    ["file", "a.png"],
    null,
    null,
    ["step-finish", "step ended: length · tokens: 4.6k in · 45 out · 4.2k cache read · 400 cache write · cost $0.0023"],
    ["subtask", "subtask (explore): find things"],
    ["agent", "agent build"],
    ["snapshot", "snapshot abc"],
    ["patch", "patch h1: a.go, b.go"],
    ["compaction", "context compacted automatically"],
    ["retry", "retry 2: overloaded"],
    ["unknown", 'unknown part type "future-thing"'],
  ], "parts");
  const reasoning = r.renderPart(parts[1]);
  eq([reasoning.tagName, reasoning.open], ["DETAILS", false], "reasoning is collapsed");
});

test("tool states render with status, input, output, error and resolved decisions", async () => {
  const cases = [
    [toolPart("a", "pending", { state: { raw: "" } }), "pending", "pendingbash$ ls"],
    [toolPart("b", "running", { state: { time: { start: 1 } } }), "running", "runningbash$ ls"],
    [toolPart("c", "completed", { state: { output: "file1\nfile2", title: "", time: { start: 1, end: 2 } } }), "completed", "completedbash$ lsfile1\nfile2"],
    [toolPart("d", "error", { state: { error: "exit 1", time: { start: 1, end: 2 } } }), "error", "errorbash$ lsexit 1"],
    [toolPart("e", "completed", { state: { output: "ok", title: "", block: { type: "permission", decision: "once", decidedAt: 1 } } }), "completed", "completedbash$ lsallowed onceok"],
    [toolPart("f", "error", { state: { error: "rejected", block: { type: "permission", decision: "reject", reason: "timeout" } } }), "error", "errorbash$ lsdenied (timeout)rejected"],
    [toolPart("g", "completed", { state: { output: "", title: "", block: { type: "permission", decision: "always", reason: "rule", rule: { permission: "bash", pattern: "ls*", action: "allow" } } } }), "completed", "completedbash$ lsallowed always (rule) by rule bash:ls*"],
    [toolPart("h", "completed", { tool: "question", input: { questions: [{ question: "Which DB?" }] }, state: { output: "PostgreSQL", title: "", block: { type: "question", answers: [["PostgreSQL"]] } } }), "completed", "completedquestionWhich DB?answered: PostgreSQLPostgreSQL"],
    [toolPart("j", "running", { state: { title: "List files" } }), "running", "runningbashList files$ ls"],
    [toolPart("m", "running", { tool: "question", input: { questions: [{ question: "Q1" }, { question: "Q2" }] }, state: { title: "question" } }), "running", "runningquestionQ1Q2"],
    [toolPart("k", "running", { tool: "grep", input: { pattern: "TODO" } }), "running", 'runninggrepTODO{\n  "pattern": "TODO"\n}'],
    [toolPart("i", "running", { tool: "read", input: { path: "a.go", offset: 10, limit: 5 } }), "running", "runningreada.go from line 10 (5 lines)"],
  ];
  for (const [part, status, text] of cases) {
    const n = r.renderTool(part);
    eq([n.dataset.status, n.textContent], [status, text], part.id);
  }
});

test("edit shows a diff, long output folds, todo dock and dropped rows show", async () => {
  const edit = r.renderTool(toolPart("e", "running", { tool: "edit", input: { path: "a.txt", oldString: "old", newString: "new" } }));
  eq([...edit.querySelectorAll(".diff span")].map((s) => [s.className, s.textContent]), [["del", "-old\n"], ["add", "+new\n"]], "two-sided diff");
  const udiff = r.renderTool(toolPart("u", "running", { tool: "edit", input: { path: "a.txt", oldString: "", newString: "", diff: "@@ -1 +1 @@\n-a\n+b" } }));
  eq([...udiff.querySelectorAll(".diff span")].map((s) => s.className), ["hunk", "del", "add"], "unified diff");
  const long = Array.from({ length: 50 }, (_, i) => "line " + i).join("\n");
  const out = r.renderTool(toolPart("l", "completed", { state: { output: long, title: "" } }));
  const fold = out.querySelector("details.fold");
  ok(fold && !fold.open, "long output folded");
  eq(fold.querySelector(".more").textContent, "show all 50 lines (389 characters)", "fold label");
  const t = { session: { id: "ses_root" }, messages: [], children: [], todos: [{ content: "write tests", status: "in_progress", priority: "high" }, { content: "ship", status: "pending", priority: "low" }], dropped: [{ source: "relay", line: 4, kind: "message", reason: "decrypt_failed", detail: "authentication failed" }] };
  const view = r.renderTranscript(t);
  eq([...view.querySelectorAll(".todo-dock li")].map((li) => [li.dataset.status, li.textContent]), [["in_progress", "◐ write tests"], ["pending", "○ ship"]], "todo dock");
  eq(view.querySelector(".dropped").textContent, "⚠ a record was dropped (decrypt_failed, message, record 4): authentication failed", "dropped row");
});

test("a refused control input reads as refused, a dropped record as dropped", () => {
  const refused = r.renderDropped({ source: "control", kind: "prompt", reason: "replayed", detail: "id ab was used before" });
  eq([refused.dataset.part, refused.dataset.reason, refused.textContent], ["refused", "replayed", "⚠ a prompt was refused and not acted on (replayed): id ab was used before"], "prompt");
  const call = r.renderDropped({ source: "control", kind: "permission", reason: "wrong_target", detail: "sealed for x" });
  eq(call.textContent, "⚠ a permission call was refused and not acted on (wrong_target): sealed for x", "rpc");
  const dropped = r.renderDropped({ source: "relay", kind: "message", reason: "decrypt_failed", line: 4, detail: "bad" });
  eq([dropped.dataset.part, dropped.textContent], ["dropped", "⚠ a record was dropped (decrypt_failed, message, record 4): bad"], "other");
});

test("a blocked permission offers Allow once / Always / Deny with a reason", async () => {
  const part = toolPart("p", "blocked", { state: { block: { type: "permission", id: "b1", permission: "bash", patterns: ["rm -rf build"] } } });
  const calls = [];
  const n = r.renderTool(part, { canControl: true, onDecide: (p, d, reason) => calls.push([p.callID, d, reason]) });
  eq([...n.querySelectorAll("button")].map((b) => [b.dataset.decision, b.textContent]), [["once", "Allow once"], ["always", "Always"], ["reject", "Deny"]], "buttons");
  n.querySelector("input.reason").value = " not now ";
  n.querySelector('button[data-decision="reject"]').click();
  n.querySelector('button[data-decision="once"]').click();
  eq(calls, [["call_p", "reject", "not now"], ["call_p", "once", ""]], "decisions");
  const readOnly = r.renderTool(part, { canControl: false });
  eq(readOnly.querySelectorAll("button").length, 0, "no buttons when the session cannot be controlled");
  const withNotice = r.renderTool(part, { canControl: true, notices: new Map([["call_p", "Already answered elsewhere"]]) });
  eq(withNotice.querySelector(".notice").textContent, "Already answered elsewhere", "stale notice");
});

test("a blocked question offers its options, multiple choice and a custom answer", async () => {
  const part = toolPart("q", "blocked", { tool: "question", input: {}, state: { block: { type: "question", id: "q1", questions: [
    { question: "Which database?", header: "DB", options: [{ label: "PostgreSQL", description: "big" }, { label: "SQLite", description: "small" }] },
    { question: "Which extras?", header: "Extras", multiple: true, custom: false, options: [{ label: "cache", description: "" }, { label: "queue", description: "" }] },
  ] } } });
  const calls = [];
  const n = r.renderTool(part, { canControl: true, onAnswer: (p, answers) => calls.push([p.callID, answers]) });
  const inputs = [...n.querySelectorAll("fieldset")].map((f) => [...f.querySelectorAll("input")].map((i) => i.type));
  eq(inputs, [["radio", "radio", "text"], ["checkbox", "checkbox"]], "inputs");
  n.querySelectorAll("fieldset")[0].querySelector('input[value="SQLite"]').click();
  n.querySelectorAll("fieldset")[0].querySelector("input.custom").value = "DuckDB";
  for (const cb of n.querySelectorAll("fieldset")[1].querySelectorAll("input")) cb.click();
  n.querySelector("button.allow").click();
  eq(calls, [["call_q", [["SQLite", "DuckDB"], ["cache", "queue"]]]], "answers");
});

test("a task tool expands its child session in place", async () => {
  const child = { session: { id: "ses_kid", parentID: "ses_root", title: "Find endpoints" }, messages: [{ info: { id: "msg_k", role: "assistant", sessionID: "ses_kid" }, parts: [{ type: "text", text: "found 3" }] }], children: [], todos: [], dropped: [] };
  const task = toolPart("t", "completed", { tool: "task", input: { description: "Find endpoints", prompt: "look" }, state: { output: "done", title: "", metadata: { sessionId: "ses_kid" } } });
  const t = { session: { id: "ses_root" }, messages: [{ info: { id: "msg_1", role: "assistant", sessionID: "ses_root" }, parts: [task] }], children: [child], todos: [], dropped: [] };
  const view = r.renderTranscript(t);
  const d = view.querySelector("details.child");
  eq([d.dataset.child, d.open, d.querySelector("summary").textContent], ["ses_kid", false, "Find endpoints · 1 messages"], "collapsed child");
  d.open = true;
  await new Promise((res) => setTimeout(res, 0));
  eq(d.querySelector('[data-message="msg_k"]')?.textContent, "found 3", "child transcript shown in place");
  eq(r.partsSummary(t), [{ role: "assistant", type: "tool", tool: "task", status: "completed" }], "summary");
});

test("a re-render keeps typed text, picked options, focus and open sections", async () => {
  const reasoning = { id: "r1", type: "reasoning", text: "hmm" };
  const perm = toolPart("p", "blocked", { state: { block: { type: "permission", permission: "bash", patterns: ["ls"] } } });
  const q = toolPart("q", "blocked", { tool: "question", input: {}, state: { block: { type: "question", questions: [{ question: "Pick", options: [{ label: "a" }, { label: "b" }] }] } } });
  const t = (extra = []) => ({ session: { id: "s" }, messages: [{ info: { id: "m1", role: "assistant", sessionID: "s" }, parts: [reasoning, perm, q] }, ...extra], children: [], todos: [], dropped: [] });
  const box = document.createElement("div");
  document.body.append(box);
  box.append(r.renderTranscript(t(), { canControl: true }));
  box.querySelector("details.reasoning").open = true;
  box.querySelector("input.reason").value = "because";
  box.querySelector('input[value="b"]').checked = true;
  box.querySelector("input.custom").focus();
  const kept = r.snapshotUI(box);
  box.replaceChildren(r.renderTranscript(t([{ info: { id: "m2", role: "assistant", sessionID: "s" }, parts: [{ type: "text", text: "more" }] }]), { canControl: true }));
  r.restoreUI(box, kept);
  eq([box.querySelector("details.reasoning").open, box.querySelector("input.reason").value, box.querySelector('input[value="b"]').checked, box.querySelector('input[value="a"]').checked, document.activeElement === box.querySelector("input.custom")],
    [true, "because", true, false, true], "kept");
  box.remove();
});

test("usage line and assistant message usage", async () => {
  eq(r.usageLine({ input: 1234, output: 340 }, 0.0123), "tokens: 1.2k in · 340 out · cost $0.01", "the labelled line");
  eq(r.usageLine({ input: 4200, output: 340, reasoning: 12, cache: { read: 3800, write: 400 } }, 0.0087),
    "tokens: 4.2k in · 340 out · 12 reasoning · 3.8k cache read · 400 cache write · cost $0.0087", "every part");
  eq(r.usageLine(undefined, undefined), "", "no usage");
  eq(r.usageLine(undefined, 0), "cost $0.00", "cost only");
  eq([0, 999, 1000, 1049, 1050, 9949, 9950, 12_345, 999_499, 999_500, 1_500_000, 25_000_000, -1, undefined].map(r.compactCount),
    ["0", "999", "1k", "1k", "1.1k", "9.9k", "10k", "12k", "999k", "1M", "1.5M", "25M", "0", "0"], "compact counts");
  const m = r.renderMessage({ info: { id: "m", role: "assistant", sessionID: "s", cost: 0.5, tokens: { input: 1, output: 2, cache: {} } }, parts: [] });
  eq([m.querySelector(".usage").textContent, m.querySelector(".usage").title], ["tokens: 1 in · 2 out · cost $0.50", "input 1, output 2, cost $0.5"], "message usage");
});

test("a prompt from another device shows its receipts under it", async () => {
  const user = (time) => ({ id: "u", role: "user", sessionID: "s", time });
  eq(receipt(user({ created: 1000 })), null, "typed where the agent runs");
  eq(receipt({ id: "a", role: "assistant", sessionID: "s", time: { created: 1, received: 1 } }), null, "an assistant message");
  const cases = [
    [{ created: 1000, received: 1000 }, "received", "✓ stored · received"],
    [{ created: 1000, received: 1000, handed: 1100 }, "handed", "✓ stored · received · handed"],
    [{ created: 1000, received: 1000, handed: 1100, started: 2200 }, "started", "✓ stored · received · started 1.2s later"],
    [{ created: 1000, received: 1000, handed: 31000, started: 31500 }, "started", "✓ stored · received · handed 30.0s later · started 30.5s later"],
    [{ created: 1000, received: 1000, handed: 185000 }, "handed", "✓ stored · received · handed 3m4s later"],
    [{ created: 1000, received: 5000, handed: 5000, started: 4000 }, "started", "✓ stored · received · started 0.0s later"],
  ];
  for (const [time, step, line] of cases) {
    const rc = receipt(user(time));
    eq([rc.step, r.receiptLine(rc)], [step, line], JSON.stringify(time));
  }
  const m = r.renderMessage({ info: user({ created: 1000, received: 1000, handed: 1100, started: 2200 }), parts: [{ id: "p", type: "text", text: "go" }] });
  const tick = m.querySelector("[data-part=receipt]");
  eq([tick?.textContent, tick?.dataset.step, m.lastElementChild === tick], ["✓ stored · received · started 1.2s later", "started", true], "ticks under the message");
  eq(r.renderMessage({ info: user({ created: 1000 }), parts: [] }).querySelector("[data-part=receipt]"), null, "no ticks on a prompt typed where the agent runs");
});

test("icons are SVG, never emoji", async () => {
  const pictographic = /\p{Extended_Pictographic}/u;
  for (const name of ["attach", "image", "file", "more"]) {
    const i = r.icon(name);
    eq([i.namespaceURI, i.tagName, i.getAttribute("aria-hidden"), i.querySelectorAll("path").length > 0], ["http://www.w3.org/2000/svg", "svg", "true", true], name);
  }
  const f = r.renderPart({ type: "file", mime: "image/png", filename: "a.png", url: "https://x/a.png" });
  ok(!pictographic.test(f.textContent) && f.querySelector("svg.icon"), `file part ${JSON.stringify(f.textContent)}`);
});

test("an unreachable relay is said in words a person can act on", async () => {
  const want = "Can't reach the relay at http://192.168.1.5:3005. Is it running? Start it with \"happy server\" on its computer, or check that this device can reach that address.";
  eq(unreachableMessage("http://192.168.1.5:3005", "192.168.1.5"), want, "LAN relay");
  eq(unreachableMessage("http://127.0.0.1:3005", "192.168.1.5"),
    "Can't reach the relay at http://127.0.0.1:3005. Is it running? Start it with \"happy server\" on its computer, or check that this device can reach that address. 127.0.0.1 is the device the page runs on: from a phone, use an address of the computer that runs the relay.", "loopback relay, page from elsewhere");
  eq(unreachableMessage("http://localhost:3005", "127.0.0.1").endsWith("that address."), true, "loopback page and relay: no note");
  // A fetch that fails says so, with the flag main.js shows the banner for.
  const relay = new Relay("http://127.0.0.1:1");
  const realFetch = globalThis.fetch;
  globalThis.fetch = async () => { throw new TypeError("Failed to fetch"); };
  let err = null;
  try { await relay.sessions(); } catch (e) { err = e; } finally { globalThis.fetch = realFetch; }
  eq([err?.name, err?.status, err?.unreachable, err?.message.startsWith("Can't reach the relay at http://127.0.0.1:1. Is it running?")], ["RelayError", 0, true, true], "fetch failure");
});

test("a prompt the relay stored but did not confirm is posted again as the same row, never as a new prompt", async () => {
  const relay = new Relay("http://127.0.0.1:1", "tok");
  const realFetch = globalThis.fetch;
  const stored = new Map(); // localId -> {seq, content}
  const posts = [];
  let lies = 0;
  let other = null; // a row someone else stored first
  globalThis.fetch = async (url, init) => {
    const u = new URL(url);
    const json = (status, v) => new Response(JSON.stringify(v), { status, headers: { "Content-Type": "application/json" } });
    if (init.method === "POST") {
      const { messages: [m] } = JSON.parse(init.body);
      posts.push(m.localId);
      let row = stored.get(m.localId), fresh = false;
      if (!row) { row = { seq: stored.size + 1, content: other ?? m.content }; stored.set(m.localId, row); fresh = other === null; }
      if (lies > 0) { lies--; return json(502, { error: "Bad gateway" }); }
      return json(200, { messages: [{ id: "r" + row.seq, seq: row.seq, localId: m.localId, new: fresh }] });
    }
    const after = Number(u.searchParams.get("after_seq"));
    const rows = [...stored.entries()].filter(([, r]) => r.seq > after).map(([localId, r]) => ({ seq: r.seq, localId, content: { t: "encrypted", c: r.content } }));
    return json(200, { messages: rows.slice(0, 1), hasMore: false });
  };
  try {
    lies = 1;
    const m = await relay.postPrompt("s1", { content: "AAA", localId: "msg_1.1" }, [0, 0, 0]);
    eq([m.seq, m.new, posts], [1, false, ["msg_1.1", "msg_1.1"]], "stored, 502, then the same row again");
    lies = 100;
    let err = null;
    try { await relay.postPrompt("s1", { content: "BBB", localId: "msg_2.1" }, [0, 0, 0]); } catch (e) { err = e; }
    eq([err?.status, err?.message.includes("it may have been stored")], [502, true], "never confirmed");
    eq(posts.filter((p) => p === "msg_2.1").length, 4, "the same row, four times");
    lies = 0;
    other = "EVIL";
    err = null;
    try { await relay.postPrompt("s1", { content: "CCC", localId: "msg_3.1" }, [0]); } catch (e) { err = e; }
    eq(err?.message, "The relay holds another row under msg_3.1: the prompt was not stored.", "a row someone else stored first");
  } finally {
    globalThis.fetch = realFetch;
  }
});

// fakeSock answers update-metadata as the relay does: compare-and-set
// against its own version, with version-mismatch carrying its value.
function fakeSock(store, { reply } = {}) {
  const calls = [];
  return {
    calls,
    timeout: () => ({
      emitWithAck: async (event, p) => {
        calls.push({ event, ...p });
        if (reply) return reply(p);
        if (p.expectedVersion !== store.version) return { result: "version-mismatch", version: store.version, metadata: store.metadata };
        store.version++;
        store.metadata = p.metadata;
        return { result: "success", version: store.version, metadata: p.metadata };
      },
    }),
  };
}

test("archive writes the lifecycle fields by compare-and-set, then POST archive; delete and archive refuse a running session", async () => {
  const cipher = c.legacyCipher(c.randomBytes(32));
  const now = 5_000_000;
  const ended = { lifecycleState: "ended", lifecycleStateSince: 1, path: "/p", claudeSessionId: "c1", extra: { kept: true } };
  // Someone else wrote version 4 in between: the archive adopts it and keeps its fields.
  const store = { version: 4, metadata: await c.sealJSON(cipher, { ...ended, summary: { text: "newer" } }) };
  const sock = fakeSock(store);
  const posted = [];
  const relay = { archive: async (sid) => posted.push(["archive", sid]), deleteSession: async (sid) => posted.push(["delete", sid]) };
  const s = { info: { id: "sid1", activeAt: now - 1000, createdAt: 0, metadataVersion: 3 }, md: ended, cipher };
  eq(await archiveSession(relay, sock, s, now), true, "archived");
  eq(sock.calls.map((x) => [x.event, x.sid, x.expectedVersion]), [["update-metadata", "sid1", 3], ["update-metadata", "sid1", 4]], "two attempts");
  eq(await c.openJSON(cipher, store.metadata), { ...ended, summary: { text: "newer" }, lifecycleState: "archived", lifecycleStateSince: now, archivedBy: "web", archiveReason: "user", lastActivityAt: now - 1000 }, "stored metadata");
  eq(lastActivity({ info: { updatedAt: now + 5, activeAt: now - 1000 }, md: s.md }), now - 1000, "an archived session keeps its last activity, not the archive's write");
  eq(lastActivity({ info: { updatedAt: 3, activeAt: 9 }, md: { lifecycleState: "ended" } }), 9, "any other: the latest of updatedAt and activeAt");
  eq(posted, [["archive", "sid1"]], "POST archive after the metadata");
  eq([s.md.lifecycleState, s.info.metadataVersion], ["archived", 5], "the page's copy");
  eq(await archiveSession(relay, sock, s, now), false, "archived already: left as it is");
  eq(posted.length, 1, "nothing posted for an archived session");
  eq(archiveFields(null, 7), { lifecycleState: "archived", lifecycleStateSince: 7, archivedBy: "web", archiveReason: "user" }, "from nothing");

  // A running session (fresh heartbeat) is refused by both, and nothing is sent.
  const running = { info: { id: "sid2", activeAt: now - 1000, createdAt: 0, metadataVersion: 1 }, md: { lifecycleState: "running" }, cipher };
  for (const [what, fn] of [["archive", () => archiveSession(relay, sock, running, now)], ["delete", () => deleteSession(relay, running, now)]]) {
    let err = null;
    try { await fn(); } catch (e) { err = e; }
    eq([err instanceof SessionActionError, err?.reason, err?.message], [true, "running", RUNNING_MESSAGE], what);
  }
  eq([sock.calls.length, posted.length], [2, 1], "nothing sent for the running session");
  // Stale is over: delete goes through.
  await deleteSession(relay, { ...running, info: { ...running.info, activeAt: now - 90_001 } }, now);
  eq(posted[1], ["delete", "sid2"], "stale session deleted");

  // The relay's refusal and a lost race are errors with the reason.
  let err = null;
  try { await updateSessionMetadata(fakeSock(null, { reply: () => ({ result: "error", message: "Session not found" }) }), cipher, "x", {}, 1, (m) => m); } catch (e) { err = e; }
  eq([err?.reason, err?.message], ["relay", "update-metadata: Session not found"], "refused");
  err = null;
  const busy = fakeSock(null, { reply: (p) => ({ result: "version-mismatch", version: p.expectedVersion + 1, metadata: null }) });
  try { await updateSessionMetadata(busy, cipher, "x", {}, 1, (m) => m, { pauseMs: 0 }); } catch (e) { err = e; }
  eq([err?.reason, busy.calls.length], ["conflict", MAX_CAS_ATTEMPTS], "lost every time");
});

test("resume goes to the daemon of the machine that ran the session, and the form suggests its folders", async () => {
  const now = 9_000_000;
  const machine = { id: "m1", host: "box", online: true, lastSeen: now - 1000, cipher: {}, happyHomeDir: "/home/u/.happy", daemon: { sessions: [{ directory: "/home/u/daemon" }, { directory: "/home/u/a" }] } };
  const md = { lifecycleState: "ended", flavor: "claude", claudeSessionId: "c1", machineId: "m1", happyHomeDir: "/home/u/.happy", path: "/home/u/a" };
  const s = (over = {}, info = {}) => ({ info: { id: "sid", activeAt: now - 1000, createdAt: 0, ...info }, md: { ...md, ...over } });
  eq(resumeTarget(s(), [machine], now), { machine, params: { type: "spawn-in-directory", directory: "", agent: "claude", resumeSessionId: "sid" } }, "resumable");
  const why = (x, ms = [machine]) => resumeTarget(x, ms, now).reason;
  eq([
    why(s({ lifecycleState: "running" })),
    why(s({ flavor: "codex" })),
    why(s({ claudeSessionId: "" })),
    why(s({ machineId: undefined })),
    why(s(), []),
    why(s(), [{ ...machine, online: false }]),
    why(s(), [{ ...machine, lastSeen: now - 90_001 }]),
    why(s(), [{ ...machine, cipher: null }]),
    why(s({ happyHomeDir: "/other" })),
    why({ info: { id: "x" }, md: null }),
  ], [
    "it is running",
    "only Claude sessions resume through a daemon; run happy resume sid on its computer",
    "the agent never reported its session id",
    "the session does not name its machine",
    "its machine m1 has no daemon on this account (run happy daemon start there)",
    "box is offline",
    "box is offline",
    "the keys of box do not open",
    "it ran from the happy home /other; the daemon of box runs /home/u/.happy",
    "its metadata cannot be read",
  ], "reasons");
  eq(resumeTarget(s({ lifecycleState: "archived" }), [machine], now).machine === machine, true, "archived resumes");
  eq(resumeTarget(s({ lifecycleState: "running" }, { activeAt: now - 90_001 }), [machine], now).machine === machine, true, "stale resumes");

  const sessions = [
    { info: { updatedAt: 10 }, md: { machineId: "m1", path: "/home/u/old" } },
    { info: { updatedAt: 30, activeAt: 5 }, md: { machineId: "m1", path: "/home/u/a" } },
    { info: { updatedAt: 20 }, md: { machineId: "m2", path: "/elsewhere" } },
    { info: { activeAt: 25 }, md: { machineId: "m1", path: "/home/u/b" } },
    { info: { updatedAt: 1 }, md: { machineId: "m1", path: "/home/u/a" } },
    { info: {}, md: null },
  ];
  eq(recentFolders(sessions, machine), ["/home/u/a", "/home/u/b", "/home/u/old", "/home/u/daemon"], "newest first, each once, then the daemon's");
  eq(recentFolders(sessions, machine, 2), ["/home/u/a", "/home/u/b"], "at most max");
  eq(recentFolders([], { id: "m9" }), [], "none");
});

test("random and mangled rows never throw in reduction or rendering", async () => {
  // A deterministic generator, so a failure repeats.
  let seed = 42;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const good = [
    ses("ses_root", 1), ses("ses_kid", 1, { parentID: "ses_root" }),
    msg("msg_a", 1, [textPart("p", "**hi** <b>"), toolPart("t", "blocked", { state: { block: { type: "question", id: "q", questions: [{ question: "?", options: [{ label: "a" }] }] } } })]),
    msg("msg_b", 2, [toolPart("u", "completed", { tool: "task", state: { output: "x", metadata: { sessionId: "ses_kid" } } }), { type: "reasoning", text: "r" }]),
    JSON.stringify({ kind: "todos", version: 1, sessionID: "ses_root", todos: [{ content: "c", status: "pending", priority: "low" }] }),
  ];
  const junk = ["null", "true", "1", '"s"', "{}", '{"kind":null}', '{"kind":"message","version":1,"info":null,"parts":null}',
    '{"kind":"message","version":1,"info":{"id":"m","role":"assistant","sessionID":"ses_root"},"parts":[{"type":"tool","state":{"status":"blocked","block":{"type":"permission"}}}]}',
    '{"kind":"message","version":1,"info":{"id":"m2","role":"user","sessionID":"ses_root"},"parts":[{"type":"text"},{"type":"file"},{"type":"retry"},{"type":"step-finish","tokens":{}}]}',
    '{"kind":"session","version":1,"session":{"id":"ses_loop","parentID":"ses_loop"}}'];
  for (let round = 0; round < 200; round++) {
    const rd = new Reducer();
    for (let i = 0; i < 12; i++) {
      let row = rnd(3) === 0 ? junk[rnd(junk.length)] : good[rnd(good.length)];
      if (rnd(4) === 0) { const at = rnd(row.length); row = row.slice(0, at) + row.slice(at + 1 + rnd(5)); }
      put(rd, i + 1, row);
    }
    const t = rd.transcript();
    r.renderTranscript(t, { canControl: true });
    blockedTools(t);
  }
});

// ---- wire helpers ----

test("pairing link, prompt envelope and stale RPC errors", async () => {
  const secret = new Uint8Array(32).fill(7);
  const link = parsePairLink("#pair=" + c.b64url(secret) + "&relay=" + encodeURIComponent("http://127.0.0.1:9/"), "http://origin.example");
  eq([c.hex(link.secret), link.relay], [c.hex(secret), "http://127.0.0.1:9"], "with relay");
  eq(parsePairLink("#pair=" + c.b64url(secret), "http://origin.example").relay, "http://origin.example", "relay defaults to the origin");
  eq(parsePairLink("#/s/x", "http://o"), null, "not a pairing link");
  let refused = "";
  try { parsePairLink("#pair=AAAA", "http://o"); } catch (e) { refused = e.reason; }
  eq(refused, "bad_length", "short key refused");
  try { parsePairLink("#pair=" + c.b64url(secret) + "&relay=javascript:x", "http://o"); refused = ""; } catch (e) { refused = e.reason; }
  eq(refused, "bad_encoding", "non-http relay refused");
  const { id, env } = promptEnvelope("ses_root", "hi", 1753120000000, new Uint8Array([1, 2, 3, 4, 5, 6]));
  eq(id, "msg_1753120000000010203040506", "id");
  eq(env, { kind: "message", version: 1, info: { id, sessionID: "ses_root", role: "user", time: { created: 1753120000000 }, agent: "build", model: { providerID: "", modelID: "" } },
    parts: [{ id: "prt_1753120000000010203040506", sessionID: "ses_root", messageID: id, type: "text", text: "hi" }] }, "envelope");
  eq([new RpcError('no tool call "x" waits for permission; nothing in this session waits for permission now').stale, new RpcError("RPC method not available").stale], [true, false], "stale");
});

test("control inputs are sealed envelopes and answers must be bound to them", () => {
  const rnd = new Uint8Array(16).fill(0xab);
  const env = controlEnvelope("sess1", "permission", { callID: "c1", decision: "once" }, 1800000000000, rnd);
  eq(env, { happyControl: 1, id: "ab".repeat(16), target: "sess1", method: "permission", iat: 1800000000000, params: { callID: "c1", decision: "once" } }, "envelope");
  eq(Object.keys(controlEnvelope("sess1", "prompt", undefined, 1, rnd)).includes("params"), false, "a prompt's envelope has no params");
  const id = env.id;
  eq(openAnswer("permission", { happyControl: 1, re: id, result: { ok: true } }, id), { ok: true }, "a bound answer");
  const refusal = (out) => { try { openAnswer("permission", out, id); return "accepted"; } catch (e) { return e.message; } };
  eq(refusal({ happyControl: 1, re: "cd".repeat(16), result: { ok: true } }).includes("not bound to this call"), true, "an answer to another call");
  eq(refusal({ ok: true }).includes("not bound to this call"), true, "an old plain ok");
  eq(refusal({ happyControl: 1, re: "cd".repeat(16), error: 'no tool call "x" waits for permission' }).includes("not bound to this call"), true, "an error answer of another call");
  eq(refusal({ happyControl: 1, re: id, error: "id x was used before", reason: "replayed" }), "id x was used before (replayed)", "the session's refusal");
  eq(new RpcError(refusal({ happyControl: 1, re: id, error: 'no tool call "x" waits for permission' })).stale, true, "a stale answer stays stale");
});

// ---- devices: pairing code, approval, revocation, machines ----

async function refusal(p) {
  try { await p; } catch (e) { return e; }
  return null;
}

test("pairing codes equal crypto.PairingCode and typed codes parse as crypto.ParsePairingCode does", async () => {
  ok(fx.pairingCodes.length >= 8, "code fixtures present");
  for (const [i, v] of fx.pairingCodes.entries()) eq(await c.pairingCode(b64(v.publicKey)), v.code, `pairingCode[${i}]`);
  eq(await c.pairingCode(b64(fx.terminalPublic)), fx.terminalCode, "terminal code");
  for (const v of fx.parseCodes) {
    let got = "", reason = "";
    try { got = c.parsePairingCode(v.in); } catch (e) { reason = e.reason; }
    eq([got, reason], [v.out, v.reason ?? ""], `parsePairingCode(${JSON.stringify(v.in)})`);
  }
});

test("pairing responses sealed by the page equal crypto.SealPairingResponse's bytes and open", async () => {
  const f = fx.sealFixed, term = b64(fx.terminalPublic), eph = b64(f.ephemeralSecret), nonce = b64(f.nonce);
  eq(c.b64encode(c.sealPairingResponse({ variant: "legacy", secret: b64(fx.accountSecret) }, term, eph, nonce)), f.legacy, "legacy bytes");
  eq(c.b64encode(c.sealPairingResponse({ variant: "dataKey", contentPublicKey: b64(fx.contentPublic) }, term, eph, nonce)), f.dataKey, "dataKey bytes");
  const fresh = c.openPairingResponse(c.sealPairingResponse({ variant: "dataKey", contentPublicKey: b64(fx.contentPublic) }, term), b64(fx.terminalSecret));
  eq([fresh.variant, c.b64encode(fresh.contentPublicKey)], ["dataKey", fx.contentPublic], "fresh seal opens");
  await rejects(Promise.resolve().then(() => c.sealPairingResponse({ variant: "dataKey" }, term)), "unsupported_version", "no content key");
  await rejects(Promise.resolve().then(() => c.sealPairingResponse({ variant: "legacy", secret: new Uint8Array(32) }, new Uint8Array(31))), "bad_length", "short terminal key");
});

test("pairing proofs equal crypto.PairingProof, proven responses crypto.SealPairingResponse's bytes, full codes split as crypto.ParseFullPairingCode", async () => {
  const v = fx.proofVector;
  eq(c.b64encode(await c.pairingProof(v.secret, b64(v.publicKey), b64(v.body))), v.proof, "proof vector");
  const f = fx.sealFixed, term = b64(fx.terminalPublic), eph = b64(f.ephemeralSecret), nonce = b64(f.nonce);
  const legacy = await c.provePairingResponse({ variant: "legacy", secret: b64(fx.accountSecret) }, fx.pairingSecret.toLowerCase(), term);
  const dataKey = await c.provePairingResponse({ variant: "dataKey", contentPublicKey: b64(fx.contentPublic) }, fx.pairingSecret, term);
  eq(c.b64encode(c.sealPairingResponse(legacy, term, eph, nonce)), f.legacyProven, "proven legacy bytes");
  eq(c.b64encode(c.sealPairingResponse(dataKey, term, eph, nonce)), f.dataKeyProven, "proven dataKey bytes");
  const opened = c.openPairingResponse(c.sealPairingResponse(dataKey, term), b64(fx.terminalSecret));
  eq([opened.variant, c.b64encode(opened.contentPublicKey), c.hex(opened.proof)], ["dataKey", fx.contentPublic, c.hex(dataKey.proof)], "proven seal opens");
  await rejects(Promise.resolve().then(() => c.sealPairingResponse({ ...dataKey, proof: new Uint8Array(31) }, term)), "bad_length", "short proof");
  const [code, secret] = [fx.terminalFull.slice(0, 11), fx.terminalFull.slice(12)];
  eq(c.parseFullPairingCode(fx.terminalFull.toLowerCase().replaceAll("-", " ")), { code, secret }, "full code");
  eq(c.parseFullPairingCode(code), { code, secret: "" }, "short code");
  for (const bad of [code + "-ABCDE", fx.terminalFull + "A", ""]) await rejects(Promise.resolve().then(() => c.parseFullPairingCode(bad)), "bad_length", `parseFullPairingCode(${bad})`);
});

test("terminal keys read from the app link, the web link and the bare key", async () => {
  const key = b64(fx.terminalPublic), u = c.b64url(key);
  for (const s of ["happy://terminal?" + u, "https://app.example/terminal/connect#key=" + u + "&x=1", "  " + u + "\n", fx.terminalPublic]) eq(c.hex(c.parseTerminalKey(s)), c.hex(key), `parseTerminalKey(${s.slice(0, 30)}…)`);
  const link = c.parseTerminalLink("happy://terminal?" + u + "&secret=qwert-yuiop");
  eq([c.hex(link.key), link.secret], [c.hex(key), "QWERT-YUIOP"], "happy's approve link");
  eq(c.parseTerminalLink("happy://terminal?" + u).secret, "", "the app's link has no secret");
  await rejects(Promise.resolve().then(() => c.parseTerminalKey("happy://terminal?" + u + "&x=1")), "bad_encoding", "unknown part");
  await rejects(Promise.resolve().then(() => c.parseTerminalKey("happy://terminal?AAAA")), "bad_length", "short key");
  await rejects(Promise.resolve().then(() => c.parseTerminalKey("not a key!")), "bad_encoding", "garbage");
});

// fakeRelay answers the approval routes from a script and records what was posted.
function fakeRelay({ lookup = [], status = null, lookupError = null, revoke = null } = {}) {
  const f = { posted: [], lookups: [] };
  f.lookupPairing = async (code) => { f.lookups.push(code); if (lookupError) throw lookupError; return lookup; };
  f.pairingStatus = async () => status;
  f.authResponse = async (key, bundle) => { f.posted.push({ key, bundle }); };
  f.revoke = async () => { if (revoke instanceof Error) throw revoke; return revoke; };
  return f;
}

test("approveTerminal checks every key's code and seals as relay.ApproveTerminal does", async () => {
  const secret = b64(fx.accountSecret), key = b64(fx.terminalPublic), term = b64(fx.terminalSecret);
  const typed = fx.terminalFull.toLowerCase().replaceAll("-", " ");
  const full = fx.terminalFull;
  // dataKey by default, with the proof of the code's second half
  let f = fakeRelay({ lookup: [{ publicKey: key, supportsV2: true }] });
  let r = await approveTerminal(f, secret, typed);
  eq([r.code, r.variant, r.proven, f.lookups, f.posted.length], [fx.terminalCode, "dataKey", true, [fx.terminalCode], 1], "dataKey approval");
  let opened = c.openPairingResponse(f.posted[0].bundle, term);
  eq([c.hex(f.posted[0].key), opened.variant, c.b64encode(opened.contentPublicKey)], [c.hex(key), "dataKey", fx.contentPublic], "dataKey bundle");
  eq(c.hex(opened.proof), c.hex(await c.pairingProof(fx.pairingSecret, key, c.concat(new Uint8Array([1]), opened.contentPublicKey))), "the proof is crypto.PairingProof's");
  // the code's first half alone proves nothing: refused, nothing asked or sent
  f = fakeRelay({ lookup: [{ publicKey: key, supportsV2: true }] });
  let e = await refusal(approveTerminal(f, secret, fx.terminalCode));
  eq([e?.reason, f.lookups.length, f.posted.length], ["short_code", 0, 0], "short code");
  ok(e.message.includes(fx.terminalCode + "-SSSSS-SSSSS"), "the refusal names the full code: " + e.message);
  // the checkbox, and a terminal without v2, share the secret
  for (const [opts, v2, what] of [[{ legacy: true }, true, "legacy asked"], [{ legacy: true }, false, "legacy asked, no v2"]]) {
    f = fakeRelay({ lookup: [{ publicKey: key, supportsV2: v2 }] });
    r = await approveTerminal(f, secret, full, opts);
    opened = c.openPairingResponse(f.posted[0].bundle, term);
    eq([r.variant, opened.variant, c.b64encode(opened.secret), opened.proof?.length], ["legacy", "legacy", fx.accountSecret, 32], what);
  }
  // a terminal the relay says takes no v2, legacy not asked: refused, nothing sent (a relay could flip the flag)
  for (const lookup of [[{ publicKey: key, supportsV2: false }], [{ publicKey: key }]]) {
    f = fakeRelay({ lookup });
    e = await refusal(approveTerminal(f, secret, full));
    eq([e?.reason, f.posted.length], ["legacy_only", 0], "no v2 without legacy asked");
  }
  f = fakeRelay({ status: { status: "pending", supportsV2: false } });
  eq([(await refusal(approveTerminal(f, secret, "happy://terminal?" + c.b64url(key))))?.reason, f.posted.length], ["legacy_only", 0], "a link whose request takes no v2");
  // a key whose code is not the typed one is refused; nothing is posted
  const other = b64(fx.pairingCodes[0].publicKey);
  for (const [lookup, reason] of [[[{ publicKey: other, supportsV2: true }], "fingerprint"], [[{ publicKey: key, supportsV2: true }, { publicKey: other, supportsV2: true }], "fingerprint"], [[], "not_found"]]) {
    f = fakeRelay({ lookup });
    const e = await refusal(approveTerminal(f, secret, full));
    eq([e instanceof ApproveError, e?.reason, f.posted.length], [true, reason, 0], `refusal ${reason}`);
    if (reason === "fingerprint") ok(e.message.includes(fx.terminalCode) && e.message.includes("nothing was sent"), "the message names the code and says nothing was sent: " + e.message);
  }
  f = fakeRelay({ lookup: [{ publicKey: key, supportsV2: true }, { publicKey: key, supportsV2: true }] });
  eq((await approveTerminal(f, secret, full)).variant, "dataKey", "the same key twice is one request");
  // a relay without the lookup route
  for (const status of [404, 405, 501]) {
    f = fakeRelay({ lookupError: new RelayError(status, "Not found") });
    const e = await refusal(approveTerminal(f, secret, full));
    eq([e?.reason, f.posted.length], ["unsupported", 0], `lookup ${status}`);
  }
  f = fakeRelay({ lookupError: new RelayError(500, "boom") });
  eq((await refusal(approveTerminal(f, secret, full)))?.status, 500, "other relay errors pass through");
  // a pasted link asks the status route instead; the app's link proves nothing
  f = fakeRelay({ status: { status: "pending", supportsV2: true } });
  r = await approveTerminal(f, secret, "happy://terminal?" + c.b64url(key));
  eq([r.code, r.variant, r.proven, f.lookups.length, f.posted.length], [fx.terminalCode, "dataKey", false, 0, 1], "link approval");
  eq(c.openPairingResponse(f.posted[0].bundle, term).proof, undefined, "no proof without the secret");
  f = fakeRelay({ status: { status: "pending", supportsV2: true } });
  r = await approveTerminal(f, secret, "happy://terminal?" + c.b64url(key) + "&secret=" + fx.pairingSecret);
  eq([r.proven, c.openPairingResponse(f.posted[0].bundle, term).proof?.length], [true, 32], "happy's approve link proves the secret");
  f = fakeRelay({ status: { status: "not_found", supportsV2: false } });
  eq((await refusal(approveTerminal(f, secret, c.b64url(key))))?.reason, "not_found", "link of no open request");
  eq((await refusal(approveTerminal(fakeRelay(), secret, "hello")))?.reason, "input", "neither code nor key");
});

test("revokeEverywhere: revoked, or not supported by the relay (local sign-out only)", async () => {
  eq(await revokeEverywhere(fakeRelay({ revoke: { generation: 2, disconnected: 3 } })), { revoked: true, generation: 2, disconnected: 3 }, "revoked");
  for (const status of [404, 405, 501]) {
    const r = await revokeEverywhere(fakeRelay({ revoke: new RelayError(status, "Not found") }));
    eq([r.revoked, /does not support revoking/.test(r.message)], [false, true], `status ${status}`);
  }
  eq((await revokeEverywhere(fakeRelay({ revoke: new RelayError(401, "Invalid token") }))).revoked, false, "401");
  eq((await refusal(revokeEverywhere(fakeRelay({ revoke: new RelayError(0, "cannot reach the relay") }))))?.status, 0, "unreachable relay throws");
});

test("machines sealed by Go decrypt as daemon.Machines reads them", async () => {
  const secret = b64(fx.accountSecret);
  for (const v of fx.machines) {
    const m = await openMachine(v.info, secret, v.now);
    const got = { id: m.id, host: m.host, platform: m.platform, version: m.version, online: m.online, agents: m.agents, daemonStatus: m.daemon?.status ?? null, error: m.error };
    const sorted = (o) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)));
    eq(sorted(got), sorted(v.want), `machine ${v.info.id}`);
  }
  const m = await openMachine({ id: "x", metadata: "!!", active: true, activeAt: 0 }, secret, 0);
  eq([m.id, m.error.startsWith("metadata: "), m.cipher !== null], ["x", true, true], "bad base64");
  eq((await openMachine(null, secret, 0)).error.startsWith("metadata"), true, "null entry");
});

test("spawn params and replies as daemon.SpawnOn and the daemon write them", async () => {
  eq(spawnParams({ directory: " /tmp/p ", agent: "claude", prompt: "hi", createFolder: true }),
    { type: "spawn-in-directory", directory: "/tmp/p", agent: "claude", approvedNewDirectoryCreation: true, prompt: "hi" }, "full");
  eq(spawnParams({ directory: "~/p", agent: "codex", prompt: "  " }), { type: "spawn-in-directory", directory: "~/p", agent: "codex" }, "minimal");
  for (const bad of [{ directory: "rel/p", agent: "claude" }, { directory: "/p", agent: "" }]) {
    let msg = "";
    try { spawnParams(bad); } catch (e) { msg = e.message; }
    ok(msg !== "", "refused: " + JSON.stringify(bad));
  }
  eq(readSpawnReply({ type: "success", sessionId: "s1", pid: 9 }), { kind: "success", sessionId: "s1" }, "success");
  eq(readSpawnReply({ type: "requestToApproveDirectoryCreation", directory: "/new" }), { kind: "ask", directory: "/new" }, "ask");
  eq(readSpawnReply({ type: "error", errorMessage: "unknown agent" }), { kind: "error", message: "unknown agent" }, "error");
  eq(readSpawnReply({ type: "success" }).kind, "error", "success without id");
  eq(readSpawnReply(null).kind, "error", "null");
});

test("a spawn to a machine whose daemon is not connected says so (the relay answers at once)", async () => {
  const cipher = c.legacyCipher(c.randomBytes(32));
  const seen = Date.UTC(2026, 0, 2, 3, 4, 5);
  const machine = { id: "m1", host: "box", cipher, lastSeen: seen };
  const sock = fakeSock(null, { reply: () => ({ ok: false, error: "RPC method not available" }) });
  let err;
  try { await spawnSession(sock, machine, { type: "spawn-in-directory", directory: "/p", agent: "codex" }); } catch (e) { err = e; }
  eq([err?.name, err?.message], ["RpcError", `the daemon of machine box is not running (last seen ${new Date(seen).toLocaleString()})`], "not running");
  eq(sock.calls.map((x) => [x.event, x.method]), [["rpc-call", "m1:spawn-happy-session"]], "one call");
  eq(daemonNotRunning({ id: "m2", lastSeen: 0 }), "the daemon of machine m2 is not running (never seen)", "never seen, no host");
  const other = fakeSock(null, { reply: () => ({ ok: false, error: "operation has timed out" }) });
  err = undefined;
  try { await spawnSession(other, machine, {}); } catch (e) { err = e; }
  eq(err?.message, "spawn-happy-session: operation has timed out", "other refusals unchanged");
});

test("random input never throws anything but the refusals in codes, keys, machines and spawn replies", async () => {
  let seed = 7;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcz234567018-_ +/=#?&:!é";
  const str = (n) => Array.from({ length: rnd(n) }, () => alphabet[rnd(alphabet.length)]).join("");
  const secret = b64(fx.accountSecret);
  const values = [null, undefined, 0, 1, "", "x", [], {}, true, { type: "success" }, { type: "error", errorMessage: 5 }, { type: "requestToApproveDirectoryCreation" }];
  for (let i = 0; i < 300; i++) {
    for (const fn of [() => c.parsePairingCode(str(16)), () => c.parseTerminalKey(["happy://terminal?", "x#key=", ""][rnd(3)] + str(50))]) {
      try { fn(); } catch (e) { ok(e instanceof c.CryptoError, `unexpected ${e.name}: ${e.message}`); }
    }
    const r = readSpawnReply(values[rnd(values.length)]);
    ok(["success", "ask", "error"].includes(r.kind), "spawn reply kind");
    const info = { id: values[rnd(values.length)], metadata: [str(60), fx.machines[0].info.metadata.slice(0, rnd(80)), values[rnd(values.length)]][rnd(3)],
      dataEncryptionKey: [null, str(40), fx.machines[0].info.dataEncryptionKey][rnd(3)], daemonState: [undefined, str(30)][rnd(2)], active: values[rnd(values.length)], activeAt: values[rnd(values.length)] };
    const m = await openMachine(info, secret, 1);
    ok(typeof m.id === "string" && Array.isArray(m.agents) && typeof m.error === "string", "machine shape");
  }
});
// ---- attachments ----

// Pixels that differ by at most one step (Go's and V8's cosines may differ
// in the last bit, which can move a value across a rounding edge).
function near(got, want, what, slack = 1) {
  eq(got.length, want.length, `${what} length`);
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  ok(worst <= slack, `${what}: differs by ${worst} (at most ${slack})`);
}
// Hash bytes whose nibbles differ by at most one quantisation step.
function nearHash(got, want, what) {
  eq(got.length, want.length, `${what} length`);
  for (let i = 0; i < got.length; i++) {
    ok(Math.abs((got[i] & 15) - (want[i] & 15)) <= 1 && Math.abs((got[i] >> 4) - (want[i] >> 4)) <= 1, `${what}: byte ${i} is ${got[i]}, Go wrote ${want[i]}`);
  }
}

test("thumbhash decodes and encodes as internal/thumbhash does", async () => {
  ok(fx.thumbhash.length >= 5, "Go's thumbhash fixtures present");
  for (const v of fx.thumbhash) {
    const what = `${v.kind} ${v.w}x${v.h}`;
    const hash = b64(v.hash);
    nearHash(th.encode(v.w, v.h, b64(v.rgba)), hash, `${what} encode`);
    const d = th.decode(hash);
    eq([d.w, d.h], [v.decoded.w, v.decoded.h], `${what} decoded size`);
    near(d.rgba, b64(v.decoded.rgba), `${what} decoded pixels`);
    ok(Math.abs(th.aspectRatio(hash) - v.ratio) < 1e-12, `${what} ratio`);
  }
  // The reference implementation's vectors (those internal/thumbhash checks against).
  const ref = await (await fetch("/thumbhash-vectors.json")).json();
  for (const v of ref) {
    const d = th.decode(b64(v.hash));
    eq([d.w, d.h], [v.decoded.w, v.decoded.h], `reference ${v.kind} size`);
    near(d.rgba, b64(v.decoded.rgba), `reference ${v.kind} pixels`);
  }
  for (const bad of [new Uint8Array(0), new Uint8Array(4), b64(fx.thumbhash[0].hash).subarray(0, 6)]) {
    let threw = null;
    try { th.decode(bad); } catch (e) { threw = e; }
    ok(threw instanceof th.ThumbHashError, `decode of ${bad.length} bytes throws ThumbHashError (${threw})`);
  }
  let threw = null;
  try { th.encode(101, 1, new Uint8Array(404)); } catch (e) { threw = e; }
  ok(threw instanceof th.ThumbHashError, "encode refuses more than 100 pixels a side");
});

test("attachments are typed by their bytes, never by the name or the browser's claim", async () => {
  const bytes = (...xs) => new Uint8Array(xs.flat().map((x) => (typeof x === "string" ? [...x].map((ch) => ch.charCodeAt(0)) : x)).flat());
  const cases = [
    [bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]), "photo.jpg", "image/png"],
    [bytes([0xff, 0xd8, 0xff, 0xe0]), "x.png", "image/jpeg"],
    [bytes("GIF89a", [1, 0]), "", "image/gif"],
    [bytes("RIFF", [0, 0, 0, 0], "WEBPVP8 "), "a", "image/webp"],
    [c.encodeUtf8("# Title\nhéllo 🌍\n"), "notes.md", "text/markdown"],
    [c.encodeUtf8("{\"a\":1}"), "x.json", "application/json"],
    [c.encodeUtf8("plain\ttext\r\n"), "x.png", "text/plain"],
    [new Uint8Array(0), "empty.txt", "text/plain"],
    [bytes([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), "a.txt", ""],
    [bytes([0x68, 0x69, 0xff, 0xfe]), "bad-utf8.txt", ""],
    [bytes("PK", [3, 4]), "x.zip", ""],
  ];
  eq(cases.map(([b, name]) => sniff(b, name)), cases.map((x) => x[2]), "sniffed types");
  // inspectFile refuses what is neither, and a file over the limit before reading it.
  const lying = new File([c.encodeUtf8("not an image")], "shot.png", { type: "image/png" });
  eq((await inspectFile(lying)).mime, "text/plain", "a text file named .png is text");
  for (const [file, reason, text] of [
    [new File([bytes([0, 1, 2, 3])], "blob.bin", { type: "image/png" }), "unsupported", "blob.bin: only images (PNG, JPEG, GIF, WebP) and text files can be attached"],
    [new File([bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13])], "cut.png"), "bad_image", "cut.png: the image/png image does not decode"],
    [{ name: "huge.png", size: MAX_ATTACHMENT + 1, arrayBuffer: () => { throw new Error("read a file over the limit"); } }, "too_large", `huge.png is 10,485,721 bytes; an attachment is at most 10,485,720 bytes`],
  ]) {
    let err = null;
    try { await inspectFile(file); } catch (e) { err = e; }
    ok(err instanceof AttachError && err.reason === reason && err.message.startsWith(text), `${file.name}: ${err?.reason} ${err?.message}, want ${reason} "${text}"`);
  }
  eq(MAX_ATTACHMENT, 10 * 1024 * 1024 - 40, "the limit is app.MaxAttachmentSize");
  eq([isBlobRef("sessions/s1/attachments/a.enc"), isBlobRef("sessions/s1/attachments/a/b"), isBlobRef("data:,x"), isBlobRef(null)], [true, false, false, false], "blob refs");
});

test("a picked image is measured, hashed, sealed with the session's key and referenced as happy send --file does", async () => {
  // A 6x4 PNG drawn by the browser.
  const canvas = new OffscreenCanvas(6, 4);
  const g = canvas.getContext("2d");
  g.fillStyle = "#c81e5a";
  g.fillRect(0, 0, 6, 4);
  const png = new Uint8Array(await (await canvas.convertToBlob({ type: "image/png" })).arrayBuffer());
  const f = await inspectFile(new File([png], "shot.png", { type: "application/octet-stream" }));
  eq([f.mime, f.width, f.height, f.bytes.length], ["image/png", 6, 4, png.length], "inspected");
  ok(th.decode(b64(f.thumbhash)).w === 32, "a landscape thumbhash");
  const cipher = c.dataKeyCipher(c.randomBytes(32));
  const calls = [];
  const relay = { uploadBlob: async (sid, name, sealed) => { calls.push({ sid, name, sealed }); return `sessions/${sid}/attachments/u1.enc`; } };
  const part = await uploadFile(relay, cipher, "s1", f);
  eq(calls.map((x) => [x.sid, x.name, x.sealed.length]), [["s1", "shot.png", png.length + 29]], "one upload of the ciphertext");
  eq(await cipher.open(calls[0].sealed), png, "the upload opens to the file");
  eq(part, { mime: "image/png", filename: "shot.png", url: "sessions/s1/attachments/u1.enc", source: { type: "blob", size: png.length, sha256: await digest(png), width: 6, height: 4, thumbhash: f.thumbhash } }, "file part");
  eq(await digest(c.encodeUtf8("abc")), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=", "digest is mapper.BlobDigest");
  const { id, env } = promptEnvelope("ses_root", "what is this?", 1700000000000, new Uint8Array([1, 2, 3, 4, 5, 6]), [part, { mime: "text/plain", filename: "n.txt", url: "sessions/s1/attachments/u2.enc", source: blobSource({ bytes: new Uint8Array(3) }) }]);
  eq(env.parts, [
    { id: "prt_1700000000000010203040506", sessionID: "ses_root", messageID: id, type: "text", text: "what is this?" },
    { id: "prt_170000000000001020304050601", sessionID: "ses_root", messageID: id, type: "file", mime: "image/png", url: part.url, filename: "shot.png", source: part.source },
    { id: "prt_170000000000001020304050602", sessionID: "ses_root", messageID: id, type: "file", mime: "text/plain", url: "sessions/s1/attachments/u2.enc", filename: "n.txt", source: { type: "blob", size: 3 } },
  ], "prompt parts");
  eq(promptEnvelope("ses_root", "", 1, new Uint8Array(6), [part]).env.parts.map((p) => p.type), ["file"], "no empty text part beside files");
});

test("blobs sealed by Go open with the session's key, or its blob key for the reference app's", async () => {
  const secret = b64(fx.accountSecret);
  for (const v of fx.blobs) {
    const cipher = await c.sessionCipher(secret, v.dataEncryptionKey);
    const relay = { downloadBlob: async (sid, ref) => b64(ref.endsWith("own.enc") ? v.own : ref.endsWith("ref.enc") ? v.reference : (() => { const e = new Error("Attachment not found"); e.status = 404; throw e; })()) };
    const blobs = new Blobs(relay, cipher, "s1");
    const own = await blobs.get({ url: "sessions/s1/attachments/own.enc", filename: "a.png" });
    eq([own.bytes, own.mime], [b64(v.plain), "image/png"], `${v.variant} own blob`);
    const ref = await blobs.get({ url: "sessions/s1/attachments/ref.enc", source: { type: "blob", size: b64(v.plain).length, key: "blob" } });
    eq(ref.bytes, b64(v.plain), `${v.variant} reference app's blob`);
    // A blob that is not the one its message describes (another blob of the
    // session put under this reference) is refused: by its SHA-256, or by
    // its size when the source has no digest.
    for (const [src, want] of [
      [{ type: "blob", size: b64(v.plain).length, sha256: await digest(c.encodeUtf8("other")) }, "its bytes are not the ones the message references (replaced or damaged on the relay)"],
      [{ type: "blob", size: b64(v.plain).length + 1 }, `it is ${b64(v.plain).length} bytes and the message says ${b64(v.plain).length + 1} (replaced or damaged on the relay)`],
    ]) {
      let swapErr = null;
      try { await new Blobs(relay, cipher, "s1").get({ url: "sessions/s1/attachments/own.enc", source: src }); } catch (e) { swapErr = e; }
      eq([swapErr?.reason, swapErr?.message], ["unavailable", want], `${v.variant} swapped blob`);
    }
    eq((await new Blobs(relay, cipher, "s1").get({ url: "sessions/s1/attachments/own.enc", source: { type: "blob", size: b64(v.plain).length, sha256: await digest(b64(v.plain)) } })).bytes, b64(v.plain), `${v.variant} blob with its digest`);
    ok(own.url.startsWith("blob:") && blobs.state({ url: "sessions/s1/attachments/own.enc" }).url === own.url, "kept as an object URL");
    let err = null;
    try { await blobs.get({ url: "sessions/s1/attachments/ref.enc.x", source: {} }); } catch (e) { err = e; }
    eq([err?.reason, err?.message], ["unavailable", "the relay does not have it"], `${v.variant} missing blob`);
    err = null;
    try { await new Blobs(relay, cipher, "s1").get({ url: "sessions/s1/attachments/ref.enc" }); } catch (e) { err = e; }
    ok(err?.reason === "unavailable" && err.message.startsWith("it does not decrypt with this session's key"), `${v.variant}: the reference blob under the record key: ${err?.message}`);
    blobs.close();
  }
});

test("random hashes, bytes and file parts never throw anything but ThumbHashError", async () => {
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) & 255;
  const good = b64(fx.thumbhash[3].hash);
  for (let i = 0; i < 400; i++) {
    const b = i % 2 ? new Uint8Array(rnd() % 40).map(rnd) : good.map((x, j) => (j === i % good.length ? rnd() : x));
    try {
      const d = th.decode(b);
      ok(d.w >= 1 && d.w <= 32 && d.h >= 1 && d.h <= 32 && d.rgba.length === d.w * d.h * 4, `decoded ${d.w}x${d.h}`);
    } catch (e) {
      ok(e instanceof th.ThumbHashError, `decode threw ${e}`);
    }
    sniff(b, "x.txt");
    const source = [undefined, null, 5, {}, { thumbhash: c.b64encode(b) }, { width: -1, height: "x", size: "big" }][i % 6];
    const mime = ["image/png", "text/plain", undefined, 7][i % 4];
    r.renderPart({ type: "file", mime, filename: i % 3 ? "f" : undefined, url: i % 5 ? "sessions/s/attachments/f" : { x: 1 }, source });
  }
});

test("file parts render: placeholder then picture, download link, unavailable in place", async () => {
  const canvas = new OffscreenCanvas(4, 2);
  const g = canvas.getContext("2d");
  g.fillStyle = "#1e90ff";
  g.fillRect(0, 0, 4, 2);
  const png = new Uint8Array(await (await canvas.convertToBlob({ type: "image/png" })).arrayBuffer());
  const cipher = c.dataKeyCipher(c.randomBytes(32));
  const store = new Map([["sessions/s1/attachments/img.enc", await cipher.seal(png)], ["sessions/s1/attachments/t.enc", await cipher.seal(c.encodeUtf8("hello"))]]);
  let release;
  const gate = new Promise((res) => { release = res; });
  const relay = { downloadBlob: async (sid, ref) => { await gate; if (!store.has(ref)) { const e = new Error("gone"); e.status = 404; throw e; } return store.get(ref); } };
  const blobs = new Blobs(relay, cipher, "s1");
  const hash = fx.thumbhash[1].hash;
  const img = r.renderPart({ type: "file", mime: "image/png", filename: "shot.png", url: "sessions/s1/attachments/img.enc", source: { type: "blob", size: png.length, width: 4, height: 2, thumbhash: hash } }, { blobs });
  document.body.append(img);
  ok(img.querySelector("canvas.placeholder") && img.querySelector("img").classList.contains("hidden"), "the placeholder shows first, the picture waits");
  eq(img.querySelector("figcaption").textContent, `shot.png · image/png · ${png.length} B · 4×2`, "caption");
  const file = r.renderPart({ type: "file", mime: "text/plain", filename: "notes.txt", url: "sessions/s1/attachments/t.enc", source: { type: "blob", size: 5 } }, { blobs });
  eq([file.querySelector("a.download")?.textContent, file.textContent], ["⬇ notes.txt", "⬇ notes.txt text/plain · 5 B"], "a download link");
  const gone = r.renderPart({ type: "file", mime: "image/png", filename: "gone.png", url: "sessions/s1/attachments/gone.enc", source: { type: "blob", size: 9, width: 1, height: 1 } }, { blobs });
  release();
  const pic = img.querySelector("img");
  for (let i = 0; i < 100 && pic.dataset.loaded !== "true"; i++) await new Promise((res) => setTimeout(res, 20));
  ok(pic.naturalWidth === 4 && !img.querySelector("canvas.placeholder") && !pic.classList.contains("hidden"), `the decrypted picture replaces the placeholder (naturalWidth ${pic.naturalWidth})`);
  for (let i = 0; i < 50 && !gone.querySelector("[data-unavailable]"); i++) await new Promise((res) => setTimeout(res, 10));
  eq(gone.textContent, "⚠ attachment unavailable: gone.png (the relay does not have it)", "a missing blob");
  // A re-render shows what is known at once: the picture, or the refusal.
  const again = r.renderPart({ type: "file", mime: "image/png", filename: "shot.png", url: "sessions/s1/attachments/img.enc", source: { type: "blob", size: 1, thumbhash: hash } }, { blobs });
  ok(!again.querySelector("canvas") && again.querySelector("img").src.startsWith("blob:"), "cached picture, no placeholder");
  eq(r.renderPart({ type: "file", mime: "image/png", filename: "gone.png", url: "sessions/s1/attachments/gone.enc" }, { blobs }).textContent, "⚠ attachment unavailable: gone.png (the relay does not have it)", "cached refusal");
  // Tool results show their attachments; a broken thumbhash is no placeholder, never an error.
  const tool = r.renderTool({ type: "tool", tool: "read", callID: "c1", state: { status: "completed", input: { path: "/w/a.png" }, output: "", attachments: [{ mime: "image/png", url: "sessions/s1/attachments/img.enc", source: { type: "blob", size: 1, thumbhash: "!!" } }] } }, { blobs });
  eq(tool.querySelectorAll(".part.file img").length, 1, "tool attachment");
  img.remove();
  blobs.close();
});

// ---- secure context ----

test("a page without a secure context says so and how to get one, instead of failing record by record", () => {
  const lan = { isSecureContext: false, crypto: { getRandomValues() {} }, location: { protocol: "http:", host: "192.168.1.5:3005", port: "3005" } };
  eq(secureContextProblem(lan, true), {
    kind: "insecure",
    title: "This page cannot open your sessions",
    text: [
      "Your browser opened it over plain http at 192.168.1.5:3005, and browsers give WebCrypto (crypto.subtle), which this app decrypts with, only to https pages and to pages of their own computer. Nothing was sent to the relay, and the pairing link was not used (it expires within minutes).",
      "Open the app over https instead: on the computer that runs the relay, give it an https address (happy server --domain NAME with a domain of yours, a tunnel such as Tailscale Serve or Cloudflare Tunnel, or an https reverse proxy: see \"From your phone\" in happy's README), then run happy web again and open its new link.",
      "On the relay's own computer, http://localhost:3005/ works as it is.",
    ],
  }, "plain http on the network, with a pairing link");
  const port80 = secureContextProblem({ ...lan, location: { protocol: "http:", host: "happy.lan", port: "" } }, false);
  eq([port80.text[0].split(".")[0], port80.text[0].endsWith("computer. Nothing was sent to the relay."), port80.text[2]],
    ["Your browser opened it over plain http at happy", true, "On the relay's own computer, http://localhost/ works as it is."], "no link, default port");
  eq(secureContextProblem({ isSecureContext: true, crypto: {}, location: lan.location }, false), {
    kind: "no-webcrypto",
    title: "This browser cannot open your sessions",
    text: ["It has no WebCrypto (crypto.subtle), which this app decrypts with. Open the app in a current Firefox, Chrome, Edge or Safari."],
  }, "a secure page without crypto.subtle");
  eq(secureContextProblem({ isSecureContext: true, crypto: { subtle: {} }, location: lan.location }, true), null, "a secure page with WebCrypto");
  eq(secureContextProblem(globalThis, false), null, "this test page (loopback)");
});

// ---- notifications (notify.js) ----

test("push data: only {v: 1, sessionId, kind, sealed?} is read", () => {
  eq(readPushData('{"v":1,"sessionId":"s","kind":"done","sealed":"eA=="}'), { sessionId: "s", kind: "done", sealed: "eA==" }, "with sealed");
  eq(readPushData('{"v":1,"sessionId":"s","kind":"question"}'), { sessionId: "s", kind: "question", sealed: "" }, "without");
  for (const bad of ["", "x", "null", '{"v":2,"sessionId":"s","kind":"done"}', '{"v":1,"kind":"done"}', '{"v":1,"sessionId":"s","kind":"other"}', '{"v":1,"sessionId":"s","kind":"done","sealed":5}']) {
    eq(readPushData(bad), null, bad);
  }
});

test("push detail: Go's sealed detail opens with the session's key, and only as the session and kind it claims", async () => {
  const secret = b64(fx.accountSecret);
  const cipher = await c.sessionCipher(secret, fx.push.dataEncryptionKey);
  const data = { sessionId: "sess-1", kind: "permission", sealed: fx.push.sealed };
  eq(await openDetail(cipher, data), fx.push.detail, "dataKey session");
  eq(await openDetail(await c.sessionCipher(secret, null), { ...data, sealed: fx.push.legacySealed }), fx.push.detail, "legacy session");
  for (const [what, d] of [["another session's id", { ...data, sessionId: "sess-2" }], ["another kind", { ...data, kind: "done" }]]) {
    try { await openDetail(cipher, d); } catch (e) { ok(/sealed detail is for sess-1\/permission/.test(e.message), what + ": " + e.message); continue; }
    throw new Fail(what + ": accepted");
  }
  await rejects(openDetail(await c.sessionCipher(secret, null), data), "auth_failed", "another session's key");
});

test("notifications: title, body, buttons and tag per kind; no claim without a detail", () => {
  const base = { icon: "icons/icon-192.png" };
  eq(notificationFor({ sessionId: "s", kind: "permission" }, fx.push.detail), { title: "Permission request", options: { ...base,
    data: { sessionId: "s", kind: "permission", callID: "call-7" }, body: "Fix the login bug\nbash: rm -rf build", tag: "s:call-7", requireInteraction: true,
    timestamp: 1760000000000, actions: [{ action: "allow", title: "Allow once" }, { action: "deny", title: "Deny" }] } }, "permission");
  eq(notificationFor({ sessionId: "s", kind: "question" }, { kind: "question", title: "T", callID: "q1", summary: "Which colour?", time: 5 }), { title: "Clarification needed", options: { ...base,
    data: { sessionId: "s", kind: "question", callID: "q1" }, body: "T\nWhich colour?", tag: "s:q1", requireInteraction: true, timestamp: 5 } }, "question: no buttons");
  eq(notificationFor({ sessionId: "s", kind: "done" }, { kind: "done", title: "T", status: "completed", summary: "All green", time: 5 }).title, "It's ready!", "done");
  eq(notificationFor({ sessionId: "s", kind: "done" }, { kind: "done", title: "T", status: "failed", summary: "rate limited", time: 5 }).options.body, "T\nrate limited", "failed: the error");
  eq(notificationFor({ sessionId: "s", kind: "done" }, { kind: "done", status: "failed" }).title, "It stopped with an error", "failed");
  eq(notificationFor({ sessionId: "s", kind: "done" }, { kind: "done", status: "cancelled" }).options.tag, "s:done", "one per session");
  eq(notificationFor({ sessionId: "s", kind: "permission" }, null), { title: "happy", options: { ...base, data: { sessionId: "s", kind: "permission" }, body: GENERIC_BODY, tag: "s:permission" } }, "no detail: no claim, no buttons");
});

test("notifications need the Home Screen on iOS, a secure page, and the APIs", () => {
  const ok_ = { isSecureContext: true, navigator: { userAgent: "Mozilla/5.0 (X11; Linux x86_64)", serviceWorker: {} }, PushManager: {}, Notification: {} };
  eq(pushSupport(ok_), { ok: true, why: "" }, "desktop");
  const iphone = { ...ok_, navigator: { ...ok_.navigator, userAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X)" }, matchMedia: () => ({ matches: false }) };
  ok(/Add to Home Screen/.test(pushSupport(iphone).why) && !pushSupport(iphone).ok, "iPhone in Safari");
  eq(pushSupport({ ...iphone, matchMedia: () => ({ matches: true }) }).ok, true, "iPhone, installed");
  ok(/secure page/.test(pushSupport({ ...ok_, isSecureContext: false }).why), "plain http");
  ok(/does not support/.test(pushSupport({ ...ok_, PushManager: undefined }).why), "no Push API");
});

// ---- run ----

const failures = [];
let passed = 0;
for (const t of tests) {
  try {
    await t.fn();
    passed++;
  } catch (e) {
    failures.push({ name: t.name, message: e instanceof Fail ? e.message : `${e.name}: ${e.message}\n${e.stack ?? ""}` });
  }
}
window.__results = { done: true, passed, total: tests.length, failures };
document.body.textContent = failures.length ? `FAIL ${failures.length}/${tests.length}` : `PASS ${passed}/${tests.length}`;
