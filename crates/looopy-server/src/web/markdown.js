// Looopy's Markdown renderer for the chat page (inserted into the page's one inline script by
// the server; see web/mod.rs). Hand-written because the page must stay self-contained.
//
// Safety by construction: the renderer builds DOM nodes and puts every piece of the model's
// text in with text nodes (`append(string)`, `textContent`), so nothing the model writes is
// ever parsed as HTML — script tags, `<img onerror=…>` and entities show as the literal text
// they are. Tag names come only from this file; the only attributes built from the text are
// a link's `href` (an absolute http:, https: or mailto: URL that the URL parser agrees
// with, else no link), its `title`, a code block's language class (letters, digits and
// `_+#.-` only) and an ordered list's numeric `start`.
//
// Supported: fenced code blocks (``` or ~~~, with a language; an unclosed fence runs to the
// end, so a block still streaming shows as code), ATX headings, bold, italic, strikethrough,
// inline code, links, <autolinks> and bare http(s) URLs, bullet and ordered lists nested by
// indentation (a line indented past its item's marker belongs to the item), block quotes,
// GFM pipe tables with alignment, horizontal rules, paragraphs with single newlines as line
// breaks (chat text is written line by line). Not supported (shown as text): raw HTML,
// setext headings, indented code blocks, reference links, footnotes. Every scan is bounded
// (nesting depth, link length, delimiter searches remembered when they fail), so a
// hostile or huge text costs time proportional to its length.
const LooopyMarkdown = (() => {
  "use strict";
  const MAX_DEPTH = 12;
  const MAX_LINK = 2048;
  // Every pattern is anchored and no two of its parts compete for the same text, so none
  // backtracks badly on a long line; the rest of a fence, heading or table rule line is
  // examined in code.
  const FENCE_LINE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
  const HEADING_LINE = /^ {0,3}(#{1,6})(?:[ \t](.*))?$/;
  const RULE = /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$/;
  const QUOTE = /^ {0,3}> ?/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
  const LANG = /^[A-Za-z0-9_+#.-]{1,40}$/;
  const PUNCT = /[!-/:-@[-`{-~]/;
  const SPACE = /\s/;
  const WORD = /[\p{L}\p{N}]/u;
  const BARE_URL = /^https?:\/\/[^\s<>"'`]+/;
  const SPECIAL = "\\`[!<*_~h";
  const URL_TAIL = ".,:;!?*_~'\"";

  // An opening fence: [indent, marker, language] (a backtick fence's info has no backtick).
  function fenceAt(line) {
    const m = FENCE_LINE.exec(line);
    if (!m || (m[2][0] === "`" && m[3].includes("`"))) return null;
    return [m[1].length, m[2], m[3].trim().split(/[ \t]/)[0]];
  }
  // An ATX heading: [level, text without the optional closing #s].
  function headingAt(line) {
    const m = HEADING_LINE.exec(line);
    if (!m) return null;
    let text = (m[2] || "").trim(), end = text.length;
    while (end > 0 && text[end - 1] === "#") end--;
    if (end === 0) text = "";
    else if (end < text.length && (text[end - 1] === " " || text[end - 1] === "\t")) text = text.slice(0, end).trim();
    return [m[1].length, text];
  }

  function el(tag, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    return e;
  }
  const blank = (line) => /^[ \t]*$/.test(line);
  const indentOf = (line) => /^ */.exec(line)[0].length;
  const dedent = (line, n) => line.slice(Math.min(n, indentOf(line)));
  // Leading tabs count as four spaces, so indentation means one thing everywhere below.
  const expandTabs = (line) => line.replace(/^[ \t]+/, (ws) => ws.replace(/\t/g, "    "));

  // A URL safe to link to, normalised by the browser's own parser, or null.
  function safeHref(raw) {
    const url = raw.trim();
    if (url.length > MAX_LINK || !/^(?:https?:\/\/|mailto:)/i.test(url)) return null;
    let parsed;
    try { parsed = new URL(url); } catch (_) { return null; }
    return ["http:", "https:", "mailto:"].includes(parsed.protocol) ? parsed.href : null;
  }
  function link(href, title) {
    const a = el("a");
    a.href = href;
    a.rel = "noopener noreferrer";
    a.target = "_blank";
    if (title) a.title = title;
    return a;
  }

  // ---- blocks ------------------------------------------------------------------------------
  // Whether a line interrupts a paragraph: any block start except that, as in CommonMark,
  // an ordered item must be numbered 1 and an item must not be empty.
  function interrupts(line) {
    if (fenceAt(line) || headingAt(line) || RULE.test(line) || QUOTE.test(line)) return true;
    const m = ITEM.exec(line);
    if (!m || m[3] == null || blank(m[3])) return false;
    return !/\d/.test(m[2][0]) || parseInt(m[2], 10) === 1;
  }

  function blocks(lines, parent, depth) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (blank(line)) { i++; continue; }
      if (depth >= MAX_DEPTH) { i = paragraph(lines, i, parent, depth, true); continue; }
      let m;
      if ((m = fenceAt(line))) i = fence(lines, i, m, parent);
      else if ((m = headingAt(line))) {
        const h = el("h" + m[0]);
        inline(m[1], h, depth);
        parent.append(h);
        i++;
      } else if (RULE.test(line)) { parent.append(el("hr")); i++; }
      else if (QUOTE.test(line)) i = quote(lines, i, parent, depth);
      else if (ITEM.test(line)) i = list(lines, i, parent, depth);
      else if (tableStart(lines, i)) i = table(lines, i, parent, depth);
      else i = paragraph(lines, i, parent, depth, false);
    }
  }

  function paragraph(lines, start, parent, depth, rest) {
    let i = start + 1;
    while (i < lines.length && !blank(lines[i])
           && (rest || (!interrupts(lines[i]) && !tableStart(lines, i)))) i++;
    const p = el("p");
    for (let k = start; k < i; k++) {
      if (k > start) p.append(el("br"));
      if (rest) p.append(lines[k].trim());
      else inline(lines[k].trim(), p, depth);
    }
    parent.append(p);
    return i;
  }

  function fence(lines, start, m, parent) {
    const [indent, marker, lang] = m;
    const mark = marker[0], width = marker.length;
    const closes = (line) => {
      const t = line.trim();
      return indentOf(line) <= 3 && t.length >= width && t === mark.repeat(t.length);
    };
    let i = start + 1;
    const body = [];
    while (i < lines.length && !closes(lines[i])) body.push(dedent(lines[i++], indent));
    const pre = el("pre"), code = el("code");
    if (LANG.test(lang)) {
      code.className = "language-" + lang;
      pre.dataset.lang = lang;
    }
    // Still streaming: the blank lines at the end may yet become code, or the closing fence.
    while (i >= lines.length && body.length && blank(body[body.length - 1])) body.pop();
    code.textContent = body.join("\n");
    pre.append(code);
    parent.append(pre);
    return i < lines.length ? i + 1 : i; // an unclosed fence runs to the end
  }

  function quote(lines, start, parent, depth) {
    const inner = [];
    let i = start;
    while (i < lines.length && QUOTE.test(lines[i])) inner.push(lines[i++].replace(QUOTE, ""));
    const q = el("blockquote");
    blocks(inner, q, depth + 1);
    parent.append(q);
    return i;
  }

  // Items are siblings when their markers are indented alike (within one space) and of one
  // kind; anything indented further belongs to the current item and is parsed again as
  // blocks, which is how lists nest.
  function list(lines, start, parent, depth) {
    const first = ITEM.exec(lines[start]);
    const base = first[1].length;
    const kind = (m) => (/\d/.test(m[2][0]) ? "ol" + m[2].slice(-1) : m[2]);
    const sameKind = kind(first);
    const sibling = (m) => m && m[1].length <= base + 1 && kind(m) === sameKind;
    const listEl = el(/\d/.test(first[2][0]) ? "ol" : "ul");
    if (listEl.tagName === "OL") {
      const n = parseInt(first[2], 10);
      if (n !== 1) listEl.start = n;
    }
    const items = [];
    let current = null, width = 0, loose = false;
    let i = start;
    while (i < lines.length) {
      const line = lines[i];
      const m = ITEM.exec(line);
      if (sibling(m) && !RULE.test(line)) {
        // Continuation lines are dedented to the item's content column (marker + 1–4 spaces).
        const gap = m[3] == null ? 1 : m[0].length - m[1].length - m[2].length - m[3].length;
        width = m[1].length + m[2].length + (gap > 4 ? 1 : gap);
        current = [m[3] == null ? "" : m[3]];
        items.push(current);
        i++;
        continue;
      }
      if (blank(line)) {
        let j = i + 1;
        while (j < lines.length && blank(lines[j])) j++;
        if (j >= lines.length) break;
        const next = lines[j];
        const nextIsSibling = sibling(ITEM.exec(next));
        if (!nextIsSibling && indentOf(next) <= base) break;
        if (nextIsSibling) loose = true;
        else for (let k = i; k < j; k++) current.push("");
        i = j;
        continue;
      }
      if (indentOf(line) > base) { current.push(dedent(line, width)); i++; continue; }
      // A lazy continuation of the item's last paragraph.
      const prev = current[current.length - 1];
      if (prev !== "" && !interrupts(line) && !tableStart(lines, i)) {
        current.push(line.trim());
        i++;
        continue;
      }
      break;
    }
    if (!loose) listEl.className = "tight";
    for (const itemLines of items) {
      const li = el("li");
      blocks(itemLines, li, depth + 1);
      listEl.append(li);
    }
    parent.append(listEl);
    return i;
  }

  function splitRow(line) {
    let s = line.trim();
    if (s.startsWith("|")) s = s.slice(1);
    if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
    const cells = [];
    let cell = "";
    for (let k = 0; k < s.length; k++) {
      if (s[k] === "\\" && s[k + 1] === "|") { cell += "|"; k++; }
      else if (s[k] === "|") { cells.push(cell.trim()); cell = ""; }
      else cell += s[k];
    }
    cells.push(cell.trim());
    return cells;
  }
  // A header row followed by a delimiter row (`---`, `:--`, `--:`, `:-:` cells) with as many
  // cells.
  function tableStart(lines, i) {
    if (i + 1 >= lines.length || !lines[i].includes("|") || indentOf(lines[i + 1]) > 3) return false;
    const rule = splitRow(lines[i + 1]);
    return rule.every((cell) => /^:?-+:?$/.test(cell)) && splitRow(lines[i]).length === rule.length;
  }
  function table(lines, start, parent, depth) {
    const head = splitRow(lines[start]);
    const align = splitRow(lines[start + 1]).map((c) =>
      c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "");
    const row = (cells, tag) => {
      const tr = el("tr");
      head.forEach((_, n) => {
        const cell = el(tag);
        if (align[n]) cell.dataset.align = align[n];
        inline(cells[n] || "", cell, depth + 1);
        tr.append(cell);
      });
      return tr;
    };
    const wrap = el("div", "table-wrap"), tableEl = el("table");
    const thead = el("thead"), tbody = el("tbody");
    thead.append(row(head, "th"));
    let i = start + 2;
    while (i < lines.length && !blank(lines[i]) && lines[i].includes("|")) tbody.append(row(splitRow(lines[i++]), "td"));
    tableEl.append(thead);
    if (tbody.firstChild) tableEl.append(tbody);
    wrap.append(tableEl);
    parent.append(wrap);
    return i;
  }

  // ---- inlines -----------------------------------------------------------------------------
  function inline(text, parent, depth, noLinks) {
    // Delimiters known to have no closer at or after a position: a later search would fail
    // too, so it is skipped (this keeps `* * * …` or "` ` ` …" linear).
    const absent = new Map();
    const seek = finder(text);
    let buf = "";
    const flush = () => { if (buf) { parent.append(buf); buf = ""; } };
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (!SPECIAL.includes(c)) { buf += c; i++; continue; }
      if (c === "\\" && i + 1 < text.length && PUNCT.test(text[i + 1])) { buf += text[i + 1]; i += 2; continue; }
      if (c === "`") {
        let run = 1;
        while (text[i + run] === "`") run++;
        const end = codeCloser(text, i + run, run, absent);
        if (end < 0) { buf += "`".repeat(run); i += run; continue; }
        let code = text.slice(i + run, end);
        if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " && code.trim()) code = code.slice(1, -1);
        flush();
        const node = el("code");
        node.textContent = code;
        parent.append(node);
        i = end + run;
        continue;
      }
      if (!noLinks && depth < MAX_DEPTH && (c === "[" || (c === "!" && text[i + 1] === "["))) {
        const image = c === "!";
        const found = linkAt(text, image ? i + 1 : i, seek);
        if (found) {
          flush();
          const href = safeHref(found.url);
          const target = href ? link(href, found.title) : parent;
          inline(found.label, target, depth + 1, true);
          if (href) parent.append(target);
          i = found.end;
          continue;
        }
      }
      if (!noLinks && c === "<") {
        const close = seek(">", i);
        const href = close > 0 && close - i < MAX_LINK && !/\s/.test(text.slice(i + 1, close))
          ? safeHref(text.slice(i + 1, close)) : null;
        if (href) {
          flush();
          const a = link(href);
          a.textContent = text.slice(i + 1, close);
          parent.append(a);
          i = close + 1;
          continue;
        }
      }
      if (!noLinks && c === "h" && (i === 0 || !WORD.test(text[i - 1]))) {
        const m = BARE_URL.exec(text.slice(i, i + MAX_LINK));
        if (m) {
          // Trailing punctuation and unbalanced closing parentheses end the sentence, not
          // the URL.
          let url = m[0], open = 0, close = 0;
          for (const ch of url) { if (ch === "(") open++; else if (ch === ")") close++; }
          for (;;) {
            const last = url[url.length - 1];
            if (URL_TAIL.includes(last)) url = url.slice(0, -1);
            else if (last === ")" && close > open) { url = url.slice(0, -1); close--; }
            else break;
          }
          const href = safeHref(url);
          if (href) {
            flush();
            const a = link(href);
            a.textContent = url;
            parent.append(a);
            i += url.length;
            continue;
          }
        }
      }
      if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
        let run = 1;
        while (text[i + run] === c) run++;
        const done = emphasis(text, i, c, run, parent, depth, noLinks, absent, flush);
        if (done > 0) { i = done; continue; }
        buf += c.repeat(run);
        i += run;
        continue;
      }
      buf += c;
      i++;
    }
    flush();
  }

  // `seek(needle, from)` is `text.indexOf(needle, from)`, remembering each needle's last
  // answer: the main loop asks with growing `from`, so a needle that is far away or absent
  // is searched for once instead of once per opening character.
  function finder(text) {
    const memo = new Map();
    return (needle, from) => {
      const m = memo.get(needle);
      if (m && m.from <= from && (m.at < 0 || m.at >= from)) return m.at;
      const at = text.indexOf(needle, from);
      memo.set(needle, { from, at });
      return at;
    };
  }

  function codeCloser(text, from, run, absent) {
    const key = "`" + run;
    if (absent.has(key) && absent.get(key) <= from) return -1;
    const tick = "`".repeat(run);
    let j = from;
    while ((j = text.indexOf(tick, j)) !== -1) {
      let k = j + run;
      while (text[k] === "`") k++;
      if (k - j === run) return j;
      j = k;
    }
    absent.set(key, from);
    return -1;
  }

  // Emphasis with `*`/`_` (one: em, two: strong) and `~~` (del). Returns the index after
  // the closing delimiter, or 0 when `text[i]` opens nothing.
  function emphasis(text, i, c, run, parent, depth, noLinks, absent, flush) {
    const after = text[i + run];
    if (after == null || SPACE.test(after)) return 0;
    if (c === "_" && i > 0 && WORD.test(text[i - 1])) return 0; // snake_case stays text
    const tries = c === "~" ? (run === 2 ? [2] : []) : run >= 2 ? [2, 1] : [1];
    for (const len of tries) {
      const end = closer(text, i + len + 1, c, len, absent);
      if (end < 0) continue;
      flush();
      const node = el(c === "~" ? "del" : len === 2 ? "strong" : "em");
      inline(text.slice(i + len, end), node, depth + 1, noLinks);
      parent.append(node);
      return end + len;
    }
    return 0;
  }
  // The closing run for a delimiter of `len` characters: not after a space, of the same
  // length (or three, closing `***x***` from the inside out), and for `_` not inside a word.
  function closer(text, from, c, len, absent) {
    const key = c + len;
    if (absent.has(key) && absent.get(key) <= from) return -1;
    const delim = c.repeat(len);
    let j = from;
    while ((j = text.indexOf(delim, j)) !== -1) {
      let end = j;
      while (text[end] === c) end++;
      const runLen = end - j;
      const fits = runLen === len || (c !== "~" && runLen === 3);
      if (fits && !SPACE.test(text[j - 1]) && !(c === "_" && end < text.length && WORD.test(text[end]))) {
        return end - len;
      }
      j = end;
    }
    absent.set(key, from);
    return -1;
  }

  // `[label](url "title")` starting at text[i] === "[": the label's matching bracket, then a
  // destination (`<…>` or without spaces, balanced parentheses) and an optional title.
  function linkAt(text, i, seek) {
    // Cheap refusals first: a link needs a "](" and, after it, a ")".
    const mid = seek("](", i);
    if (mid < 0 || mid - i > MAX_LINK) return null;
    const end = seek(")", mid + 2);
    if (end < 0 || end - mid > 2 * MAX_LINK + 8) return null;
    let depthB = 0, j = i;
    const limit = Math.min(text.length, i + MAX_LINK);
    for (; j < limit; j++) {
      const ch = text[j];
      if (ch === "\\") { j++; continue; }
      if (ch === "[") depthB++;
      else if (ch === "]" && --depthB === 0) break;
    }
    if (j >= limit || text[j + 1] !== "(") return null;
    const label = text.slice(i + 1, j);
    let k = j + 2;
    while (text[k] === " ") k++;
    let url = "";
    if (text[k] === "<") {
      const close = text.indexOf(">", k);
      if (close < 0 || close - k > MAX_LINK) return null;
      url = text.slice(k + 1, close);
      k = close + 1;
    } else {
      let parens = 0;
      const from = k;
      for (; k < text.length && k - from < MAX_LINK; k++) {
        const ch = text[k];
        if (SPACE.test(ch)) break;
        if (ch === "(") parens++;
        else if (ch === ")") { if (parens === 0) break; parens--; }
      }
      url = text.slice(from, k);
    }
    while (text[k] === " ") k++;
    let title = "";
    const open = text[k];
    if (open === "\"" || open === "'" || open === "(") {
      const shut = open === "(" ? ")" : open;
      const close = text.indexOf(shut, k + 1);
      if (close < 0 || close - k > MAX_LINK) return null;
      title = text.slice(k + 1, close);
      k = close + 1;
      while (text[k] === " ") k++;
    }
    if (text[k] !== ")") return null;
    return { label, url, title, end: k + 1 };
  }

  // Renders `source` (Markdown) as a fragment of safe DOM nodes.
  function render(source) {
    const frag = document.createDocumentFragment();
    const lines = String(source).replace(/\r\n?/g, "\n").split("\n").map(expandTabs);
    blocks(lines, frag, 0);
    return frag;
  }

  return { render };
})();
