// Rendering of a transcript (reduce.js) into DOM nodes: messages, parts,
// tools with their state, blocks with their controls, child sessions in
// place, the todo dock, usage and dropped records. Text only ever enters the
// page as text nodes (markdown.js builds nodes, never HTML).

import { renderMarkdown } from "./markdown.js";
import { findChild, receipt, INTERRUPTED_TOOL, INTERRUPTED_MESSAGE } from "./reduce.js";
import { IMAGE_TYPES, isBlobRef, placeholder } from "./attach.js";

/** h builds an element: h("div", {class: "x", dataset: {a: 1}, onclick}, ...children). */
export function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e && typeof v !== "string") e[k] = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k);
  return e;
}

// Icons are inline SVG (24×24, stroked with the text colour), never emoji:
// a phone without an emoji font shows emoji as empty boxes.
const ICONS = {
  attach: ["M21 11.5l-8.6 8.6a5.5 5.5 0 0 1-7.8-7.8l8.6-8.6a3.7 3.7 0 0 1 5.2 5.2l-8.6 8.6a1.8 1.8 0 0 1-2.6-2.6l7.9-7.9"],
  image: ["M4 5h16v14H4z", "M4 16l5-5 4 4 3-3 4 4", "M15.5 9.5h.01"],
  file: ["M6 3h8l4 4v14H6z", "M14 3v4h4", "M9 12h6", "M9 16h6"],
  more: ["M5 12h.01", "M12 12h.01", "M19 12h.01"],
};
const SVG = "http://www.w3.org/2000/svg";

/** icon returns the inline SVG icon name ("attach", "image", "file",
 * "more"), hidden from screen readers (the control carries the label). */
export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  for (const [k, v] of Object.entries({ viewBox: "0 0 24 24", width: "20", height: "20", fill: "none", stroke: "currentColor",
    "stroke-width": name === "more" ? "3" : "2", "stroke-linecap": "round", "stroke-linejoin": "round", "aria-hidden": "true", class: "icon" })) svg.setAttribute(k, v);
  for (const d of ICONS[name] ?? []) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

export const FOLD_LINES = 20;
export const FOLD_CHARS = 2000;

/** folded shows long text in a <details> with the first lines as summary. */
export function folded(text, cls) {
  const s = String(text ?? "");
  const lines = s.split("\n");
  if (lines.length <= FOLD_LINES && s.length <= FOLD_CHARS) return h("pre", { class: cls }, s);
  const head = lines.slice(0, 5).join("\n").slice(0, 400);
  return h("details", { class: "fold " + (cls || "") },
    h("summary", {}, h("pre", {}, head), h("span", { class: "more" }, `show all ${lines.length} lines (${s.length} characters)`)),
    h("pre", {}, s));
}

/** toolSubject is the telling member of a tool's input (what `happy log` shows after the name). */
export function toolSubject(tool, input) {
  const i = input || {};
  switch (tool) {
    case "bash": return i.command;
    case "read": case "write": case "edit": return i.path;
    case "glob": case "grep": return i.pattern;
    case "fetch": return i.url;
    case "search": return i.query;
    case "task": return i.description;
    case "plan": return "";
    case "question": return i.questions?.[0]?.question;
    default: return "";
  }
}

/** diffLines renders an edit: the unified diff when given, else its two sides. */
export function diffView(input) {
  const lines = [];
  if (typeof input.diff === "string" && input.diff !== "") {
    for (const l of input.diff.split("\n")) lines.push(l);
  } else {
    for (const l of String(input.oldString ?? "").split("\n")) lines.push("-" + l);
    for (const l of String(input.newString ?? "").split("\n")) lines.push("+" + l);
  }
  return h("pre", { class: "diff" }, lines.map((l) => {
    const c = l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : l.startsWith("@@") ? "hunk" : "ctx";
    return h("span", { class: c }, l + "\n");
  }));
}

const SHOWN_IN_INPUT = new Set(["bash", "read", "write", "edit", "question"]);

const DECISION_LABELS = { once: "allowed once", always: "allowed always", reject: "denied" };

