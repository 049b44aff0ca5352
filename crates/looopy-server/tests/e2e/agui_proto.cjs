// AG-UI's protobuf framing (Accept: application/vnd.ag-ui.event+proto) read by the official
// packages: @ag-ui/client 1.0.0's HttpAgent (which picks its binary parser from the
// response's Content-Type and decodes with @ag-ui/proto), with its enforcement and
// verifier, every event validated by @ag-ui/core's schemas; and @ag-ui/proto's own
// `decode` on the raw frames. Run by tests/agui_proto.rs:
//
//   NODE_PATH=target/e2e-node/node_modules node agui_proto.cjs <base-url> <scenario>
//
// Prints one JSON report on stdout; exits 1 (with the reason on stderr) on any failure,
// including any warning or error the client logs.
"use strict";

const { HttpAgent, runHttpRequest, transformHttpEventStream } = require("@ag-ui/client");
const { EventSchema } = require("@ag-ui/core/schemas");
const proto = require("@ag-ui/proto");
const { BinaryReader } = require("@bufbuild/protobuf/wire");

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

/** JSON with sorted keys: the client re-creates events, so key order is not the wire's. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** Content types of the responses the agents below received. */
const seenTypes = [];
async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  seenTypes.push(response.headers.get("content-type"));
  return response;
}

/** HttpAgent asking for the binary framing (HttpAgent itself asks for SSE). */
class ProtoAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    return { ...init, headers: { ...init.headers, Accept: proto.AGUI_MEDIA_TYPE } };
  }
}

