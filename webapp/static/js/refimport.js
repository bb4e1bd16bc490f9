// Reading a session the reference CLI wrote (docs/ARCHITECTURE.md, "The reference
// app"): its legacy rows — prompts {role:"user"}, seed 000's
// session envelopes {role:"session"} and the older {role:"agent"} records
// (acp, codex, output, event) — and the permissions of its agentState,
// projected onto the canonical transcript, as the CLI's package
// session/refimport does. The browser holds the only key, so the projection
// runs here; the Go test checks this one against the Go one on the same
// rows. What cannot be mapped is a dropped entry with its reason.

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const SOURCE = "reference";

// CLAUDE_TOOLS: canonical tool → [Claude name, {canonical key: Claude key}].
const CLAUDE_TOOLS = {
  bash: ["Bash", {}], read: ["Read", { path: "file_path" }], write: ["Write", { path: "file_path" }],
  edit: ["Edit", { path: "file_path", oldString: "old_string", newString: "new_string", replaceAll: "replace_all" }],
  glob: ["Glob", {}], grep: ["Grep", {}], fetch: ["WebFetch", {}], search: ["WebSearch", {}],
  task: ["Task", { agent: "subagent_type" }], todo: ["TodoWrite", {}], question: ["AskUserQuestion", {}], plan: ["ExitPlanMode", {}],
};
const ALIASES = { Agent: "Task" };

/** canonicalTool is [tool, input] of a native tool name and its arguments. */
export function canonicalTool(name, args) {
  const n = ALIASES[name] ?? name;
  for (const [tool, [cname, keys]] of Object.entries(CLAUDE_TOOLS)) {
    if (cname !== n) continue;
    const back = Object.fromEntries(Object.entries(keys).map(([k, v]) => [v, k]));
    const input = {};
    for (const [k, v] of Object.entries(args)) input[back[k] ?? k] = v;
    return [tool, input];
  }
  const m = /^mcp__(.+?)__(.+)$/.exec(name);
  if (m) return [`mcp:${m[1]}/${m[2]}`, args];
  return [name, args];
}

// FNV-1a 64 of the parts, as the CLI's mapper.MakeID.
const FNV_OFFSET = 0xcbf29ce484222325n, FNV_PRIME = 0x100000001b3n, MASK = 0xffffffffffffffffn;
const enc = new TextEncoder();
function makeID(prefix, sid, pos, identity) {
  let h = FNV_OFFSET;
  for (const bytes of [enc.encode(sid), [0], enc.encode(prefix), [0], enc.encode(identity)]) {
    for (const b of bytes) h = ((h ^ BigInt(b)) * FNV_PRIME) & MASK;
  }
  return prefix + pos.toString(16).padStart(12, "0") + h.toString(16).padStart(16, "0");
}

// patternsOf is what a permission on tool accesses (the CLI's
// agent.ToolPatterns): the command, path, pattern, URL, query or agent.
function patternsOf(tool, input) {
  const key = { bash: "command", read: "path", write: "path", edit: "path", glob: "pattern", grep: "pattern", fetch: "url", search: "query", task: "agent" }[tool];
  if (key && typeof input[key] === "string" && input[key] !== "") return [input[key]];
  if (tool.startsWith("mcp:")) return ["*"];
  return undefined;
}

function outputText(v) {
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

function deepEqual(a, b) { return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b)); }
function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (isObject(v)) return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

/**
 * importLegacy projects legacy rows [{seq, env}] (env the parsed row, in
 * seq order) and agentState (an object or null) onto a transcript whose
 * root session is root ({id, directory, title?, …}): {session, messages,
 * children, todos, dropped}, messages as {info, parts}.
 */
export function importLegacy(rows, agentState, root) {
  const b = new Builder(root);
  for (const r of rows) b.row(r.seq, r.env, r.text);
  b.permissions(agentState);
  if (!(typeof b.rootS.s.title === "string" && b.rootS.s.title.trim() !== "")) b.rootS.s.title = b.firstPrompt;
  const t = b.transcript(b.rootS);
  t.dropped.push(...b.dropped);
  return t;
}

class Builder {
  constructor(root) {
    this.root = root.id;
    this.pos = 0;
    this.tools = new Map();
    this.order = [];
    this.seen = new Set();
    this.subs = new Map();
    this.dropped = [];
    this.firstPrompt = "";
    this.rootS = { s: { ...root }, msgs: [], kids: [], user: "", cur: null, turn: "" };
  }

