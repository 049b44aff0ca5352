// Looopy's chat page: sends with POST /v1/contexts/{id}/messages, watches the open
// conversation's events with one EventSource, and keeps the URL and the conversation shown
// in step: `#ctx=<id>` names it, opening one from the list is a navigation (Back returns to
// the previous one), a new chat has no hash until its first message names it. Every event
// carries its per-context seq (the SSE id): events at or below the last seq seen are
// ignored, so replay after a reconnection never shows anything twice.
(() => {
  const KINDS = ["task-created", "task-status", "task-complete", "content-delta", "content-complete",
    "thought-stream", "tool-start", "tool-progress", "tool-complete", "input-required", "input-received",
    "auth-required", "auth-completed", "file-write", "data-write", "dataset-write", "subtask-created", "usage"];
  // The kinds that can change what the composer offers (Stop, answering a question).
  const MODE_KINDS = new Set(["task-created", "task-status", "task-complete", "input-required", "input-received"]);
  // The API's base is where the page is served ("/" or a prefix such as "/agent/" when the
  // server's router is nested in another application).
  const API = location.pathname.endsWith("/") ? location.pathname : location.pathname + "/";
  const token = new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const log = $("log"), statusEl = $("status"), notice = $("notice"), input = $("message");
  const body = document.body, el = LooopyTurns.el;

  let contextId = null, source = null, lastSeq = 0, opened = false, reopenTimer = 0, backoff = 1000;
  // Bumped whenever another conversation is opened: answers to requests made for the
  // previous one are dropped.
  let generation = 0;

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }
  // A request to the API (`json` becomes the body); `null` when the server is unreachable.
  function request(path, opts) {
    const o = opts || {};
    const init = { method: o.method || "GET", headers: headers(o.json ? { "Content-Type": "application/json" } : null) };
    if (o.json) init.body = JSON.stringify(o.json);
    return fetch(API + path, init).catch(() => null);
  }
  function setStatus(state, text) {
    statusEl.dataset.status = state;
    statusEl.textContent = text || state;
  }
  function say(text) { notice.textContent = text || ""; }
  async function failure(res) {
    if (res.status === 401) return "This server needs a token: open the page as /?token=<your token>.";
    try { const b = await res.json(); return (b.error && b.error.message) || res.statusText; }
    catch (_) { return res.status + " " + res.statusText; }
  }
  function contextFromHash() {
    const m = /^#ctx=([A-Za-z0-9._:-]{1,128})$/.exec(location.hash);
    return m ? m[1] : null;
  }
  function newContextId() {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  // The page's own URL for a conversation (or for a new chat), keeping ?token=.
  const urlFor = (id) => location.pathname + location.search + (id ? "#ctx=" + id : "");

  // Whether the view follows the conversation: true while the user is at (or near) the
  // bottom, measured when they scroll.
  let pinned = true;
  const scroller = log.parentElement;
  scroller.addEventListener("scroll", () => {
    pinned = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 160;
  }, { passive: true });
  function scrollDown() {
    if (pinned) scroller.scrollTop = scroller.scrollHeight;
  }

  const artifacts = LooopyArtifacts.create({ api: API, headers, say, failure, grew: scrollDown });
  const io = { log, artifacts, request, say, failure, grew: scrollDown, changed: () => composerMode(),
    reconnect: () => connect(), cancelTask, retry };
  const turns = LooopyTurns.create(io);
  const list = LooopyContexts.create($("contexts"), io, (id) => {
    if (id === contextId) newChat(false);
  });

  // ---- which conversation is shown ------------------------------------------------------------
  function showContext() {
    $("ctx").textContent = contextId ? "context " + contextId : "";
    body.dataset.contextId = contextId || "";
    list.mark(contextId);
  }
  // Shows conversation `id` (null: a new, empty chat): the stream of the previous one is
  // closed and everything of it forgotten, then `id`'s history and events are replayed.
  function open(id) {
    generation++;
    disconnect();
    contextId = id;
    lastSeq = 0;
    body.dataset.lastSeq = "0";
    turns.clear();
    artifacts.clear();
    const empty = el("p", "empty", id ? "Loading…" : "Send a message to start. Answers stream in as they are written.");
    empty.id = "empty";
    log.replaceChildren(empty);
    pinned = true;
    say("");
    showContext();
    composerMode();
    if (id) resume();
  }
  // The URL changed (a list link, Back/Forward, an edited hash): show what it names.
  function route() {
    const id = contextFromHash();
    if (!id && location.hash) history.replaceState(null, "", urlFor(null));
    if (id !== contextId) open(id);
  }
  function newChat(push) {
    if (push && location.hash) history.pushState(null, "", urlFor(null));
    else history.replaceState(null, "", urlFor(null));
    open(null);
    input.focus();
  }

  // Reopening a conversation: replay its events from the start; the stored history gives
  // the user messages, which events do not carry.
  async function resume() {
    const gen = generation, id = contextId;
    const path = "v1/contexts/" + encodeURIComponent(id) + "/messages";
    const res = await request(path);
    if (gen !== generation) return;
    if (!res || !res.ok) {
      say(res ? await failure(res) : "Could not reach the server.");
      if (res && res.status === 404) {
        // Nothing to show under this URL: say so and show a new chat, at its own URL.
        history.replaceState(null, "", urlFor(null));
        open(null);
        say("That conversation does not exist (it may have been deleted).");
      }
      return;
    }
    const h = await res.json();
    // The history comes in pages (oldest first): gather them all for the user texts.
    let messages = h.messages || [];
    for (let next = h.nextCursor; next; ) {
      const more = await request(path + "?limit=100&cursor=" + encodeURIComponent(next));
      if (!more || !more.ok) break;
      const page = await more.json();
      messages = messages.concat(page.messages || []);
      next = page.nextCursor;
    }
    if (gen !== generation) return;
    turns.setHistory(messages.filter((m) => m.role === "user").map((m) => m.content), h.lastEventId || 0);
    const empty = $("empty");
    if (empty) empty.textContent = "Nothing here yet.";
    connect();
  }

  // ---- the event stream --------------------------------------------------------------------
  function onEvent(kind, ev) {
    let e;
    try { e = JSON.parse(ev.data); } catch (_) { return; }
    const seq = Number(ev.lastEventId || e.seq);
    if (!(seq > lastSeq)) return; // already shown (replay overlap)
    lastSeq = seq;
    body.dataset.lastSeq = String(seq);
    turns.onEvent(kind, e, seq);
    scrollDown();
    if (MODE_KINDS.has(kind)) composerMode();
    // A turn that ends changes the list: its title (the first message) and its order.
    if (kind === "task-complete" && !(e.path && e.path.length)) list.refresh();
  }
  function streamUrl() {
    const q = new URLSearchParams();
    if (token) q.set("access_token", token);
    q.set("lastEventId", String(lastSeq));
    return API + "v1/contexts/" + encodeURIComponent(contextId) + "/events?" + q;
  }
  // Opens the stream if it is not open. EventSource reconnects by itself after a network
  // error (sending Last-Event-ID); if it gives up (CLOSED) the page reopens it from the
  // last seq it has seen, backing off.
  function connect() {
    if (!contextId || source) return;
    clearTimeout(reopenTimer);
    setStatus(opened ? "reconnecting" : "connecting", opened ? "reconnecting…" : "connecting…");
    const es = new EventSource(streamUrl());
    source = es;
    es.onopen = () => {
      if (opened) body.dataset.reconnects = String(Number(body.dataset.reconnects) + 1);
      opened = true;
      backoff = 1000;
      setStatus("open", "live");
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        if (source === es) { source = null; giveUpOrRetry(); }
      } else if (source === es) {
        setStatus("reconnecting", "reconnecting…");
      }
    };
    for (const kind of KINDS) es.addEventListener(kind, (ev) => { if (source === es) onEvent(kind, ev); });
  }
  // EventSource does not say why it gave up: ask the server. A refusal that retrying
  // cannot fix (no or wrong token, the conversation is gone) stops here with a message;
  // anything else (server restarting, network down) is retried with backoff.
  async function giveUpOrRetry() {
    const gen = generation;
    setStatus("reconnecting", "reconnecting in " + Math.round(backoff / 1000) + "s…");
    const res = await request("v1/contexts/" + encodeURIComponent(contextId) + "/messages");
    if (gen !== generation) return;
    if (res && (res.status === 401 || res.status === 403 || res.status === 404)) {
      say(await failure(res));
      setStatus("error", "disconnected");
      return;
    }
    clearTimeout(reopenTimer);
    reopenTimer = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 15000);
  }
  function disconnect() {
    clearTimeout(reopenTimer);
    if (source) source.close();
    source = null;
    opened = false;
    setStatus("idle", "idle");
  }

  // ---- sending, answering, stopping ---------------------------------------------------------
  async function send(text) {
    say("");
    if (!contextId) {
      // The new chat becomes this conversation, at its own URL (replacing the new chat's).
      contextId = newContextId();
      history.replaceState(null, "", urlFor(contextId));
      showContext();
    }
    const gen = generation;
    const res = await request("v1/contexts/" + encodeURIComponent(contextId) + "/messages",
      { method: "POST", json: { message: text } });
    if (!res || !res.ok) {
      say(res ? await failure(res) : "Could not reach the server; try again.");
      return false;
    }
    const started = await res.json();
    if (gen !== generation) return true;
    turns.turnFor(started.taskId).user.textContent = text;
    connect();
    composerMode();
    list.refresh();
    return true;
  }
  async function cancelTask(taskId) {
    const res = await request("v1/tasks/" + encodeURIComponent(taskId) + "/cancel", { method: "POST" });
    if (!res || !res.ok) say(res ? await failure(res) : "Could not reach the server.");
  }
  // Retry of a failed or stopped turn: its message again, as a new turn.
  async function retry(text, button) {
    if (!text) return;
    button.disabled = true;
    await send(text);
    button.disabled = false;
  }

  // The composer follows the conversation: Stop while a turn holds it, and when the agent
  // asked a question, the message box answers it (the form in the turn still works too).
  function composerMode() {
    const running = turns.active().length > 0;
    body.dataset.running = String(running);
    $("stop").hidden = !running;
    const pending = turns.pendingInput();
    const form = $("composer");
    if (pending) {
      form.dataset.answering = pending.e.inputId;
      input.placeholder = "Answer: " + (pending.e.prompt || "the agent's question");
      $("send").textContent = "Answer";
    } else {
      delete form.dataset.answering;
      input.placeholder = "Message (Enter to send, Shift+Enter for a new line)";
      $("send").textContent = "Send";
    }
  }

  $("composer").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    $("send").disabled = true;
    const pending = turns.pendingInput();
    const ok = pending ? await turns.answer(pending, text) : await send(text);
    if (ok) input.value = "";
    $("send").disabled = false;
    composerMode();
    input.focus();
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => { for (const id of turns.active()) cancelTask(id); });
  $("new-chat").addEventListener("click", () => newChat(true));
  window.addEventListener("hashchange", route);
  window.addEventListener("popstate", route);
  window.addEventListener("online", () => { if (!source && contextId && opened) connect(); });
  list.refresh();
  if (!contextFromHash() && location.hash) history.replaceState(null, "", urlFor(null));
  open(contextFromHash());
})();
