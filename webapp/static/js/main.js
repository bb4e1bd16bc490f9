// The app: sign-in (pairing link or backup key), the live session list, one
// session's live transcript with its controls, the account's machines with
// a "New session" form, and the devices page (approve a terminal, sign out
// everywhere). State lives in this module; every change re-renders the part
// of the page it touches.

import * as c from "./crypto.js";
import { Relay, RpcError, callRPC, controlEnvelope, parsePairLink, promptEnvelope, unreachableMessage } from "./api.js";
import { Reducer, blockedTools, sessionState, lifecycleState, isLive, turnOpen, sessionTitle, stoppedView, STATE_LABELS } from "./reduce.js";
import { approveTerminal, revokeEverywhere, openMachine, spawnParams, spawnSession } from "./devices.js";
import { archiveSession, deleteSession, lastActivity, resumeTarget, resumeSession, recentFolders } from "./sessions.js";
import { h, icon, renderTranscript, partsSummary, snapshotUI, restoreUI } from "./render.js";
import { Blobs, inspectFile, uploadFile, IMAGE_TYPES } from "./attach.js";
import { secureContextProblem } from "./secure.js";
import { saveKeys, clearKeys } from "./keystore.js";
import { pushSupport, pushState, enablePush, disablePush, renewPush } from "./notify.js";

const STORE_KEY = "happy.account";
const $ = (sel) => document.querySelector(sel);

const app = {
  account: null, // {relay, token, secret: Uint8Array}
  relay: null,
  sock: null,
  sessions: new Map(), // sid → {info, md, cipher, thinking (undefined until a heartbeat), turnOpen, waiting, error}
  open: null, // {sid, reducer, transcript, notices, openChildren, loading, blobs, files, stick, lastTop}
  view: null, // "machines" | "devices" | null (a session or nothing)
  machines: [], // openMachine's results, newest activity first
  machinesError: "",
  spawn: null, // {state: "asking"|"sending", params, machine} while a spawn waits
  pairing: false, // a pairing link is being used
  pendingLink: null, // a pairing link opened while signed in, waiting for the person's yes
  error: "",
  down: "", // why the relay cannot be reached ("" while it answers)
  actions: { list: null, page: false, confirm: null, busy: null, notes: new Map() },
  sw: Promise.resolve(null), // the service worker's registration (null: none)
  swError: "", // why there is none // session actions: the list row whose panel is open (sid), the page's panel, the delete awaiting its yes ("list:sid"/"page:sid"), the action running (sid), sid → {text, cls}
};

// ---- account ----

function loadAccount() {
  try {
    const a = JSON.parse(localStorage.getItem(STORE_KEY) || "null");
    if (a && a.relay && a.token && a.secret) return { relay: a.relay, token: a.token, secret: c.b64decode(a.secret) };
  } catch { /* a broken entry is a signed-out browser */ }
  return null;
}

function saveAccount(a) {
  localStorage.setItem(STORE_KEY, JSON.stringify({ relay: a.relay, token: a.token, secret: c.b64encode(a.secret) }));
}

// SIGNED_OUT is what the sign-in page says after "Sign out of this browser".
const SIGNED_OUT = "Signed out of this browser. Open a new link from `happy web`, or restore with your backup key, to sign in again.";

function signOut(message = "") {
  localStorage.removeItem(STORE_KEY);
  forgetDevice(app.relay);
  app.sock?.close();
  Object.assign(app, { account: null, relay: null, sock: null, sessions: new Map(), open: null, view: null, machines: [], spawn: null, error: typeof message === "string" ? message : "" });
  location.hash = "";
  render();
}

// forgetDevice undoes what a login left for the service worker: its keys
// go, and its push subscription (the relay forgets it, the browser drops
// it); in the background, without failing the sign-out. What uses app.sw
// next (a new login's renewal) waits for it.
function forgetDevice(relay) {
  clearKeys().catch(() => {});
  if (!relay) return;
  app.sw = app.sw.then(async (reg) => {
    if (reg) await disablePush(relay, reg).catch(() => {});
    return reg;
  });
}

// registerWorker starts the service worker (sw.js, a module worker): the
// app's offline start and its notifications.
function registerWorker() {
  if (!("serviceWorker" in navigator)) {
    app.swError = "this browser has no service workers";
    return;
  }
  app.sw = navigator.serviceWorker.register("sw.js", { type: "module" }).catch((e) => {
    app.swError = e?.message ?? String(e);
    return null;
  });
}

// activeWorker waits (at most 15 s) for the service worker to be running.
async function activeWorker() {
  if (!(await app.sw)) throw new Error("happy's service worker did not start here (" + (app.swError || "unknown reason") + ")");
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error("happy's service worker did not start within 15 s")), 15000); });
  try {
    return await Promise.race([navigator.serviceWorker.ready, late]);
  } finally {
    clearTimeout(timer);
  }
}

// pairFromLink collects the answer of the link's pairing request: the token
// (sealed for the link's key on happy's relay, plain on the reference relay)
// and the account secret sealed for the same key. On happy's relay it then
// says it collected the answer, so the relay does not send it again.
async function pairFromLink(link) {
  const relay = new Relay(link.relay);
  const pub = c.boxPublicKey(link.secret);
  const r = await relay.pair(pub);
  const token = typeof r.sealedToken === "string" ? c.openSealedToken(c.b64decode(r.sealedToken), link.secret) : r.token;
  const resp = c.openPairingResponse(c.b64decode(r.response), link.secret);
  if (resp.variant !== "legacy") throw new Error("this pairing gave the browser only the account's public key, which cannot read sessions; pair with `happy web`, which shares the account secret");
  if (typeof r.sealedToken === "string") await new Relay(link.relay, token).collected(pub).catch(() => {}); // it expires anyway
  return { relay: link.relay, token, secret: resp.secret };
}

// takeLink reads a pairing link from the address bar (null when there is
// none, or it is broken: app.error says why) and removes it from there at
// once.
function takeLink() {
  let link = null;
  try {
    link = parsePairLink(location.hash, location.origin);
  } catch (e) {
    app.error = "this pairing link is broken: " + e.message;
  }
  if (location.hash.startsWith("#pair=")) history.replaceState(null, "", location.pathname + location.search);
  return link;
}