  id(prefix, identity) { this.pos++; return makeID(prefix, this.root, this.pos, identity); }

  drop(seq, kind, reason, detail, raw) {
    const d = { source: SOURCE, reason };
    if (seq) d.line = seq;
    if (kind) d.kind = kind;
    if (detail) d.detail = detail;
    const r = typeof raw === "string" ? raw.slice(0, 512) : "";
    if (r) d.raw = r;
    this.dropped.push(d);
  }

  sub(key) {
    if (!key) return this.rootS;
    if (this.subs.has(key)) return this.subs.get(key);
    const tr = this.tools.get(key);
    const parent = tr ? tr.sess : this.rootS;
    const s = { s: { id: this.id("ses_", "subagent:" + key), projectID: this.rootS.s.projectID ?? "", directory: this.rootS.s.directory ?? "", parentID: parent.s.id, title: "", time: { created: 0, updated: 0 } },
      msgs: [], kids: [], user: "", cur: null, turn: "" };
    this.subs.set(key, s);
    parent.kids.push(s);
    if (tr) this.link(tr, s.s.id);
    return s;
  }

  link(tr, child) { tr.part.state.metadata = { ...(tr.part.state.metadata ?? {}), sessionId: child }; }

  transcript(s) {
    return { session: s.s, messages: s.msgs, children: s.kids.map((k) => this.transcript(k)), todos: [], dropped: [] };
  }

  row(seq, env, raw) {
    const role = typeof env?.role === "string" ? env.role : "";
    const c = env?.content;
    if (!isObject(c)) { this.drop(seq, role, "invalid_field", "content must be an object", raw); return; }
    switch (role) {
      case "user":
        if (c.type !== "text" || typeof c.text !== "string") { this.drop(seq, "user", "invalid_field", 'a prompt needs content {type:"text", text}', raw); return; }
        this.userText(this.rootS, `prompt:${seq}`, 0, c.text);
        return;
      case "session":
        this.envelope(seq, c.type === "session" && c.data !== undefined ? c.data : c, raw);
        return;
      case "agent":
        switch (c.type) {
          case "session": this.envelope(seq, c.data, raw); return;
          case "acp": case "codex": this.provider(seq, "agent/" + c.type, c.data, raw); return;
          case "output": this.output(seq, c.data, raw); return;
          case "event": this.event(seq, c.data, raw); return;
        }
        this.drop(seq, "agent/" + c.type, "unknown_type", "an agent record of a type this version does not know", raw);
        return;
    }
    this.drop(seq, role, "unknown_type", "a legacy record of a role this version does not know", raw);
  }

