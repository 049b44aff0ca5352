// A minimal chat on the official AG-UI client, `@ag-ui/client`'s `HttpAgent`, talking to
// `looopy serve` through its AG-UI front door (`POST /v1/agui`, proxied by serve.mjs so the
// page and the API share an origin). No adapter: the agent's URL is Looopy's route.
//
// - The thread id is the Looopy context id; it lives in the URL hash, so
//   `GET /v1/contexts/{id}/messages` shows the same conversation.
// - The page renders `agent.messages`, which the client folds from the events: user,
//   reasoning, assistant text with its tool calls, and tool results.
// - A question (`ask_user`) ends the run with the `interrupt` outcome; the page shows it and
//   answers it with the next run's `resume`.
// - Stop cancels the run on the server (`POST /v1/agui/{threadId}/runs/{runId}/cancel`);
//   `abortRun()` alone would only drop the stream, and the run would go on.
import { createRoot } from 'react-dom/client';
import { useRef, useState } from 'react';
import { HttpAgent } from '@ag-ui/client';

function threadId() {
  const fromHash = location.hash.slice(1);
  if (/^[A-Za-z0-9._:-]{1,128}$/.test(fromHash)) return fromHash;
  const id = `thread-${crypto.randomUUID()}`;
  history.replaceState(null, '', `#${id}`);
  return id;
}

const agent = new HttpAgent({ url: '/v1/agui', threadId: threadId() });

function Message({ message, results }) {
  const { role } = message;
  if (role === 'tool') return null; // shown with its call
  if (role === 'reasoning') {
    return <div className="message reasoning" data-role={role}>{message.content}</div>;
  }
  return (
    <div className={`message ${role}`} data-role={role}>
      {message.content && <div className="text">{message.content}</div>}
      {(message.toolCalls ?? []).map((call) => {
        const result = results.get(call.id);
        return (
          <div key={call.id} className="tool" data-tool={call.function.name} data-done={result !== undefined}>
            {call.function.name}({call.function.arguments}){result !== undefined && ` → ${result}`}
          </div>
        );
      })}
    </div>
  );
}

function Interrupt({ interrupt, onAnswer }) {
  const [answer, setAnswer] = useState('');
  return (
    <form
      className="question"
      onSubmit={(e) => {
        e.preventDefault();
        onAnswer(interrupt, answer);
      }}
    >
      <span>{interrupt.message ?? interrupt.reason}</span>
      <input name="answer" value={answer} onChange={(e) => setAnswer(e.target.value)} />
      <button type="submit">Answer</button>
    </form>
  );
}

function App() {
  const [messages, setMessages] = useState(agent.messages);
  const [interrupts, setInterrupts] = useState([]);
  const [status, setStatus] = useState('ready');
  const [error, setError] = useState(null);
  const [input, setInput] = useState('');
  const runId = useRef(null);

  async function run(parameters) {
    runId.current = `run-${crypto.randomUUID()}`;
    setStatus('streaming');
    setError(null);
    try {
      await agent.runAgent(
        { runId: runId.current, ...parameters },
        {
          onMessagesChanged: ({ messages }) => setMessages([...messages]),
          onRunFailed: ({ error }) => setError(String(error?.message ?? error)),
        },
      );
    } catch (e) {
      setError(String(e?.message ?? e));
    }
    setMessages([...agent.messages]);
    setInterrupts([...agent.pendingInterrupts]);
    setStatus('ready');
  }

  const send = (text) => {
    agent.addMessage({ id: `user-${crypto.randomUUID()}`, role: 'user', content: text });
    setMessages([...agent.messages]);
    run({});
  };
  const answer = (interrupt, payload) =>
    run({ resume: [{ interruptId: interrupt.id, status: 'resolved', payload }] });
  const stop = () => {
    if (!runId.current) return;
    const path = `${encodeURIComponent(agent.threadId)}/runs/${encodeURIComponent(runId.current)}`;
    fetch(`/v1/agui/${path}/cancel`, { method: 'POST' });
  };

  const results = new Map(
    messages.filter((m) => m.role === 'tool').map((m) => [m.toolCallId, m.content]),
  );
  return (
    <main>
      <h1>Looopy × AG-UI</h1>
      {messages.map((m) => (
        <Message key={m.id} message={m} results={results} />
      ))}
      {interrupts.map((i) => (
        <Interrupt key={i.id} interrupt={i} onAnswer={answer} />
      ))}
      {error && <div className="error">{error}</div>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (input.trim()) send(input);
          setInput('');
        }}
      >
        <input
          name="prompt"
          value={input}
          placeholder="Ask something — try “What is 6*7?”"
          onChange={(e) => setInput(e.target.value)}
        />
        <button type="submit" disabled={status !== 'ready' || interrupts.length > 0}>
          Send
        </button>
        <button type="button" name="stop" onClick={stop}>
          Stop
        </button>
      </form>
      <p id="status" data-status={status}>
        {status}
      </p>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
