// A small Markdown renderer that builds DOM nodes and never parses HTML:
// every character of the input ends up as text (raw HTML shows as typed).
// Blocks: fenced code, ATX headings, blockquotes, lists (- * + and 1.),
// horizontal rules, paragraphs. Inline: `code`, **strong**, *em* / _em_,
// ~~del~~, [text](url) and bare http(s) URLs, with links only to http:,
// https: and mailto:.

const el = (tag, ...kids) => {
  const e = document.createElement(tag);
  for (const k of kids) e.append(k);
  return e;
};

/** safeHref returns url when it is an http(s) or mailto link, else "". */
export function safeHref(url) {
  const u = String(url).trim();
  return /^(https?:\/\/|mailto:)/i.test(u) && !/[\s<>"]/.test(u) ? u : "";
}

// link returns an <a> to url showing text (inline Markdown, or plain text
// for a bare URL, whose text must not be read as a link again), or null for
// an unsafe URL.
function link(text, url, plain = false) {
  const href = safeHref(url);
  if (!href) return null;
  const a = el("a");
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  if (plain) a.append(text);
  else a.append(...inline(text, true));
  return a;
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|~~([\s\S]+?)~~|\*([^*\s](?:[\s\S]*?[^*\s])?)\*|(?<![A-Za-z0-9])_([^_\s](?:[\s\S]*?[^_\s])?)_(?![A-Za-z0-9])|\[([^\]\n]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

/** inline renders one run of inline Markdown to an array of nodes (inside a
 * link's text, noLinks keeps links from nesting). */
export function inline(text, noLinks = false) {
  const out = [];
  let s = String(text);
  while (s.length > 0) {
    const m = INLINE.exec(s);
    if (!m) { out.push(document.createTextNode(s)); break; }
    if (m.index > 0) out.push(document.createTextNode(s.slice(0, m.index)));
    if (m[1] !== undefined) out.push(el("code", m[2].replace(/^ (.*) $/s, "$1")));
    else if (m[3] !== undefined || m[4] !== undefined) out.push(el("strong", ...inline(m[3] ?? m[4], noLinks)));
    else if (m[5] !== undefined) out.push(el("del", ...inline(m[5], noLinks)));
    else if (m[6] !== undefined || m[7] !== undefined) out.push(el("em", ...inline(m[6] ?? m[7], noLinks)));
    else if (noLinks && (m[8] !== undefined || m[10] !== undefined)) out.push(document.createTextNode(m[0]));
    else if (m[8] !== undefined) out.push(link(m[8], m[9]) ?? document.createTextNode(m[0]));
    else if (m[10] !== undefined) out.push(link(m[10], m[10], true) ?? document.createTextNode(m[0]));
    s = s.slice(m.index + m[0].length);
  }
  return out;
}

function withBreaks(lines) {
  const out = [];
  lines.forEach((l, i) => {
    if (i > 0) out.push(document.createElement("br"));
    out.push(...inline(l));
  });
  return out;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const HR = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;

/** renderMarkdown returns a <div class="md"> holding the rendered text. */
export function renderMarkdown(text) {
  const root = el("div");
  root.className = "md";
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence)) body.push(lines[i++]);
      i++; // closing fence (or the end)
      const code = el("code", body.join("\n"));
      if (m[2]) code.dataset.lang = m[2];
      root.append(el("pre", code));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      root.append(el("h" + Math.min(m[1].length + 2, 6), ...inline(m[2])));
      i++;
      continue;
    }
    if (HR.test(line)) { root.append(el("hr")); i++; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      const q = el("blockquote");
      q.append(...renderMarkdown(body.join("\n")).childNodes);
      root.append(q);
      continue;
    }
    if ((m = ITEM.exec(line))) {
      const ordered = /\d/.test(m[2]);
      const list = el(ordered ? "ol" : "ul");
      if (ordered && parseInt(m[2], 10) !== 1) list.start = parseInt(m[2], 10);
      while (i < lines.length && (m = ITEM.exec(lines[i])) && /\d/.test(m[2]) === ordered) {
        const body = [m[3]];
        i++;
        while (i < lines.length && lines[i].trim() !== "" && !ITEM.exec(lines[i]) && /^\s{2,}/.test(lines[i])) body.push(lines[i++].trim());
        list.append(el("li", ...withBreaks(body)));
      }
      root.append(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() !== "" && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) && !HR.test(lines[i]) && !QUOTE.test(lines[i]) && !ITEM.test(lines[i])) para.push(lines[i++]);
    root.append(el("p", ...withBreaks(para)));
  }
  return root;
}