// usePairLink signs this browser in with a pairing link. A login already
// here is replaced only once the new one works; on failure it stays.
async function usePairLink(link) {
  app.pendingLink = null;
  app.pairing = true;
  render();
  try {
    const a = await pairFromLink(link);
    app.pairing = false;
    if (app.account) {
      forgetDevice(app.relay);
      app.sock?.close();
      app.open?.blobs?.close();
      Object.assign(app, { account: null, relay: null, sock: null, sessions: new Map(), open: null, view: null, machines: [], spawn: null, error: "" });
    }
    saveAccount(a);
    await start(a);
  } catch (e) {
    app.pairing = false;
    app.error = "pairing failed: " + e.message;
    if (app.account) { render(); return; }
    const saved = loadAccount();
    if (saved) await start(saved); else render();
  }
}

// onPairLink handles a pairing link opened in this page (at load, or by a
// navigation that changes only the fragment). Any page may send a browser
// to a pairing link, one of its own account too: when this browser is
// signed in already, the link waits for the person's confirmation
// (pairConfirmView) and the current login stays until then.
async function onPairLink(link) {
  if (!link) { render(); return; }
  if (app.account) { app.pendingLink = link; render(); return; }
  await usePairLink(link);
}

function pairConfirmView() {
  if (app.pairing) return h("div", { id: "pair-confirm", class: "notice confirm", role: "status" }, "pairing this browser…");
  const link = app.pendingLink;
  return h("div", { id: "pair-confirm", class: "notice confirm", role: "alertdialog", "aria-labelledby": "pair-confirm-text" },
    h("p", { id: "pair-confirm-text" },
      "A pairing link was opened in this browser. Signing in with it replaces the current login (relay ", h("code", {}, app.account.relay),
      ") with the account of the link" + (link.relay !== app.account.relay ? " on " + link.relay : "") +
      ", which may be someone else's: the sessions you would then see, and the prompts you would send, are theirs. Continue only if you just ran ",
      h("code", {}, "happy web"), " yourself."),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "allow", id: "pair-confirm-yes", onclick: () => usePairLink(link) }, "Sign in with the link"),
      h("button", { type: "button", class: "ghost", id: "pair-confirm-no", onclick: () => { app.pendingLink = null; render(); } }, "Keep the current login")));
}

async function restoreFromBackup(text, relayURL) {
  const secret = c.parseBackupKey(text);
  const relay = new Relay(relayURL);
  return { relay: relay.base, token: await relay.signIn(secret), secret };
}

async function start(account) {
  app.account = account;
  app.relay = new Relay(account.relay, account.token);
  // The service worker reads the keys from IndexedDB (keystore.js); a
  // subscription this browser holds is registered with the relay again.
  saveKeys(account).catch((e) => console.warn("happy: keys not stored for notifications:", e?.message ?? e));
  const relay = app.relay;
  app.sw.then((reg) => reg && renewPush(relay, reg)).catch((e) => console.warn("happy: notifications not renewed:", e?.message ?? e));
  connectSocket();
  await refreshSessions();
  route();
}

// ---- live data ----

function connectSocket() {
  const sock = app.relay.socket();
  app.sock = sock;
  sock.on("connect", () => { app.error = ""; app.down = ""; renderStatus(); refreshSessions(); refreshMachines(); if (app.open) fetchOpen(); });
  sock.on("connect_error", (e) => {
    // A transport that did not open (or timed out) is a relay out of
    // reach; anything else is the relay's own refusal.
    if (e?.type === "TransportError" || e?.message === "timeout") app.down = unreachableMessage(app.relay.base);
    else app.error = `live updates unavailable: ${e?.message ?? e}`;
    renderStatus();
  });
  sock.on("update", (u) => onUpdate(u?.body ?? {}));
  sock.on("ephemeral", (e) => {
    if (e?.type === "text-delta") { onTextDelta(e); return; }
    if (e?.type === "machine-activity") {
      // A daemon's heartbeat: it decides whether its sessions can resume.
      const m = app.machines.find((x) => x.id === e.id);
      if (!m) return;
      m.online = e.active === true;
      m.lastSeen = Number(e.activeAt) || m.lastSeen;
      if (app.view === "machines") renderMachines();
      renderActions();
      return;
    }
    if (e?.type !== "activity") return;
    const s = app.sessions.get(e.id);
    if (!s) return;
    s.info.activeAt = e.activeAt ?? s.info.activeAt;
    s.info.active = e.active;
    s.thinking = e.active === false ? undefined : !!e.thinking;
    renderList();
    if (app.open?.sid === e.id) renderHeader();
  });
}

// onTextDelta applies a live text delta of the open session to its part in
// memory (docs/ARCHITECTURE.md, "Live text"); one render per frame however
// many deltas arrive. A delta that does not fit (missed, or not stored
// yet) is skipped: the next stored version brings the text.
function onTextDelta(e) {
  const o = app.open;
  const s = app.sessions.get(e.id);
  if (!o || o.sid !== e.id || !s?.cipher || typeof e.message !== "string") return;
  c.openJSON(s.cipher, e.message).then((d) => {
    if (app.open !== o || o.reducer.applyDelta(d) !== "applied") return;
    if (o.liveFrame) return;
    o.liveFrame = requestAnimationFrame(() => {
      o.liveFrame = 0;
      if (app.open !== o) return;
      o.transcript = o.reducer.transcript();
      renderTranscriptView();
    });
  }, () => {});
}

function onUpdate(body) {
  switch (body.t) {
    case "new-message": {
      const s = app.sessions.get(body.sid);
      if (s) { s.info.updatedAt = body.message?.createdAt ?? Date.now(); renderList(); }
      if (app.open?.sid === body.sid) fetchOpen();
      else if (s && s.watch) watchSession(s);
      return;
    }
    case "update-session": {
      const s = app.sessions.get(body.id);
      if (s && body.agentState && typeof body.agentState.value === "string") {
        s.info.agentState = body.agentState.value;
        if (app.open?.sid === body.id) fetchOpen();
      }
      if (!s || !body.metadata) return;
      c.openJSON(s.cipher, body.metadata.value).then((md) => {
        s.md = md;
        s.info.metadataVersion = body.metadata.version;
        renderList();
        if (app.open?.sid === body.id) renderHeader();
      }, () => {});
      return;
    }
    case "new-session":
    case "delete-session":
      refreshSessions();
      return;
    case "update-machine":
    case "new-machine":
      refreshMachines();
  }
}

