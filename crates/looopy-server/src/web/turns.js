// The conversation's turns: one `section.turn` per top-level task, built from its events.
// Each turn shows the user's message, then the agent's activity in the order it happened
// (thoughts, one Markdown block per model call, tool cards with their arguments, sub-agent
// blocks, input and authorization forms, artifact cards), then a footer with the turn's
// model, tokens and duration, copy buttons and, when it failed or was stopped, a readable
// error and a Retry button. Sub-agents' child tasks are nodes of the same shape nested in
// their parent's flow (details.subtask), so every event kind renders the same at any depth.
// Requests go through `io` (see app.js); forms for input and authorization are in forms.js.
const LooopyTurns = (() => {
  "use strict";
  const W = LooopyWords;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  // A copy button: no text of its own (its label is CSS), so it never adds to the text of
  // what it sits in; `text()` is read when clicked.
  function copyButton(text, what) {
    const b = el("button", "copy");
    b.type = "button";
    b.title = "Copy " + what;
    b.setAttribute("aria-label", "Copy " + what);
    b.addEventListener("click", async (ev) => {
      ev.preventDefault();
      ev.stopPropagation();
      const ok = await copyText(text());
      b.dataset.copied = ok ? "true" : "false";
      setTimeout(() => { delete b.dataset.copied; }, 1500);
    });
    return b;
  }
  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (_) {
      // No clipboard API (a page served over plain http from another host): the old way.
      const area = el("textarea");
      area.value = text;
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.append(area);
      area.select();
      let ok = false;
      try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
      area.remove();
      return ok;
    }
  }

  // Code blocks of a rendered fragment: highlighted, with a copy button of their own.
  function decorate(frag) {
    for (const pre of frag.querySelectorAll("pre")) {
      const code = pre.querySelector("code");
      if (!code) continue;
      LooopyHighlight.highlight(code, pre.dataset.lang);
      pre.append(copyButton(() => code.textContent, "code"));
    }
    return frag;
  }

  function create(io) {
    const turns = new Map();
    // Sub-agents' child tasks, by task id (their blocks live inside their turn).
    const subtasks = new Map();
    // Open input requests, by inputId: what the composer answers (`{node, form, e}`).
    const openInputs = new Map();
    // Texts of earlier user messages (from the stored history), for tasks replayed on load.
    let historyTexts = [], historyUntil = 0;
    const forms = LooopyForms.create({ io, el, openInputs });

    function turnFor(taskId) {
      let t = turns.get(taskId);
      if (t) return t;
      const empty = document.getElementById("empty");
      if (empty) empty.remove();
      const section = el("section", "turn");
      section.dataset.taskId = taskId;
      section.dataset.state = "submitted";
      const said = el("div", "said");
      const user = el("div", "user");
      said.append(user, copyButton(() => user.textContent, "message"));
      const agent = el("div", "agent");
      const meta = el("div", "meta");
      const state = el("span", "state", W.state("submitted"));
      const cancel = el("button", "link cancel", "stop");
      cancel.type = "button";
      cancel.addEventListener("click", () => io.cancelTask(taskId));
      meta.append(state, cancel);
      // Thoughts, text blocks, tools and input forms, in the order they happen.
      const activity = el("div", "activity");
      const error = el("div", "error");
      const foot = el("div", "foot");
      const stats = el("span", "stats");
      const retry = el("button", "secondary retry", "Retry");
      retry.type = "button";
      retry.addEventListener("click", () => io.retry(user.textContent, retry));
      foot.append(stats, copyButton(() => t.text.all(), "answer"), retry);
      agent.append(meta, activity, error, foot);
      section.append(said, agent);
      io.log.append(section);
      // The latest text block is the turn's answer so far: it carries #answer-<taskId>.
      const text = textStream(activity, (block) => {
        const previous = document.getElementById("answer-" + taskId);
        if (previous) previous.removeAttribute("id");
        block.id = "answer-" + taskId;
      });
      t = { taskId, section, user, state, activity, text, error, stats, thoughts: new Map(), tools: new Map(),
            inputs: new Map(), auths: new Map(), model: "", tokens: 0, started: null };
      turns.set(taskId, t);
      return t;
    }

    // A node is what an event renders into: the turn itself for its top-level task, or a
    // child task's block. Blocks are keyed by task id, so a replayed subtask-created (or a
    // child's event seen before it) never makes a second.
    function nodeFor(t, e) {
      if (e.taskId === t.taskId) return t;
      return subtasks.get(e.taskId) || subtaskNode(t, parentNode(t, e.parentTaskId), e.taskId, e.path);
    }
    function parentNode(t, parentId) {
      return (parentId && subtasks.get(parentId)) || t;
    }
    function subtaskNode(t, parent, taskId, path) {
      const box = el("details", "subtask");
      box.open = true;
      box.dataset.taskId = taskId;
      box.dataset.parentTaskId = parent.taskId;
      box.dataset.depth = String(path && path.length ? path.length : 1);
      box.dataset.state = "submitted";
      const summary = el("summary");
      const who = el("span", "who", "sub-agent");
      const prompt = el("span", "prompt");
      const state = el("span", "state", W.state("submitted"));
      // Stops this sub-agent alone: its parent gets an error result and goes on.
      const cancel = el("button", "link cancel", "cancel");
      cancel.type = "button";
      cancel.addEventListener("click", (ev) => { ev.preventDefault(); ev.stopPropagation(); io.cancelTask(taskId); });
      summary.append(who, prompt, state, cancel);
      // Opened or closed by hand: the block stays as the user left it.
      summary.addEventListener("click", () => { n.touched = true; });
      const activity = el("div", "activity"), error = el("div", "error");
      box.append(summary, activity, error);
      parent.activity.append(box);
      const n = { taskId, box, section: box, who, prompt, state, activity, error, parent,
                  text: textStream(activity, null), thoughts: new Map(), tools: new Map(),
                  inputs: new Map(), auths: new Map(), touched: false };
      subtasks.set(taskId, n);
      return n;
    }
    // subtask-created, in the parent's stream: names the block and puts it right after the
    // parent's delegating tool call.
    function subtaskCreated(t, parent, e) {
      const n = subtasks.get(e.subtaskId) || subtaskNode(t, parent, e.subtaskId, (e.path || []).concat([e.taskId]));
      if (e.agentId) { n.who.textContent = e.agentId; n.box.dataset.agent = e.agentId; }
      n.prompt.textContent = e.prompt || "";
      n.prompt.title = e.prompt || "";
      if (e.toolCallId) n.box.dataset.toolCallId = e.toolCallId;
      if (e.remoteTaskId) n.box.dataset.remoteTaskId = e.remoteTaskId;
      const call = e.toolCallId && parent.tools.get(e.toolCallId);
      if (call) { call.box.after(n.box); call.box.dataset.subtaskId = e.subtaskId; }
      return n;
    }
    // The machine state in data-state (for styles and tests), words in the badge.
    function setState(n, state) {
      n.section.dataset.state = state;
      n.state.textContent = W.state(state);
      if (!n.box) return;
      // A finished child folds away (unless the user opened or closed it by hand); one
      // that failed or waits for the user stays open.
      if (state === "completed" && !n.touched) n.box.open = false;
      if ((state === "waiting-input" || state === "waiting-auth" || state === "failed") && !n.touched) n.box.open = true;
    }
    function showFailure(n, e) {
      const f = W.failure(e);
      const box = el("div", "failure");
      box.append(el("strong", "title", f.title));
      if (f.detail) box.append(" ", el("span", "detail", f.detail));
      if (f.code) box.append(" ", el("code", "code", f.code));
      n.error.replaceChildren(box);
      n.error.dataset.code = f.code;
    }
    function showStats(t) {
      const ms = t.started != null && t.ended != null ? Math.max(0, t.ended - t.started) : null;
      t.stats.textContent = W.stats(t.model, t.tokens, ms);
      if (t.model) t.section.dataset.model = t.model;
      t.section.dataset.tokens = String(t.tokens);
      if (ms != null) t.section.dataset.durationMs = String(ms);
    }

    // ---- answer text: one Markdown block per model call ------------------------------------
    // Each model call's text is its own block (.part), appended to the task's flow when its
    // first delta arrives, so text before a tool call, the tool card and the answer after it
    // stay in order and never glue. A streaming block is rendered from its whole text at most
    // once per animation frame; the complete text at once.
    const dirty = new Set();
    let frame = 0;
    function textStream(flow, onBlock) {
      const s = { flow, onBlock, block: null, raw: "", count: 0, done: [] };
      s.all = () => s.done.concat(s.block ? [s.raw] : []).join("\n\n");
      return s;
    }
    function paint(s) {
      dirty.delete(s);
      if (s.block) s.block.replaceChildren(decorate(LooopyMarkdown.render(s.raw)));
    }
    function paintDirty() {
      frame = 0;
      for (const s of [...dirty]) paint(s);
      io.grew();
    }
    function textDelta(s, delta) {
      if (!s.block) {
        s.block = el("div", "part");
        s.block.dataset.index = String(++s.count);
        s.block.dataset.complete = "false";
        s.raw = "";
        s.flow.append(s.block);
        if (s.onBlock) s.onBlock(s.block);
      }
      s.raw += delta || "";
      dirty.add(s);
      if (!frame) frame = requestAnimationFrame(paintDirty);
    }
    // Closes the open block, rendering `content` (the call's whole text) when there is one.
    function textComplete(s, content) {
      if (typeof content === "string" && content) {
        if (!s.block) textDelta(s, "");
        s.raw = content;
      }
      if (!s.block) return;
      paint(s);
      s.block.dataset.complete = "true";
      if (s.block.dataset.superseded !== "true") s.done.push(s.raw);
      s.block = null;
    }

    // A turn continued after the process running it died: the text the dead run was still
    // streaming is superseded (closed, dimmed), a notice says so, and what the turn says
    // next starts a block of its own below it.
    function resumed(n, e) {
      if (n.text.block) {
        n.text.block.dataset.superseded = "true";
        textComplete(n.text, null);
      }
      const note = el("div", "resumed", e.message || "Resumed after an interruption.");
      const from = e.metadata.fromIteration;
      if (from != null) note.dataset.fromIteration = String(from);
      if (e.metadata.replica) note.dataset.replica = String(e.metadata.replica);
      n.activity.append(note);
    }

    // One event (already de-duplicated by seq): finds its turn and node and renders it.
    function onEvent(kind, e, seq) {
      const root = (e.path && e.path.length) ? e.path[0] : e.taskId;
      const t = turnFor(root);
      render(kind, e, t, nodeFor(t, e), seq);
    }

    // `t` is the turn, `n` the node of the event's own task (`t` itself for the top level).
    function render(kind, e, t, n, seq) {
      const child = n !== t;
      switch (kind) {
        case "task-created": {
          const model = e.metadata && e.metadata.model;
          if (child) {
            const agent = e.metadata && e.metadata.agentId;
            if (agent && !n.box.dataset.agent) { n.who.textContent = agent; n.box.dataset.agent = agent; }
            break;
          }
          if (model) t.model = String(model);
          t.started = Date.parse(e.timestamp) || null;
          showStats(t);
          if (!t.user.textContent && seq <= historyUntil && historyTexts.length)
            t.user.textContent = historyTexts.shift();
          break;
        }
        case "task-status":
          setState(n, e.status);
          if (e.status === "failed") showFailure(n, e);
          if (e.metadata && e.metadata.resumed === true) resumed(n, e);
          break;
        case "task-complete": {
          // The final answer, shown only if no text streamed (else it is the last block).
          textComplete(n.text, n.text.count ? null : e.content);
          io.artifacts.settle(e.taskId);
          setState(n, e.status);
          if (e.status === "failed" && !n.error.firstChild) showFailure(n, e);
          for (const form of n.inputs.values()) forms.closeInput(form, null);
          for (const form of n.auths.values()) forms.closeAuth(form, null);
          if (!child) { t.ended = Date.parse(e.timestamp) || null; showStats(t); }
          break;
        }
        case "subtask-created": subtaskCreated(t, n, e); break;
        case "content-delta": textDelta(n.text, e.delta); break;
        case "content-complete": textComplete(n.text, e.content); break;
        case "thought-stream": thought(n, e); break;
        case "tool-start": toolStart(n, e); break;
        case "tool-progress": {
          const tool = n.tools.get(e.toolCallId);
          if (!tool) break;
          tool.bar.value = Math.max(0, Math.min(1, Number(e.progress) || 0));
          if (e.message) tool.detail.textContent = e.message;
          break;
        }
        case "tool-complete": {
          const tool = n.tools.get(e.toolCallId) || toolStart(n, e);
          tool.box.dataset.success = String(!!e.success);
          tool.bar.value = 1;
          tool.outcome.textContent = e.success ? "done" : "failed";
          const shown = e.success ? e.result : e.error;
          if (shown != null) tool.detail.textContent = typeof shown === "string" ? shown : JSON.stringify(shown, null, 2);
          break;
        }
        case "input-required": forms.inputForm(n, e); break;
        case "input-received": {
          const form = n.inputs.get(e.inputId);
          if (form) forms.closeInput(form, "answered");
          break;
        }
        case "auth-required": forms.authForm(n, e); break;
        case "auth-completed": forms.authorized(n, e); break;
        case "file-write": io.artifacts.file(n.activity, e); break;
        case "data-write": io.artifacts.data(n.activity, e); break;
        case "dataset-write": io.artifacts.dataset(n.activity, e); break;
        case "usage":
          // Counted into the turn (a sub-agent's tokens too) and, for a child, its block.
          if (child) n.section.dataset.tokens = String((Number(n.section.dataset.tokens) || 0) + (e.totalTokens || 0));
          t.tokens += e.totalTokens || 0;
          if (!t.model && e.model && !child) t.model = String(e.model);
          showStats(t);
          break;
        default: break;
      }
    }

    function thought(t, e) {
      let th = t.thoughts.get(e.thoughtId);
      if (!th) {
        const box = el("details", "thought");
        box.dataset.complete = "false";
        const summary = el("summary", null, "Thinking");
        const text = el("div", "body");
        box.append(summary, text);
        t.activity.append(box);
        th = { box, summary, text };
        t.thoughts.set(e.thoughtId, th);
      }
      if (e.delta) th.text.textContent += e.delta;
      if (e.isComplete) {
        if (e.content != null) th.text.textContent = e.content;
        th.box.dataset.complete = "true";
        let label = "Thought";
        if (e.thoughtType) label += " · " + e.thoughtType;
        if (typeof e.confidence === "number") label += " · " + Math.round(e.confidence * 100) + "% sure";
        if (e.truncated) label += " (cut short)";
        th.summary.textContent = label;
      }
    }

    // A tool card: the tool's name and outcome, a progress bar, its arguments (one line per
    // argument; strings as they are, other values as JSON) and then its progress message
    // or result.
    function toolStart(t, e) {
      const box = el("div", "tool");
      box.dataset.callId = e.toolCallId;
      const name = el("span", "name", e.toolName || "tool");
      const outcome = el("span", "outcome", "running");
      const bar = el("progress");
      bar.max = 1;
      const args = el("dl", "args");
      const given = e.arguments;
      if (given && typeof given === "object" && !Array.isArray(given)) {
        for (const [key, value] of Object.entries(given)) {
          args.append(el("dt", null, key), el("dd", null, typeof value === "string" ? value : JSON.stringify(value)));
        }
      } else if (given != null) {
        args.append(el("dd", null, JSON.stringify(given)));
      }
      const detail = el("div", "detail");
      box.append(name, outcome, bar, args, detail);
      t.activity.append(box);
      const tool = { box, bar, outcome, detail };
      t.tools.set(e.toolCallId, tool);
      return tool;
    }

    return {
      onEvent,
      turnFor,
      // Texts of the stored user messages, given to tasks replayed up to `until`.
      setHistory(texts, until) { historyTexts = texts; historyUntil = until; },
      // Top-level tasks that still hold the conversation (what Stop stops).
      active() {
        return [...turns.values()].filter((t) => W.active(t.section.dataset.state)).map((t) => t.taskId);
      },
      // The input request the composer answers: the latest one still open.
      pendingInput() {
        const open = [...openInputs.values()];
        return open.length ? open[open.length - 1] : null;
      },
      answer: (pending, text) => forms.answerWithText(pending, text),
      clear() {
        turns.clear();
        subtasks.clear();
        openInputs.clear();
        dirty.clear();
        historyTexts = [];
        historyUntil = 0;
      },
    };
  }

  return { create, el, copyButton };
})();
