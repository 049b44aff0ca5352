// Drives a Looopy server with the official AG-UI client, @ag-ui/client 1.0.0 (HttpAgent,
// its event enforcement and its verifier), and validates every event with @ag-ui/core's
// own zod schemas. Run by tests/agui_client.rs:
//
//   NODE_PATH=target/e2e-node/node_modules node agui_client.cjs <base-url> <scenario>
//
// Prints one JSON report on stdout; exits 1 (with the reason on stderr) on any failure,
// including any warning or error the client logs ([ag-ui][enforce] warnings name unknown
// fields and nulls the client had to strip).
"use strict";

const { HttpAgent, runHttpRequest, transformHttpEventStream } = require("@ag-ui/client");
const { EventSchema } = require("@ag-ui/core/schemas");

const [base, scenario] = process.argv.slice(2);
const logged = [];
for (const level of ["warn", "error"]) {
  const original = console[level];
  console[level] = (...args) => {
    logged.push(`${level}: ${args.map(String).join(" ")}`);
    original.apply(console, args);
  };
}

function fail(why) {
  process.stderr.write(`FAIL: ${why}\n`);
  process.exit(1);
}

function check(condition, why) {
  if (!condition) fail(why);
}

/** Runs `agent` with `params`, recording every event (each validated by @ag-ui/core). */
async function runRecorded(agent, params, how = "runAgent") {
  const events = [];
  let finished = null;
  let failed = null;
  const subscriber = {
    onEvent({ event }) {
      const parsed = EventSchema.safeParse(event);
      if (!parsed.success) fail(`event does not validate: ${JSON.stringify(event)}: ${parsed.error}`);
      events.push(event);
    },
    onRunFinishedEvent(params) {
      finished = {
        outcome: params.outcome,
        interrupts: params.interrupts,
        pendingToolCallIds: params.pendingToolCallIds,
      };
    },
    onRunFailed({ error }) {
      failed = error;
    },
  };
  try {
    await agent[how](params, subscriber);
  } catch (error) {
    fail(`${how} threw: ${error && error.stack ? error.stack : error}`);
  }
  if (failed) fail(`the run failed: ${failed}`);
  return { events, finished };
}

/** JSON with sorted keys: the client re-creates events, so key order is not the wire's. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function types(events) {
  return events.map((e) => e.type);
}

/** The raw frames (id and event) of a finished run, read with fetch. */
async function rawFrames(url, lastEventId) {
  const headers = lastEventId ? { "last-event-id": lastEventId } : {};
  const response = await fetch(url, { headers });
  check(response.ok, `GET ${url}: ${response.status}`);
  const text = await response.text();
  const frames = [];
  for (const block of text.split("\n\n")) {
    let id = null;
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("id:")) id = line.slice(3).trim();
      if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length) frames.push({ id, event: JSON.parse(data.join("\n")) });
  }
  return frames;
}

/** An HttpAgent that reconnects to a run instead of starting one. */
class ReconnectingAgent extends HttpAgent {
  constructor(config, runUrl, lastEventId) {
    super(config);
    this.runUrl = runUrl;
    this.lastEventId = lastEventId;
  }
  connect() {
    const headers = { accept: "text/event-stream", "last-event-id": this.lastEventId };
    return transformHttpEventStream(runHttpRequest(() => fetch(this.runUrl, { headers })));
  }
}

async function calc() {
  const agent = new HttpAgent({ url: `${base}/v1/agui`, threadId: "agui-node-calc" });
  agent.messages = [{ id: "u1", role: "user", content: "What is 6*7?" }];
  const { events, finished } = await runRecorded(agent, { runId: "run-calc" });
  const kinds = types(events);
  for (const kind of ["RUN_STARTED", "STEP_STARTED", "REASONING_START", "REASONING_MESSAGE_CONTENT",
    "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
    "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"]) {
    check(kinds.includes(kind), `no ${kind} in ${kinds}`);
  }
  check(finished && finished.outcome === "success", `outcome ${JSON.stringify(finished)}`);
  const call = events.find((e) => e.type === "TOOL_CALL_START");
  check(call.toolCallName === "calculator", `tool ${call.toolCallName}`);
  const result = events.find((e) => e.type === "TOOL_CALL_RESULT");
  check(result.content === "42", `result ${result.content}`);
  // What the client folded the events into.
  const reasoning = agent.messages.filter((m) => m.role === "reasoning");
  const tool = agent.messages.find((m) => m.role === "tool");
  const answer = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content || "").join(" ");
  check(reasoning.length >= 1 && reasoning[0].content.length > 10, "no reasoning message");
  check(tool && tool.content === "42", "no tool message with 42");
  check(answer.includes("42"), `answer ${answer}`);
  const toolCalls = agent.messages.flatMap((m) => m.toolCalls || []);
  check(toolCalls.some((c) => c.function.name === "calculator" && JSON.parse(c.function.arguments).expression === "6*7"),
    "no calculator call in the messages");
  return { kinds, answer, reasoning: reasoning.length, messages: agent.messages.length };
}