async function openSessionInfo(info) {
  const s = { info, md: null, cipher: null, thinking: undefined, turnOpen: undefined, waiting: false, error: "" };
  try {
    s.cipher = await c.sessionCipher(app.account.secret, info.dataEncryptionKey);
    if (info.metadata) s.md = await c.openJSON(s.cipher, info.metadata);
  } catch (e) {
    s.error = `cannot decrypt: ${e.message}`;
  }
  return s;
}

async function refreshSessions() {
  if (!app.relay) return;
  try {
    const list = await app.relay.sessions();
    const next = new Map();
    for (const info of list) {
      const old = app.sessions.get(info.id);
      const s = old && old.info.metadataVersion === info.metadataVersion && old.cipher ? Object.assign(old, { info: { ...info } }) : await openSessionInfo(info);
      if (old) { s.thinking = old.thinking; s.turnOpen = old.turnOpen; s.waiting = old.waiting; }
      next.set(info.id, s);
    }
    app.sessions = next;
    app.error = "";
    app.down = "";
    for (const s of next.values()) if (s.cipher && lifecycleState(s.info, s.md, Date.now()) === "running") { s.watch = true; watchSession(s); }
  } catch (e) {
    if (e.status === 401) { signOut("the relay refused this browser's token; sign in again"); return; }
    if (e.unreachable) app.down = e.message; else app.error = e.message;
  }
  renderStatus();
  renderList();
  if (app.open) { renderHeader(); renderTranscriptView(); }
}

// watchSession keeps a running session's "waiting for you" up to date
// without opening it: its rows are reduced in the background.
async function watchSession(s) {
  if (s.busy) { s.again = true; return; }
  s.busy = true;
  try {
    s.reducer ??= new Reducer();
    await addRows(s.reducer, s.cipher, await app.relay.messages(s.info.id, s.reducer.lastSeq));
    const t = s.reducer.transcript();
    s.waiting = blockedTools(t).length > 0;
    s.turnOpen = turnOpen(t);
    renderList();
  } catch { /* the next update tries again */ }
  s.busy = false;
  if (s.again) { s.again = false; watchSession(s); }
}

async function addRows(reducer, cipher, rows) {
  for (const row of rows) {
    const ct = row.content?.c;
    if (typeof ct !== "string") { reducer.addFailure(row.seq, "invalid_field", "row has no encrypted content"); continue; }
    try {
      reducer.add(row.seq, row.localId, c.decodeUtf8(await cipher.open(c.b64decode(ct))));
    } catch (e) {
      reducer.addFailure(row.seq, "decrypt_failed", e.message);
    }
  }
  return rows.length;
}

async function fetchOpen() {
  const o = app.open;
  if (!o) return;
  if (o.busy) { o.again = true; return; }
  o.busy = true;
  try {
    const s = app.sessions.get(o.sid);
    const n = await addRows(o.reducer, s.cipher, await app.relay.messages(o.sid, o.reducer.lastSeq));
    const stateChanged = await readAgentState(o.reducer, s);
    if (n > 0 || stateChanged || !o.transcript) {
      o.transcript = o.reducer.transcript();
      if (o.reducer.imported()) {
        const had = s.importedTitle;
        s.importedTitle = o.transcript.session.title;
        if (had !== s.importedTitle) renderHeader();
      }
      s.waiting = blockedTools(o.transcript).length > 0;
      s.turnOpen = turnOpen(o.transcript);
      renderTranscriptView();
      renderList();
    }
    o.error = "";
  } catch (e) {
    if (e.unreachable) { app.down = e.message; renderStatus(); } else { o.error = e.message; renderTranscriptView(); }
  }
  o.busy = false;
  if (o.again) { o.again = false; fetchOpen(); }
}

// rootOf is the root session of s's transcript when no session record names
// one (a reference session): the session as the relay lists it, titled by
// its metadata summary.
function rootOf(s, sid) {
  const md = s?.md || {};
  const title = typeof md.summary?.text === "string" ? md.summary.text.trim() : "";
  return { id: sid, directory: typeof md.path === "string" ? md.path : "", title,
    time: { created: s?.info?.createdAt ?? 0, updated: s?.info?.updatedAt ?? 0 } };
}

// readAgentState gives reducer s's agentState (a reference session keeps its
// permissions there) when it changed; it reports whether it did.
async function readAgentState(reducer, s) {
  const sealed = s.info.agentState;
  if (typeof sealed !== "string" || sealed === "" || sealed === reducer.sealedState) return false;
  reducer.sealedState = sealed;
  try {
    reducer.setAgentState(await c.openJSON(s.cipher, sealed));
  } catch { reducer.setAgentState(null); }
  return true;
}

// ---- controls ----

function openCtx() {
  const o = app.open;
  const s = app.sessions.get(o.sid);
  const live = s && isLive(stateOf(s));
  if (!o.blobs && s?.cipher) o.blobs = new Blobs(app.relay, s.cipher, o.sid);
  return {
    canControl: live,
    blobs: o.blobs,
    notices: o.notices,
    openChildren: o.openChildren,
    onDecide: (part, decision, reason) => control(part.callID, "permission", { callID: part.callID, decision, ...(reason ? { reason } : {}) }),
    onAnswer: (part, answers) => control(part.callID, "answer", { callID: part.callID, answers }),
  };
}

async function control(callID, method, params) {
  const o = app.open;
  const s = app.sessions.get(o.sid);
  o.notices.delete(callID);
  try {
    await callRPC(app.sock, s.cipher, o.sid, method, params);
  } catch (e) {
    o.notices.set(callID, e instanceof RpcError && e.stale ? "Already answered elsewhere: " + e.message : "Not sent: " + e.message);
    renderTranscriptView();
  }
}

// sendPrompt uploads the attached files first (each sealed with the
// session's cipher), then writes the prompt that references them.
async function sendPrompt(text, files = [], progress = () => {}) {
  const o = app.open;
  const s = app.sessions.get(o.sid);
  const root = o.transcript?.session?.id;
  if (!root || !root.startsWith("ses_")) throw new Error("this session has no transcript yet");
  const parts = [];
  for (const [i, f] of files.entries()) {
    progress(`uploading ${f.name} (${i + 1} of ${files.length})…`);
    parts.push(await uploadFile(app.relay, s.cipher, o.sid, f));
  }
  progress("sending…");
  const { id, env } = promptEnvelope(root, text, Date.now(), c.randomBytes(6), parts);
  env.control = controlEnvelope(o.sid, "prompt");
  await app.relay.postPrompt(o.sid, { content: await c.sealJSON(s.cipher, env), localId: id + ".1" });
}