/** blockResolved tells a block that was answered (decidedAt set, as mapper.Block.Resolved) from one still waiting. */
const blockResolved = (b) => b.decidedAt !== undefined && b.decidedAt !== null;

function resolvedBlock(b) {
  if (!b) return null;
  if (b.type === "question") {
    const answers = (b.answers || []).map((a) => (a || []).join(", ")).join("; ");
    return h("div", { class: "resolved", dataset: { decision: "answered" } }, "answered: ", answers || "(no answer)");
  }
  let text = DECISION_LABELS[b.decision] || String(b.decision);
  if (b.reason) text += ` (${b.reason})`;
  if (b.rule) text += ` by rule ${b.rule.permission}:${b.rule.pattern}`;
  return h("div", { class: "resolved", dataset: { decision: b.decision } }, text);
}

function permissionControls(part, ctx) {
  const b = part.state.block;
  const reason = h("input", { type: "text", class: "reason", placeholder: "reason (optional)", "aria-label": "reason for denying" });
  const btn = (label, decision, cls) => h("button", { type: "button", class: cls, dataset: { decision },
    onclick: (e) => { e.currentTarget.disabled = true; ctx.onDecide?.(part, decision, decision === "reject" ? reason.value.trim() : ""); } }, label);
  return h("div", { class: "block permission" },
    h("div", { class: "ask" }, `wants permission: ${b.permission || part.tool}`, (b.patterns || []).length ? h("code", {}, b.patterns.join(" ")) : null),
    ctx.canControl ? h("div", { class: "actions" },
      btn("Allow once", "once", "allow"), btn("Always", "always", "always"), reason, btn("Deny", "reject", "deny")) : null);
}

function questionControls(part, ctx) {
  const qs = part.state.block.questions || [];
  const pickers = qs.map((q, qi) => {
    const multiple = q.multiple === true;
    const name = `q-${part.callID}-${qi}`;
    const options = (q.options || []).map((o) => h("label", { class: "option" },
      h("input", { type: multiple ? "checkbox" : "radio", name, value: o.label }),
      h("span", { class: "label" }, o.label), o.description ? h("span", { class: "desc" }, o.description) : null));
    const custom = q.custom === false ? null : h("input", { type: "text", class: "custom", placeholder: "your own answer", "aria-label": "your own answer" });
    return { q, el: h("fieldset", { class: "question" }, h("legend", {}, q.header ? `${q.header}: ` : "", q.question), options, custom), custom, name };
  });
  const send = h("button", { type: "button", class: "allow", onclick: (e) => {
    const answers = pickers.map((p) => {
      const picked = [...p.el.querySelectorAll(`input[name="${CSS.escape(p.name)}"]:checked`)].map((i) => i.value);
      const own = p.custom?.value.trim();
      if (own) picked.push(own);
      return picked;
    });
    e.currentTarget.disabled = true;
    ctx.onAnswer?.(part, answers);
  } }, "Answer");
  return h("div", { class: "block question-block" }, pickers.map((p) => p.el), ctx.canControl ? h("div", { class: "actions" }, send) : null);
}

function toolInput(part) {
  const i = part.state.input || {};
  switch (part.tool) {
    case "bash": return h("pre", { class: "command" }, "$ " + (i.command ?? ""));
    case "edit": return h("div", {}, h("div", { class: "file" }, i.path ?? ""), diffView(i));
    case "write": return h("div", {}, h("div", { class: "file" }, i.path ?? ""), folded(i.content ?? "", "content"));
    case "read": return h("div", { class: "file" }, i.path ?? "", i.offset ? ` from line ${i.offset}` : "", i.limit ? ` (${i.limit} lines)` : "");
    case "task": return i.prompt ? folded(i.prompt, "prompt") : null;
    case "plan": return i.plan ? renderMarkdown(i.plan) : null;
    case "question":
      // While blocked, the controls show the questions.
      if (part.state.status === "blocked" || !Array.isArray(i.questions)) return null;
      return h("div", { class: "questions" }, i.questions.map((q) => h("div", { class: "q" }, q?.question ?? "")));
    case "todo": return null;
    default: {
      const s = JSON.stringify(i, null, 2);
      return s && s !== "{}" ? folded(s, "json") : null;
    }
  }
}

