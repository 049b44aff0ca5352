// The official `openai` npm SDK against a Looopy server: a streamed Responses turn, a
// whole one continued with previous_response_id, a background stream dropped and resumed
// with starting_after, a streamed chat completion and the model list. Run by
// tests/openai_node.rs:
//
//   node openai_client.mjs <server url>
//
// Prints one JSON object (what it saw) on stdout; the Rust test asserts on it. Every wait
// is bounded (the client's own timeout). `openai` is loaded from $LOOOPY_NODE_MODULES.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.LOOOPY_NODE_MODULES;
const { default: OpenAI, NotFoundError } = await import(
  pathToFileURL(join(modules, 'openai', 'index.mjs')).href
);

const [base] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const seen = {};

async function collect(stream, limit) {
  const out = [];
  for await (const event of stream) {
    out.push(event);
    if (limit !== undefined && out.length >= limit) break;
  }
  return out;
}

// A streamed turn.
const streamed = await collect(
  await client.responses.create({ model: 'looopy', input: 'What is 6*7?', stream: true }),
);
seen.numbers = streamed.map((e) => e.sequence_number);
const final = streamed.at(-1);
seen.lastType = final.type;
seen.outputText = final.response.output_text ??
  final.response.output.filter((i) => i.type === 'message').map((i) => i.content[0].text).join('');
seen.reasoning = final.response.output.filter((i) => i.type === 'reasoning').length;
seen.deltasHaveFields = streamed
  .filter((e) => e.type === 'response.output_text.delta')
  .every((e) => e.item_id && Number.isInteger(e.output_index) && e.content_index === 0 && Array.isArray(e.logprobs));

// A whole response, continued.
const first = await client.responses.create({ model: 'looopy', input: 'ask me something' });
const answered = await client.responses.create({ model: 'looopy', input: 'Ada', previous_response_id: first.id });
seen.first = first.status;
seen.answered = { status: answered.status, text: answered.output_text, previous: answered.previous_response_id === first.id };

// A background stream, dropped after 6 events and resumed.
const head = await collect(
  await client.responses.create({ model: 'looopy', input: 'slowly please', background: true, stream: true }),
  6,
);
const id = head[0].response.id;
const tail = await collect(
  await client.responses.retrieve(id, { stream: true, starting_after: head.at(-1).sequence_number }),
);
seen.resumed = [...head, ...tail].map((e) => e.sequence_number);
seen.resumedLast = tail.at(-1).type;

// Chat completions and models.
let content = '';
let usage = null;
for await (const chunk of await client.chat.completions.create({
  model: 'looopy',
  messages: [{ role: 'user', content: 'What is 6*7?' }],
  stream: true,
  stream_options: { include_usage: true },
})) {
  content += chunk.choices[0]?.delta?.content ?? '';
  usage = chunk.usage ?? usage;
}
seen.chat = content;
seen.usage = usage;
seen.models = (await client.models.list()).data.map((m) => m.id);
try {
  await client.responses.retrieve('resp_nope_1');
  seen.notFound = 'found';
} catch (error) {
  seen.notFound = error instanceof NotFoundError ? error.status : String(error);
}
console.log(JSON.stringify(seen));
