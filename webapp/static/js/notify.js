// Notifications (docs/ARCHITECTURE.md, "The web app", "Notifications"):
// what a Web Push message from the relay shows and what its buttons do,
// shared by the service worker (sw.js), which shows and answers them with
// no page open, and by the page's switch on the Devices page, which
// subscribes this browser. The relay's message is {v: 1, sessionId, kind,
// sealed?}: sealed is the session's own ciphertext of {happyPush: 1, kind,
// sessionId, title, callID?, tool?, summary?, status?, time}, which only a
// device holding the account's keys opens; the relay and the push service
// see nothing else.

import * as c from "./crypto.js";
import { Relay, callRPC } from "./api.js";

/** PUSH_TITLES are the notification titles per kind (the reference app's). */
export const PUSH_TITLES = { permission: "Permission request", question: "Clarification needed", done: "It's ready!" };
const DONE_TITLES = { failed: "It stopped with an error", cancelled: "It was stopped" };

/** GENERIC_BODY is the body of a notification whose detail could not be
 * read: only the relay vouches for it, so it claims nothing. */
export const GENERIC_BODY = "A notification this device could not open: look in happy.";

/** ACTIONS are the buttons of a permission request. */
export const ACTIONS = [{ action: "allow", title: "Allow once" }, { action: "deny", title: "Deny" }];

/** readPushData parses the relay's message; null when it is not {v: 1,
 * sessionId, kind (permission, question, done), sealed?}. */
export function readPushData(text) {
  let d;
  try { d = JSON.parse(text); } catch { return null; }
  if (!d || d.v !== 1 || typeof d.sessionId !== "string" || !d.sessionId || !(d.kind in PUSH_TITLES)) return null;
  if (d.sealed !== undefined && typeof d.sealed !== "string") return null;
  return { sessionId: d.sessionId, kind: d.kind, sealed: d.sealed ?? "" };
}

/** sessionCipherFor finds session sid among the account's sessions
 * (GET /v1/sessions) and returns its cipher. */
export async function sessionCipherFor(relay, secret, sid) {
  const info = (await relay.sessions()).find((s) => s?.id === sid);
  if (!info) throw new Error(`session ${sid} is not among the account's sessions on ${relay.base}`);
  return c.sessionCipher(secret, info.dataEncryptionKey);
}

/** openDetail opens data.sealed with the session's cipher and checks that
 * it is what the clear fields announce (happyPush 1, the same session and
 * kind): a relay cannot pass one session's detail off under another's id
 * (a legacy session shares the account secret) or another kind. */
export async function openDetail(cipher, data) {
  const d = await c.openJSON(cipher, data.sealed);
  if (!d || d.happyPush !== 1) throw new Error("the sealed detail is not a push detail");
  if (d.sessionId !== data.sessionId || d.kind !== data.kind) throw new Error(`the sealed detail is for ${d.sessionId}/${d.kind}, the message says ${data.sessionId}/${data.kind}`);
  return d;
}

const str = (v) => (typeof v === "string" ? v : "");

/** notificationFor is what to show: {title, options} for
 * ServiceWorkerRegistration.showNotification, from the relay's message and
 * its opened detail. Without a detail (none sealed, or it did not open)
 * nothing but the relay says anything happened, so the notification claims
 * nothing (title "happy", GENERIC_BODY) and offers no buttons. A permission
 * request gets Allow once and Deny; every notification stays until it is
 * handled except a finished turn's. */
export function notificationFor(data, detail) {
  const kind = data.kind;
  const base = { icon: "icons/icon-192.png", data: { sessionId: data.sessionId, kind } };
  if (!detail) {
    return { title: "happy", options: { ...base, body: GENERIC_BODY, tag: `${data.sessionId}:${kind}` } };
  }
  const title = kind === "done" ? (DONE_TITLES[detail.status] ?? PUSH_TITLES.done) : PUSH_TITLES[kind];
  const what = kind === "permission" && str(detail.tool) ? [str(detail.tool), str(detail.summary)].filter(Boolean).join(": ") : str(detail.summary);
  const options = {
    ...base,
    body: [str(detail.title), what].filter(Boolean).join("\n"),
    tag: kind === "done" ? `${data.sessionId}:done` : `${data.sessionId}:${str(detail.callID)}`,
    requireInteraction: kind !== "done",
  };
  if (Number.isFinite(detail.time)) options.timestamp = detail.time;
  if (kind !== "done" && str(detail.callID)) options.data.callID = detail.callID;
  if (kind === "permission" && str(detail.callID)) options.actions = ACTIONS;
  return { title, options };
}

/** notificationForPush goes from the relay's message text to what shows,
 * with keys (keystore.js's loadKeys, or null): anything that does not open
 * gives the generic notification of its kind (a push must show one). */
