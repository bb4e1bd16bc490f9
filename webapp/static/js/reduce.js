// Record reduction: the decrypted rows of one relay session folded into a
// transcript {session, messages, children, todos, dropped}, as the CLI's
// session.Readback does (docs/ARCHITECTURE.md, "Relay envelope and versions").
// Each row is {kind, version, …}; the highest version of a record wins, a
// message is ordered by the seq of its first version, and anything unreadable
// becomes a Dropped entry with a reason instead of disappearing. A row must be
// the record version its localId names ("<record id>.<version>"; a legacy
// envelope happy wrote "legacy:<its id>.<n>"): a row stored under another
// one (a relay replaying a row's ciphertext) is refused as wrong_localid.

import { importLegacy } from "./refimport.js";

const KINDS = new Set(["message", "session", "todos", "dropped"]);
const TODO_STATUS = new Set(["pending", "in_progress", "completed", "cancelled"]);
const TODO_PRIORITY = new Set(["high", "medium", "low"]);

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** Reducer holds the records of one relay session. root ({id, directory,
 * title}: the session as the relay lists it, title its metadata summary)
 * is the root of a session without session records; a session with no
 * canonical records at all was written by the reference CLI, and its
 * transcript is its legacy rows projected (refimport.js), with the
 * permissions of the agentState given to setAgentState. */
export class Reducer {
  constructor(root = null) {
    this.root = root;
    this.legacyRows = []; // {seq, env, text}: the legacy rows, for a reference session
    this.agentState = null;
    this.sessions = new Map(); // id → {version, seq, value}
    this.messages = new Map(); // message id → {version, seq, value:{info, parts}}
    this.todos = new Map(); // session id → {version, seq, value}
    this.refused = new Map(); // session id → {version, seq, value}
    this.first = new Map(); // message id → seq of its first version
    this.dropped = []; // refusals of this reader
    this.legacy = 0; // reference-app prompts without an envelope
    this.lastSeq = 0;
  }

  refuse(seq, kind, reason, detail, raw) {
    let r = typeof raw === "string" ? raw : "";
    if (r.length > 512) r = r.slice(0, 512);
    this.dropped.push({ source: "relay", line: seq, kind, reason, detail, raw: r });
  }

  /** addRaw adds a row whose decryption failed or whose text is not JSON. */
  addFailure(seq, reason, detail) {
    this.lastSeq = Math.max(this.lastSeq, seq);
    this.refuse(seq, "", reason, detail, "");
  }