async function abortTurn() {
  const o = app.open;
  await callRPC(app.sock, app.sessions.get(o.sid).cipher, o.sid, "abort", {});
}

// ---- views ----

const stateOf = (s) => sessionState(s.info, s.md, Date.now(), { waiting: s.waiting, thinking: s.thinking, turnOpen: s.turnOpen });

function ago(ms) {
  if (!ms) return "";
  const d = Math.max(0, Date.now() - ms) / 1000;
  if (d < 60) return `${Math.floor(d)} s ago`;
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

function route() {
  const m = /^#\/s\/([^/]+)$/.exec(location.hash);
  const sid = m ? decodeURIComponent(m[1]) : null;
  const view = { "#/machines": "machines", "#/devices": "devices" }[location.hash] ?? null;
  if (view !== app.view) {
    app.view = view;
    if (view === "machines") refreshMachines();
  }
  if (sid !== (app.open?.sid ?? null)) {
    app.open?.blobs?.close();
    app.open?.resize?.disconnect();
    app.actions.page = false;
    app.open = sid ? { sid, reducer: new Reducer(rootOf(app.sessions.get(sid), sid)), transcript: null, notices: new Map(), openChildren: new Set(), blobs: null, files: [], stick: true, lastTop: 0 } : null;
    if (sid) fetchOpen();
  }
  render();
}

function render() {
  const root = $("#app");
  root.replaceChildren();
  document.body.classList.toggle("has-open", !!app.open || !!app.view);
  if (!app.account) { root.append(signInView()); return; }
  root.append(
    h("header", { class: "top" },
      h("a", { href: "#", class: "brand" }, "happy"),
      h("span", { id: "status", class: "status" }),
      h("nav", { class: "nav" },
        h("a", { href: "#/machines", id: "nav-machines" }, "Machines"),
        h("a", { href: "#/devices", id: "nav-devices" }, "Devices"))),
    h("div", { id: "relay-down", class: "banner hidden", role: "alert" },
      h("p", { id: "relay-down-text" }),
      h("div", { class: "actions" },
        h("button", { type: "button", id: "relay-retry", onclick: retryRelay }, "Retry now"),
        h("span", { id: "relay-retry-note", class: "prompt-note", role: "status" }))),
    app.pendingLink || app.pairing ? pairConfirmView() : "",
    h("main", { class: "layout" },
      h("section", { id: "list", class: "list", "aria-label": "sessions" }),
      h("section", { id: "session", class: "session", "aria-label": "session" })));
  renderStatus();
  renderList();
  renderSession();
}

function renderStatus() {
  const el = $("#status");
  if (el) el.textContent = app.down ? "" : app.error;
  const down = $("#relay-down");
  if (!down) return;
  down.classList.toggle("hidden", !app.down);
  $("#relay-down-text").textContent = app.down ? app.down + " happy tries again every few seconds." : "";
  if (!app.down) $("#relay-retry-note").textContent = "";
}

// retryRelay tries the relay at once: the session list over HTTP, and a
// new Socket.IO connection in place of the one waiting out its back-off.
async function retryRelay() {
  const note = $("#relay-retry-note");
  if (note) note.textContent = "trying…";
  if (app.sock && !app.sock.connected) { app.sock.disconnect(); app.sock.connect(); }
  await refreshSessions();
  if (app.down && $("#relay-retry-note")) $("#relay-retry-note").textContent = "still no answer";
}

function signInView() {
  const key = h("textarea", { id: "backup-key", rows: 2, placeholder: "XXXXX-XXXXX-…", autocomplete: "off", spellcheck: "false", "aria-label": "backup key" });
  const relay = h("input", { id: "relay-url", type: "url", value: location.origin, "aria-label": "relay URL" });
  const msg = h("p", { class: "error", role: "alert", id: "signin-message" }, app.pairing ? "pairing this browser…" : app.error);
  return h("div", { class: "signin" },
    h("h1", {}, "happy"),
    h("p", {}, "Open the link that ", h("code", {}, "happy web"), " prints on your computer to sign in this browser."),
    h("form", { onsubmit: async (e) => {
      e.preventDefault();
      msg.textContent = "signing in…";
      try {
        const a = await restoreFromBackup(key.value, relay.value);
        saveAccount(a);
        app.error = "";
        await start(a);
      } catch (err) { msg.textContent = err.message; }
    } },
      h("label", { for: "backup-key" }, "Or restore with your backup key (", h("code", {}, "happy auth backup"), " prints it)"),
      key,
      h("label", { for: "relay-url" }, "Relay"),
      relay,
      h("button", { type: "submit" }, "Restore")),
    msg);
}

function renderList() {
  const el = $("#list");
  if (!el) return;
  const rows = [...app.sessions.values()].sort((a, b) => lastActivity(b) - lastActivity(a));
  const none = app.down ? h("p", { class: "empty" }, "The sessions show once the relay answers.") : h("p", { class: "empty" }, "No sessions yet. Start one with ", h("code", {}, "happy claude"), ".");
  const row = (s) => {
    const st = stateOf(s);
    const md = s.md || {};
    const sid = s.info.id;
    const title = s.error && !s.md ? s.error : sessionTitle(md, s.importedTitle);
    const open = app.actions.list === sid;
    return h("li", { class: "row" + (app.open?.sid === sid ? " current" : ""), dataset: { sid, state: st } },
      h("div", { class: "row-main" },
        h("a", { href: "#/s/" + encodeURIComponent(sid) },
          h("span", { class: "title" }, title),
          h("span", { class: `state ${st}` }, STATE_LABELS[st]),
          h("span", { class: "meta" }, [md.flavor, md.host, md.path].filter(Boolean).join(" · ")),
          h("span", { class: "when" }, ago(lastActivity(s)))),
        h("button", { type: "button", class: "ghost more", "aria-label": `actions for ${title}`, "aria-expanded": String(open),
          onclick: () => { app.actions.list = open ? null : sid; renderList(); } }, icon("more"))),
      open ? actionsView(s, "list") : "");
  };
  // Archived sessions are listed apart, under the live and ended ones.
  const live = rows.filter((s) => stateOf(s) !== "archived");
  const archived = rows.filter((s) => stateOf(s) === "archived");
  el.replaceChildren(h("h2", {}, "Sessions"), rows.length === 0 ? none : "",
    h("ul", {}, live.map(row)),
    archived.length === 0 ? "" : h("details", { class: "archived", open: app.showArchived || archived.some((s) => s.info.id === app.open?.sid) || undefined,
      ontoggle: (e) => { app.showArchived = e.target.open; } },
      h("summary", {}, `Archived (${archived.length})`), h("ul", {}, archived.map(row))));
}

// ---- session actions: archive, delete, resume ----

// actionsView is the panel of what can be done to session s, in the list
// ("list") or on its page ("page"): archive and delete (refused while it
// runs, as the CLI refuses), delete after a yes, resume through its
// machine's daemon when resumeTarget allows it.
function actionsView(s, where) {
  const sid = s.info.id;
  const st = stateOf(s);
  const note = app.actions.notes.get(sid);
  const busy = app.actions.busy === sid;
  const kids = [];
  if (isLive(st)) {
    kids.push(h("p", { class: "act-why" }, `Running: it can be archived or deleted once its happy ends (happy stop ${sid}) or it is stale.`));
  } else if (app.actions.confirm === `${where}:${sid}`) {
    kids.push(h("p", { class: "act-confirm-text" }, "Delete this session and its whole transcript from the relay? This cannot be undone."),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "deny act-delete-yes", disabled: busy, onclick: () => runAction(s, "delete") }, "Yes, delete it"),
        h("button", { type: "button", class: "ghost act-delete-no", onclick: () => { app.actions.confirm = null; renderActions(); } }, "Cancel")));
  } else {
    const rt = resumeTarget(s, app.machines);
    kids.push(h("div", { class: "actions" },
      rt.machine ? h("button", { type: "button", class: "allow act-resume", disabled: busy, onclick: () => runAction(s, "resume") }, `Resume on ${rt.machine.host || rt.machine.id}`) : "",
      st !== "archived" ? h("button", { type: "button", class: "act-archive", disabled: busy, onclick: () => runAction(s, "archive") }, "Archive") : "",
      h("button", { type: "button", class: "deny act-delete", disabled: busy, onclick: () => { app.actions.confirm = `${where}:${sid}`; app.actions.notes.delete(sid); renderActions(); } }, "Delete…")));
    if (!rt.machine) kids.push(h("p", { class: "act-why" }, `Resume: not here, ${rt.reason}.`));
  }
  if (note) kids.push(h("p", { class: "act-note " + (note.cls || ""), role: "status" }, note.text));
  return h("div", { class: "actions-panel", dataset: { sid } }, kids);
}