  envelope(seq, e, raw) {
    if (!isObject(e)) { this.drop(seq, "session", "invalid_field", "a session envelope must be an object {id, time, role, ev}", raw); return; }
    const ev = e.ev;
    if (!isObject(ev) || typeof ev.t !== "string" || ev.t === "") { this.drop(seq, "session", "invalid_field", "the envelope's ev must be an object with a type t", raw); return; }
    const kind = "session/" + ev.t;
    const id = typeof e.id === "string" ? e.id : "";
    if (id === "") { this.drop(seq, kind, "missing_id", "a session envelope needs an id", raw); return; }
    if (this.seen.has(id)) { this.drop(seq, kind, "invalid_field", `envelope id ${JSON.stringify(id)} seen before (the first one counts)`, raw); return; }
    this.seen.add(id);
    const time = Number.isInteger(e.time) ? e.time : 0;
    const turn = typeof e.turn === "string" ? e.turn : "";
    const s = this.sub(typeof e.subagent === "string" && e.subagent ? e.subagent : typeof e.invoke === "string" ? e.invoke : "");
    const text = typeof ev.text === "string" ? ev.text : null;
    if (e.role === "user") {
      if (ev.t === "text") {
        if (text === null) { this.drop(seq, kind, "invalid_field", "a text event needs text", raw); return; }
        this.userText(s, id, time, text);
      } else if (ev.t === "file" || ev.t === "photo") {
        const m = this.userMessage(s, id, time);
        m.parts.push(this.file(m, id, ev));
      } else this.drop(seq, kind, "unknown_type", "a user event of a type this version does not know", raw);
      return;
    }
    if (e.role !== "agent") { this.drop(seq, kind, "invalid_field", `envelope role ${JSON.stringify(e.role ?? "")} is neither user nor agent`, raw); return; }
    switch (ev.t) {
      case "turn-start": {
        this.closeTurn(s, time, "");
        const m = this.assistant(s, turn, time);
        m.parts.push({ ...this.base(m, id), type: "step-start" });
        return;
      }
      case "turn-end": {
        const finish = { completed: "stop", failed: "error", cancelled: "aborted" }[ev.status];
        if (!finish) { this.drop(seq, kind, "invalid_field", `turn-end status ${JSON.stringify(ev.status ?? "")} is not completed, failed or cancelled`, raw); return; }
        if (!s.cur || (turn !== "" && s.turn !== turn)) { this.drop(seq, kind, "orphan", `turn-end of turn ${JSON.stringify(turn)}, which is not open`, raw); return; }
        this.closeTurn(s, time, finish);
        return;
      }
      case "text": case "service": {
        if (text === null) { this.drop(seq, kind, "invalid_field", "a text event needs text", raw); return; }
        const m = this.assistant(s, turn, time);
        if (ev.t === "text" && ev.thinking === true) m.parts.push({ ...this.base(m, id), type: "reasoning", text, time: { start: time, end: time } });
        else m.parts.push({ ...this.base(m, id), type: "text", text, ...(ev.t === "service" ? { synthetic: true } : {}), time: { start: time, end: time } });
        return;
      }
      case "tool-call-start": {
        if (typeof ev.call !== "string" || ev.call === "" || typeof ev.name !== "string" || ev.name === "") { this.drop(seq, kind, "missing_id", "a tool-call-start needs call and name", raw); return; }
        const args = ev.args === undefined || ev.args === null ? {} : ev.args;
        if (!isObject(args)) { this.drop(seq, kind, "invalid_field", "tool-call-start args must be an object", raw); return; }
        this.startTool(seq, kind, s, turn, id, time, ev.call, ev.name, typeof ev.title === "string" ? ev.title : "", typeof ev.description === "string" ? ev.description : "", args, raw);
        return;
      }
      case "tool-call-end":
        this.endTool(seq, kind, typeof ev.call === "string" ? ev.call : "", time, null, false, raw);
        return;
      case "file": case "photo": {
        const m = this.assistant(s, turn, time);
        m.parts.push(this.file(m, id, ev));
        return;
      }
      case "start":
        if (typeof ev.title === "string" && ev.title !== "" && s !== this.rootS) s.s.title = ev.title;
        return;
      case "stop":
        if (s !== this.rootS) this.closeTurn(s, time, "stop");
        return;
    }
    this.drop(seq, kind, "unknown_type", "a session event of a type this version does not know", raw);
  }

  file(m, identity, ev) {
    let mime = typeof ev.mimeType === "string" && ev.mimeType ? ev.mimeType : "";
    if (!mime) mime = ev.t === "photo" || (ev.image !== undefined && ev.image !== null) ? "image/*" : "application/octet-stream";
    const p = { ...this.base(m, identity), type: "file", mime, url: "ref:" + (typeof ev.ref === "string" ? ev.ref : "") };
    if (typeof ev.name === "string" && ev.name) p.filename = ev.name;
    return p;
  }

  base(m, identity) { return { id: this.id("prt_", identity), sessionID: m.info.sessionID, messageID: m.info.id }; }

  userMessage(s, identity, at) {
    this.closeTurn(s, at, "");
    const m = { info: { id: this.id("msg_", identity), sessionID: s.s.id, role: "user", time: { created: at }, agent: "", model: { providerID: "", modelID: "" } }, parts: [] };
    s.msgs.push(m);
    s.user = m.info.id;
    return m;
  }

  userText(s, identity, at, text) {
    const m = this.userMessage(s, identity, at);
    m.parts.push({ ...this.base(m, identity), type: "text", text });
    if (s === this.rootS && this.firstPrompt === "") this.firstPrompt = text.trim().split("\n")[0].trim();
  }

  assistant(s, turn, at) {
    if (s.cur && (turn === "" || turn === s.turn)) return s.cur;
    this.closeTurn(s, at, "");
    const identity = turn === "" ? `turn@${this.pos}` : "turn:" + turn;
    const m = { info: { id: this.id("msg_", identity), sessionID: s.s.id, role: "assistant", time: { created: at }, parentID: s.user, modelID: "", providerID: "", agent: "", path: { cwd: "", root: "" } }, parts: [] };
    s.msgs.push(m);
    s.cur = m; s.turn = turn;
    return m;
  }

