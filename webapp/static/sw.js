// happy's service worker (docs/ARCHITECTURE.md, "The web app",
// "Notifications"). A module worker (registered with type "module"), so it
// imports the page's own modules instead of copies: Chromium runs module
// service workers, Firefox since 147; where registration fails the page says
// notifications are unavailable. It does three things:
//   - keeps the app's files (SHELL) so the app starts without a network
//     (each request of one goes to the network first; the copy answers when
//     the network does not); the relay's routes are never cached;
//   - shows the relay's Web Push messages, their sealed detail opened with
//     the session's key (notify.js; the keys come from keystore.js);
//   - answers a blocked tool from its notification's Allow once and Deny
//     buttons with the same sealed, bound permission RPC the page sends,
//     over a socket of its own, without opening the page. A failure shows
//     as a notification saying why.

import "./lib/tweetnacl-1.0.3/nacl-fast.min.js";
import "./lib/socket.io-4.8.1/socket.io.min.js";
import { loadKeys } from "./js/keystore.js";
import { notificationForPush, answerPermission } from "./js/notify.js";

const CACHE = "happy-app-v2";

// SHELL is every file of the app but this one and the licenses (a test
// keeps the list whole).
const SHELL = [
  "./",
  "index.html",
  "app.css",
  "manifest.webmanifest",
  "icon.svg",
  "favicon.ico",
  "icons/icon-192.png",
  "icons/icon-512.png",
  "js/api.js",
  "js/attach.js",
  "js/crypto.js",
  "js/devices.js",
  "js/keystore.js",
  "js/main.js",
  "js/markdown.js",
  "js/notify.js",
  "js/reduce.js",
  "js/refimport.js",
  "js/render.js",
  "js/secure.js",
  "js/sessions.js",
  "js/thumbhash.js",
  "lib/socket.io-4.8.1/socket.io.min.js",
  "lib/tweetnacl-1.0.3/nacl-fast.min.js",
];

const scope = new URL(self.registration.scope);
const shellPaths = new Set(SHELL.map((p) => new URL(p, scope).pathname));

self.addEventListener("install", (e) => {
  e.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL.map((p) => new Request(new URL(p, scope), { cache: "no-cache" })))).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (e) => {
  e.waitUntil((async () => {
    for (const name of await caches.keys()) if (name !== CACHE) await caches.delete(name);
    await self.clients.claim();
  })());
});

// fromNetwork answers with the network's copy (and keeps it), or with the
// kept one when the network fails.
async function fromNetwork(req, key) {
  const cache = await caches.open(CACHE);
  try {
    const resp = await fetch(req);
    if (resp.ok) await cache.put(key, resp.clone());
    return resp;
  } catch (err) {
    const kept = await cache.match(key);
    if (kept) return kept;
    throw err;
  }
}

self.addEventListener("fetch", (e) => {
  const url = new URL(e.request.url);
  if (e.request.method !== "GET" || url.origin !== scope.origin) return;
  const nav = e.request.mode === "navigate" && url.pathname === scope.pathname;
  if (!nav && !shellPaths.has(url.pathname)) return; // the relay's routes
  e.respondWith(fromNetwork(e.request, nav ? new URL("./", scope).href : url.href));
});

self.addEventListener("push", (e) => {
  const text = e.data ? e.data.text() : "";
  e.waitUntil((async () => {
    const keys = await loadKeys().catch(() => null);
    const n = await notificationForPush(text, keys);
    await self.registration.showNotification(n.title, n.options);
  })());
});

// onClick handles a click on a notification: Allow once or Deny answer the
// tool in place; anywhere else opens (or focuses) the app on the session.
async function onClick(n, action) {
  const d = n.data ?? {};
  n.close();
  if ((action === "allow" || action === "deny") && d.kind === "permission" && d.callID) {
    try {
      const keys = await loadKeys();
      if (!keys) throw new Error("this browser is signed out of happy");
      await answerPermission(keys, d.sessionId, d.callID, action === "allow" ? "once" : "reject");
    } catch (err) {
      await self.registration.showNotification("Not answered", {
        body: `${action === "allow" ? "Allow once" : "Deny"} did not reach the session: ${err?.message ?? err}`,
        icon: "icons/icon-192.png", tag: `${d.sessionId}:${d.callID}:failed`, data: { sessionId: d.sessionId, kind: "failed" },
      });
    }
    return;
  }
  const url = new URL(d.sessionId ? `./#/s/${encodeURIComponent(d.sessionId)}` : "./", scope).href;
  for (const w of await self.clients.matchAll({ type: "window", includeUncontrolled: true })) {
    if (new URL(w.url).origin !== scope.origin) continue;
    await w.focus();
    if (w.navigate) await w.navigate(url).catch(() => {});
    return;
  }
  await self.clients.openWindow(url);
}

self.addEventListener("notificationclick", (e) => {
  const done = onClick(e.notification, e.action);
  try {
    e.waitUntil(done);
  } catch {
    // An event made by a script (tests) cannot be extended; it runs anyway.
  }
});
