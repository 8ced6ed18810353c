// Worker against a real emqd: concurrency, auto-extend, fail with the
// error text, Retry/Dead, graceful stop and AbortSignal, reconnect.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Worker, Retry, Dead, AuthError } from '../src/index.js';
import { startStack, qname, waitFor, once } from './helpers.mjs';

let stack;
let admin;

before(async () => {
  stack = await startStack();
  admin = await stack.connect({ name: 'admin' });
});
after(async () => {
  await stack?.stop();
});

/** A promise with its resolve, for a handler to wait on. */
function gate() {
  let open;
  const p = new Promise((r) => {
    open = r;
  });
  p.open = open;
  return p;
}

function worker(queue, handler, opts = {}) {
  return new Worker(queue, handler, { port: stack.port, handleSignals: false, ...opts });
}

async function row(q, id) {
  return admin.job(q, id);
}

test('runs up to concurrency handlers at once, never more; completes every job', async () => {
  const q = qname();
  const n = 12;
  await admin.enqueueMany(q, Array.from({ length: n }, (_, i) => ({ payload: i, group: `TENg${i % 4}` })));
  let running = 0;
  let most = 0;
  const full = gate();
  const w = worker(q, async () => {
    running++;
    most = Math.max(most, running);
    if (running === 4) full.open();
    await full; // the first four wait until all four run together
    running--;
  }, { concurrency: 4 });
  const done = [];
  w.on('completed', (j) => done.push(j.id));
  await w.start();
  await waitFor(() => done.length === n, { what: 'all jobs completed' });
  assert.equal(most, 4);
  assert.equal(new Set(done).size, n);
  await w.stop();
  const s = await admin.stats(q);
  assert.deepEqual([s.pending, s.active], [0, 0]);
});

test('flat: true serves ungrouped work, "both" serves both kinds', async () => {
  const q = qname();
  await admin.enqueue(q, 'f', { job: 'JOBflat' });
  await admin.enqueue(q, 'g', { job: 'JOBgrp', group: 'TENacme' });
  const seen = [];
  const w = worker(q, (job) => seen.push(job.id), { flat: true });
  await w.start();
  await waitFor(() => seen.length === 1, { what: 'the flat job' });
  await w.stop();
  assert.deepEqual(seen, ['JOBflat']);
  await admin.enqueue(q, 'f2', { job: 'JOBflat2' });
  const both = worker(q, (job) => seen.push(job.id), { flat: 'both', concurrency: 2 });
  await both.start();
  await waitFor(() => seen.length === 3, { what: 'both kinds' });
  await both.stop();
  assert.deepEqual(seen.slice(1).sort(), ['JOBflat2', 'JOBgrp']);
});

test('a handler that rejects fails the job with its message; Retry and Dead choose', async () => {
  const q = qname();
  await admin.enqueue(q, 'boom', { job: 'JOBboom', group: 'TENacme' });
  await admin.enqueue(q, 'retry', { job: 'JOBretry', group: 'TENbeta' });
  await admin.enqueue(q, 'dead', { job: 'JOBdead', group: 'TENgamma' });
  const attempts = {};
  const w = worker(q, async (job) => {
    attempts[job.id] = job.attempt;
    if (job.payload === 'boom') throw new Error('SMTP 451: grüße');
    if (job.payload === 'retry' && job.attempt === 1) throw new Retry(0, 'try again now');
    if (job.payload === 'dead') throw new Dead('poison pill');
  }, { concurrency: 3 });
  const failed = [];
  w.on('failed', (job, err, state) => failed.push([job.id, err.message, state]));
  const completed = [];
  w.on('completed', (job) => completed.push([job.id, job.attempt]));
  await w.start();
  await waitFor(() => failed.length === 3 && completed.length === 1, { what: 'the settles' });
  await w.stop();
  failed.sort();
  assert.deepEqual(failed, [
    ['JOBboom', 'SMTP 451: grüße', 'delayed'],
    ['JOBdead', 'poison pill', 'dead'],
    ['JOBretry', 'try again now', 'pending'],
  ]);
  assert.deepEqual(completed, [['JOBretry', 2]]);
  const boom = await row(q, 'JOBboom');
  assert.equal(boom.state, 'delayed');
  assert.equal(boom.error, 'SMTP 451: grüße');
  assert.deepEqual((await admin.deadList(q)).map((d) => [d.job, d.error]), [['JOBdead', 'poison pill']]);
});

