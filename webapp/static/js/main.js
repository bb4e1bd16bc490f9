// The app: sign-in (pairing link or backup key), the live session list, one
// session's live transcript with its controls, the account's machines with
// a "New session" form, and the devices page (approve a terminal, sign out
// everywhere). State lives in this module; every change re-renders the part
// of the page it touches.

import * as c from "./crypto.js";
import { Relay, RpcError, callRPC, controlEnvelope, parsePairLink, promptEnvelope } from "./api.js";
import { Reducer, blockedTools, sessionState, STATE_LABELS } from "./reduce.js";
import { approveTerminal, revokeEverywhere, openMachine, spawnParams, spawnSession } from "./devices.js";
import { h, renderTranscript, partsSummary, snapshotUI, restoreUI } from "./render.js";
import { Blobs, inspectFile, uploadFile, IMAGE_TYPES } from "./attach.js";
import { secureContextProblem } from "./secure.js";

const STORE_KEY = "happy.account";
const $ = (sel) => document.querySelector(sel);

const app = {
  account: null, // {relay, token, secret: Uint8Array}
  relay: null,
  sock: null,
  sessions: new Map(), // sid → {info, md, cipher, thinking, waiting, error}
  open: null, // {sid, reducer, transcript, notices, openChildren, loading, blobs, files}
  view: null, // "machines" | "devices" | null (a session or nothing)
  machines: [], // openMachine's results, newest activity first
  machinesError: "",
  spawn: null, // {state: "asking"|"sending", params, machine} while a spawn waits
  pairing: false, // a pairing link is being used
  pendingLink: null, // a pairing link opened while signed in, waiting for the person's yes
  error: "",
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

function signOut(message = "") {
  localStorage.removeItem(STORE_KEY);
  app.sock?.close();
  Object.assign(app, { account: null, relay: null, sock: null, sessions: new Map(), open: null, view: null, machines: [], spawn: null, error: typeof message === "string" ? message : "" });
  location.hash = "";
  render();
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
  connectSocket();
  await refreshSessions();
  route();
}

// ---- live data ----

function connectSocket() {
  const sock = app.relay.socket();
  app.sock = sock;
  sock.on("connect", () => { app.error = ""; refreshSessions(); if (app.open) fetchOpen(); });
  sock.on("connect_error", (e) => { app.error = `live updates unavailable: ${e.message}`; renderStatus(); });
  sock.on("update", (u) => onUpdate(u?.body ?? {}));
  sock.on("ephemeral", (e) => {
    if (e?.type === "text-delta") { onTextDelta(e); return; }
    if (e?.type !== "activity") return;
    const s = app.sessions.get(e.id);
    if (!s) return;
    s.info.activeAt = e.activeAt ?? s.info.activeAt;
    s.info.active = e.active;
    s.thinking = !!e.thinking;
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
      if (app.view === "machines") refreshMachines();
  }
}

async function openSessionInfo(info) {
  const s = { info, md: null, cipher: null, thinking: false, waiting: false, error: "" };
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
      if (old) { s.thinking = old.thinking; s.waiting = old.waiting; }
      next.set(info.id, s);
    }
    app.sessions = next;
    app.error = "";
    for (const s of next.values()) if (s.cipher && sessionState(s.info, s.md, Date.now()) !== "stale" && !["ended", "archived"].includes(s.md?.lifecycleState)) { s.watch = true; watchSession(s); }
  } catch (e) {
    if (e.status === 401) { signOut("the relay refused this browser's token; sign in again"); return; }
    app.error = e.message;
  }
  renderList();
}

// watchSession keeps a running session's "waiting for you" up to date
// without opening it: its rows are reduced in the background.
async function watchSession(s) {
  if (s.busy) { s.again = true; return; }
  s.busy = true;
  try {
    s.reducer ??= new Reducer();
    await addRows(s.reducer, s.cipher, await app.relay.messages(s.info.id, s.reducer.lastSeq));
    s.waiting = blockedTools(s.reducer.transcript()).length > 0;
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
      reducer.add(row.seq, c.decodeUtf8(await cipher.open(c.b64decode(ct))));
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
    if (n > 0 || !o.transcript) {
      o.transcript = o.reducer.transcript();
      s.waiting = blockedTools(o.transcript).length > 0;
      renderTranscriptView();
      renderList();
    }
  } catch (e) {
    o.error = e.message;
    renderTranscriptView();
  }
  o.busy = false;
  if (o.again) { o.again = false; fetchOpen(); }
}

// ---- controls ----

function openCtx() {
  const o = app.open;
  const s = app.sessions.get(o.sid);
  const live = s && ["running", "waiting", "thinking"].includes(stateOf(s));
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
  await app.relay.sendMessages(o.sid, [{ content: await c.sealJSON(s.cipher, env), localId: id + ".1" }]);
}

async function abortTurn() {
  const o = app.open;
  await callRPC(app.sock, app.sessions.get(o.sid).cipher, o.sid, "abort", {});
}

// ---- views ----