/** renderTool renders a tool part: status, name, subject, input, output or
 * error, its block (controls while blocked, the decision once resolved) and,
 * for a task, its child session expandable in place. */
export function renderTool(part, ctx = {}) {
  const st = part.state;
  const status = st.status;
  // The header names what the input below does not show already.
  const title = st.title && st.title !== part.tool ? st.title : "";
  const subject = title || (SHOWN_IN_INPUT.has(part.tool) ? "" : toolSubject(part.tool, st.input));
  const node = h("div", { class: `part tool st-${status}`, dataset: { part: "tool", tool: part.tool, status, callId: part.callID } },
    h("div", { class: "tool-head" },
      h("span", { class: `badge ${status}` }, status === "interrupted" ? INTERRUPTED_TOOL : status),
      h("span", { class: "tool-name" }, part.tool),
      subject ? h("span", { class: "subject" }, subject) : null),
    toolInput(part));
  if (status === "blocked" && st.block) node.append(st.block.type === "question" ? questionControls(part, ctx) : permissionControls(part, ctx));
  if (status === "interrupted" && st.block && !blockResolved(st.block)) {
    node.append(h("div", { class: "resolved", dataset: { decision: "unanswered" } }, st.block.type === "question" ? "was waiting for an answer" : `was waiting for permission: ${st.block.permission || part.tool}`));
  } else if (status !== "blocked" && st.block) node.append(resolvedBlock(st.block));
  const notice = ctx.notices?.get(part.callID);
  if (notice) node.append(h("div", { class: "notice" }, notice));
  if (status === "completed" && st.output !== undefined && st.output !== "") node.append(folded(st.output, "output"));
  if (status === "error") node.append(h("pre", { class: "error" }, st.error ?? "error"));
  if (part.tool === "task" && ctx.transcript) {
    const sid = st.metadata?.sessionId || part.metadata?.sessionId;
    const child = sid ? findChild(ctx.transcript, sid) : null;
    if (child) {
      const d = h("details", { class: "child", dataset: { child: child.session.id } },
        h("summary", {}, child.session.title || "subagent", ` · ${child.messages.length} messages`));
      let built = false;
      d.addEventListener("toggle", () => {
        if (d.open && !built) { built = true; d.append(renderMessages(child, { ...ctx, transcript: ctx.transcript })); }
      });
      if (ctx.openChildren?.has(child.session.id)) { d.open = true; built = true; d.append(renderMessages(child, ctx)); }
      node.append(d);
    }
  }
  if (part.tool === "todo" && Array.isArray(st.input?.todos)) node.append(renderTodos(st.input.todos, "todo-input"));
  if (Array.isArray(st.attachments)) {
    for (const a of st.attachments) if (a && typeof a === "object") node.append(renderFile({ ...a, type: "file" }, ctx));
  }
  return node;
}