  closeTurn(s, at, finish) {
    const m = s.cur;
    if (!m) return;
    s.cur = null; s.turn = "";
    if (!finish) return;
    m.info.time.completed = at;
    m.info.finish = finish;
    m.parts.push({ ...this.base(m, `finish@${this.pos}`), type: "step-finish", reason: finish });
  }

  startTool(seq, kind, s, turn, identity, at, call, name, title, desc, args, raw) {
    if (this.tools.has(call)) { this.drop(seq, kind, "invalid_field", `tool call ${JSON.stringify(call)} announced before`, raw); return; }
    const m = this.assistant(s, turn, at);
    const [tool, input] = canonicalTool(name, args);
    const state = { status: "running", input, time: { start: at } };
    if (title && title !== name) state.title = title;
    if (desc && !("description" in input)) state.metadata = { description: desc };
    const part = { ...this.base(m, identity), type: "tool", callID: call, tool, state };
    if (tool !== name) {
      part.metadata = { providerTool: name };
      if (!deepEqual(input, args)) part.metadata.providerInput = args;
    }
    m.parts.push(part);
    const ref = { part, sess: s, msg: m, name };
    this.tools.set(call, ref);
    this.order.push(ref);
    if (this.subs.has(call)) this.link(ref, this.subs.get(call).s.id);
  }

  endTool(seq, kind, call, at, output, isErr, raw) {
    const tr = this.tools.get(call);
    if (!tr) { this.drop(seq, kind, "orphan", `the end of tool call ${JSON.stringify(call)}, which was never announced`, raw); return; }
    const st = tr.part.state;
    if (!["pending", "running", "blocked"].includes(st.status)) {
      if (output !== null) this.drop(seq, kind, "illegal_transition", `a second result of tool call ${JSON.stringify(call)} (the first one counts)`, raw);
      return;
    }
    st.time.end = Math.max(at, st.time.start);
    if (isErr) {
      st.status = "error";
      delete st.title;
      st.error = output ? output : "error";
      return;
    }
    st.status = "completed";
    st.output = output ?? "";
  }

  provider(seq, kind, d, raw) {
    if (!isObject(d) || typeof d.type !== "string" || d.type === "") { this.drop(seq, kind, "invalid_field", "data must be an object with a type", raw); return; }
    kind += "/" + d.type;
    const s = this.rootS;
    const text = typeof d.message === "string" ? d.message : typeof d.text === "string" ? d.text : null;
    switch (d.type) {
      case "message": case "reasoning": case "thinking": {
        if (text === null) { this.drop(seq, kind, "invalid_field", d.type === "message" ? "a message needs message" : "reasoning needs text", raw); return; }
        const m = this.assistant(s, s.turn, 0);
        m.parts.push({ ...this.base(m, `row:${seq}`), type: d.type === "message" ? "text" : "reasoning", text, ...(d.type === "message" ? {} : { time: { start: 0 } }) });
        return;
      }
      case "tool-call": {
        const args = d.input === undefined || d.input === null ? {} : d.input;
        if (typeof d.callId !== "string" || d.callId === "" || typeof d.name !== "string" || d.name === "" || !isObject(args)) {
          this.drop(seq, kind, "invalid_field", "a tool-call needs callId, name and an input object", raw); return;
        }
        this.startTool(seq, kind, s, s.turn, `row:${seq}`, 0, d.callId, d.name, "", "", args, raw);
        return;
      }
      case "tool-result": case "tool-call-result":
        this.endTool(seq, kind, typeof d.callId === "string" ? d.callId : "", 0, outputText(d.output), d.isError === true, raw);
        return;
      case "task_started":
        this.closeTurn(s, 0, "");
        this.assistant(s, `task@${seq}`, 0);
        return;
      case "task_complete": this.closeTurn(s, 0, "stop"); return;
      case "turn_aborted": this.closeTurn(s, 0, "aborted"); return;
      case "permission-request":
        this.drop(seq, kind, "unknown_type", "a permission is read from the session's agentState, not from this record", raw);
        return;
    }
    this.drop(seq, kind, "unknown_type", "not transcript content this version maps (token counts, file edits, terminal output, …)", raw);
  }