// renderActions redraws both places a panel shows.
function renderActions() {
  renderList();
  renderHeader();
}

async function runAction(s, what) {
  const sid = s.info.id;
  const say = (text, cls = "") => { app.actions.notes.set(sid, { text, cls }); renderActions(); };
  app.actions.busy = sid;
  say(what === "archive" ? "archiving…" : what === "delete" ? "deleting…" : "resuming…");
  try {
    if (what === "archive") {
      await archiveSession(app.relay, app.sock, s);
      say("Archived.", "ok");
    } else if (what === "delete") {
      await deleteSession(app.relay, s);
      app.actions.confirm = null;
      app.actions.notes.delete(sid);
      if (app.actions.list === sid) app.actions.list = null;
      if (app.open?.sid === sid) location.hash = "#";
    } else {
      const rt = resumeTarget(s, app.machines);
      if (!rt.machine) throw new Error(rt.reason);
      const r = await resumeSession(app.sock, rt);
      if (r.kind !== "success") throw new Error(r.kind === "ask" ? `the daemon asks to create ${r.directory}` : r.message);
      say(`Resumed on ${rt.machine.host || rt.machine.id}.`, "ok");
      if (app.open?.sid !== r.sessionId) location.hash = "#/s/" + encodeURIComponent(r.sessionId);
    }
  } catch (e) {
    say(`Not ${what === "archive" ? "archived" : what === "delete" ? "deleted" : "resumed"}: ${e.message}`, "error");
  } finally {
    app.actions.busy = null;
  }
  await refreshSessions();
}

function renderHeader() {
  const el = $("#session-head");
  const o = app.open;
  const s = o && app.sessions.get(o.sid);
  if (!el || !s) return;
  const st = stateOf(s);
  const md = s.md || {};
  el.replaceChildren(
    h("a", { href: "#", class: "back", "aria-label": "back to sessions" }, "‹"),
    h("div", { class: "head-text" },
      h("h2", {}, sessionTitle(md, s.importedTitle)),
      h("div", { class: "meta" }, [md.flavor, md.host, md.path].filter(Boolean).join(" · "))),
    h("span", { class: `state ${st}`, id: "session-state" }, STATE_LABELS[st]),
    h("button", { type: "button", class: "ghost more", id: "session-more", "aria-label": "session actions", "aria-expanded": String(app.actions.page),
      onclick: () => { app.actions.page = !app.actions.page; renderHeader(); } }, icon("more")));
  $("#session-actions")?.replaceChildren(app.actions.page ? actionsView(s, "page") : "");
  $("#prompt")?.classList.toggle("hidden", !isLive(st));
}

