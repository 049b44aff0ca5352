// The conversation list: the caller's conversations from `GET /v1/contexts` (most recently
// active first, titled by their first message), each a `#ctx=<id>` link — so opening one
// is a navigation the Back button undoes — with a delete button (`DELETE
// /v1/contexts/{id}`, after a confirmation). The open conversation is marked
// `aria-current`.
const LooopyContexts = (() => {
  "use strict";
  const el = (tag, cls, text) => LooopyTurns.el(tag, cls, text);

  // `io`: `request`, `say`, `failure`; `onDeleted(id)` after a delete went through.
  function create(nav, io, onDeleted) {
    let current = null, loading = null, again = false;
    const items = new Map();

    function row(c) {
      const item = el("div", "context");
      item.dataset.contextId = c.contextId;
      const link = el("a", "open");
      link.href = "#ctx=" + encodeURIComponent(c.contextId);
      link.append(el("span", "title", c.title || "New conversation"), el("span", "when", LooopyWords.ago(c.updatedAt)));
      link.title = c.title || c.contextId;
      const del = el("button", "delete", "×");
      del.type = "button";
      del.title = "Delete this conversation";
      del.setAttribute("aria-label", "Delete “" + (c.title || c.contextId) + "”");
      del.addEventListener("click", (ev) => { ev.preventDefault(); remove(c); });
      item.append(link, del);
      return item;
    }

    // Reloads the list (the first page, up to 100); a call while one runs reloads once more
    // after it, so the list always ends up as fresh as the last call asked.
    async function refresh() {
      if (loading) { again = true; return loading; }
      loading = (async () => {
        const res = await io.request("v1/contexts?limit=100");
        if (res && res.ok) {
          const body = await res.json();
          items.clear();
          const rows = (body.contexts || []).map((c) => { const r = row(c); items.set(c.contextId, r); return r; });
          if (!rows.length) rows.push(el("p", "none", "No conversations yet."));
          nav.replaceChildren(...rows);
          nav.dataset.count = String(items.size);
          mark(current);
        }
      })();
      try { await loading; } finally { loading = null; }
      if (again) { again = false; await refresh(); }
    }

    function mark(id) {
      current = id;
      for (const [cid, item] of items) {
        if (cid === id) item.setAttribute("aria-current", "page"); else item.removeAttribute("aria-current");
      }
    }

    async function remove(c) {
      const title = c.title || "this conversation";
      if (!window.confirm("Delete “" + title + "”? Its messages and files are removed for good.")) return;
      const res = await io.request("v1/contexts/" + encodeURIComponent(c.contextId), { method: "DELETE" });
      if (!res || !(res.ok || res.status === 404)) {
        io.say(res ? await io.failure(res) : "Could not reach the server; try again.");
        return;
      }
      const item = items.get(c.contextId);
      if (item) item.remove();
      items.delete(c.contextId);
      onDeleted(c.contextId);
      refresh();
    }

    return { refresh, mark };
  }

  return { create };
})();