  output(seq, d, raw) {
    if (!isObject(d)) { this.drop(seq, "agent/output", "invalid_field", "data must be an object", raw); return; }
    const kind = "agent/output/" + (typeof d.type === "string" ? d.type : "");
    const s = this.rootS;
    const content = d.message?.content;
    const isString = typeof content === "string";
    const blocks = Array.isArray(content) ? content : null;
    if (!isString && !blocks && (d.type === "assistant" || d.type === "user")) { this.drop(seq, kind, "invalid_field", "message.content must be a string or an array of blocks", raw); return; }
    switch (d.type) {
      case "assistant":
        blocks.forEach((bl, i) => {
          const identity = `row:${seq}:${i}`;
          const type = isObject(bl) ? bl.type : undefined;
          if (type === "text" || type === "thinking") {
            const m = this.assistant(s, s.turn, 0);
            if (type === "text") m.parts.push({ ...this.base(m, identity), type: "text", text: typeof bl.text === "string" ? bl.text : "" });
            else m.parts.push({ ...this.base(m, identity), type: "reasoning", text: typeof bl.thinking === "string" ? bl.thinking : "", time: { start: 0 } });
          } else if (type === "tool_use" || type === "tool-call") {
            const args = bl.input === undefined || bl.input === null ? {} : bl.input;
            if (typeof bl.id !== "string" || bl.id === "" || typeof bl.name !== "string" || bl.name === "" || !isObject(args)) {
              this.drop(seq, kind, "invalid_field", `content[${i}]: a tool_use needs id, name and an input object`, raw); return;
            }
            this.startTool(seq, kind, s, s.turn, identity, 0, bl.id, bl.name, "", "", args, raw);
          } else this.drop(seq, kind, "unknown_type", `content[${i}]: a block of type ${JSON.stringify(type ?? "")}`, raw);
        });
        return;
      case "user":
        if (isString) { this.userText(s, `row:${seq}`, 0, content); return; }
        blocks.forEach((bl, i) => {
          const type = isObject(bl) ? bl.type : undefined;
          if (type === "text") this.userText(s, `row:${seq}:${i}`, 0, typeof bl.text === "string" ? bl.text : "");
          else if (type === "tool_result") {
            const out = typeof bl.content === "string" ? bl.content : Array.isArray(bl.content)
              ? bl.content.filter((x) => isObject(x) && x.type === "text").map((x) => (typeof x.text === "string" ? x.text : "")).join("\n") : outputText(bl.content);
            this.endTool(seq, kind, typeof bl.tool_use_id === "string" ? bl.tool_use_id : "", 0, out, bl.is_error === true, raw);
          } else this.drop(seq, kind, "unknown_type", `content[${i}]: a block of type ${JSON.stringify(type ?? "")}`, raw);
        });
        return;
      case "result":
        this.closeTurn(s, 0, d.is_error === true ? "error" : "stop");
        return;
    }
    this.drop(seq, kind, "unknown_type", "a Claude line that is not transcript content (system, summary, …)", raw);
  }

  event(seq, d, raw) {
    if (!isObject(d)) { this.drop(seq, "agent/event", "invalid_field", "data must be an object", raw); return; }
    const kind = "agent/event/" + (typeof d.type === "string" ? d.type : "");
    const s = this.rootS;
    if (d.type === "ready") { if (s.cur) this.closeTurn(s, 0, "stop"); return; }
    if (d.type === "message") {
      if (typeof d.message !== "string") { this.drop(seq, kind, "invalid_field", "an event message needs message", raw); return; }
      const m = this.assistant(s, s.turn, 0);
      m.parts.push({ ...this.base(m, `row:${seq}`), type: "text", text: d.message, synthetic: true });
      return;
    }
    this.drop(seq, kind, "unknown_type", "an event that is not transcript content (mode switch, usage limit)", raw);
  }

