// The README's worker and producer, extracted from its fenced code blocks
// and run exactly as printed against a real emqd: the producer enqueues,
// the worker does the work, SIGTERM stops it cleanly.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, waitFor, PKG_DIR, SOURCE_ROOT } from './helpers.mjs';

/** A README's ```js blocks whose first line is "// NAME: ...", by NAME
 * (default: the package's README). */
export function readmeExamples(file = path.join(PKG_DIR, 'README.md')) {
  const text = fs.readFileSync(file, 'utf8');
  const out = {};
  for (const m of text.matchAll(/^```js\n([\s\S]*?)^```$/gm)) {
    const name = /^\/\/ ([\w.-]+\.mjs):/.exec(m[1]);
    if (name) out[name[1]] = m[1];
  }
  return out;
}

let stack;
let dir;
before(async () => {
  stack = await startStack();
  // A project that installed the package: node_modules/echomq -> client/node.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-node-readme-'));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PKG_DIR, path.join(dir, 'node_modules', 'echomq'), 'dir');
  for (const [name, code] of Object.entries(readmeExamples())) fs.writeFileSync(path.join(dir, name), code);
});
after(async () => {
  await stack?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function run(name) {
  const child = spawn(process.execPath, [name], {
    cwd: dir,
    env: { ...process.env, EMQ_ADDR: `127.0.0.1:${stack.port}`, EMQ_TOKEN: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const res = { child, stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (d) => (res.stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (res.stderr += d));
  res.exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
  return res;
}

test('the README examples are at most 30 lines each', () => {
  const ex = readmeExamples();
  assert.deepEqual(Object.keys(ex).sort(), ['producer.mjs', 'worker.mjs']);
  for (const [name, code] of Object.entries(ex)) {
    assert.ok(code.trimEnd().split('\n').length <= 30, `${name} is longer than 30 lines`);
  }
});

test('the top-level README prints the same examples ("Workers in Node.js")', () => {
  assert.deepEqual(readmeExamples(path.join(SOURCE_ROOT, 'README.md')), readmeExamples());
});

test('the README producer and worker, as printed', async () => {
  const admin = await stack.connect();
  const p = run('producer.mjs');
  assert.deepEqual(await p.exited, { code: 0, sig: null }, p.stderr);
  assert.match(p.stdout, /^JOBwelcome-42 enqueued$/m);
  assert.equal(p.stdout.match(/^JOB[\w-]+ enqueued$/gm).length, 3);
  const again = run('producer.mjs');
  assert.equal((await again.exited).code, 0, again.stderr);
  assert.match(again.stdout, /^JOBwelcome-42 duplicate$/m);
  const jobs = 5; // 1 + 2 the first time, 2 more (new ids) the second

  const w = run('worker.mjs');
  try {
    await waitFor(() => (w.stdout.match(/^sent /gm) || []).length === jobs, {
      what: `the worker to send ${jobs} mails (stdout: ${w.stdout} stderr: ${w.stderr})`,
    });
    // "sent" is printed before the handler returns and its completion
    // reaches the daemon: wait for the completions, not just the prints.
    let s;
    await waitFor(async () => {
      s = await admin.stats('mail');
      return s.pending === 0 && s.active === 0;
    }, { what: "every job completed (pending and active 0)" });
    assert.deepEqual([s.pending, s.active, s.delayed, s.dead], [0, 0, 0, 0]);
  } catch (e) {
    w.child.kill('SIGKILL'); // a failed wait must not leave it running
    throw e;
  }
  // A clean stop: SIGTERM to the worker this test started.
  w.child.kill('SIGTERM');
  assert.deepEqual(await w.exited, { code: 0, sig: null }, w.stderr);
  assert.match(w.stdout, /^worker stopped$/m);
  assert.deepEqual(await admin.check('mail'), []);
  assert.equal((await admin.job('mail', 'JOBwelcome-42')).state, 'completed');
});

test('the README worker: Retry delays the job; SIGTERM when idle quits at once', async () => {
  const admin = await stack.connect();
  // A job the README worker cannot finish quickly: to .invalid, it retries
  // (Retry, one minute): the row is delayed with attempts 1. Then a stop
  // with nothing running quits at once.
  await admin.enqueue('mail', { to: 'x@host.invalid', subject: 's' }, { job: 'JOBinvalid', group: 'TENacme' });
  const w = run('worker.mjs');
  await waitFor(async () => (await admin.job('mail', 'JOBinvalid')).state === 'delayed', { what: 'the Retry' });
  w.child.kill('SIGTERM');
  assert.equal((await w.exited).code, 0, w.stderr);
  const r = await admin.job('mail', 'JOBinvalid');
  assert.deepEqual([r.state, r.attempts, r.error], ['delayed', 1, 'retry requested']);
});