const sizeText = (n) => (typeof n !== "number" ? "" : n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KB` : `${(n / (1 << 20)).toFixed(1)} MB`);

function unavailable(name, why) {
  return h("div", { class: "unavailable", role: "note", dataset: { unavailable: "true" } }, `⚠ attachment unavailable: ${name}${why ? ` (${why})` : ""}`);
}

/**
 * renderFile renders a file part (a user message's, or a tool state's
 * attachment). A blob reference shows, for an image, its ThumbHash
 * placeholder and then the decrypted picture (ctx.blobs, attach.js
 * Blobs); for any other file a link that downloads and decrypts it on
 * click. A blob that cannot be fetched or opened says "attachment
 * unavailable" in place. Other URLs show the name only.
 */
export function renderFile(part, ctx = {}) {
  const src = part.source && typeof part.source === "object" ? part.source : {};
  const name = String(part.filename || part.mime || "file");
  const node = h("div", { class: "part file", dataset: { part: "file" } });
  if (!isBlobRef(part.url)) {
    node.append(icon("file"), name);
    return node;
  }
  node.dataset.ref = part.url;
  const info = [part.mime, sizeText(src.size), src.width && src.height ? `${src.width}×${src.height}` : ""].filter(Boolean).join(" · ");
  const blobs = ctx.blobs;
  const state = blobs?.state(part);
  if (state?.error) {
    node.append(unavailable(name, state.error));
    return node;
  }
  const fail = (err) => node.replaceChildren(unavailable(name, err?.message ?? String(err)));
  if (IMAGE_TYPES.includes(part.mime)) {
    const fig = h("figure", { class: "attachment image" });
    const ph = state?.url ? null : placeholder(src.thumbhash);
    if (ph) {
      ph.className = "placeholder";
      if (src.width > 0 && src.height > 0) ph.style.aspectRatio = `${src.width} / ${src.height}`;
      fig.append(ph);
    }
    const img = h("img", { alt: name, class: ph ? "hidden" : "", dataset: { loaded: "false" } });
    img.addEventListener("load", () => { img.dataset.loaded = "true"; img.classList.remove("hidden"); ph?.remove(); });
    img.addEventListener("error", () => fail(new Error("the image does not display")));
    fig.append(img, h("figcaption", {}, name, info ? ` · ${info}` : ""));
    node.append(fig);
    if (state?.url) img.src = state.url;
    else if (blobs) blobs.get(part).then((v) => { img.src = v.url; }, fail);
    else node.append(unavailable(name, "not loaded here"));
    return node;
  }
  const link = h("a", { href: "#", class: "download", onclick: (e) => {
    e.preventDefault();
    if (!blobs) return fail(new Error("not loaded here"));
    link.textContent = `⬇ ${name} (decrypting…)`;
    blobs.get(part).then((v) => {
      link.textContent = `⬇ ${name}`;
      const a = h("a", { href: v.url, download: name, class: "hidden" });
      document.body.append(a);
      a.click();
      a.remove();
    }, fail);
  } }, `⬇ ${name}`);
  node.append(link, info ? h("span", { class: "file-info" }, ` ${info}`) : "");
  return node;
}

const num = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "0");

/** compactCount writes a token count short: 340, 1.2k, 12k, 1.5M. */
export function compactCount(n) {
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) return "0";
  const short = (v, unit) => (v < 9.95 ? v.toFixed(1).replace(/\.0$/, "") : String(Math.round(v))) + unit;
  if (n < 1000) return String(Math.round(n));
  if (n < 999_500) return short(n / 1000, "k");
  return short(n / 1_000_000, "M");
}

/** costText writes a cost in dollars: cents from $0.01 up ("$0.01",
 * "$1.25"), four places below that ("$0.0087"), "$0.00" for nothing. */
export function costText(cost) {
  if (cost === 0) return "$0.00";
  return "$" + (Math.abs(cost) >= 0.01 ? cost.toFixed(2) : cost.toFixed(4));
}

/** usageLine labels a message's usage: "tokens: 1.2k in · 340 out · 12
 * reasoning · 3.8k cache read · 400 cache write · cost $0.01"; parts that
 * are not known are left out, and "" means nothing is known. */
export function usageLine(tokens, cost) {
  const bits = [];
  if (tokens) {
    bits.push(`${compactCount(tokens.input)} in`, `${compactCount(tokens.output)} out`);
    if (tokens.reasoning) bits.push(`${compactCount(tokens.reasoning)} reasoning`);
    if (tokens.cache?.read) bits.push(`${compactCount(tokens.cache.read)} cache read`);
    if (tokens.cache?.write) bits.push(`${compactCount(tokens.cache.write)} cache write`);
  }
  const tok = bits.length ? "tokens: " + bits.join(" · ") : "";
  const money = typeof cost === "number" && Number.isFinite(cost) ? "cost " + costText(cost) : "";
  return [tok, money].filter(Boolean).join(" · ");
}

/** usageTitle is the exact figures behind usageLine, for its tooltip. */
function usageTitle(tokens, cost) {
  const t = tokens || {};
  const bits = [`input ${num(t.input)}`, `output ${num(t.output)}`];
  if (t.reasoning) bits.push(`reasoning ${num(t.reasoning)}`);
  if (t.cache?.read || t.cache?.write) bits.push(`cache read ${num(t.cache.read)}`, `cache write ${num(t.cache.write)}`);
  if (typeof cost === "number") bits.push(`cost $${cost}`);
  return bits.join(", ");
}

/** renderPart renders any part; unknown types show as a note, never vanish. */
export function renderPart(part, ctx = {}) {
  switch (part.type) {
    case "text": {
      const n = h("div", { class: "part text" + (part.synthetic ? " synthetic" : ""), dataset: { part: "text" } });
      n.append(renderMarkdown(part.text));
      return n;
    }
    case "reasoning":
      return h("details", { class: "part reasoning", dataset: { part: "reasoning" } }, h("summary", {}, "reasoning"), renderMarkdown(part.text));
    case "tool":
      return renderTool(part, ctx);
    case "file":
      return renderFile(part, ctx);
    case "step-start":
      return null;
    case "step-finish":
      // A step that ended normally says nothing (its usage is in the
      // message's); one cut short says how.
      if (part.reason === "stop" || part.reason === "tool-calls") return null;
      return h("div", { class: "part step-finish", dataset: { part: "step-finish", reason: part.reason } }, `step ended: ${part.reason}`, part.tokens || part.cost !== undefined ? " · " + usageLine(part.tokens, part.cost) : "");
    case "subtask":
      return h("div", { class: "part subtask", dataset: { part: "subtask" } }, `subtask (${part.agent}): ${part.description}`);
    case "agent":
      return h("div", { class: "part agent", dataset: { part: "agent" } }, `agent ${part.name}`);
    case "snapshot":
      return h("div", { class: "part meta", dataset: { part: "snapshot" } }, `snapshot ${part.snapshot}`);
    case "patch":
      return h("div", { class: "part meta", dataset: { part: "patch" } }, `patch ${part.hash}: ${(part.files || []).join(", ")}`);
    case "compaction":
      return h("div", { class: "part meta", dataset: { part: "compaction" } }, part.auto ? "context compacted automatically" : "context compacted");
    case "retry":
      return h("div", { class: "part retry", dataset: { part: "retry" } }, `retry ${part.attempt}: ${part.error?.message ?? ""}`);
    default:
      return h("div", { class: "part unknown", dataset: { part: "unknown" } }, `unknown part type ${JSON.stringify(part.type)}`);
  }
}

/**
 * receiptLine is the compact line of a prompt's receipts (reduce.js
 * receipt), as happy log writes it: "✓ stored · received", then
 * "· handed" once the agent took it or "· started 1.2s later" once it
 * started; times count from when the session received it (one clock), and
 * a wait of a second or more for the running turn shows as
 * "· handed 30.0s later".
 */
export function receiptLine(rc) {
  const later = (at) => {
    const ms = Math.max(at - rc.received, 0);
    if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s later`;
    const s = Math.round(ms / 1000), hh = Math.floor(s / 3600), mm = Math.floor((s % 3600) / 60), ss = s % 60;
    return `${hh > 0 ? `${hh}h` : ""}${mm}m${ss}s later`;
  };
  let line = "✓ stored · received";
  if (rc.handed === null) return line;
  if (rc.handed - rc.received >= 1000) line += ` · handed ${later(rc.handed)}`;
  else if (rc.started === null) line += " · handed";
  if (rc.started !== null) line += ` · started ${later(rc.started)}`;
  return line;
}

