// Code highlighting for the chat page's code blocks: a small hand-written tokenizer (the
// page stays self-contained and works offline, so no library is fetched). It knows the
// comment, string and keyword syntax of the languages a chat shows most — Rust, JavaScript
// and TypeScript, JSON, Python, Go, C, C++, Java, C#, shell, SQL, YAML and TOML — and
// colours comments, strings, numbers, keywords and literals. Anything else stays plain.
//
// It only ever splits the code's own text into text nodes wrapped in `<span class="tok-…">`
// elements, so the code's text (`textContent`) is exactly what it was and nothing in it is
// ever parsed as HTML. Each scan step consumes at least one character, so the work is
// linear in the text's length.
const LooopyHighlight = (() => {
  "use strict";
  const C_LIKE_LITERALS = ["true", "false", "null"];
  const words = (s) => s.split(" ");
  // Per language: line comment starts, block comment delimiters, string quotes, keywords
  // and literals.
  const C = { line: ["//"], block: ["/*", "*/"], quotes: "\"'" };
  const LANGS = {
    rust: Object.assign({}, C, { quotes: "\"", literals: ["true", "false", "None", "Some", "Ok", "Err", "self", "Self"],
      keywords: words("as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref return static struct super trait type unsafe use where while") }),
    js: Object.assign({}, C, { quotes: "\"'`", literals: ["true", "false", "null", "undefined", "this", "NaN"],
      keywords: words("async await break case catch class const continue debugger default delete do else export extends finally for from function if import in instanceof let new of return static super switch throw try typeof var void while with yield interface type enum implements readonly") }),
    json: { line: [], block: null, quotes: "\"", literals: C_LIKE_LITERALS, keywords: [] },
    python: { line: ["#"], block: null, quotes: "\"'", literals: ["True", "False", "None", "self"],
      keywords: words("and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case") },
    go: Object.assign({}, C, { quotes: "\"'`", literals: ["true", "false", "nil", "iota"],
      keywords: words("break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var") }),
    c: Object.assign({}, C, { literals: ["true", "false", "NULL", "nullptr", "this", "null"],
      keywords: words("auto break case char class const continue default do double else enum extern final float for goto if int long namespace new private protected public return short signed sizeof static struct switch template typedef union unsigned using void volatile while boolean byte extends implements import package throw throws try catch var bool string") }),
    sh: { line: ["#"], block: null, quotes: "\"'", literals: ["true", "false"],
      keywords: words("if then else elif fi for while until do done case esac function in return export local set echo cd exit source") },
    sql: { line: ["--"], block: ["/*", "*/"], quotes: "'\"", literals: ["NULL", "TRUE", "FALSE"], caseless: true,
      keywords: words("SELECT FROM WHERE INSERT INTO VALUES UPDATE SET DELETE CREATE TABLE INDEX DROP ALTER ADD JOIN LEFT RIGHT INNER OUTER ON AS AND OR NOT IN IS GROUP BY ORDER HAVING LIMIT OFFSET DISTINCT UNION ALL PRIMARY KEY REFERENCES DEFAULT WITH RETURNING CASE WHEN THEN ELSE END") },
    yaml: { line: ["#"], block: null, quotes: "\"'", literals: ["true", "false", "null", "yes", "no"], keywords: [] },
  };
  const ALIASES = { rs: "rust", javascript: "js", mjs: "js", cjs: "js", jsx: "js", ts: "js", typescript: "js",
    tsx: "js", py: "python", golang: "go", h: "c", cpp: "c", "c++": "c", cc: "c", hpp: "c", java: "c",
    cs: "c", csharp: "c", kotlin: "c", swift: "c", bash: "sh", shell: "sh", zsh: "sh", console: "sh",
    yml: "yaml", toml: "yaml", ini: "yaml", jsonl: "json", json5: "json" };
  const IDENT = /[A-Za-z_$][A-Za-z0-9_$]*/y;
  const NUMBER = /(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)[A-Za-z0-9_]*/y;

  // The language's rules, or null when it is not one this highlighter knows.
  function rules(lang) {
    const name = String(lang || "").toLowerCase();
    const found = LANGS[ALIASES[name] || name];
    if (!found) return null;
    if (!found.set) {
      const fold = (w) => (found.caseless ? w.toUpperCase() : w);
      found.set = new Map();
      for (const w of found.keywords) found.set.set(fold(w), "k");
      for (const w of found.literals) found.set.set(fold(w), "l");
      found.fold = fold;
    }
    return found;
  }

  // `[kind, text]` pieces of `text` (kind null for plain text), in order.
  function tokens(text, r) {
    const out = [];
    let plain = "";
    const push = (kind, piece) => {
      if (!kind) { plain += piece; return; }
      if (plain) { out.push([null, plain]); plain = ""; }
      out.push([kind, piece]);
    };
    let i = 0;
    while (i < text.length) {
      const ch = text[i];
      const line = r.line.find((m) => text.startsWith(m, i));
      if (line) {
        const end = text.indexOf("\n", i);
        const stop = end < 0 ? text.length : end;
        push("c", text.slice(i, stop));
        i = stop;
        continue;
      }
      if (r.block && text.startsWith(r.block[0], i)) {
        const end = text.indexOf(r.block[1], i + r.block[0].length);
        const stop = end < 0 ? text.length : end + r.block[1].length;
        push("c", text.slice(i, stop));
        i = stop;
        continue;
      }
      if (r.quotes.includes(ch)) {
        let j = i + 1;
        while (j < text.length && text[j] !== ch && !(text[j] === "\n" && ch !== "`")) j += text[j] === "\\" ? 2 : 1;
        const stop = Math.min(text.length, j + 1);
        push("s", text.slice(i, stop));
        i = stop;
        continue;
      }
      if (/[0-9]/.test(ch) && !/[A-Za-z0-9_$]/.test(text[i - 1] || "")) {
        NUMBER.lastIndex = i;
        const m = NUMBER.exec(text);
        if (m) { push("n", m[0]); i += m[0].length; continue; }
      }
      if (/[A-Za-z_$]/.test(ch)) {
        IDENT.lastIndex = i;
        const word = IDENT.exec(text)[0];
        const kind = r.set.get(r.fold(word)) || (text[i + word.length] === "(" ? "f" : null);
        push(kind, word);
        i += word.length;
        continue;
      }
      push(null, ch);
      i++;
    }
    if (plain) out.push([null, plain]);
    return out;
  }

  // Highlights a `<code>` element's text in place (its text stays exactly the same);
  // returns whether the language was known.
  function highlight(code, lang) {
    const r = rules(lang);
    if (!r) return false;
    const text = code.textContent;
    const frag = document.createDocumentFragment();
    for (const [kind, piece] of tokens(text, r)) {
      if (!kind) { frag.append(piece); continue; }
      const span = document.createElement("span");
      span.className = "tok-" + kind;
      span.textContent = piece;
      frag.append(span);
    }
    code.replaceChildren(frag);
    code.dataset.highlighted = "true";
    return true;
  }

  return { highlight, known: (lang) => rules(lang) !== null };
})();