  /** add folds one decrypted row at seq: localId is the one it was stored
   * under, text its plaintext. */
  add(seq, localId, text) {
    this.lastSeq = Math.max(this.lastSeq, seq);
    let env;
    try {
      env = JSON.parse(text);
    } catch {
      this.refuse(seq, "", "unparseable_json", "not valid JSON", text);
      return;
    }
    if (!isObject(env)) {
      this.refuse(seq, "", "not_an_object", "a relay record must be a JSON object", text);
      return;
    }
    if (env.kind === undefined) {
      // The reference app's legacy records: its prompts, and the envelopes
      // happy writes for it next to the canonical records.
      const c = env.content;
      const envelope = isObject(c) && ((env.role === "session" && (c.ev !== undefined || c.type === "session")) ||
        (env.role === "agent" && typeof c.type === "string" && c.type !== ""));
      if (env.role === "user" || envelope) {
        const wrong = legacyLocalIdError(localId, env);
        if (wrong) { this.refuse(seq, typeof env.role === "string" ? env.role : "", "wrong_localid", wrong, text); return; }
        this.legacy++;
        this.legacyRows.push({ seq, env, text });
        return;
      }
      this.refuse(seq, typeof env.role === "string" ? env.role : "", "unknown_type", "no envelope kind", text);
      return;
    }
    const kind = String(env.kind);
    const version = env.version;
    if (!Number.isInteger(version) || version < 1) {
      this.refuse(seq, kind, "invalid_field", "version must be an integer >= 1", text);
      return;
    }
    if (!KINDS.has(kind)) {
      this.refuse(seq, kind, "unknown_type", "unknown envelope kind", text);
      return;
    }
    const keep = (map, key, value) => {
      const cur = map.get(key);
      if (!cur || version > cur.version) map.set(key, { version, seq, value });
    };
    // owns refuses the row unless localId is "<record>.<version>".
    const owns = (record) => {
      if (localId === `${record}.${version}`) return true;
      this.refuse(seq, kind, "wrong_localid", `stored under localId ${JSON.stringify(localId ?? "")}, but it is ${record} version ${version}`, text);
      return false;
    };
    switch (kind) {
      case "message": {
        const err = checkMessage(env.info, env.parts);
        if (err) { this.refuse(seq, kind, "invalid_field", err, text); return; }
        const id = env.info.id;
        if (!owns(id)) return;
        const f = this.first.get(id);
        if (f === undefined || seq < f) this.first.set(id, seq);
        const cur = this.messages.get(id);
        if (cur && version > cur.version) keepLive(cur.value.parts, env.parts);
        keep(this.messages, id, { info: env.info, parts: env.parts });
        return;
      }
      case "session":
        if (!isObject(env.session) || typeof env.session.id !== "string" || env.session.id === "") {
          this.refuse(seq, kind, "invalid_field", "session record needs a session with an id", text);
          return;
        }
        if (!owns(env.session.id)) return;
        keep(this.sessions, env.session.id, env.session);
        return;
      case "todos": {
        if (typeof env.sessionID !== "string" || env.sessionID === "" || !Array.isArray(env.todos)) {
          this.refuse(seq, kind, "invalid_field", "todos record needs sessionID and a todos array", text);
          return;
        }
        for (let i = 0; i < env.todos.length; i++) {
          const t = env.todos[i];
          if (!isObject(t) || (t.status !== undefined && !TODO_STATUS.has(t.status)) || (t.priority !== undefined && !TODO_PRIORITY.has(t.priority))) {
            this.refuse(seq, kind, "invalid_field", `todos[${i}]: unknown status or priority`, text);
            return;
          }
        }
        if (!owns("todos:" + env.sessionID)) return;
        keep(this.todos, env.sessionID, env.todos);
        return;
      }
      case "dropped":
        if (typeof env.sessionID !== "string" || env.sessionID === "" || !Array.isArray(env.dropped)) {
          this.refuse(seq, kind, "invalid_field", "dropped record needs sessionID and a dropped array", text);
          return;
        }
        if (!owns("dropped:" + env.sessionID)) return;
        keep(this.refused, env.sessionID, env.dropped);
    }
  }

  /** applyDelta folds one live text delta {messageId, partId, offset,
   * delta} (docs/ARCHITECTURE.md, "Live text"; offsets in UTF-16 units, a
   * JavaScript string's length) into the stored part it extends. It returns
   * "applied", "duplicate", "gap" (the delta starts past the part's end, or
   * the part is not stored yet: the next stored version brings the text),
   * "conflict" (it overlaps with other text) or "invalid". */
  applyDelta(d) {
    if (!isObject(d) || typeof d.messageId !== "string" || typeof d.partId !== "string" ||
      !Number.isInteger(d.offset) || d.offset < 0 || typeof d.delta !== "string" || d.delta === "") return "invalid";
    const m = this.messages.get(d.messageId);
    const p = m?.value.parts.find((x) => isObject(x) && x.id === d.partId && (x.type === "text" || x.type === "reasoning"));
    if (!p) return "gap";
    const text = typeof p.text === "string" ? p.text : "";
    if (d.offset > text.length) return "gap";
    const have = text.slice(d.offset);
    if (have.length >= d.delta.length) return have.startsWith(d.delta) ? "duplicate" : "conflict";
    if (!d.delta.startsWith(have)) return "conflict";
    p.text = text + d.delta.slice(have.length);
    return "applied";
  }

  /** setAgentState gives the session's decrypted agentState (an object, or
   * null): a reference session's permissions. */
  setAgentState(st) { this.agentState = isObject(st) ? st : null; }