test('the lease is extended while a long handler runs, and the job completes', async () => {
  const q = qname();
  const { job } = await admin.enqueue(q, 'long', { group: 'TENacme' });
  const finish = gate();
  const w = worker(q, () => finish, { leaseMs: 600 });
  const started = once(w, 'started');
  await w.start();
  await started;
  const first = (await row(q, job)).lease_until;
  // lease_until moves twice: the worker heartbeats past several leases.
  let last = first;
  let moves = 0;
  await waitFor(async () => {
    const r = await row(q, job);
    assert.equal(r.state, 'active');
    if (r.lease_until > last) {
      moves++;
      last = r.lease_until;
    }
    return moves >= 2;
  }, { what: 'lease_until to move twice', interval: 50 });
  const completed = once(w, 'completed');
  finish.open();
  await completed;
  await w.stop();
  const r = await row(q, job);
  assert.equal(r.state, 'completed');
  assert.equal(r.attempts, 1); // never reaped
});

test('stop(): credit 0, running handlers get the grace, the rest is released with its attempt', async () => {
  const q = qname();
  for (let i = 1; i <= 5; i++) await admin.enqueue(q, i, { job: `JOBs${i}`, group: `TENg${i}` });
  const quick = gate();
  const seen = new Map();
  const w = worker(q, (job, ctx) => {
    seen.set(job.id, ctx.signal);
    // JOBs1 finishes once told to; JOBs2 hangs past any grace.
    return job.id === 'JOBs1' ? quick : new Promise(() => {});
  }, { concurrency: 2, leaseMs: 30000 });
  const released = [];
  w.on('released', (j) => released.push(j.id));
  const completed = [];
  w.on('completed', (j) => completed.push(j.id));
  await w.start();
  await waitFor(() => seen.size === 2, { what: 'two handlers running' });
  assert.deepEqual([...seen.keys()].sort(), ['JOBs1', 'JOBs2']);
  const stopped = w.stop({ graceMs: 60000 });
  quick.open(); // finishes within the grace
  await waitFor(() => completed.length === 1, { what: 'JOBs1 completed during the grace' });
  await w.stop({ graceMs: 0 }); // cut the grace: JOBs2 is released
  await stopped;
  assert.deepEqual(completed, ['JOBs1']);
  assert.deepEqual(released, ['JOBs2']);
  assert.equal(seen.get('JOBs2').aborted, true);
  const r2 = await row(q, 'JOBs2');
  assert.deepEqual([r2.state, r2.attempts], ['pending', 0]);
  for (let i = 3; i <= 5; i++) {
    const r = await row(q, `JOBs${i}`);
    assert.deepEqual([r.state, r.attempts], ['pending', 0]);
  }
  const s = await admin.stats(q);
  assert.deepEqual([s.pending, s.active], [4, 0]);
});

test('an AbortSignal stops the worker; run() resolves; the hanging job goes back unspent', async () => {
  const q = qname();
  const { job } = await admin.enqueue(q, 'hang', { group: 'TENacme' });
  const ac = new AbortController();
  let handlerSignal;
  const w = worker(q, (j, ctx) => {
    handlerSignal = ctx.signal;
    return new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
  }, { signal: ac.signal, graceMs: 100 });
  const running = w.run();
  await once(w, 'started');
  ac.abort();
  await running;
  assert.equal(handlerSignal.aborted, true);
  const r = await row(q, job);
  assert.deepEqual([r.state, r.attempts], ['pending', 0]);
});

