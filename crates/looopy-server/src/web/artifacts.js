// Artifact cards for the chat page: files (`file-write`, streamed in chunks), data records
// (`data-write`) and datasets (`dataset-write`, batches of rows), one card per artifactId,
// updated in place as events arrive. A card never holds content in the DOM beyond a small
// preview: a file's chunks are decoded into Blob parts (the browser may page them to disk)
// while the artifact stays under the keep limit, then dropped, and the download falls back
// to the server's content route fetched with the page's bearer header.
const LooopyArtifacts = (() => {
  "use strict";
  // Most bytes of one artifact the page keeps to offer from memory; past it the download
  // comes from the server. `<body data-keep-bytes>` overrides it (the tests lower it).
  const KEEP_BYTES = 16 * 1024 * 1024;
  // Most bytes kept by all of the page's artifacts together.
  const KEEP_TOTAL = 64 * 1024 * 1024;
  const TABLE_ROWS = 20;     // dataset rows shown
  const TEXT_PREVIEW = 4096; // characters of a text file shown
  const JSON_SHOWN = 100000; // characters of pretty JSON shown
  const CELL_CHARS = 200;    // characters of one table cell
  // The type of every file download's Blob: bytes to save, never a document to render.
  const SAVE_TYPE = "application/octet-stream";

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function size(n) {
    if (n < 1024) return n + " B";
    const units = ["KB", "MB", "GB", "TB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(1) + " " + units[i];
  }
  // UTF-8 length of a string without encoding it.
  function utf8Length(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }
  // Bytes a base64 text decodes to.
  function base64Length(s) {
    const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
    return Math.max(0, Math.floor(s.length / 4) * 3 - pad);
  }
  function decodeBase64(s) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(s);
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function sha256Hex(blob) {
    const digest = await crypto.subtle.digest("SHA-256", await blob.arrayBuffer());
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  }
  // The last path segment of an artifact name ("out/report.md" → "report.md").
  function fileName(name, fallback) {
    const base = String(name || "").split(/[\\/]/).filter(Boolean).pop();
    return base || fallback;
  }
  // `name` ending in `ext` (".json"), added unless it is there already.
  function withExt(name, ext) {
    return name.toLowerCase().endsWith(ext) ? name : name + ext;
  }

  // env: { api (the API base, ending in "/"), headers() (with the bearer token), say(text),
  // failure(response) (a message for a refused request), grew() (a card grew after the
  // event that built it, e.g. an image loaded) }.
  function create(env) {
    const cards = new Map();
    let keptTotal = 0;

    function keepLimit() {
      const v = Number(document.body.dataset.keepBytes);
      return Number.isFinite(v) && v >= 0 ? v : KEEP_BYTES;
    }
    function contentUrl(c) {
      return env.api + "v1/tasks/" + encodeURIComponent(c.taskId) + "/artifacts/" + encodeURIComponent(c.id);
    }

    // ---- the card shared by every kind -------------------------------------------------
    // A new card for `e.artifactId`; one that already exists (the artifact is written
    // again) is replaced where it stands, so replay or a rewrite never adds a second card.
    function card(flow, e, kind) {
      const old = cards.get(e.artifactId);
      if (old) release(old);
      const box = el("div", "artifact");
      box.dataset.artifactId = e.artifactId;
      box.dataset.kind = kind;
      const head = el("div", "head");
      const name = el("span", "name", e.artifactId);
      const type = el("span", "type");
      head.append(el("span", "icon", kind === "file" ? "▣" : kind === "data" ? "{}" : "▦"), name, type);
      const progress = el("progress");
      const amount = el("span", "amount");
      const status = el("div", "status");
      status.append(progress, amount);
      const body = el("div", "body");
      const foot = el("div", "foot");
      box.append(head, status, body, foot);
      if (old) old.box.replaceWith(box); else flow.append(box);
      const c = { id: e.artifactId, kind, taskId: e.taskId, box, name, type, progress, amount, body, foot };
      cards.set(e.artifactId, c);
      return c;
    }
    // Forgets what a card holds (its content is being replaced).
    function release(c) {
      if (c.url) URL.revokeObjectURL(c.url);
      if (c.previewUrl) URL.revokeObjectURL(c.previewUrl);
      c.url = null;
      c.previewUrl = null;
      c.blob = null;
      keptTotal -= c.kept || 0;
      c.kept = 0;
      c.parts = null;
    }
    function setState(c, state) { c.box.dataset.state = state; }
    // Keeps `part` (a Blob part of `bytes` bytes) unless that would pass a limit, in which
    // case everything kept so far is dropped and the download comes from the server.
    function keep(c, part, bytes) {
      if (!c.parts) return;
      if (c.kept + bytes > keepLimit() || keptTotal + bytes > KEEP_TOTAL) {
        keptTotal -= c.kept;
        c.kept = 0;
        c.parts = null;
        c.box.dataset.source = "server";
        return;
      }
      c.parts.push(part);
      c.kept += bytes;
      keptTotal += bytes;
    }
    // The download link: the kept content as a blob: URL, or the content route fetched with
    // the bearer header when clicked (the route takes no token in its URL, on purpose).
    function link(c, label, blob, download) {
      const a = el("a", "download", label);
      a.download = download;
      if (blob) {
        if (c.url) URL.revokeObjectURL(c.url);
        c.url = URL.createObjectURL(blob);
        c.blob = blob;
        a.href = c.url;
        a.dataset.source = "stream";
      } else {
        a.href = contentUrl(c);
        a.dataset.source = "server";
        a.addEventListener("click", (ev) => { ev.preventDefault(); fromServer(a); });
      }
      c.box.dataset.source = a.dataset.source;
      c.foot.prepend(a);
      return a;
    }
    async function fromServer(a) {
      if (a.dataset.busy === "true") return;
      a.dataset.busy = "true";
      const res = await fetch(a.href, { headers: env.headers() }).catch(() => null);
      try {
        if (!res || !res.ok) {
          env.say(res ? await env.failure(res) : "Could not reach the server to download " + a.download + ".");
          return;
        }
        const got = await res.blob();
        const url = URL.createObjectURL(got.slice(0, got.size, SAVE_TYPE));
        const save = el("a");
        save.href = url;
        save.download = a.download;
        document.body.append(save);
        save.click();
        save.remove();
        // Revoking at once can cancel the download in some browsers.
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (_) {
        env.say("The download of " + a.download + " failed.");
      } finally {
        a.dataset.busy = "false";
      }
    }
    function failed(c, metadata) {
      setState(c, "incomplete");
      release(c);
      c.progress.remove();
      c.amount.textContent = "incomplete" + (metadata && metadata.error ? ": " + metadata.error : "");
    }

    // ---- files ------------------------------------------------------------------------
    function file(flow, e) {
      let c = cards.get(e.artifactId);
      const index = Number(e.index) || 0;
      if (index === 0 || !c || c.kind !== "file") {
        c = card(flow, e, "file");
        Object.assign(c, { next: 0, bytes: 0, chunks: 0, kept: 0, parts: [], carry: "", text: "",
          mime: e.mimeType || "application/octet-stream", encoding: e.encoding || "utf-8", done: false });
        c.name.textContent = e.name || e.artifactId;
        c.type.textContent = c.mime;
        c.box.dataset.mimeType = c.mime;
        c.box.dataset.source = "stream";
        setState(c, "streaming");
        // Chunks of a replaced artifact seen before its first one cannot be placed.
        if (index !== 0) { c.parts = null; c.box.dataset.source = "server"; }
      }
      if (c.done) return;
      if (index !== c.next && c.parts) {
        // A gap: what the page holds is not the file any more.
        release(c);
        c.box.dataset.source = "server";
      }
      c.next = index + 1;
      c.chunks += 1;
      const data = typeof e.data === "string" ? e.data : "";
      if (c.encoding === "base64") {
        const text = c.carry + data;
        const whole = e.complete ? text.length : text.length - (text.length % 4);
        const ready = text.slice(0, whole);
        c.carry = text.slice(whole);
        const n = base64Length(ready);
        c.bytes += n;
        if (c.parts && ready) {
          try { keep(c, decodeBase64(ready), n); } catch (_) { release(c); c.box.dataset.source = "server"; }
        }
      } else {
        const n = utf8Length(data);
        c.bytes += n;
        keep(c, data, n);
        if (c.text.length < TEXT_PREVIEW) c.text += data.slice(0, TEXT_PREVIEW - c.text.length);
      }
      c.box.dataset.bytes = String(c.bytes);
      c.box.dataset.chunks = String(c.chunks);
      c.amount.textContent = size(c.bytes) + " received";
      if (e.complete) finishFile(c, e.metadata || {});
    }
    async function finishFile(c, metadata) {
      c.done = true;
      if (metadata.incomplete) { failed(c, metadata); return; }
      const total = typeof metadata.size === "number" ? metadata.size : c.bytes;
      c.box.dataset.size = String(total);
      const name = fileName(c.name.textContent, c.id);
      // Typed as plain bytes, so the link can only ever be saved: a file that says it is HTML
      // or SVG is never rendered as a document of this origin from a blob: URL.
      const blob = c.parts && total === c.bytes ? new Blob(c.parts, { type: SAVE_TYPE }) : null;
      c.parts = null; // now in the blob
      const kept = await offer(c, blob, metadata.sha256, true, "Download", name);
      if (kept == null) return;
      c.amount.textContent = size(total) + (metadata.sha256 ? " · sha256 " + metadata.sha256.slice(0, 12) + "…" : "");
      if (c.box.dataset.verified === "true") c.amount.textContent += " ✓";
      c.amount.title = metadata.sha256 || "";
      if (kept && c.mime.startsWith("image/")) {
        const img = el("img", "preview");
        img.alt = name;
        // The same bytes (a slice copies nothing) with the image's type; an <img> never runs
        // scripts, not even an SVG's.
        c.previewUrl = URL.createObjectURL(c.blob.slice(0, c.blob.size, c.mime));
        img.src = c.previewUrl;
        img.addEventListener("load", () => { img.dataset.loaded = "true"; if (env.grew) env.grew(); });
        img.addEventListener("error", () => { img.dataset.loaded = "false"; img.remove(); });
        c.body.append(img);
      } else if (c.text && c.encoding !== "base64") {
        const d = el("details", "text-preview");
        d.append(el("summary", null, "Preview"), el("pre", null, c.text + (total > utf8Length(c.text) ? "\n…" : "")));
        c.body.append(d);
      } else if (c.mime.startsWith("image/")) {
        c.foot.append(el("span", "note", "too large to preview"));
      }
      setState(c, "complete");
    }
    // Links `blob` (the content built from the stream) once it matches the streamed sha256,
    // else the server's copy. `exact`: the blob holds the streamed bytes themselves (a
    // file), so it may be offered unverified where `crypto.subtle` is missing (a page not
    // served from a secure context); data and datasets are re-serialized from parsed JSON,
    // which can differ from the server's form (`1.0`, integers past 2^53), so they are
    // offered only verified. Resolves to whether the blob was linked, or null when the card
    // was replaced meanwhile.
    async function offer(c, blob, expected, exact, label, download) {
      c.box.dataset.verified = "unavailable";
      if (blob && expected && window.crypto && crypto.subtle) {
        setState(c, "verifying");
        let hex = "";
        try { hex = await sha256Hex(blob); } catch (_) { hex = ""; }
        if (cards.get(c.id) !== c) return null;
        c.box.dataset.verified = String(hex === expected);
        if (hex !== expected) blob = null;
      } else if (!exact) {
        blob = null;
      }
      if (!blob) release(c);
      if (c.progress.isConnected) c.progress.remove();
      link(c, label, blob, download);
      return !!blob;
    }

    // ---- data records -----------------------------------------------------------------
    async function data(flow, e) {
      const c = card(flow, e, "data");
      const metadata = e.metadata || {};
      c.name.textContent = e.name || e.artifactId;
      c.type.textContent = "JSON";
      c.progress.remove();
      const compact = JSON.stringify(e.data === undefined ? null : e.data);
      const bytes = typeof metadata.size === "number" ? metadata.size : utf8Length(compact);
      c.box.dataset.size = String(bytes);
      c.amount.textContent = size(bytes);
      let pretty = JSON.stringify(e.data === undefined ? null : e.data, null, 2);
      const lines = pretty.split("\n").length;
      if (pretty.length > JSON_SHOWN) pretty = pretty.slice(0, JSON_SHOWN) + "\n… (download for the rest)";
      const d = el("details", "json");
      d.open = lines <= 12;
      const what = Array.isArray(e.data) ? e.data.length + " items"
        : e.data && typeof e.data === "object" ? Object.keys(e.data).length + " keys" : typeof e.data;
      d.append(el("summary", null, "JSON · " + what), el("pre", null, pretty));
      c.body.append(d);
      // The record is already in memory: its compact JSON is the download when it is
      // byte for byte what the server holds.
      const blob = new Blob([compact], { type: "application/json" });
      const done = await offer(c, blob, metadata.sha256, false, "Download", withExt(fileName(c.name.textContent, c.id), ".json"));
      if (done == null) return;
      // JSON numbers past 2^53 (or written `1.0`) do not survive the browser's parse.
      if (c.box.dataset.verified === "false") c.foot.append(el("span", "note", "numbers shown as the browser reads them; the download is exact"));
      setState(c, "complete");
    }

    // ---- datasets ---------------------------------------------------------------------
    function dataset(flow, e) {
      let c = cards.get(e.artifactId);
      const index = Number(e.index) || 0;
      if (index === 0 || !c || c.kind !== "dataset") {
        c = card(flow, e, "dataset");
        Object.assign(c, { next: 0, rows: 0, bytes: 0, kept: 0, parts: [], shown: [], schema: e.schema, done: false });
        c.name.textContent = e.name || e.artifactId;
        c.type.textContent = "dataset";
        c.box.dataset.source = "stream";
        c.table = el("table");
        const wrap = el("div", "table-wrap");
        wrap.append(c.table);
        c.body.append(wrap);
        setState(c, "streaming");
        if (index !== 0) { c.parts = null; c.box.dataset.source = "server"; }
      }
      if (c.done) return;
      if (index !== c.next && c.parts) { release(c); c.box.dataset.source = "server"; }
      c.next = index + 1;
      if (e.schema && !c.schema) c.schema = e.schema;
      const rows = Array.isArray(e.rows) ? e.rows : [];
      for (const row of rows) {
        const line = JSON.stringify(row) + "\n";
        const n = utf8Length(line);
        c.bytes += n;
        keep(c, line, n);
        if (c.shown.length < TABLE_ROWS) c.shown.push(row);
      }
      c.rows += rows.length;
      if (rows.length && c.shown.length <= TABLE_ROWS) drawTable(c);
      c.box.dataset.rows = String(c.rows);
      c.amount.textContent = c.rows + (c.rows === 1 ? " row" : " rows") + " received";
      if (e.complete) finishDataset(c, e.metadata || {});
    }
    function columns(c) {
      const props = c.schema && c.schema.properties && typeof c.schema.properties === "object"
        ? Object.keys(c.schema.properties) : [];
      const cols = props.slice();
      for (const row of c.shown) {
        if (row && typeof row === "object" && !Array.isArray(row)) {
          for (const k of Object.keys(row)) if (!cols.includes(k)) cols.push(k);
        } else if (!cols.includes("value")) cols.push("value");
      }
      return cols;
    }
    function cell(v) {
      if (v === undefined) return "";
      const s = typeof v === "string" ? v : JSON.stringify(v);
      return s.length > CELL_CHARS ? s.slice(0, CELL_CHARS) + "…" : s;
    }
    function drawTable(c) {
      const cols = columns(c);
      const head = el("tr");
      for (const k of cols) head.append(el("th", null, k));
      const thead = el("thead");
      thead.append(head);
      const tbody = el("tbody");
      for (const row of c.shown) {
        const tr = el("tr");
        const obj = row && typeof row === "object" && !Array.isArray(row);
        for (const k of cols) {
          const td = el("td", null, obj ? cell(row[k]) : (k === "value" ? cell(row) : ""));
          if (typeof (obj ? row[k] : row) === "number") td.dataset.align = "right";
          tr.append(td);
        }
        tbody.append(tr);
      }
      c.table.replaceChildren(thead, tbody);
    }
    async function finishDataset(c, metadata) {
      c.done = true;
      if (metadata.incomplete) { failed(c, metadata); return; }
      const rows = typeof metadata.rowCount === "number" ? metadata.rowCount : c.rows;
      const total = typeof metadata.size === "number" ? metadata.size : c.bytes;
      c.box.dataset.rows = String(rows);
      c.box.dataset.size = String(total);
      c.amount.textContent = rows + (rows === 1 ? " row" : " rows") + " · " + size(total);
      const blob = c.parts && rows === c.rows ? new Blob(c.parts, { type: "application/x-ndjson" }) : null;
      c.parts = null;
      const done = await offer(c, blob, metadata.sha256, false, "Download (JSON Lines)",
        withExt(fileName(c.name.textContent, c.id), ".jsonl"));
      if (done == null) return;
      if (rows > c.shown.length) c.foot.append(el("span", "note", "first " + c.shown.length + " of " + rows + " rows"));
      setState(c, "complete");
    }

    // A task ended: its artifacts still streaming will get no more chunks.
    function settle(taskId) {
      for (const c of cards.values()) {
        if (c.taskId === taskId && c.box.dataset.state === "streaming") {
          c.done = true;
          failed(c, { error: "the task ended before the artifact was complete" });
        }
      }
    }
    function clear() {
      for (const c of cards.values()) release(c);
      cards.clear();
      keptTotal = 0;
    }
    return { file, data, dataset, settle, clear };
  }

  return { create, size, decodeBase64, utf8Length };
})();