function renderSession() {
  const el = $("#session");
  if (!el) return;
  if (app.view === "machines") { el.replaceChildren(machinesView()); return; }
  if (app.view === "devices") { el.replaceChildren(devicesView()); return; }
  const o = app.open;
  if (!o) { el.replaceChildren(h("p", { class: "empty" }, "Pick a session.")); return; }
  const text = h("textarea", { id: "prompt-text", rows: 2, placeholder: "Send the next prompt…", "aria-label": "prompt" });
  const note = h("span", { class: "prompt-note", role: "status", id: "prompt-note" });
  const chips = h("ul", { class: "attached", id: "attached", "aria-label": "attached files" });
  const say = (msg, cls = "") => { note.textContent = msg; note.className = "prompt-note" + (cls ? " " + cls : ""); };
  const showFiles = () => chips.replaceChildren(...o.files.map((f, i) => h("li", { class: "chip", dataset: { name: f.name } },
    icon(IMAGE_TYPES.includes(f.mime) ? "image" : "file"),
    h("span", {}, `${f.name} · ${f.bytes.length.toLocaleString("en-US")} bytes`),
    h("button", { type: "button", class: "ghost", "aria-label": `remove ${f.name}`, onclick: () => { o.files.splice(i, 1); showFiles(); } }, "✕"))));
  // Files are picked here and checked by their bytes at once; nothing
  // leaves the browser before Send.
  const picker = h("input", { type: "file", id: "attach-input", class: "hidden", multiple: true,
    accept: "image/png,image/jpeg,image/gif,image/webp,text/*,.md,.txt,.json,.yaml,.yml,.csv,.log,.xml,.toml",
    onchange: async () => {
      const picked = [...picker.files];
      picker.value = "";
      const errors = [];
      for (const file of picked) {
        try { o.files.push(await inspectFile(file)); } catch (err) { errors.push(err.message); }
      }
      showFiles();
      say(errors.join("; "), errors.length ? "error" : "");
    } });
  showFiles();
  const form = h("form", { id: "prompt", class: "prompt", onsubmit: async (e) => {
    e.preventDefault();
    const t = text.value.trim();
    if (!t && o.files.length === 0) return;
    try {
      await sendPrompt(t, o.files, say);
      text.value = "";
      o.files = [];
      showFiles();
      say("");
    } catch (err) { say(err.message, "error"); }
  } },
    chips,
    text,
    h("div", { class: "prompt-actions" },
      picker,
      h("button", { type: "button", id: "attach", class: "ghost with-icon", "aria-label": "attach files", onclick: () => picker.click() }, icon("attach"), "Attach"),
      h("button", { type: "submit", id: "send" }, "Send"),
      h("button", { type: "button", id: "abort", class: "deny", onclick: async () => {
        note.textContent = "aborting…";
        try { await abortTurn(); note.textContent = "aborted"; } catch (err) { note.textContent = err.message; }
      } }, "Abort"),
      note));
  const scroller = h("div", { id: "transcript", class: "scroll" });
  // The transcript follows the newest message while the person is at the
  // bottom (o.stick); scrolling up stops that, scrolling back down resumes
  // it. Only a move up counts: content that grows under a view that was
  // at the bottom (a picture that loaded) does not move scrollTop.
  scroller.addEventListener("scroll", () => {
    const top = scroller.scrollTop;
    if (scroller.scrollHeight - top - scroller.clientHeight < 40) o.stick = true;
    else if (top < o.lastTop - 2) o.stick = false;
    o.lastTop = top;
  }, { passive: true });
  el.replaceChildren(h("div", { id: "session-head", class: "session-head" }), h("div", { id: "session-actions" }), scroller, form);
  renderHeader();
  renderTranscriptView();
}

// followNewest keeps the open transcript at its newest message while the
// person is there (o.stick).
function followNewest(el, o) {
  if (!o.stick) return;
  el.scrollTop = el.scrollHeight;
  o.lastTop = el.scrollTop;
}

function renderTranscriptView() {
  const el = $("#transcript");
  const o = app.open;
  if (!el || !o) return;
  if (!app.sessions.has(o.sid)) { el.replaceChildren(h("p", { class: "empty" }, app.sessions.size ? "No such session." : "Loading…")); return; }
  if (!o.transcript) { el.replaceChildren(h("p", { class: "empty" }, o.error || "Loading…")); return; }
  const kept = snapshotUI(el);
  // A session nothing runs any more shows its open parts as interrupted
  // (a view: the transcript is kept as stored).
  const s = app.sessions.get(o.sid);
  const view = renderTranscript(isLive(stateOf(s)) ? o.transcript : stoppedView(o.transcript), openCtx());
  view.addEventListener("toggle", (e) => {
    const id = e.target.dataset?.child;
    if (id) e.target.open ? o.openChildren.add(id) : o.openChildren.delete(id);
  }, true);
  el.replaceChildren(view, o.error ? h("p", { class: "error" }, o.error) : "");
  restoreUI(el, kept);
  followNewest(el, o);
  // Pictures decrypt and load after this render, and live text grows the
  // view: each change of size follows the newest message too.
  o.resize?.disconnect();
  o.resize = new ResizeObserver(() => { if (app.open === o) followNewest(el, o); });
  o.resize.observe(view);
  o.resize.observe(el);
  renderHeader();
}

// ---- devices: approve a terminal, sign out everywhere ----

function devicesView() {
  const code = h("input", { id: "approve-code", type: "text", autocomplete: "off", autocapitalize: "characters", spellcheck: "false", placeholder: "XXXXX-XXXXX-XXXXX-XXXXX, or the link", "aria-label": "pairing code or link" });
  const legacy = h("input", { id: "approve-legacy", type: "checkbox" });
  const result = h("p", { id: "approve-result", role: "status" });
  const form = h("form", { id: "approve", class: "card", onsubmit: async (e) => {
    e.preventDefault();
    result.className = "";
    result.textContent = "approving…";
    try {
      const r = await approveTerminal(app.relay, app.account.secret, code.value, { legacy: legacy.checked });
      result.textContent = `Approved the terminal with code ${r.code} (${r.variant === "legacy" ? "account secret shared" : "content key only"}). ` +
        (r.proven ? "It signs in within a few seconds." : "The link or key carries no pairing secret: the terminal shows your account and asks to confirm it.");
      result.className = "ok";
      code.value = "";
    } catch (err) {
      result.textContent = "Not approved: " + err.message;
      result.className = "error";
    }
  } },
    h("h2", {}, "Approve a terminal"),
    h("p", {}, "Run ", h("code", {}, "happy auth login"), " on the computer, then type the whole code it shows (all four groups) or paste its link."),
    code,
    h("label", { class: "check", for: "approve-legacy" }, legacy,
      h("span", {}, "Share the account secret (the terminal can then read every session; needed by terminals that do not take the content key)")),
    h("button", { type: "submit", id: "approve-submit" }, "Approve"),
    result);
  const note = h("p", { id: "revoke-result", role: "status" });
  const confirm = h("div", { class: "actions hidden", id: "revoke-confirm-row" },
    h("button", { type: "button", class: "deny", id: "revoke-confirm", onclick: async () => {
      note.textContent = "revoking…";
      try {
        const r = await revokeEverywhere(app.relay);
        signOut(r.revoked ? `Signed out everywhere: every token of the account is revoked (${r.disconnected ?? 0} live connections closed). Pair your devices again.` : r.message);
      } catch (err) {
        note.textContent = "Not revoked: " + err.message;
        note.className = "error";
      }
    } }, "Yes, sign out every device"),
    h("button", { type: "button", class: "ghost", onclick: () => confirm.classList.add("hidden") }, "Cancel"));
  const leave = h("div", { class: "actions hidden", id: "signout-confirm-row", role: "alertdialog", "aria-label": "sign out of this browser?" },
    h("button", { type: "button", class: "deny", id: "signout-confirm", onclick: () => signOut(SIGNED_OUT) }, "Yes, sign out"),
    h("button", { type: "button", class: "ghost", id: "signout-cancel", onclick: () => leave.classList.add("hidden") }, "Cancel"));
  return h("div", { class: "page", id: "devices" },
    h("div", { class: "page-head" }, h("a", { href: "#", class: "back", "aria-label": "back to sessions" }, "‹"), h("h2", {}, "Devices")),
    h("div", { class: "scroll" },
      form,
      notifyCard(),
      h("div", { class: "card", id: "this-browser" },
        h("h2", {}, "This browser"),
        h("p", {}, "Signed in to ", h("code", {}, app.account.relay), ". Signing out forgets the account's keys here; the sessions and your other devices are not touched. To sign in again you need a new link from ",
          h("code", {}, "happy web"), " or your backup key."),
        h("button", { type: "button", class: "ghost", id: "signout", onclick: () => leave.classList.remove("hidden") }, "Sign out of this browser…"),
        leave),
      h("div", { class: "card" },
        h("h2", {}, "Sign out everywhere"),
        h("p", {}, "Revokes every token of the account: every terminal, daemon and browser must pair again. Then this browser forgets its keys."),
        h("button", { type: "button", class: "deny", id: "revoke", onclick: () => confirm.classList.remove("hidden") }, "Sign out everywhere"),
        confirm, note)));
}