async function interrupt() {
  const agent = new HttpAgent({ url: `${base}/v1/agui`, threadId: "agui-node-ask" });
  agent.messages = [{ id: "u1", role: "user", content: "Please ask me something" }];
  const first = await runRecorded(agent, { runId: "run-ask" });
  check(first.finished && first.finished.outcome === "interrupt", `outcome ${JSON.stringify(first.finished)}`);
  check(agent.pendingInterrupts.length === 1, `pending ${JSON.stringify(agent.pendingInterrupts)}`);
  const asked = agent.pendingInterrupts[0];
  const second = await runRecorded(agent, {
    runId: "run-answer",
    resume: [{ interruptId: asked.id, status: "resolved", payload: "Ada" }],
  });
  check(second.finished && second.finished.outcome === "success", `outcome ${JSON.stringify(second.finished)}`);
  const answer = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content || "").join(" ");
  check(answer.includes("Ada"), `answer ${answer}`);
  check(agent.pendingInterrupts.length === 0, "interrupts still pending");
  return { interrupt: asked, answer };
}

async function reconnect() {
  // A run to reconnect to, then its frames as the server has them.
  const agent = new HttpAgent({ url: `${base}/v1/agui`, threadId: "agui-node-re" });
  agent.messages = [{ id: "u1", role: "user", content: "What is 6*7?" }];
  await runRecorded(agent, { runId: "run-re" });
  const runUrl = `${base}/v1/agui/agui-node-re/runs/run-re`;
  const all = await rawFrames(runUrl);
  const cuts = [];
  for (const cut of [1, 5, 10, Math.floor(all.length / 2), all.length - 2]) {
    const resumed = new ReconnectingAgent({ url: `${base}/v1/agui`, threadId: "agui-node-re" }, runUrl, all[cut - 1].id);
    const { events } = await runRecorded(resumed, { runId: "run-re" }, "connectAgent");
    const rest = all.slice(cut).map((f) => f.event);
    const prelude = events.length - rest.length;
    check(prelude >= 1, `cut ${cut}: ${events.length} events for ${rest.length} missing`);
    const got = events.slice(prelude);
    for (let i = 0; i < rest.length; i++) {
      check(canonical(got[i]) === canonical(rest[i]),
        `cut ${cut}: not the rest of the run at ${i}: ${JSON.stringify(got[i])} != ${JSON.stringify(rest[i])}`);
    }
    check(events[0].type === "RUN_STARTED", `cut ${cut}: starts with ${events[0].type}`);
    cuts.push({ cut, prelude });
  }
  return { frames: all.length, cuts };
}

async function research() {
  const agent = new HttpAgent({ url: `${base}/v1/agui`, threadId: "agui-node-research" });
  agent.messages = [{ id: "u1", role: "user", content: "research tea" }];
  const { events, finished } = await runRecorded(agent, { runId: "run-research" });
  check(finished && finished.outcome === "success", `outcome ${JSON.stringify(finished)}`);
  const started = events.find((e) => e.type === "SUBAGENT_STARTED");
  check(started && started.name === "researcher", "no SUBAGENT_STARTED for the researcher");
  const attributed = events.filter((e) => e.subagentRunId === started.subagentRunId).map((e) => e.type);
  check(attributed.includes("TOOL_CALL_START") && attributed.includes("TEXT_MESSAGE_CONTENT"),
    `attributed: ${attributed}`);
  const subMessages = agent.messages.filter((m) => m.subagentRunId === started.subagentRunId);
  check(subMessages.length >= 1, "no message of the sub-agent");
  return { subagent: started.subagentRunId, attributed: attributed.length, subMessages: subMessages.length };
}

async function frontend() {
  const tools = [{
    name: "change_background",
    description: "Changes the page's background colour.",
    parameters: { type: "object", properties: { color: { type: "string" } }, required: ["color"] },
  }];
  const agent = new HttpAgent({ url: `${base}/v1/agui`, threadId: "agui-node-frontend" });
  agent.messages = [{ id: "u1", role: "user", content: "make it blue" }];
  const first = await runRecorded(agent, { runId: "run-ft-1", tools });
  check(first.finished && first.finished.outcome === "success", `outcome ${JSON.stringify(first.finished)}`);
  const pending = first.finished.pendingToolCallIds;
  check(pending && pending.length === 1, `pending ${JSON.stringify(pending)}`);
  const call = agent.messages.flatMap((m) => m.toolCalls || []).find((c) => c.id === pending[0]);
  check(call && call.function.name === "change_background", "the pending call is not in the messages");
  const args = JSON.parse(call.function.arguments);
  // The application runs the tool and adds its result to the conversation.
  agent.messages.push({ id: "t1", role: "tool", toolCallId: call.id, content: `background is ${args.color}` });
  const second = await runRecorded(agent, { runId: "run-ft-2", tools });
  check(second.finished && second.finished.outcome === "success", `outcome ${JSON.stringify(second.finished)}`);
  check((second.finished.pendingToolCallIds || []).length === 0, "still pending");
  check(!types(second.events).includes("TOOL_CALL_RESULT"), "the client's own result came back");
  const answer = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content || "").join(" ");
  check(answer.includes("Done: background is blue"), `answer ${answer}`);
  const toolMessages = agent.messages.filter((m) => m.role === "tool");
  check(toolMessages.length === 1, `tool messages ${JSON.stringify(toolMessages)}`);
  return { pending, answer };
}

const scenarios = { calc, interrupt, reconnect, research, frontend };

(async () => {
  const run = scenarios[scenario];
  if (!run) fail(`unknown scenario ${scenario}`);
  const report = await run();
  check(logged.length === 0, `the client logged:\n${logged.join("\n")}`);
  process.stdout.write(JSON.stringify(report) + "\n");
})().catch((error) => fail(error && error.stack ? error.stack : String(error)));