  permissions(state) {
    if (state === null || state === undefined) return;
    if (!isObject(state)) { this.drop(0, "agentState", "invalid_field", "agentState is not an object with requests and completedRequests maps", ""); return; }
    const reqs = [];
    const read = (m, done, key) => {
      if (m === undefined || m === null) return;
      if (!isObject(m)) { this.drop(0, "agentState", "invalid_field", "agentState is not an object with requests and completedRequests maps", ""); return; }
      for (const [id, r] of Object.entries(m)) {
        if (id === "") { this.drop(0, "agentState." + key, "missing_id", "a request with an empty id", JSON.stringify(r)); continue; }
        if (!isObject(r) || typeof r.tool !== "string" || r.tool === "") { this.drop(0, "agentState." + key, "invalid_field", `request ${JSON.stringify(id)} needs a tool name`, JSON.stringify(r)); continue; }
        reqs.push({ ...r, id, done, arguments: isObject(r.arguments) ? r.arguments : {}, createdAt: Number.isInteger(r.createdAt) ? r.createdAt : 0,
          completedAt: Number.isInteger(r.completedAt) ? r.completedAt : 0 });
      }
    };
    read(state.completedRequests, true, "completedRequests");
    read(state.requests, false, "requests");
    reqs.sort((a, b) => (a.createdAt !== b.createdAt ? a.createdAt - b.createdAt : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const used = new Set();
    for (const r of reqs) this.permission(r, used);
  }

  findTool(r, used) {
    for (const k of [r.toolUseId, r.id]) {
      const tr = typeof k === "string" && k !== "" ? this.tools.get(k) : undefined;
      if (tr && !used.has(tr)) return tr;
    }
    const [, input] = canonicalTool(r.tool, r.arguments);
    for (const exact of [true, false]) {
      for (const tr of this.order) {
        if (used.has(tr) || tr.name !== r.tool) continue;
        if (exact && !deepEqual(tr.part.state.input, input)) continue;
        return tr;
      }
    }
    return null;
  }

  permission(r, used) {
    let decision = "", reason = "";
    if (r.done) {
      if (r.decision === "approved_for_session") decision = "always";
      else if (r.decision === "approved" || (!r.decision && r.status === "approved")) decision = "once";
      else if (r.decision === "abort" || (!r.decision && r.status === "canceled")) { decision = "reject"; reason = "cancelled"; }
      else if (r.decision === "denied" || (!r.decision && r.status === "denied")) decision = "reject";
      else {
        this.drop(0, "agentState.completedRequests", "unknown_decision", `request ${JSON.stringify(r.id)}: status ${JSON.stringify(r.status ?? "")}, decision ${JSON.stringify(r.decision ?? "")}`, "");
        return;
      }
    }
    let tr = this.findTool(r, used);
    const [tool, cin] = canonicalTool(r.tool, r.arguments);
    const block = { type: "permission", id: r.id, permission: tool };
    const pats = patternsOf(tool, cin);
    if (pats) block.patterns = pats;
    if (!tr) {
      const call = typeof r.toolUseId === "string" && r.toolUseId !== "" ? r.toolUseId : r.id;
      const s = this.rootS;
      if (!s.cur) {
        const last = [...s.msgs].reverse().find((m) => m.info.role === "assistant");
        if (last) { s.cur = last; s.turn = ""; }
      }
      this.startTool(0, "agentState", s, s.turn, "request:" + r.id, r.createdAt, call, r.tool, "", "", r.arguments, "");
      tr = this.tools.get(call);
      if (!tr) return;
    }
    used.add(tr);
    const st = tr.part.state;
    if (!r.done) {
      if (!["pending", "running", "blocked"].includes(st.status)) {
        this.drop(0, "agentState.requests", "illegal_transition", `request ${JSON.stringify(r.id)} is pending, but tool call ${JSON.stringify(tr.part.callID)} already ended`, "");
        return;
      }
      st.status = "blocked";
      st.block = block;
      return;
    }
    const at = r.completedAt || r.createdAt;
    block.decidedAt = at;
    block.decision = decision;
    if (reason) block.reason = reason;
    if (decision === "always" && Array.isArray(r.allowedTools)) block.always = r.allowedTools;
    if (typeof r.reason === "string" && r.reason !== "" && !block.reason && decision === "reject") block.reason = r.reason;
    if (decision !== "reject") {
      st.block = block;
      if (st.status === "blocked") st.status = "running";
      return;
    }
    if (st.status === "error") { st.block = block; return; }
    let msg = typeof r.reason === "string" && r.reason !== "" ? r.reason : block.reason === "cancelled" ? "permission request cancelled" : "permission denied";
    tr.part.state = { status: "error", input: st.input, error: msg, ...(st.metadata ? { metadata: st.metadata } : {}),
      time: { start: st.time.start, end: Math.max(at, st.time.start) }, block };
  }
}