// notifyCard is the Devices page's switch for this browser's notifications.
function notifyCard() {
  const state = h("p", { id: "notify-state", role: "status" }, "checking…");
  const toggle = h("button", { type: "button", id: "notify-toggle", class: "hidden" }, "Turn on");
  const card = h("div", { class: "card", id: "notify" },
    h("h2", {}, "Notifications on this device"),
    h("p", {}, "When a session needs you (a tool waits for permission, a question, a finished turn) this device shows a notification; a tool can be allowed once or denied from it. What it says is sealed with the session's key: the relay and the push service see none of it."),
    state, toggle);
  const show = (text, cls = "", button = "") => {
    state.textContent = text;
    state.className = cls;
    toggle.textContent = button;
    toggle.classList.toggle("hidden", !button);
    toggle.disabled = false;
  };
  const refresh = async () => {
    const support = pushSupport();
    if (!support.ok) { show(support.why); return; }
    const reg = await app.sw;
    if (!reg) { show("Notifications are unavailable: happy's service worker did not start here (" + (app.swError || "unknown reason") + ")."); return; }
    const st = await pushState(reg);
    if (st === "on") show("On for this browser.", "ok", "Turn off");
    else if (st === "blocked") show("Blocked: this site may not show notifications. Allow them in the browser's site settings, then come back.", "error");
    else show("Off for this browser.", "", "Turn on");
  };
  toggle.onclick = async () => {
    const on = toggle.textContent === "Turn on";
    toggle.disabled = true;
    state.className = "";
    state.textContent = on ? "turning on…" : "turning off…";
    try {
      const reg = await activeWorker();
      if (on) await enablePush(app.relay, reg);
      else await disablePush(app.relay, reg);
      await refresh();
    } catch (e) {
      show((on ? "Not turned on: " : "Not turned off: ") + (e?.message ?? e), "error", on ? "Turn on" : "Turn off");
    }
  };
  refresh().catch((e) => show("Notifications: " + (e?.message ?? e), "error"));
  return card;
}

// ---- machines and new sessions ----

async function refreshMachines() {
  if (!app.relay) return;
  try {
    const list = await app.relay.machines();
    const now = Date.now();
    const ms = await Promise.all(list.map((info) => openMachine(info, app.account.secret, now)));
    ms.sort((a, b) => b.lastSeen - a.lastSeen);
    app.machines = ms;
    app.machinesError = "";
  } catch (e) {
    if (e.unreachable) { app.down = e.message; renderStatus(); }
    app.machinesError = e.message;
  }
  renderMachines();
  renderActions(); // what can be resumed depends on the machines
}

function renderMachines() {
  const el = $("#machine-list");
  if (!el) return;
  const now = Date.now();
  el.replaceChildren(app.machinesError ? h("p", { class: "error" }, app.machinesError) : "",
    app.machines.length === 0 ? h("p", { class: "empty" }, "No machines yet. Run ", h("code", {}, "happy daemon start"), " on a computer.") : "",
    h("ul", {}, app.machines.map((m) => {
      const online = m.online && now - m.lastSeen <= 90_000;
      const d = m.daemon && typeof m.daemon === "object" ? m.daemon : null;
      return h("li", { class: "machine", dataset: { machine: m.id, online: String(online) } },
        h("div", { class: "machine-head" },
          h("span", { class: "title" }, m.host || m.id),
          h("span", { class: "state " + (online ? "running" : "ended") }, online ? "online" : "offline")),
        h("div", { class: "meta" }, [m.platform, m.version && "happy " + m.version, online ? "" : m.lastSeen ? "last seen " + ago(m.lastSeen) : "never seen"].filter(Boolean).join(" · ")),
        h("div", { class: "meta" }, "agents: " + (m.agents.length ? m.agents.join(", ") : "none found")),
        d ? h("div", { class: "meta daemon" }, `daemon ${d.status ?? "?"}${d.pid ? ", pid " + d.pid : ""}, ${Array.isArray(d.sessions) ? d.sessions.length : 0} sessions`) : "",
        m.error ? h("div", { class: "error" }, m.error) : "",
        m.cipher && m.agents.length ? h("button", { type: "button", class: "ghost", onclick: () => pickMachine(m.id) }, "New session here") : "");
    })));
  renderSpawnMachines();
}

function pickMachine(id) {
  const sel = $("#spawn-machine");
  if (!sel) return;
  sel.value = id;
  renderSpawnAgents();
  $("#spawn-dir")?.focus();
}

function renderSpawnMachines() {
  const sel = $("#spawn-machine");
  if (!sel) return;
  const keep = sel.value;
  const usable = app.machines.filter((m) => m.cipher && m.agents.length);
  sel.replaceChildren(...usable.map((m) => h("option", { value: m.id }, `${m.host || m.id}${m.online ? "" : " (offline)"}`)));
  if (usable.some((m) => m.id === keep)) sel.value = keep;
  renderSpawnAgents();
}

