// The conformance driver (tests/conformance/driver_node.mjs) run by hand
// through its commands against a real emqd, checked over our own
// connection: a self-test while the suite's runner is written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { startStack, qname, waitFor, SOURCE_ROOT } from './helpers.mjs';

const DRIVER = path.join(SOURCE_ROOT, 'tests', 'conformance', 'driver_node.mjs');

let stack;
let admin;
before(async () => {
  stack = await startStack({ emqdArgs: ['--token', 'tok'] });
  admin = await stack.connect({ token: 'tok' });
});
const drivers = new Set();
after(async () => {
  for (const child of drivers) child.kill('SIGKILL'); // a driver a failed test left
  await stack?.stop();
});

/** The driver as a child: `send(cmd)` resolves with its result; events
 * are collected in `events`. */
function startDriver() {
  const child = spawn(process.execPath, [DRIVER], {
    env: { ...process.env, EMQ_HOST: '127.0.0.1', EMQ_PORT: String(stack.port), EMQ_TOKEN: 'tok' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  drivers.add(child);
  child.on('exit', () => drivers.delete(child));
  const events = [];
  const waiting = [];
  const lines = [];
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(line);
    const msg = JSON.parse(line); // every stdout line is JSON
    if ('event' in msg) events.push(msg);
    else waiting.shift()(msg);
  });
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    events,
    lines,
    exited,
    send(cmd) {
      return new Promise((resolve) => {
        waiting.push(resolve);
        child.stdin.write(JSON.stringify(cmd) + '\n');
      });
    },
  };
}

test('driver: connect, enqueue, claim, fencing, settles, pipeline, quit', async () => {
  const d = startDriver();
  const q = qname();
  const refused = await d.send({ do: 'connect', token: 'nope' });
  assert.deepEqual([refused.ok, refused.error, refused.class], [false, 'EAUTH', 'AuthError']);
  assert.equal(typeof refused.message, 'string');
  assert.deepEqual(await d.send({ do: 'connect', name: 'drv' }), { ok: true });
  assert.deepEqual(await d.send({ do: 'ping' }), { ok: true });
  const e = await d.send({ do: 'enqueue', queue: q, payload: { s: 'é😀' }, group: 'TENacme' });
  assert.equal(e.verdict, 'enqueued');
  assert.match(e.job, /^JOB/);
  const many = await d.send({ do: 'enqueue_many', queue: q, group: 'TENacme', items: [{ payload: 1, job: 'JOBm1' }, { payload: 2, group: 'bad' }, { payload: 3, job: 'JOBm3' }] });
  assert.deepEqual(many.results.map((r) => r.verdict ?? r.error), ['enqueued', 'EBRAND', 'enqueued']);
  assert.equal(many.results[1].class, 'BrandError');
  const c = await d.send({ do: 'claim', queue: q, count: 1, lease_ms: 30000 });
  assert.deepEqual(c.jobs.map((j) => [j.job, j.group, j.attempt, j.payload]), [[e.job, 'TENacme', 1, { s: 'é😀' }]]);
  const stale = await d.send({ do: 'complete', queue: q, job: e.job, lease: '424242' });
  assert.deepEqual([stale.ok, stale.error, stale.class], [false, 'ELEASE', 'LeaseError']);
  const x = await d.send({ do: 'extend', queue: q, job: e.job, lease_ms: 60000 });
  assert.equal(x.lease_until, (await admin.job(q, e.job)).lease_until);
  assert.deepEqual(await d.send({ do: 'release', queue: q, job: e.job }), { ok: true, state: 'pending' });
  assert.equal((await admin.job(q, e.job)).attempts, 0);
  const p = await d.send({ do: 'pipeline', ops: [
    { do: 'enqueue', queue: q, payload: 'p', job: 'JOBp1', group: 'TENbeta' },
    { do: 'claim', queue: q, count: 3 },
    { do: 'complete', queue: q, job: 'JOBnone', lease: '1' },
  ] });
  assert.equal(p.results[0].verdict, 'enqueued');
  assert.equal(p.results[1].jobs.length, 3);
  assert.deepEqual([p.results[2].ok, p.results[2].error], [false, 'ENOJOB']);
  for (const j of p.results[1].jobs) {
    const how = j.job === 'JOBm1' ? { do: 'fail', queue: q, job: j.job, error: 'bad', dead: true } : { do: 'complete', queue: q, job: j.job };
    assert.equal((await d.send(how)).ok, true);
  }
  assert.deepEqual((await admin.deadList(q)).map((j) => [j.job, j.error]), [['JOBm1', 'bad']]);
  assert.deepEqual(await d.send({ do: 'frobnicate' }), { ok: false, error: 'UNSUPPORTED', class: 'DriverError', message: 'unknown command frobnicate' });
  assert.deepEqual(await d.send({ do: 'close' }), { ok: true });
  assert.deepEqual(await d.send({ do: 'quit' }), { ok: true });
  assert.equal(await d.exited, 0);
});

test('driver: stream events, and a worker with behaves stopped with its grace', async () => {
  const d = startDriver();
  const q = qname();
  await d.send({ do: 'connect' });
  await admin.enqueueMany(q, [1, 2, 3].map((n) => ({ payload: n, job: `JOBs${n}` })));
  assert.deepEqual(await d.send({ do: 'stream', queue: q, credit: 2, flat: true }), { ok: true });
  await waitFor(() => d.events.length === 2, { what: 'two pushes' });
  assert.deepEqual(d.events.map((ev) => [ev.event, ev.job, ev.attempt]), [['pushed', 'JOBs1', 1], ['pushed', 'JOBs2', 1]]);
  await d.send({ do: 'complete', queue: q, job: 'JOBs1' });
  await waitFor(() => d.events.length === 3, { what: 'the third push' });
  await d.send({ do: 'stream', queue: q, credit: 0, flat: true });
  for (const id of ['JOBs2', 'JOBs3']) await d.send({ do: 'complete', queue: q, job: id });
  d.events.length = 0;

  const w = qname();
  await admin.enqueueMany(w, ['ok', 'raise', 'hang', 'slow'].map((n) => ({ payload: n, job: `JOB${n}`, group: `TEN${n}` })));
  assert.deepEqual(await d.send({ do: 'worker_start', queue: w, concurrency: 4, lease_ms: 30000,
    behave: { JOBraise: 'raise', JOBhang: 'hang', JOBslow: 'sleep:50' }, default_behave: 'complete' }), { ok: true });
  await waitFor(() => d.events.filter((ev) => ev.event !== 'started').length === 3, { what: 'three settles' });
  const settled = d.events.filter((ev) => ev.event !== 'started').map((ev) => [ev.event, ev.job]).sort();
  assert.deepEqual(settled, [['completed', 'JOBok'], ['completed', 'JOBslow'], ['failed', 'JOBraise']]);
  const failed = d.events.find((ev) => ev.event === 'failed');
  assert.equal((await admin.job(w, 'JOBraise')).error, failed.error);
  assert.deepEqual(await d.send({ do: 'worker_stop', grace_ms: 100 }), { ok: true });
  const hang = await admin.job(w, 'JOBhang');
  assert.deepEqual([hang.state, hang.attempts], ['pending', 0]);
  d.send({ do: 'quit' });
  assert.equal(await d.exited, 0);
});
