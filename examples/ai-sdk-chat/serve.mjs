// Serves the page and proxies /v1/* to looopy serve, so the page and the API share one
// origin (no CORS, and a token — LOOOPY_TOKEN — stays on the server side).
//
//   LOOOPY_URL   where looopy serve listens (default: start `looopy serve` on 127.0.0.1:8080)
//   LOOOPY_BIN   the looopy program to start (default: `looopy` on PATH)
//   PORT         the page's port (default 3000; 0 picks a free one)
//   BUNDLE       the built page script (default dist/app.js, what `npm run build` writes)
//
// Prints `listening on http://127.0.0.1:<port>` once ready.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { Readable } from 'node:stream';

const here = new URL('.', import.meta.url);
let upstream = process.env.LOOOPY_URL;
if (!upstream) {
  upstream = 'http://127.0.0.1:8080';
  const looopy = spawn(process.env.LOOOPY_BIN ?? 'looopy', ['serve', '--addr', '127.0.0.1:8080'], {
    stdio: 'inherit',
  });
  looopy.on('exit', (code) => {
    console.error(`looopy serve exited (${code})`);
    process.exit(1);
  });
  process.on('exit', () => looopy.kill());
  process.on('SIGINT', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

const files = {
  '/': [new URL('index.html', here), 'text/html; charset=utf-8'],
  '/app.js': [process.env.BUNDLE ?? new URL('dist/app.js', here), 'text/javascript; charset=utf-8'],
};

async function proxy(req, res) {
  const headers = { ...req.headers };
  delete headers.host;
  delete headers.connection;
  if (process.env.LOOOPY_TOKEN) headers.authorization = `Bearer ${process.env.LOOOPY_TOKEN}`;
  const controller = new AbortController();
  // A browser that leaves drops only its request; the turn goes on (stop is a request).
  res.on('close', () => controller.abort());
  try {
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const answer = await fetch(new URL(req.url, upstream), {
      method: req.method,
      headers,
      body: hasBody ? Readable.toWeb(req) : undefined,
      duplex: hasBody ? 'half' : undefined,
      signal: controller.signal,
    });
    const out = {};
    answer.headers.forEach((value, key) => {
      if (key !== 'content-length' && key !== 'transfer-encoding') out[key] = value;
    });
    res.writeHead(answer.status, out);
    if (!answer.body) return res.end();
    for await (const chunk of answer.body) res.write(chunk);
    res.end();
  } catch (error) {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(controller.signal.aborted ? undefined : `looopy is unreachable: ${error.message}`);
  }
}

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url, 'http://page').pathname;
  if (path.startsWith('/v1/')) return proxy(req, res);
  const file = files[path];
  if (!file) {
    res.writeHead(404, { 'content-type': 'text/plain' });
    return res.end('not found');
  }
  try {
    const body = await readFile(file[0]);
    res.writeHead(200, { 'content-type': file[1], 'cache-control': 'no-store' });
    res.end(body);
  } catch {
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(`${path} is missing: run npm run build`);
  }
});

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
