// What the chat page says to people: task states in words ("waiting for your answer", not
// `waiting-input`; the machine name stays in `data-state`), failures as a sentence with
// what to do, and a turn's model, tokens and duration in one short line.
const LooopyWords = (() => {
  "use strict";
  const STATES = {
    submitted: "queued",
    working: "working…",
    "waiting-input": "waiting for your answer",
    "waiting-auth": "waiting for authorization",
    "waiting-subtask": "waiting for a sub-agent",
    completed: "completed",
    failed: "failed",
    canceled: "stopped",
    rejected: "refused",
  };
  // Whether a turn in this state still holds the conversation (it can be stopped).
  const ACTIVE = new Set(["submitted", "working", "waiting-input", "waiting-auth", "waiting-subtask"]);

  function state(s) {
    return STATES[s] || String(s || "").replace(/-/g, " ");
  }

  // What a failure's code means for the person reading it; the server's message follows.
  const FAILURES = {
    max_iterations: "The agent took more steps than it is allowed.",
    interrupted: "The turn was interrupted before it finished.",
    store_error: "The server could not save the conversation.",
    storage_unavailable: "The server's storage is unavailable right now.",
    turn_too_large: "The conversation grew too large for one turn.",
    llm_config: "The model is not configured correctly.",
    llm_connect: "The model's server could not be reached.",
    llm_http: "The model's server answered with an error.",
    llm_timeout: "The model took too long to answer.",
    llm_interrupted: "The model's answer was cut off.",
    llm_provider: "The model failed.",
    llm_decode: "The model's answer could not be read.",
  };

  // `{title, detail, code}` for a task-status `failed` (or `canceled`) event.
  function failure(e) {
    const info = e.error || {};
    const code = info.code ? String(info.code) : "";
    const message = String(info.message || e.message || "").trim();
    const title = FAILURES[code] || "Something went wrong.";
    return { title, detail: message && message !== title ? capital(message) : "", code,
             retryable: info.retryable !== false };
  }
  function capital(s) {
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function tokens(n) {
    return Number(n).toLocaleString("en-US") + (n === 1 ? " token" : " tokens");
  }
  function duration(ms) {
    if (!(ms >= 0)) return "";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
    const m = Math.floor(ms / 60000), s = Math.round((ms % 60000) / 1000);
    return m + " min " + s + " s";
  }
  // "gpt-4o · 1,234 tokens · 2.1 s", leaving out what is not known yet.
  function stats(model, total, ms) {
    const parts = [];
    if (model) parts.push(model);
    if (total > 0) parts.push(tokens(total));
    if (ms != null) parts.push(duration(ms));
    return parts.join(" · ");
  }
  // "just now", "5 min ago", "yesterday", or the date, for the conversation list.
  function ago(iso, now) {
    const t = Date.parse(iso);
    if (!(t > 0)) return "";
    const s = Math.max(0, ((now || Date.now()) - t) / 1000);
    if (s < 60) return "just now";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    if (s < 172800) return "yesterday";
    return new Date(t).toLocaleDateString();
  }

  return { state, active: (s) => ACTIVE.has(s), failure, stats, duration, ago };
})();
