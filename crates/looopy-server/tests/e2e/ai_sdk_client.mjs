// The AI SDK's own client code against a Looopy server: `DefaultChatTransport` (which parses
// every chunk with the package's chunk schema and throws on any invalid one), the chunk
// schema again on each chunk by hand, and `readUIMessageStream` folding the stream into
// the assistant message. Run by tests/ai_sdk_node.rs:
//
//   node ai_sdk_client.mjs <server url> <scenario> <chat id>
//
// Prints one JSON object (what the scenario saw) on stdout; the Rust test asserts on it.
// Every wait is bounded.
//
// `ai` is loaded from the node_modules directory in $LOOOPY_NODE_MODULES (where .ci/run
// installs the pinned version), so the script needs no package.json of its own.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.LOOOPY_NODE_MODULES;
const {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
  uiMessageChunkSchema,
} = await import(pathToFileURL(join(modules, 'ai', 'dist', 'index.js')).href);

const [base, scenario, chatId] = process.argv.slice(2);
const api = `${base}/v1/ai-sdk/chat`;
const transport = new DefaultChatTransport({ api });
const LIMIT_MS = 30000;

function user(id, text) {
  return { id, role: 'user', parts: [{ type: 'text', text }] };
}

function bounded(what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), LIMIT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Reads a chunk stream to its end: the chunks, any the schema refuses, and the message
// `readUIMessageStream` folds them into (continuing `message` when given).
async function fold(stream, message) {
  const [forChunks, forMessage] = stream.tee();
  const chunks = [];
  const invalid = [];
  const schema = uiMessageChunkSchema();
  const reading = (async () => {
    const reader = forChunks.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      const checked = await schema.validate(value);
      if (!checked.success) invalid.push({ chunk: value, error: String(checked.error) });
    }
  })();
  let last;
  const errors = [];
  for await (const m of readUIMessageStream({
    stream: forMessage,
    message,
    onError: (e) => errors.push(String(e)),
  })) {
    last = m;
  }
  await reading;
  return { chunks, invalid, message: last, errors };
}

function send(messages, abortSignal) {
  return bounded(
    'sendMessages',
    transport.sendMessages({
      chatId,
      messages,
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal,
    }),
  );
}

function textOf(chunks) {
  return chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('');
}

async function taskState(taskId) {
  const r = await fetch(`${base}/v1/tasks/${taskId}`);
  return (await r.json()).state;
}

async function waitState(taskId, wanted) {
  const deadline = Date.now() + LIMIT_MS;
  for (;;) {
    const state = await taskState(taskId);
    if (state === wanted || Date.now() > deadline) return state;
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Reads chunks until `enough(chunks)`, then aborts the request (the client leaves).
async function readThenLeave(messages, enough) {
  const controller = new AbortController();
  const stream = await send(messages, controller.signal);
  const reader = stream.getReader();
  const chunks = [];
  while (!enough(chunks)) {
    const { done, value } = await bounded('a chunk', reader.read());
    if (done) break;
    chunks.push(value);
  }
  controller.abort();
  await reader.cancel().catch(() => {});
  return chunks;
}

const scenarios = {
  // One turn, folded into one assistant message.
  async turn() {
    const seen = await fold(await send([user('m-1', 'What is 6*7?')]));
    return { ...seen, types: seen.chunks.map((c) => c.type) };
  },

  // A question is a tool part awaiting its output; the client adds the output and sends
  // again (what `addToolOutput` + `sendAutomaticallyWhen` do), continuing the message.
  async ask() {
    const messages = [user('m-1', 'ask me something')];
    const first = await fold(await send(messages));
    const message = structuredClone(first.message);
    const part = message.parts.find((p) => p.type === 'tool-ask_user');
    const waiting = { state: part.state, toolMetadata: part.toolMetadata };
    part.state = 'output-available';
    part.output = 'Ada';
    messages.push(message);
    const automatic = lastAssistantMessageIsCompleteWithToolCalls({ messages });
    const second = await fold(await send(messages), message);
    return {
      waiting,
      firstFinish: first.chunks.findLast((c) => c.type === 'finish'),
      automatic,
      invalid: [...first.invalid, ...second.invalid],
      errors: [...first.errors, ...second.errors],
      message: second.message,
    };
  },

  // The client leaves mid-turn, then resumes (the URL `useChat({resume: true})` calls):
  // the whole turn from its first chunk; once it is over, nothing to resume.
  async resume() {
    const before = await readThenLeave([user('m-1', 'slowly please')], (c) => textOf(c).length >= 20);
    const stream = await bounded('reconnectToStream', transport.reconnectToStream({ chatId }));
    const resumed = await fold(stream);
    const taskId = resumed.chunks[0].messageId;
    const state = await waitState(taskId, 'completed');
    const idle = await bounded('reconnectToStream', transport.reconnectToStream({ chatId }));
    return {
      before: before.map((c) => c.type),
      beforeText: textOf(before),
      firstChunk: resumed.chunks[0],
      resumedText: textOf(resumed.chunks),
      lastType: resumed.chunks.at(-1).type,
      invalid: resumed.invalid,
      errors: resumed.errors,
      message: resumed.message,
      state,
      idle: idle === null,
    };
  },

  // Leaving does not stop a turn; the stop route does, and the message ends with `abort`.
  async stop() {
    const left = await readThenLeave([user('m-1', 'slowly one')], (c) => c.length >= 1);
    const leftTask = left[0].messageId;
    const leftState = await waitState(leftTask, 'completed');

    const stream = await send([user('m-2', 'slowly two')]);
    const [forStop, forFold] = stream.tee();
    const reader = forStop.getReader();
    let taskId;
    let text = '';
    while (text.length === 0) {
      const { value } = await bounded('a chunk', reader.read());
      if (value.type === 'start') taskId = value.messageId;
      if (value.type === 'text-delta') text += value.delta;
    }
    const stopped = await fetch(`${api}/${chatId}/stop`, { method: 'POST' });
    const stopBody = await stopped.json();
    reader.releaseLock();
    forStop.cancel().catch(() => {});
    const seen = await fold(forFold);
    return {
      leftState,
      stopStatus: stopped.status,
      stopBody,
      taskId,
      lastType: seen.chunks.at(-1).type,
      invalid: seen.invalid,
      errors: seen.errors,
      state: await waitState(taskId, 'canceled'),
    };
  },
};

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}`);
  process.exit(2);
}
try {
  console.log(JSON.stringify(await run()));
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