function renderSpawnAgents() {
  const sel = $("#spawn-agent");
  if (!sel) return;
  const m = app.machines.find((x) => x.id === $("#spawn-machine")?.value);
  const keep = sel.value;
  sel.replaceChildren(...(m?.agents ?? []).map((a) => h("option", { value: a }, a)));
  if (m?.agents.includes(keep)) sel.value = keep;
  renderSpawnFolders(m);
}

// renderSpawnFolders suggests the folders the picked machine ran sessions
// in (the folder input's datalist).
function renderSpawnFolders(m) {
  const list = $("#spawn-dirs");
  if (list) list.replaceChildren(...(m ? recentFolders([...app.sessions.values()], m) : []).map((p) => h("option", { value: p })));
}

async function runSpawn(params, machine) {
  const note = $("#spawn-result");
  const ask = $("#spawn-ask");
  const say = (text, cls = "") => { if (note) { note.textContent = text; note.className = cls; } };
  ask?.classList.add("hidden");
  app.spawn = { state: "sending", params, machine };
  say(`starting ${params.agent} on ${machine.host || machine.id}…`);
  try {
    const r = await spawnSession(app.sock, machine, params);
    if (r.kind === "success") {
      app.spawn = null;
      say("started");
      await refreshSessions();
      location.hash = "#/s/" + encodeURIComponent(r.sessionId);
      return;
    }
    if (r.kind === "ask") {
      app.spawn = { state: "asking", params, machine };
      say("");
      $("#spawn-ask-text").textContent = `The folder ${r.directory || params.directory} does not exist on ${machine.host || machine.id}. Create it?`;
      ask?.classList.remove("hidden");
      $("#spawn-ask-yes")?.focus();
      return;
    }
    app.spawn = null;
    say("Not started: " + r.message, "error");
  } catch (e) {
    app.spawn = null;
    say("Not started: " + e.message, "error");
  }
}

function machinesView() {
  const machine = h("select", { id: "spawn-machine", "aria-label": "machine", onchange: renderSpawnAgents });
  const dir = h("input", { id: "spawn-dir", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "/home/you/project", "aria-label": "folder", list: "spawn-dirs" });
  const agent = h("select", { id: "spawn-agent", "aria-label": "agent" });
  const prompt = h("textarea", { id: "spawn-prompt", rows: 3, placeholder: "First prompt (optional)", "aria-label": "first prompt" });
  const create = h("input", { id: "spawn-create", type: "checkbox" });
  const form = h("form", { id: "spawn", class: "card", onsubmit: (e) => {
    e.preventDefault();
    const m = app.machines.find((x) => x.id === machine.value);
    const note = $("#spawn-result");
    if (!m) { note.textContent = "Pick a machine."; note.className = "error"; return; }
    let params;
    try {
      params = spawnParams({ directory: dir.value, agent: agent.value, prompt: prompt.value, createFolder: create.checked });
    } catch (err) { note.textContent = err.message; note.className = "error"; return; }
    runSpawn(params, m);
  } },
    h("h2", {}, "New session"),
    h("label", { for: "spawn-machine" }, "Machine"), machine,
    h("label", { for: "spawn-dir" }, "Folder"), dir, h("datalist", { id: "spawn-dirs" }),
    h("label", { for: "spawn-agent" }, "Agent"), agent,
    h("label", { for: "spawn-prompt" }, "First prompt"), prompt,
    h("label", { class: "check", for: "spawn-create" }, create, h("span", {}, "Create the folder if it does not exist")),
    h("button", { type: "submit", id: "spawn-submit" }, "Start"),
    h("div", { id: "spawn-ask", class: "notice hidden", role: "alertdialog" },
      h("p", { id: "spawn-ask-text" }),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "allow", id: "spawn-ask-yes", onclick: () => { const s = app.spawn; if (s?.state === "asking") runSpawn({ ...s.params, approvedNewDirectoryCreation: true }, s.machine); } }, "Create it"),
        h("button", { type: "button", class: "ghost", id: "spawn-ask-no", onclick: () => { app.spawn = null; $("#spawn-ask")?.classList.add("hidden"); } }, "Cancel"))),
    h("p", { id: "spawn-result", role: "status" }));
  const page = h("div", { class: "page", id: "machines" },
    h("div", { class: "page-head" }, h("a", { href: "#", class: "back", "aria-label": "back to sessions" }, "‹"), h("h2", {}, "Machines"),
      h("button", { type: "button", class: "ghost", id: "machines-refresh", onclick: refreshMachines }, "Refresh")),
    h("div", { class: "scroll" }, h("div", { id: "machine-list", class: "card" }), form));
  queueMicrotask(renderMachines);
  return page;
}

// ---- boot ----

// insecureView says why this page cannot run the app (secure.js) and what
// to do; nothing else of the app starts.
function insecureView(p) {
  return h("div", { class: "signin", id: "insecure", role: "alert", dataset: { kind: p.kind } },
    h("h1", {}, p.title),
    ...p.text.map((t) => h("p", {}, t)));
}

async function boot() {
  // Without a secure context there is no WebCrypto, and every record would
  // fail to decrypt on its own: say so once, send nothing, and take a
  // pairing link (a secret) out of the address bar unused.
  const problem = secureContextProblem(globalThis, location.hash.startsWith("#pair="));
  if (problem) {
    if (location.hash.startsWith("#pair=")) history.replaceState(null, "", location.pathname + location.search);
    $("#app").replaceChildren(insecureView(problem));
    return;
  }
  registerWorker();
  window.addEventListener("hashchange", () => {
    if (location.hash.startsWith("#pair=")) { onPairLink(takeLink()); return; }
    if (app.account) route();
  });
  setInterval(() => { if (app.account) { renderList(); renderHeader(); if (app.view === "machines") renderMachines(); } }, 5000);
  const link = takeLink();
  const saved = loadAccount();
  if (saved) {
    app.pendingLink = link;
    await start(saved);
  } else if (link) {
    await usePairLink(link);
  } else {
    render();
  }
}

// Test hook: what the page shows, as data (e2e tests compare it with `happy log --json`).
// decide answers a call of the open session as the buttons do (also one
// that no longer waits, which is how a test makes a stale answer).
window.happyApp = {
  summary: () => (app.open?.transcript ? partsSummary(app.open.transcript) : null),
  decide: (callID, decision) => control(callID, "permission", { callID, decision }),
};

boot();