test('reconnects after emqd restarts with work in hand, and settles it', async () => {
  const q = qname();
  await admin.enqueue(q, 'held', { job: 'JOBheld', group: 'TENacme' });
  const release = gate();
  const done = [];
  let inHand = false;
  const w = worker(q, async (job) => {
    if (job.id === 'JOBheld') {
      inHand = true;
      await release;
    }
    done.push(job.id);
  }, { concurrency: 2, leaseMs: 60000 });
  let connects = 0;
  w.on('connected', () => connects++);
  await w.start();
  // In the handler, not only leased: the daemon leases a pushed job in
  // Redis before it writes the push, so a row already 'active' may still
  // be on its way. Killed in between, the daemon takes the push with it:
  // the lease is nobody's until it expires (a minute here), and the held
  // job would never be in hand.
  await waitFor(() => inHand, { what: "JOBheld in the worker's handler" });
  assert.equal((await admin.job(q, 'JOBheld')).state, 'active');
  // Kill the emqd this test started, by its pid, and start it again on
  // the same port: the worker reconnects by itself.
  admin.destroy();
  await stack.restartEmqd('SIGKILL');
  admin = await stack.connect({ name: 'admin' });
  await waitFor(() => connects === 2, { what: 'the worker to reconnect' });
  await admin.enqueue(q, 'after', { job: 'JOBafter', group: 'TENbeta' });
  await waitFor(() => done.includes('JOBafter'), { what: 'work taken after the restart' });
  release.open(); // the job held across the restart completes on the new connection
  await waitFor(() => done.includes('JOBheld'), { what: 'the held job' });
  await waitFor(async () => (await admin.job(q, 'JOBheld')).state === 'completed', { what: 'JOBheld completed' });
  await w.stop();
  assert.equal((await admin.job(q, 'JOBheld')).attempts, 1);
  const s = await admin.stats(q);
  assert.deepEqual([s.pending, s.active], [0, 0]);
  assert.deepEqual(await admin.check(q), []);
});

test('stopped while emqd is down: the daemon back within the grace settles and releases', async () => {
  const q = qname();
  await admin.enqueue(q, 'finish', { job: 'JOBfin', group: 'TENa' });
  await admin.enqueue(q, 'hang', { job: 'JOBhang', group: 'TENb' });
  const finish = gate();
  const started = new Set();
  const w = worker(q, (job) => {
    started.add(job.id);
    return job.id === 'JOBfin' ? finish : new Promise(() => {});
  }, { concurrency: 2, leaseMs: 60000 });
  await w.start();
  await waitFor(() => started.size === 2, { what: 'both handlers running' });
  const down = once(w, 'disconnected');
  admin.destroy();
  await stack.emqd.kill('SIGKILL');
  await down;
  const stopped = w.stop({ graceMs: 60000 });
  const completed = once(w, 'completed');
  const released = once(w, 'released');
  await stack.restartEmqd();
  admin = await stack.connect({ name: 'admin' });
  finish.open();
  await completed; // settled over the connection made for the stop
  await w.stop({ graceMs: 0 });
  await released;
  await stopped;
  const fin = await admin.job(q, 'JOBfin');
  assert.deepEqual([fin.state, fin.attempts], ['completed', 1]);
  const hang = await admin.job(q, 'JOBhang');
  assert.deepEqual([hang.state, hang.attempts], ['pending', 0]);
});

test('a refused token is fatal: start() and run() reject AuthError', async () => {
  const secured = await startStack({ emqdArgs: ['--token', 's3cret'] });
  try {
    const w = new Worker(qname(), () => {}, { port: secured.port, token: 'wrong', handleSignals: false });
    await assert.rejects(w.start(), AuthError);
    await assert.rejects(w.run(), AuthError);
  } finally {
    await secured.stop();
  }
});