const stateOf = (s) => sessionState(s.info, s.md, Date.now(), { waiting: s.waiting, thinking: s.thinking });

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
    app.open = sid ? { sid, reducer: new Reducer(), transcript: null, notices: new Map(), openChildren: new Set(), blobs: null, files: [] } : null;
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
        h("a", { href: "#/devices", id: "nav-devices" }, "Devices")),
      h("button", { type: "button", class: "ghost", onclick: () => signOut() }, "Sign out")),
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
  if (el) el.textContent = app.error;
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
  const rows = [...app.sessions.values()].sort((a, b) => Math.max(b.info.updatedAt ?? 0, b.info.activeAt ?? 0) - Math.max(a.info.updatedAt ?? 0, a.info.activeAt ?? 0));
  el.replaceChildren(h("h2", {}, "Sessions"), rows.length === 0 ? h("p", { class: "empty" }, "No sessions yet. Start one with ", h("code", {}, "happy claude"), ".") : "",
    h("ul", {}, rows.map((s) => {
      const st = stateOf(s);
      const md = s.md || {};
      return h("li", { class: "row" + (app.open?.sid === s.info.id ? " current" : ""), dataset: { sid: s.info.id, state: st } },
        h("a", { href: "#/s/" + encodeURIComponent(s.info.id) },
          h("span", { class: "title" }, md.summary?.text || s.error || "(untitled)"),
          h("span", { class: `state ${st}` }, STATE_LABELS[st]),
          h("span", { class: "meta" }, [md.flavor, md.host, md.path].filter(Boolean).join(" · ")),
          h("span", { class: "when" }, ago(Math.max(s.info.updatedAt ?? 0, s.info.activeAt ?? 0)))));
    })));
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
      h("h2", {}, md.summary?.text || "(untitled)"),
      h("div", { class: "meta" }, [md.flavor, md.host, md.path].filter(Boolean).join(" · "))),
    h("span", { class: `state ${st}`, id: "session-state" }, STATE_LABELS[st]));
  const live = ["running", "waiting", "thinking"].includes(st);
  $("#prompt")?.classList.toggle("hidden", !live);
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
    h("span", {}, `${IMAGE_TYPES.includes(f.mime) ? "🖼" : "📄"} ${f.name} · ${f.bytes.length.toLocaleString("en-US")} bytes`),
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
      h("button", { type: "button", id: "attach", class: "ghost", "aria-label": "attach files", onclick: () => picker.click() }, "📎 Attach"),
      h("button", { type: "submit", id: "send" }, "Send"),
      h("button", { type: "button", id: "abort", class: "deny", onclick: async () => {
        note.textContent = "aborting…";
        try { await abortTurn(); note.textContent = "aborted"; } catch (err) { note.textContent = err.message; }
      } }, "Abort"),
      note));
  el.replaceChildren(h("div", { id: "session-head", class: "session-head" }), h("div", { id: "transcript", class: "scroll" }), form);
  renderHeader();
  renderTranscriptView();
}

function renderTranscriptView() {
  const el = $("#transcript");
  const o = app.open;
  if (!el || !o) return;
  const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  if (!app.sessions.has(o.sid)) { el.replaceChildren(h("p", { class: "empty" }, app.sessions.size ? "No such session." : "Loading…")); return; }
  if (!o.transcript) { el.replaceChildren(h("p", { class: "empty" }, o.error || "Loading…")); return; }
  const kept = snapshotUI(el);
  const view = renderTranscript(o.transcript, openCtx());
  view.addEventListener("toggle", (e) => {
    const id = e.target.dataset?.child;
    if (id) e.target.open ? o.openChildren.add(id) : o.openChildren.delete(id);
  }, true);
  el.replaceChildren(view, o.error ? h("p", { class: "error" }, o.error) : "");
  restoreUI(el, kept);
  if (atBottom) el.scrollTop = el.scrollHeight;
  renderHeader();
}

// ---- devices: approve a terminal, sign out everywhere ----

function devicesView() {
  const code = h("input", { id: "approve-code", type: "text", autocomplete: "off", autocapitalize: "characters", spellcheck: "false", placeholder: "XXXXX-XXXXX, or the link", "aria-label": "pairing code or link" });
  const legacy = h("input", { id: "approve-legacy", type: "checkbox" });
  const result = h("p", { id: "approve-result", role: "status" });
  const form = h("form", { id: "approve", class: "card", onsubmit: async (e) => {
    e.preventDefault();
    result.className = "";
    result.textContent = "approving…";
    try {
      const r = await approveTerminal(app.relay, app.account.secret, code.value, { legacy: legacy.checked });
      result.textContent = `Approved the terminal with code ${r.code} (${r.variant === "legacy" ? "account secret shared" : "content key only"}). It signs in within a few seconds.`;
      result.className = "ok";
      code.value = "";
    } catch (err) {
      result.textContent = "Not approved: " + err.message;
      result.className = "error";
    }
  } },
    h("h2", {}, "Approve a terminal"),
    h("p", {}, "Run ", h("code", {}, "happy auth login"), " on the computer, then type the code it shows or paste its link."),
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
  return h("div", { class: "page", id: "devices" },
    h("div", { class: "page-head" }, h("a", { href: "#", class: "back", "aria-label": "back to sessions" }, "‹"), h("h2", {}, "Devices")),
    h("div", { class: "scroll" },
      form,
      h("div", { class: "card" },
        h("h2", {}, "Sign out everywhere"),
        h("p", {}, "Revokes every token of the account: every terminal, daemon and browser must pair again. Then this browser forgets its keys."),
        h("button", { type: "button", class: "deny", id: "revoke", onclick: () => confirm.classList.remove("hidden") }, "Sign out everywhere"),
        confirm, note)));
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
    app.machinesError = e.message;
  }
  renderMachines();
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
  const dir = h("input", { id: "spawn-dir", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "/home/you/project", "aria-label": "folder" });
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
    h("label", { for: "spawn-dir" }, "Folder"), dir,
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
