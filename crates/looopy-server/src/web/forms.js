// Inline requests in a turn: questions the agent asks (`input-required`: buttons for
// options and yes/no, a text field otherwise — or the main message box, see app.js) and
// authorization requests (`auth-required`: an Authorize link for OAuth with a URL, a
// password field for a key or token). Answers go to the task that asked: a sub-agent's
// question to its child task.
const LooopyForms = (() => {
  "use strict";

  function create({ io, el, openInputs }) {
    function inputForm(n, e) {
      if (n.inputs.has(e.inputId)) return;
      const form = el("form", "input");
      form.dataset.inputId = e.inputId;
      form.append(el("div", "prompt", e.prompt || "Input needed"));
      const row = el("div", "row");
      const submit = (value) => provideInput(n, form, e.inputId, value);
      if (Array.isArray(e.options) && e.options.length) {
        for (const opt of e.options) {
          const label = typeof opt === "string" ? opt : JSON.stringify(opt);
          const b = el("button", "secondary", label);
          b.type = "button";
          b.addEventListener("click", () => submit(opt));
          row.append(b);
        }
      } else if (e.inputType === "confirmation") {
        for (const [label, value] of [["Yes", true], ["No", false]]) {
          const b = el("button", value ? null : "secondary", label);
          b.type = "button";
          b.addEventListener("click", () => submit(value));
          row.append(b);
        }
      } else {
        const field = el("input");
        field.type = "text";
        field.name = "value";
        field.required = true;
        const b = el("button", null, "Answer");
        b.type = "submit";
        row.append(field, b);
        form.addEventListener("submit", (ev) => { ev.preventDefault(); submit(field.value); });
      }
      form.append(row, el("div", "hint", "…or type your answer in the message box below."));
      n.activity.append(form);
      n.inputs.set(e.inputId, form);
      openInputs.set(e.inputId, { node: n, form, e });
      io.changed();
    }
    function closeInput(form, note) {
      openInputs.delete(form.dataset.inputId);
      if (form.dataset.answered === "true") return;
      form.dataset.answered = "true";
      for (const c of form.querySelectorAll("input, button")) c.disabled = true;
      if (note) form.append(el("div", "meta", note));
      io.changed();
    }
    async function provideInput(n, form, inputId, value) {
      for (const c of form.querySelectorAll("input, button")) c.disabled = true;
      const res = await io.request("v1/tasks/" + encodeURIComponent(n.taskId) + "/input",
        { method: "POST", json: { inputId, value } });
      if (!res || !res.ok) {
        io.say(res ? await io.failure(res) : "Could not reach the server; try again.");
        for (const c of form.querySelectorAll("input, button")) c.disabled = false;
        return false;
      }
      closeInput(form, "answered: " + (typeof value === "string" ? value : JSON.stringify(value)));
      io.reconnect();
      return true;
    }
    // The message box's text as the answer to `pending`: "yes"/"no" for a confirmation, an
    // option by its label (case aside), else the text itself.
    function answerWithText(pending, text) {
      const e = pending.e;
      let value = text;
      if (e.inputType === "confirmation") {
        const yes = /^(y|yes|ok|sure|true)\b/i.test(text), no = /^(n|no|false)\b/i.test(text);
        if (yes || no) value = yes;
      } else if (Array.isArray(e.options) && e.options.length) {
        const label = (o) => (typeof o === "string" ? o : JSON.stringify(o)).toLowerCase();
        const found = e.options.find((o) => label(o) === text.toLowerCase());
        if (found !== undefined) value = found;
      }
      return provideInput(pending.node, pending.form, e.inputId, value);
    }

    // ---- authorization requests -------------------------------------------------------------
    // An OAuth request with a URL gets an Authorize link (a new tab, no opener, no referrer):
    // the authorization server sends that tab to the server's callback, which resumes the
    // task. Anything else gets a password field whose value goes only into the POST body of
    // /v1/tasks/{id}/auth: it is cleared as it is sent and never shown, logged or kept.
    function authForm(n, e) {
      if (n.auths.has(e.authId)) return;
      const form = el("form", "auth");
      form.autocomplete = "off";
      form.dataset.authId = e.authId;
      form.dataset.authType = e.authType || "";
      form.dataset.provider = e.provider || "";
      form.append(el("div", "prompt", e.prompt || "Authorization needed"));
      if (e.provider) form.append(el("div", "provider", "provider: " + e.provider));
      const row = el("div", "row");
      const url = e.authType === "oauth2" ? webUrl(e.authUrl) : null;
      if (url) {
        const a = el("a", "authorize", "Authorize");
        a.href = url;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        row.append(a, el("span", "meta", "opens " + new URL(url).host + " in a new tab"));
      } else {
        const field = el("input");
        field.type = "password";
        field.name = "credential";
        field.autocomplete = "off";
        field.required = true;
        field.placeholder = e.authType === "api-key" ? "API key" : "Token";
        const b = el("button", null, e.authType === "api-key" ? "Submit key" : "Submit token");
        b.type = "submit";
        row.append(field, b);
        form.addEventListener("submit", (ev) => {
          ev.preventDefault();
          const value = field.value;
          field.value = "";
          if (value.trim()) provideCredentials(n, form, e.authId, e.authType, value);
        });
      }
      form.append(row);
      n.activity.append(form);
      n.auths.set(e.authId, form);
      // The call that asked waits (it runs again once authorized).
      const call = e.metadata && e.metadata.toolCallId && n.tools.get(e.metadata.toolCallId);
      if (call && !call.box.dataset.success) call.outcome.textContent = "waiting for authorization";
      const first = form.querySelector("input, a");
      if (first) first.focus();
    }
    // Only an absolute http(s) URL becomes a link.
    function webUrl(text) {
      try {
        const u = new URL(text);
        return u.protocol === "https:" || u.protocol === "http:" ? u.href : null;
      } catch (_) { return null; }
    }
    function closeAuth(form, note) {
      if (form.dataset.closed === "true") return;
      form.dataset.closed = "true";
      for (const c of form.querySelectorAll("input, button")) c.disabled = true;
      for (const a of form.querySelectorAll("a")) a.removeAttribute("href");
      if (note) form.append(el("div", "meta", note));
    }
    // auth-completed: the request's widget becomes one line naming the provider.
    function authorized(n, e) {
      const provider = (e.metadata && e.metadata.provider) || "";
      const line = el("div", "authorized", "authorized" + (provider ? " (" + provider + ")" : ""));
      line.dataset.authId = e.authId;
      const form = n.auths.get(e.authId);
      if (form) form.replaceWith(line); else n.activity.append(line);
      n.auths.set(e.authId, line);
      line.dataset.closed = "true";
    }
    async function provideCredentials(n, form, authId, authType, value) {
      for (const c of form.querySelectorAll("input, button")) c.disabled = true;
      const credentials = authType === "api-key" ? { apiKey: value } : { token: value };
      const res = await io.request("v1/tasks/" + encodeURIComponent(n.taskId) + "/auth",
        { method: "POST", json: { authId, credentials } });
      if (!res || !res.ok) {
        io.say(res ? await io.failure(res) : "Could not reach the server; try again.");
        for (const c of form.querySelectorAll("input, button")) c.disabled = false;
        return;
      }
      closeAuth(form, "sent");
      io.reconnect();
    }

    return { inputForm, closeInput, answerWithText, authForm, closeAuth, authorized };
  }

  return { create };
})();