export async function notificationForPush(text, keys) {
  const data = readPushData(text);
  if (!data) return { title: "happy", options: { body: GENERIC_BODY, icon: "icons/icon-192.png", tag: "happy", data: {} } };
  if (!keys || !data.sealed) return notificationFor(data, null);
  try {
    const relay = new Relay(keys.relay, keys.token);
    const detail = await openDetail(await sessionCipherFor(relay, keys.secret, data.sessionId), data);
    return notificationFor(data, detail);
  } catch (e) {
    console.warn("happy: a notification's detail did not open:", e?.message ?? e);
    return notificationFor(data, null);
  }
}

/** connected waits for sock's connection (rejects on its first refusal or
 * after timeoutMs). */
function connected(sock, timeoutMs) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no connection to the relay within ${timeoutMs / 1000} s`)), timeoutMs);
    sock.once("connect", () => { clearTimeout(t); resolve(); });
    sock.once("connect_error", (e) => { clearTimeout(t); reject(new Error("cannot connect to the relay: " + (e?.message ?? e))); });
  });
}

/** answerPermission answers a blocked tool as the page's buttons do: the
 * session's permission RPC {callID, decision} ("once" or "reject"), sealed
 * in a control envelope bound to the session and method, over a socket of
 * its own that it closes. It returns the session's bound answer, or throws
 * (api.js RpcError: refused, stale, unbound; or no connection). */
export async function answerPermission(keys, sid, callID, decision, timeoutMs = 30000) {
  const relay = new Relay(keys.relay, keys.token);
  const cipher = await sessionCipherFor(relay, keys.secret, sid);
  const sock = relay.socket();
  try {
    await connected(sock, timeoutMs);
    return await callRPC(sock, cipher, sid, "permission", { callID, decision }, timeoutMs);
  } finally {
    sock.close();
  }
}

// ---- the page's switch ----

/** pushSupport says whether this browser can get happy's notifications:
 * {ok, why}. iOS and iPadOS deliver Web Push only to an app added to the
 * Home Screen. */
export function pushSupport(g = globalThis) {
  const nav = g.navigator ?? {};
  const ios = /iPhone|iPad|iPod/.test(nav.userAgent ?? "") || (/Macintosh/.test(nav.userAgent ?? "") && nav.maxTouchPoints > 1);
  const standalone = nav.standalone === true || g.matchMedia?.("(display-mode: standalone)")?.matches === true;
  if (ios && !standalone) return { ok: false, why: "On iPhone and iPad, notifications need happy on the Home Screen: tap Share, then Add to Home Screen, and open happy from there." };
  if (!g.isSecureContext) return { ok: false, why: "Notifications need a secure page: open happy over https (or on this device's own address)." };
  if (!nav.serviceWorker || !g.PushManager || !g.Notification) return { ok: false, why: "This browser does not support web notifications." };
  return { ok: true, why: "" };
}

const sameKey = (a, b) => !!a && !!b && a.byteLength === b.byteLength && new Uint8Array(a).every((x, i) => x === b[i]);

/** pushState is "on" when this browser has a subscription and may show
 * notifications, "blocked" when the person refused notifications, else "off". */
export async function pushState(reg, g = globalThis) {
  if (g.Notification?.permission === "denied") return "blocked";
  const sub = await reg.pushManager.getSubscription();
  return sub && g.Notification?.permission === "granted" ? "on" : "off";
}

/** enablePush turns notifications on for this browser: the permission
 * (asked if need be), a subscription with the relay's VAPID key (an old one
 * made with another key is replaced), registered with the relay. Errors say
 * what to do. */
export async function enablePush(relay, reg, g = globalThis) {
  const perm = g.Notification.permission === "granted" ? "granted" : await g.Notification.requestPermission();
  if (perm !== "granted") throw new Error("notifications are blocked for this site: allow them in the browser's site settings, then try again");
  const key = await relay.vapidPublicKey();
  let sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub.options?.applicationServerKey, key)) {
    await sub.unsubscribe();
    sub = null;
  }
  sub ??= await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  await relay.subscribePush(sub.toJSON());
}

/** disablePush turns them off: the relay forgets the subscription, the
 * browser drops it. */
export async function disablePush(relay, reg) {
  const sub = await reg.pushManager.getSubscription();
  if (!sub) return;
  try {
    await relay.unsubscribePush(sub.endpoint);
  } finally {
    await sub.unsubscribe();
  }
}

/** renewPush registers this browser's subscription with the relay again
 * (at every start: after a revocation, or a new relay database, the relay
 * no longer has it). Nothing happens without a subscription. */
export async function renewPush(relay, reg, g = globalThis) {
  const sub = await reg.pushManager.getSubscription();
  if (sub && g.Notification?.permission === "granted") await relay.subscribePush(sub.toJSON());
}