  /** imported reports whether the transcript is the projection of legacy
   * rows: there are some, and no canonical message or session record. */
  imported() { return this.legacyRows.length > 0 && this.messages.size === 0 && this.sessions.size === 0; }

  /** transcript builds the document: the root session (the first session
   * record without a parentID), its messages in order, child sessions
   * nested under their parent, todos, and every dropped entry; for a
   * reference session (imported), the legacy rows projected. */
  transcript() {
    if (this.imported()) {
      const root = { id: "", projectID: "", directory: "", title: "", time: { created: 0, updated: 0 }, ...(this.root ?? {}) };
      const t = importLegacy(this.legacyRows, this.agentState, root);
      t.dropped.push(...this.dropped);
      return t;
    }
    const bySession = new Map();
    for (const { value } of this.messages.values()) {
      const sid = value.info.sessionID;
      if (!bySession.has(sid)) bySession.set(sid, []);
      bySession.get(sid).push(value);
    }
    const children = new Map();
    let rootID = "", rootSeq = 0;
    for (const [id, s] of this.sessions) {
      if (!s.value.parentID) {
        if (rootID === "" || s.seq < rootSeq || (s.seq === rootSeq && id < rootID)) { rootID = id; rootSeq = s.seq; }
        continue;
      }
      if (!children.has(s.value.parentID)) children.set(s.value.parentID, []);
      children.get(s.value.parentID).push(id);
    }
    const used = new Set();
    const build = (id) => {
      used.add(id);
      const msgs = (bySession.get(id) || []).slice();
      msgs.sort((a, b) => {
        const fa = this.first.get(a.info.id), fb = this.first.get(b.info.id);
        if (fa !== fb) return fa - fb;
        return a.info.id < b.info.id ? -1 : a.info.id > b.info.id ? 1 : 0;
      });
      const t = {
        session: this.sessions.get(id)?.value ?? { id },
        messages: msgs,
        children: [],
        todos: this.todos.get(id)?.value ?? [],
        dropped: (this.refused.get(id)?.value ?? []).slice(),
      };
      for (const k of (children.get(id) || []).sort()) if (!used.has(k)) t.children.push(build(k));
      return t;
    };
    const doc = rootID ? build(rootID) : { session: { id: "" }, messages: [], children: [], todos: [], dropped: [] };
    doc.dropped.push(...this.dropped);
    const orphans = [...bySession.keys()].filter((s) => !used.has(s)).sort();
    for (const sid of orphans) {
      for (const m of bySession.get(sid)) {
        doc.dropped.push({ source: "relay", line: this.messages.get(m.info.id).seq, kind: "message", reason: "orphan",
          detail: `message ${m.info.id} belongs to session ${sid}, which has no session record` });
      }
    }
    return doc;
  }
}

// keepLive keeps, in a new stored version's parts, the live text a reader
// already has past it: a stored version older than the deltas applied since
// (its text a prefix of the live text) must not take the text back.
function keepLive(oldParts, newParts) {
  if (!Array.isArray(oldParts) || !Array.isArray(newParts)) return;
  for (const np of newParts) {
    if (!isObject(np) || typeof np.text !== "string" || (np.type !== "text" && np.type !== "reasoning")) continue;
    const op = oldParts.find((x) => isObject(x) && x.id === np.id && x.type === np.type);
    if (op && typeof op.text === "string" && op.text.length > np.text.length && op.text.startsWith(np.text)) np.text = op.text;
  }
}