/** An agent that reconnects to a run over the binary framing instead of starting one. */
class ReconnectingAgent extends HttpAgent {
  constructor(config, runUrl, headers) {
    super(config);
    this.runUrl = runUrl;
    this.extra = headers;
  }
  connect() {
    const headers = { accept: proto.AGUI_MEDIA_TYPE, ...this.extra };
    return transformHttpEventStream(runHttpRequest(() => recordingFetch(this.runUrl, { headers })));
  }
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
    onRunFinishedEvent(p) {
      finished = { outcome: p.outcome, pendingToolCallIds: p.pendingToolCallIds };
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

/** The SSE frames (id and event) of a finished run. */
async function sseFrames(url) {
  const response = await fetch(url, { headers: { accept: "text/event-stream" } });
  check(response.ok, `GET ${url}: ${response.status}`);
  check(response.headers.get("content-type") === "text/event-stream", "SSE content type");
  const frames = [];
  for (const block of (await response.text()).split("\n\n")) {
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

/** Looopy's frame id: field 1000 of the envelope, which AG-UI's decoder skips. */
function frameId(bytes) {
  const reader = new BinaryReader(bytes);
  let id = null;
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1000) id = reader.string();
    else reader.skip(wireType, field);
  }
  return id;
}

/** The binary frames of a run (id and event, decoded by @ag-ui/proto), read with fetch. */
async function protoFrames(url, headers = {}) {
  const response = await fetch(url, { headers: { accept: proto.AGUI_MEDIA_TYPE, ...headers } });
  check(response.ok, `GET ${url}: ${response.status}`);
  check(response.headers.get("content-type") === proto.AGUI_MEDIA_TYPE,
    `content type ${response.headers.get("content-type")}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  const frames = [];
  let at = 0;
  while (at < bytes.length) {
    check(at + 4 <= bytes.length, `a cut length prefix at ${at}`);
    const len = new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0, false);
    check(at + 4 + len <= bytes.length, `a cut frame at ${at}`);
    const body = bytes.subarray(at + 4, at + 4 + len);
    frames.push({ id: frameId(body), event: proto.decode(body) });
    at += 4 + len;
  }
  return frames;
}

function sameEvents(got, want, what) {
  check(got.length === want.length, `${what}: ${got.length} events, ${want.length} on SSE`);
  for (let i = 0; i < want.length; i++) {
    check(canonical(got[i]) === canonical(want[i]),
      `${what}: event ${i} differs: ${JSON.stringify(got[i])} != ${JSON.stringify(want[i])}`);
  }
}

async function calc() {
  const agent = new ProtoAgent({ url: `${base}/v1/agui`, threadId: "agui-proto-calc", fetch: recordingFetch });
  agent.messages = [{ id: "u1", role: "user", content: "What is 6*7?" }];
  const { events, finished } = await runRecorded(agent, { runId: "run-calc" });
  check(seenTypes[0] === proto.AGUI_MEDIA_TYPE, `the run was answered as ${seenTypes[0]}`);
  const kinds = events.map((e) => e.type);
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
  const reasoning = agent.messages.filter((m) => m.role === "reasoning");
  const tool = agent.messages.find((m) => m.role === "tool");
  const answer = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content || "").join(" ");
  check(reasoning.length >= 1 && reasoning[0].content.length > 10, "no reasoning message");
  check(tool && tool.content === "42", "no tool message with 42");
  check(answer.includes("42"), `answer ${answer}`);
  const toolCalls = agent.messages.flatMap((m) => m.toolCalls || []);
  check(toolCalls.some((c) => c.function.name === "calculator" && JSON.parse(c.function.arguments).expression === "6*7"),
    "no calculator call in the messages");

  // The same run on the SSE framing: the same events, event for event, and the same ids.
  const runUrl = `${base}/v1/agui/agui-proto-calc/runs/run-calc`;
  const sse = await sseFrames(runUrl);
  sameEvents(events, sse.map((f) => f.event), "the live binary run");
  const binary = await protoFrames(runUrl);
  sameEvents(binary.map((f) => f.event), sse.map((f) => f.event), "the binary replay");
  check(canonical(binary.map((f) => f.id)) === canonical(sse.map((f) => f.id)),
    `ids ${binary.map((f) => f.id)} != ${sse.map((f) => f.id)}`);
  return { kinds, answer, reasoning: reasoning.length, events: events.length };
}

async function reconnect() {
  const agent = new ProtoAgent({ url: `${base}/v1/agui`, threadId: "agui-proto-re" });
  agent.messages = [{ id: "u1", role: "user", content: "What is 6*7?" }];
  await runRecorded(agent, { runId: "run-re" });
  const runUrl = `${base}/v1/agui/agui-proto-re/runs/run-re`;
  const all = await protoFrames(runUrl);
  const sse = await sseFrames(runUrl);
  const cuts = [];
  for (const cut of [1, 5, 10, Math.floor(all.length / 2), all.length - 2]) {
    const id = all[cut - 1].id;
    check(typeof id === "string" && id.length > 0, `frame ${cut} has no id`);
    // The official client, resumed with the id read from the binary frame.
    const resumed = new ReconnectingAgent({ url: `${base}/v1/agui`, threadId: "agui-proto-re" }, runUrl,
      { "last-event-id": id });
    const { events } = await runRecorded(resumed, { runId: "run-re" }, "connectAgent");
    const rest = all.slice(cut).map((f) => f.event);
    const prelude = events.length - rest.length;
    check(prelude >= 1, `cut ${cut}: ${events.length} events for ${rest.length} missing`);
    sameEvents(events.slice(prelude), rest, `cut ${cut}`);
    check(events[0].type === "RUN_STARTED", `cut ${cut}: starts with ${events[0].type}`);
    // `?after=` is the same cursor; the binary prelude is the SSE prelude.
    const viaQuery = await protoFrames(`${runUrl}?after=${encodeURIComponent(id)}`);
    const sseResumed = await fetch(runUrl, { headers: { accept: "text/event-stream", "last-event-id": id } });
    const sseEvents = (await sseResumed.text()).split("\n\n")
      .map((b) => b.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n"))
      .filter((d) => d).map((d) => JSON.parse(d));
    sameEvents(viaQuery.map((f) => f.event), sseEvents, `cut ${cut} via ?after=`);
    cuts.push({ cut, prelude });
  }
  check(seenTypes.every((t) => t === proto.AGUI_MEDIA_TYPE), `content types ${seenTypes}`);
  return { frames: all.length, sseFrames: sse.length, cuts };
}

/** The binary replay of a finished run decodes to its SSE events. */
async function sameOnBothFramings(thread, run) {
  const runUrl = `${base}/v1/agui/${thread}/runs/${run}`;
  const sse = await sseFrames(runUrl);
  const binary = await protoFrames(runUrl);
  sameEvents(binary.map((f) => f.event), sse.map((f) => f.event), `run ${run}`);
  return sse.map((f) => f.event);
}

async function research() {
  const agent = new ProtoAgent({ url: `${base}/v1/agui`, threadId: "agui-proto-research" });
  agent.messages = [{ id: "u1", role: "user", content: "research tea" }];
  const { events, finished } = await runRecorded(agent, { runId: "run-research" });
  check(finished && finished.outcome === "success", `outcome ${JSON.stringify(finished)}`);
  const started = events.find((e) => e.type === "SUBAGENT_STARTED");
  check(started && started.name === "researcher", "no SUBAGENT_STARTED for the researcher");
  check(events.some((e) => e.type === "SUBAGENT_FINISHED"), "no SUBAGENT_FINISHED");
  const attributed = events.filter((e) => e.subagentRunId === started.subagentRunId).map((e) => e.type);
  check(attributed.includes("TOOL_CALL_START") && attributed.includes("TEXT_MESSAGE_CONTENT"),
    `attributed: ${attributed}`);
  const sse = await sameOnBothFramings("agui-proto-research", "run-research");
  sameEvents(events, sse, "the live binary run");
  return { subagent: started.subagentRunId, attributed: attributed.length };
}

async function interrupt() {
  const agent = new ProtoAgent({ url: `${base}/v1/agui`, threadId: "agui-proto-ask" });
  agent.messages = [{ id: "u1", role: "user", content: "Please ask me something" }];
  const first = await runRecorded(agent, { runId: "run-ask" });
  check(first.finished && first.finished.outcome === "interrupt", `outcome ${JSON.stringify(first.finished)}`);
  check(agent.pendingInterrupts.length === 1, `pending ${JSON.stringify(agent.pendingInterrupts)}`);
  const asked = agent.pendingInterrupts[0];
  sameEvents(first.events, await sameOnBothFramings("agui-proto-ask", "run-ask"), "the asking run");
  const second = await runRecorded(agent, {
    runId: "run-answer",
    resume: [{ interruptId: asked.id, status: "resolved", payload: "Ada" }],
  });
  check(second.finished && second.finished.outcome === "success", `outcome ${JSON.stringify(second.finished)}`);
  sameEvents(second.events, await sameOnBothFramings("agui-proto-ask", "run-answer"), "the answered run");
  const answer = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content || "").join(" ");
  check(answer.includes("Ada"), `answer ${answer}`);
  return { interrupt: asked, answer };
}

const scenarios = { calc, reconnect, research, interrupt };

(async () => {
  const run = scenarios[scenario];
  if (!run) fail(`unknown scenario ${scenario}`);
  const report = await run();
  check(logged.length === 0, `the client logged:\n${logged.join("\n")}`);
  process.stdout.write(JSON.stringify(report) + "\n");
})().catch((error) => fail(error && error.stack ? error.stack : String(error)));