/** renderMessage renders one message with its parts; an assistant message adds its usage and error, a prompt from another device its receipts. */
export function renderMessage(m, ctx = {}) {
  const info = m.info;
  const node = h("article", { class: `msg ${info.role}`, dataset: { message: info.id, role: info.role } });
  for (const p of m.parts) {
    const n = renderPart(p, ctx);
    if (n) node.append(n);
  }
  if (info.role === "assistant") {
    if (info.interrupted) node.append(h("div", { class: "msg-interrupted", dataset: { part: "interrupted" } }, INTERRUPTED_MESSAGE));
    if (info.error) node.append(h("div", { class: "msg-error" }, `${info.error.name ?? "error"}: ${info.error.message ?? info.error.data?.message ?? ""}`));
    const usage = usageLine(info.tokens, info.cost);
    if (usage) node.append(h("div", { class: "usage", title: usageTitle(info.tokens, info.cost) }, usage));
  }
  const rc = receipt(info);
  if (rc) node.append(h("div", { class: "receipt", dataset: { part: "receipt", step: rc.step } }, receiptLine(rc)));
  return node;
}

/** renderDropped is the warning row of one dropped record. */
export function renderDropped(d) {
  if (d.source === "control") {
    // A control input the session refused (docs/ARCHITECTURE.md, "Trust").
    return h("div", { class: "dropped", role: "alert", dataset: { part: "refused", reason: d.reason } },
      `⚠ a ${d.kind === "prompt" ? "prompt" : (d.kind || "control") + " call"} was refused and not acted on (${d.reason}): ${d.detail ?? ""}`);
  }
  return h("div", { class: "dropped", role: "alert", dataset: { part: "dropped", reason: d.reason } },
    `⚠ a record was dropped (${d.reason}${d.kind ? ", " + d.kind : ""}${d.line ? ", record " + d.line : ""}): ${d.detail ?? ""}`);
}