// legacyLocalIdError checks a legacy envelope against its localId: under
// "legacy:<id>.<n>" (what happy writes) the envelope's own id (content.id of
// a session envelope, content.data.id of an ACP tool result) must be <id>.
// Other localIds (the reference app's prompts) cannot be checked. It returns
// the refusal's detail, or "".
function legacyLocalIdError(localId, env) {
  if (typeof localId !== "string" || !localId.startsWith("legacy:")) return "";
  const rest = localId.slice("legacy:".length);
  const dot = rest.lastIndexOf(".");
  const n = dot < 0 ? NaN : Number(rest.slice(dot + 1));
  const c = env.content;
  const id = env.role === "session" ? c?.id : env.role === "agent" && c?.type === "acp" ? c?.data?.id : undefined;
  const own = typeof id === "string" && id !== "" ? id : "";
  if (Number.isInteger(n) && n >= 1 && /^[0-9]+$/.test(rest.slice(dot + 1)) && own !== "" && rest.slice(0, dot) === own) return "";
  return `stored under localId ${JSON.stringify(localId)}, but it is the legacy envelope ${JSON.stringify(own)}`;
}

function checkMessage(info, parts) {
  if (!isObject(info) || !Array.isArray(parts)) return "message record needs info and parts";
  if (typeof info.id !== "string" || info.id === "") return "info.id: missing";
  if (info.role !== "user" && info.role !== "assistant") return `info.role: unknown role ${JSON.stringify(info.role)}`;
  if (typeof info.sessionID !== "string" || info.sessionID === "") return "info.sessionID: missing";
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i];
    if (!isObject(p) || typeof p.type !== "string") return `parts[${i}]: not a part`;
    if (p.type === "tool" && (!isObject(p.state) || typeof p.state.status !== "string")) return `parts[${i}].state: missing status`;
  }
  return "";
}

/** findChild returns the child transcript with session id sid, searching the whole tree. */
export function findChild(t, sid) {
  for (const c of t.children) {
    if (c.session.id === sid) return c;
    const d = findChild(c, sid);
    if (d) return d;
  }
  return null;
}

/** blockedTools lists the tool parts of a transcript (children included) that wait for a person. */
export function blockedTools(t) {
  const out = [];
  const walk = (tr) => {
    for (const m of tr.messages) for (const p of m.parts) if (p.type === "tool" && p.state.status === "blocked") out.push(p);
    tr.children.forEach(walk);
  };
  walk(t);
  return out;
}

/** INTERRUPTED_TOOL and INTERRUPTED_MESSAGE are what readers show of the
 * open parts of a session nothing runs any more (happy log's
 * export.InterruptedTool and export.InterruptedMessage). */
export const INTERRUPTED_TOOL = "interrupted (its happy stopped)";
export const INTERRUPTED_MESSAGE = "interrupted: its happy stopped before this message finished";

const OPEN_TOOL = new Set(["pending", "running", "blocked"]);

/** stoppedView is transcript t as readers show a session nothing runs any
 * more (ended, archived or stale: not isLive): each tool still pending,
 * running or blocked gets status "interrupted" (its stored status kept as
 * state.was), and an assistant message that never finished (no completed
 * time or no finish) gets info.interrupted = true; children alike. The
 * result shares what it does not change with t; t itself is not changed
 * (the stored transcript stays as written: a stale session may come back). */
export function stoppedView(t) {
  const messages = t.messages.map((m) => {
    let parts = m.parts;
    if (parts.some((p) => p.type === "tool" && OPEN_TOOL.has(p.state?.status))) {
      parts = parts.map((p) => p.type === "tool" && OPEN_TOOL.has(p.state?.status)
        ? { ...p, state: { ...p.state, status: "interrupted", was: p.state.status } } : p);
    }
    const info = m.info.role === "assistant" && (!m.info.time?.completed || !m.info.finish) ? { ...m.info, interrupted: true } : m.info;
    return parts === m.parts && info === m.info ? m : { ...m, info, parts };
  });
  return { ...t, messages, children: t.children.map(stoppedView) };
}

export const STALE_AFTER_MS = 90_000;

/** LIVE_STATES are the states of a session a happy process runs (lifecycle
 * "running" with a fresh sign of life): it takes prompts and controls. */
export const LIVE_STATES = ["running", "idle", "thinking", "waiting"];

/** isLive tells a live state (LIVE_STATES) from ended, archived and stale. */
export const isLive = (state) => LIVE_STATES.includes(state);

