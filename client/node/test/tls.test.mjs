// TLS from the Node client against a real tls-only emqd (a plain
// connection would fail these tests), with certificates made by openssl:
// enqueue, stream and complete over TLS, a worker over TLS, a server
// certificate from another CA refused, and tls://HOST:PORT.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Worker, ConnectionLost } from '../src/index.js';
import { startStack, qname, waitFor } from './helpers.mjs';

let stack;
let dir;
const file = (n) => path.join(dir, n);

function makePki() {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-node-tls-'));
  const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=node CA');
  ssl('req', '-x509', ...ec, '-keyout', 'o.key', '-out', 'other.pem', '-days', '2', '-subj', '/CN=other');
  ssl('req', ...ec, '-keyout', 's.key', '-out', 's.csr', '-subj', '/CN=emqd');
  fs.writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  ssl('x509', '-req', '-in', 's.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', '9',
    '-days', '2', '-extfile', 'san.ext', '-out', 's.pem');
}

before(async () => {
  makePki();
  stack = await startStack({
    emqdArgs: ['--tls-cert', file('s.pem'), '--tls-key', file('s.key'), '--tls-only'],
    ready: /TLS connections only/,
  });
});
after(async () => {
  await stack?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('enqueue, stream and complete over TLS', async () => {
  const c = await stack.connect({ tls: { ca: fs.readFileSync(file('ca.pem')) } });
  assert.equal(c.address, `tls://127.0.0.1:${stack.port}`);
  const q = qname();
  const { job } = await c.enqueue(q, { secret: 'over tls' });
  await c.stream(q, 1, { flat: true });
  const pushed = await c.nextJob({ timeout: 15000 });
  assert.equal(pushed.job, job);
  assert.deepEqual(pushed.payload, { secret: 'over tls' });
  await c.complete(pushed);
  // Pipelined requests on one TLS connection answer in order.
  // (Another queue: the stream above would take its jobs.)
  const q2 = qname();
  const ids = await Promise.all(Array.from({ length: 50 }, (_, i) => c.enqueue(q2, i)));
  assert.equal(new Set(ids.map((r) => r.job)).size, 50);
  assert.equal(await c.depth(q2), 50);
  await c.close();
});

test('a worker over TLS', async () => {
  const c = await stack.connect({ tls: { ca: fs.readFileSync(file('ca.pem')) } });
  const q = qname();
  await c.enqueue(q, 1);
  let done = 0;
  const w = new Worker(q, async () => {
    done++;
  }, { host: '127.0.0.1', port: stack.port, tls: { ca: fs.readFileSync(file('ca.pem')) },
    flat: 'both', handleSignals: false });
  const running = w.run();
  await waitFor(() => done === 1, { what: 'the job worked over TLS' });
  await w.stop();
  await running;
  await c.close();
});

test('a server certificate from another CA is refused', async () => {
  await assert.rejects(
    Client.connect({ host: '127.0.0.1', port: stack.port, tls: { ca: fs.readFileSync(file('other.pem')) },
      timeout: 15000 }),
    (err) => err instanceof ConnectionLost && /certificate/.test(err.message),
  );
});

test('tls://HOST:PORT speaks TLS', async () => {
  // tls:// alone uses the default CAs; the test CA comes as an option.
  const c = await Client.connect({ addr: `tls://127.0.0.1:${stack.port}`, tls: { ca: fs.readFileSync(file('ca.pem')) },
    timeout: 15000 });
  await c.ping();
  await c.close();
});