export function renderMessages(t, ctx) {
  const box = h("div", { class: "messages" });
  for (const m of t.messages) box.append(renderMessage(m, { ...ctx, transcript: ctx.transcript || t }));
  for (const d of t.dropped) box.append(renderDropped(d));
  return box;
}

const TODO_MARK = { pending: "○", in_progress: "◐", completed: "●", cancelled: "⊘" };

export function renderTodos(todos, cls = "todos") {
  return h("ul", { class: cls }, todos.map((t) => h("li", { class: `todo ${t.status ?? "pending"}`, dataset: { status: t.status ?? "pending" } },
    h("span", { class: "mark" }, TODO_MARK[t.status] ?? "○"), " ", t.content ?? "")));
}

/** renderTranscript renders the whole session: messages (children in
 * place under their task tools), dropped warnings and the todo dock. */
export function renderTranscript(t, ctx = {}) {
  const c = { ...ctx, transcript: t };
  const root = h("div", { class: "transcript" }, renderMessages(t, c));
  if (t.todos.length) root.append(h("aside", { class: "todo-dock" }, h("h3", {}, "Todos"), renderTodos(t.todos)));
  return root;
}

// A re-render keeps what the person was doing: text typed into a tool's
// controls, options picked, the field that had focus, and which folded
// sections were open (keyed by message and position in it). snapshotUI
// reads it from a rendered transcript, restoreUI puts it on the next one.
function uiKeys(el) {
  const out = [];
  for (const article of el.querySelectorAll("article[data-message]")) {
    article.querySelectorAll("details, input, textarea").forEach((n, i) => out.push([`${article.dataset.message}:${i}:${n.tagName}`, n]));
  }
  return out;
}

export function snapshotUI(el) {
  const state = new Map();
  for (const [key, n] of uiKeys(el)) {
    if (n.tagName === "DETAILS") state.set(key, { open: n.open });
    else state.set(key, { value: n.value, checked: n.checked, focus: document.activeElement === n });
  }
  return state;
}

export function restoreUI(el, state) {
  for (const [key, n] of uiKeys(el)) {
    const v = state.get(key);
    if (!v) continue;
    if (n.tagName === "DETAILS") {
      if (v.open && !n.open) n.open = true;
      continue;
    }
    if (n.type === "checkbox" || n.type === "radio") n.checked = v.checked;
    else if (v.value) n.value = v.value;
    if (v.focus) n.focus();
  }
}

/** partsSummary lists what a transcript shows, in order: for comparison with
 * `happy log --json` ({type, text} or {type:"tool", tool, status}). */
export function partsSummary(t) {
  const out = [];
  for (const m of t.messages) for (const p of m.parts) {
    if (p.type === "text" || p.type === "reasoning") out.push({ role: m.info.role, type: p.type, text: p.text });
    else if (p.type === "tool") out.push({ role: m.info.role, type: "tool", tool: p.tool, status: p.state.status });
  }
  return out;
}