/** lifecycleState is the state `happy sessions` shows (app.State):
 * "ended" or "archived" from the metadata, "stale" when a running
 * session's last sign of life (activeAt, lifecycleStateSince, createdAt,
 * whichever is later) is over 90 s old, else "running". */
export function lifecycleState(info, md, now) {
  const lc = md?.lifecycleState;
  if (lc === "ended" || lc === "archived") return lc;
  const last = Math.max(info?.activeAt || 0, md?.lifecycleStateSince || 0, info?.createdAt || 0);
  if (now - last > STALE_AFTER_MS) return "stale";
  return "running";
}

/** sessionState is what the list shows: lifecycleState, with a running
 * session told apart by what a reader knows: "waiting" when a tool waits
 * for a person; else the heartbeat's thinking flag (true: "thinking",
 * false: "idle", waiting for its next prompt); before any heartbeat was
 * heard (thinking undefined) the transcript's last turn (turnOpen: true
 * "thinking", false "idle"); "running" when neither is known yet. */
export function sessionState(info, md, now, { waiting = false, thinking, turnOpen } = {}) {
  const st = lifecycleState(info, md, now);
  if (st !== "running") return st;
  if (waiting) return "waiting";
  if (thinking === true) return "thinking";
  if (thinking === false) return "idle";
  if (turnOpen === true) return "thinking";
  if (turnOpen === false) return "idle";
  return "running";
}

/** turnOpen reports whether the root session's last message is a turn
 * still under way: a prompt not answered yet (a user message last) or an
 * assistant message not completed (no time.completed, no error). */
export function turnOpen(t) {
  const last = t?.messages?.[t.messages.length - 1];
  if (!last) return false;
  if (last.info.role === "user") return true;
  return !(last.info.time?.completed > 0) && !last.info.error;
}

/** pathBase is Go's filepath.Base on a Unix path: the last element, trailing
 * slashes removed; "/" for a path of slashes only and "." for "". */
export function pathBase(p) {
  if (p === "") return ".";
  const s = p.replace(/\/+$/, "");
  if (s === "") return "/";
  return s.slice(s.lastIndexOf("/") + 1);
}

// GO_BLANK matches a string strings.TrimSpace empties (Unicode White_Space,
// which is not quite JavaScript's trim: U+0085 is space, U+FEFF is not).
const GO_BLANK = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** sessionTitle is a session's title as `happy log` shows it
 * (app.Opened.TitleOf): metadata summary.text unless blank, else the
 * title of its transcript's root (a reference session's first prompt)
 * when given and not blank, else the last element of its folder (path),
 * else "(untitled)". */
export function sessionTitle(md, rootTitle) {
  const text = md?.summary?.text;
  if (typeof text === "string" && !GO_BLANK.test(text)) return text;
  if (typeof rootTitle === "string" && !GO_BLANK.test(rootTitle)) return rootTitle.trim();
  if (typeof md?.path === "string" && md.path !== "") return pathBase(md.path);
  return "(untitled)";
}

export const STATE_LABELS = {
  running: "running", idle: "idle", waiting: "waiting for you", thinking: "thinking", ended: "ended", archived: "archived", stale: "stale",
};

/**
 * receipt reads the receipts of a prompt sent from another device, which
 * the running session writes on its version of the user message
 * (info.time.received, handed, started: Unix ms; docs/ARCHITECTURE.md,
 * "Receipts"). It is null for anything else (an assistant message, a
 * prompt typed where the agent runs, one the session has not taken up);
 * otherwise {step, received, handed, started}, step the last one reached
 * ("received", "handed" or "started"), a time null when not reached.
 */
export function receipt(info) {
  const t = info?.role === "user" ? info.time : null;
  const at = (v) => (Number.isFinite(v) && v > 0 ? v : null);
  if (!t || at(t.received) === null) return null;
  const rc = { step: "received", received: t.received, handed: at(t.handed), started: null };
  if (rc.handed !== null) {
    rc.step = "handed";
    rc.started = at(t.started);
    if (rc.started !== null) rc.step = "started";
  }
  return rc;
}
