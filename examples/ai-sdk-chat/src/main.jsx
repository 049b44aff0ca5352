// A minimal chat on the AI SDK's own `useChat`, talking to `looopy serve` through its AI SDK
// front door (`/v1/ai-sdk/chat`, proxied by serve.mjs so the page and the API share an origin).
//
// - The chat id is the Looopy context id; it lives in the URL hash, so a reload resumes the
//   running turn (`resume: true` calls GET /v1/ai-sdk/chat/{id}/stream).
// - Looopy's questions (`ask_user`) arrive as tool parts awaiting their output: the page asks
//   for the answer and gives it with `addToolOutput`; `sendAutomaticallyWhen` sends it.
// - Stop cancels the turn on the server (the SDK's own `stop()` only drops the request).
import { createRoot } from 'react-dom/client';
import { useState } from 'react';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';

const api = '/v1/ai-sdk/chat';

function chatId() {
  const fromHash = location.hash.slice(1);
  if (/^[A-Za-z0-9._:-]{1,128}$/.test(fromHash)) return fromHash;
  const id = `chat-${crypto.randomUUID()}`;
  history.replaceState(null, '', `#${id}`);
  return id;
}

const id = chatId();
const transport = new DefaultChatTransport({ api });

function Question({ part, onAnswer }) {
  const [answer, setAnswer] = useState('');
  const prompt = part.toolMetadata?.prompt ?? part.input?.question ?? part.input?.prompt;
  return (
    <form
      className="question"
      onSubmit={(e) => {
        e.preventDefault();
        onAnswer(answer);
      }}
    >
      <span>{prompt}</span>
      <input name="answer" value={answer} onChange={(e) => setAnswer(e.target.value)} />
      <button type="submit">Answer</button>
    </form>
  );
}

function Part({ part, onAnswer }) {
  if (part.type === 'text') return <div className="text">{part.text}</div>;
  if (part.type === 'reasoning') return <div className="reasoning">{part.text}</div>;
  if (part.type === 'file') {
    return (
      <div className="file">
        <a href={part.url}>{part.url.split('/').pop()}</a> ({part.mediaType})
      </div>
    );
  }
  if (part.type.startsWith('tool-') || part.type === 'dynamic-tool') {
    const name = part.type === 'dynamic-tool' ? part.toolName : part.type.slice(5);
    if (part.state === 'input-available' && part.toolMetadata?.looopyInputId) {
      return <Question part={part} onAnswer={(output) => onAnswer(part, name, output)} />;
    }
    const output = part.state === 'output-available' ? ` → ${JSON.stringify(part.output)}` : '';
    const error = part.state === 'output-error' ? ` → error: ${part.errorText}` : '';
    return (
      <div className="tool" data-tool={name} data-state={part.state}>
        {name}({JSON.stringify(part.input)}){output}
        {error}
      </div>
    );
  }
  return null;
}

function App() {
  const [input, setInput] = useState('');
  const { messages, sendMessage, addToolOutput, status, error } = useChat({
    id,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  });
  const answer = (part, tool, output) =>
    addToolOutput({ tool, toolCallId: part.toolCallId, output });
  const stop = () => fetch(`${api}/${encodeURIComponent(id)}/stop`, { method: 'POST' });
  return (
    <main>
      <h1>Looopy × useChat</h1>
      {messages.map((m) => (
        <div key={m.id} className={`message ${m.role}`} data-role={m.role}>
          {m.parts.map((part, i) => (
            <Part key={i} part={part} onAnswer={answer} />
          ))}
        </div>
      ))}
      {error && <div className="error">{String(error.message ?? error)}</div>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (input.trim()) sendMessage({ text: input });
          setInput('');
        }}
      >
        <input
          name="prompt"
          value={input}
          placeholder="Ask something — try “What is 6*7?”"
          onChange={(e) => setInput(e.target.value)}
        />
        <button type="submit" disabled={status !== 'ready' && status !== 'error'}>
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
