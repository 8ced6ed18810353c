// Client against a real emqd over a real redis-server: every op of
// PROTOCOL.md section 5, pipelining, pushes vs replies, errors mapped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  Client, Job, EmqError, LeaseError, NoJobError, KindError, BrandError, QueueNameError,
  ArgumentError, NotFoundError, StateError, EmptyBatchError, UnknownOpError, AuthError, TooBigError,
  ConnectionLost, UsageError, CODES, ERROR_CLASSES, parseAddr, PermissionDeniedError, FullError,
} from '../src/index.js';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, qname, waitFor, freePort } from './helpers.mjs';

let stack;
let c; // the client under test
let admin; // an independent connection, to check effects

before(async () => {
  stack = await startStack();
  c = await stack.connect({ name: 'client-test' });
  admin = await stack.connect({ name: 'admin' });
});
after(async () => {
  await stack?.stop();
});

test('hello: server info, protocol 1', () => {
  assert.equal(c.server.server, 'emqd');
  assert.equal(c.server.protocol, 1);
  assert.equal(c.address, `127.0.0.1:${stack.port}`);
});

test('every wire code has its class, named from the table', () => {
  for (const [code, [, , name]] of Object.entries(CODES)) {
    const cls = ERROR_CLASSES[code];
    const e = new cls('m');
    assert.equal(cls.name, name);
    assert.equal(e.name, name);
    assert.equal(e.code, code);
    assert.ok(e instanceof EmqError && e instanceof Error);
  }
  assert.equal(new ConnectionLost().code, 'ECONN');
});

test('addresses parse as libemq parses them', () => {
  assert.deepEqual(parseAddr('10.0.0.1:7711'), { host: '10.0.0.1', port: 7711 });
  assert.deepEqual(parseAddr('[::1]:7'), { host: '::1', port: 7 });
  assert.deepEqual(parseAddr('7712'), { host: '127.0.0.1', port: 7712 });
  assert.deepEqual(parseAddr('unix:/run/emqd.sock'), { path: '/run/emqd.sock' });
  assert.throws(() => parseAddr('::1:7'), UsageError);
  assert.throws(() => parseAddr('host:0'), UsageError);
});

test('ping, and a raw request', async () => {
  await c.ping();
  const r = await c.request('stats', { queue: qname() });
  assert.equal(r.pending, 0);
  assert.ok(!('ok' in r) && !('ref' in r));
});

test('enqueue: minted id, duplicate, delay, max_attempts', async () => {
  const q = qname();
  const a = await c.enqueue(q, { to: 'a@b.c' }, { group: 'TENacme' });
  assert.equal(a.verdict, 'enqueued');
  assert.match(a.job, /^JOB[0-9A-HJKMNP-TV-Z]{26}$/);
  const b = await c.enqueue(q, { to: 'x' }, { job: 'JOBmine-1', maxAttempts: 3 });
  assert.deepEqual(b, { job: 'JOBmine-1', verdict: 'enqueued' });
  assert.deepEqual(await c.enqueue(q, 'other', { job: 'JOBmine-1' }), { job: 'JOBmine-1', verdict: 'duplicate' });
  const row = await admin.job(q, 'JOBmine-1');
  assert.equal(row.max_attempts, 3);
  assert.deepEqual(row.payload, { to: 'x' });
  assert.equal(row.group, null);
  const d = await c.enqueue(q, 1, { delayMs: 3600000 });
  assert.equal((await admin.job(q, d.job)).state, 'delayed');
});

test('enqueueMany: one result per item, in order, errors as classes', async () => {
  const q = qname();
  const r = await c.enqueueMany(q, [
    { payload: 1 },
    { payload: 2, job: 'JOBm-1', group: 'TENbeta' },
    { payload: 3, group: 'bad' },
    { payload: 4, job: 'nope' },
    { payload: 5, job: 'JOBm-1' },
  ], { group: 'TENacme' });
  assert.equal(r.length, 5);
  assert.equal(r[0].ok, true);
  assert.equal(r[0].verdict, 'enqueued');
  assert.deepEqual(r[1], { ok: true, job: 'JOBm-1', verdict: 'enqueued' });
  assert.equal(r[2].ok, false);
  assert.ok(r[2].error instanceof BrandError);
  assert.equal(r[2].error.code, 'EBRAND');
  assert.ok(r[3].error instanceof KindError);
  assert.deepEqual(r[4], { ok: true, job: 'JOBm-1', verdict: 'duplicate' });
  assert.equal(await admin.depth(q, 'TENacme'), 1);
  assert.equal(await admin.depth(q, 'TENbeta'), 1);
  await assert.rejects(c.enqueueMany(q, []), EmptyBatchError);
});

test('claim, extend, complete; fencing with a stale token', async () => {
  const q = qname();
  const { job } = await c.enqueue(q, { n: 1 }, { group: 'TENacme' });
  const [j] = await c.claim(q, { leaseMs: 5000 });
  assert.ok(j instanceof Job);
  assert.equal(j.id, job);
  assert.equal(j.group, 'TENacme');
  assert.equal(j.attempt, 1);
  assert.deepEqual(j.payload, { n: 1 });
  const before0 = (await admin.job(q, job)).lease_until;
  await waitFor(async () => (await c.extend(j, 60000)) > before0, { what: 'lease_until to move' });
  assert.equal((await admin.job(q, job)).lease_until, j.leaseUntil);
  await assert.rejects(c.complete(j.withLease('999999')), (e) => e instanceof LeaseError && e.code === 'ELEASE');
  assert.equal((await admin.job(q, job)).state, 'active');
  assert.equal(await c.complete(j), 'completed');
  assert.equal(await c.complete(j), 'completed'); // a resend (5.8)
  await assert.rejects(c.fail(j), LeaseError);
  assert.equal((await admin.job(q, job)).state, 'completed');
});

test('fail: delayed with backoff, pending with retryMs 0, dead', async () => {
  const q = qname();
  const { job } = await c.enqueue(q, 'p', { maxAttempts: 3 });
  let [j] = await c.claim(q, { flat: true });
  assert.equal(await c.fail(j, { error: 'SMTP 451', retryMs: 0 }), 'pending');
  [j] = await c.claim(q, { flat: true });
  assert.equal(j.attempt, 2);
  assert.equal(await c.fail(j, { error: 'again' }), 'delayed');
  const row = await admin.job(q, job);
  assert.equal(row.error, 'again');
  assert.equal(row.state, 'delayed');
  const { job: k } = await c.enqueue(q, 'p2');
  const [jk] = await c.claim(q, { flat: true });
  assert.equal(jk.id, k);
  assert.equal(await c.fail(jk, { error: 'poison', dead: true }), 'dead');
  const dead = await admin.deadList(q);
  assert.deepEqual(dead.map((d) => [d.job, d.error]), [[k, 'poison']]);
});

test('release returns the attempt; a disconnect counts it', async () => {
  const q = qname();
  const { job } = await c.enqueue(q, 'r', { group: 'TENacme' });
  const [j] = await c.claim(q);
  assert.equal((await admin.job(q, job)).attempts, 1);
  assert.equal(await c.release(j, { error: 'shutting down' }), 'pending');
  let row = await admin.job(q, job);
  assert.equal(row.attempts, 0);
  assert.equal(row.error, 'shutting down');
  // A connection that closes with the lease: released, attempt counted.
  const d = await stack.connect();
  const [j2] = await d.claim(q);
  assert.equal(j2.attempt, 1);
  d.destroy();
  row = await waitFor(async () => {
    const r = await admin.job(q, job);
    return r.state === 'pending' && r;
  }, { what: 'the release on disconnect' });
  assert.equal(row.attempts, 1);
  assert.equal(row.error, 'connection closed');
});

test('grouped vs flat claims', async () => {
  const q = qname();
  await c.enqueue(q, 'flat', { job: 'JOBflat' });
  await c.enqueue(q, 'grouped', { job: 'JOBgrp', group: 'TENacme' });
  const g = await c.claim(q, { count: 10 });
  assert.deepEqual(g.map((x) => x.id), ['JOBgrp']);
  const f = await c.claim(q, { count: 10, flat: true });
  assert.deepEqual(f.map((x) => [x.id, x.group]), [['JOBflat', null]]);
  await Promise.all([...g, ...f].map((x) => c.complete(x)));
});

test('limit, pause, resume, reassign, drain, depth, reap, stats, groups, job, check', async () => {
  const q = qname();
  await c.enqueueMany(q, [1, 2, 3].map((n) => ({ payload: n, job: `JOBa${n}` })), { group: 'TENacme' });
  await c.enqueue(q, 4, { job: 'JOBb1', group: 'TENbeta' });
  await c.limit(q, 'TENacme', 1);
  let groups = [];
  for await (const g of c.allGroups(q, { count: 1 })) groups.push(g);
  groups.sort((x, y) => x.group.localeCompare(y.group));
  assert.deepEqual(groups.map((g) => [g.group, g.depth, g.limit]), [['TENacme', 3, 1], ['TENbeta', 1, null]]);
  const page = await c.groups(q);
  assert.equal(typeof page.cursor, 'string');
  await c.limit(q, 'TENacme', null);
  assert.equal(await c.pause(q, 'TENbeta'), true);
  assert.equal(await c.pause(q, 'TENbeta'), false);
  assert.equal((await c.stats(q)).paused, 1);
  assert.equal(await c.resume(q, 'TENbeta'), true);
  assert.equal(await c.resume(q, 'TENbeta'), false);
  assert.equal(await c.reassign(q, 'JOBa3', 'TENbeta'), 'TENacme');
  assert.equal(await c.depth(q, 'TENbeta'), 2);
  assert.equal(await c.depth(q), 0);
  assert.equal(await c.drain(q, 'TENacme'), 2);
  await assert.rejects(c.job(q, 'JOBa1'), NoJobError);
  // A long lease while reassign must see the job active (a 1 ms one could
  // be reaped by upkeep first), then cut to 1 ms for the reap.
  const [j] = await c.claim(q, { leaseMs: 600000 });
  await assert.rejects(c.reassign(q, j.id, 'TENacme'), StateError);
  await c.extend(j, 1);
  await waitFor(async () => (await c.reap(q, 'TENbeta')) === 1 || (await c.job(q, j.id)).state === 'pending',
    { what: 'the 1 ms lease to be reaped' });
  assert.equal(await c.reap(q), 0);
  const s = await c.stats(q);
  assert.equal(s.pending, 2);
  assert.equal(s.active, 0);
  assert.equal(s.groups >= 1, true);
  assert.deepEqual(await c.check(q), []);
});

test('weight: more turns for a group, shown by groups, pipelined in order', async () => {
  const q = qname();
  for (const g of ['TENa', 'TENb']) {
    await c.enqueueMany(q, [0, 1, 2, 3].map((n) => ({ payload: n, job: `JOB${g}${n}` })), { group: g });
  }
  await c.weight(q, 'TENa', 3);
  await assert.rejects(c.weight(q, 'TENa', 0), (e) => e instanceof ArgumentError);
  const weights = (await c.groups(q)).groups.map((g) => [g.group, g.weight]).sort();
  assert.deepEqual(weights, [['TENa', 3], ['TENb', 1]]);
  const p = c.pipeline();
  p.claim(q, { count: 4 });
  p.weight(q, 'TENa', null);
  p.claim(q, { count: 3 });
  const r = await p.exec();
  assert.deepEqual(r[0].value.map((j) => j.id), ['JOBTENa0', 'JOBTENa1', 'JOBTENa2', 'JOBTENb0']);
  assert.deepEqual(r[2].value.map((j) => j.id), ['JOBTENa3', 'JOBTENb1', 'JOBTENb2']);
  assert.deepEqual(await c.check(q), []);
});

test('defaults: limit and weight without a group apply to groups without their own', async () => {
  const q = qname();
  for (const g of ['TENa', 'TENb']) {
    await c.enqueueMany(q, [0, 1, 2].map((n) => ({ payload: n, job: `JOB${g}${n}` })), { group: g });
  }
  await c.limit(q, null, 1);
  await c.limit(q, 'TENb', 2);
  await c.weight(q, undefined, 2);
  await assert.rejects(c.weight(q, null, 0), (e) => e instanceof ArgumentError);
  assert.deepEqual((await c.stats(q)).defaults, { limit: 1, weight: 2, rate: null, cap: null });
  const from = (await c.groups(q)).groups.map((g) => [g.group, g.limit, g.limit_from, g.weight_from]).sort();
  assert.deepEqual(from, [['TENa', 1, 'queue', 'queue'], ['TENb', 2, 'group', 'queue']]);
  assert.deepEqual((await c.claim(q, { count: 6 })).map((j) => j.id), ['JOBTENa0', 'JOBTENb0', 'JOBTENb1']);
  await c.limit(q, null, null);
  await c.weight(q, null, null);
  assert.deepEqual((await c.stats(q)).defaults, { limit: null, weight: null, rate: null, cap: null });
  assert.deepEqual(await c.check(q), []);
});

test('cap: a full lane rejects with FullError naming the cap, pipelined in order', async () => {
  const q = qname();
  await c.cap(q, 'TENa', 1);
  await assert.rejects(c.cap(q, 'TENa', 0), (e) => e instanceof ArgumentError);
  const p = c.pipeline();
  p.enqueue(q, 1, { group: 'TENa', job: 'JOBa1' });
  p.enqueue(q, 2, { group: 'TENa', job: 'JOBa2' });
  p.cap(q, 'TENa', null);
  p.enqueue(q, 2, { group: 'TENa', job: 'JOBa2' });
  const r = await p.exec();
  assert.equal(r[0].status, 'fulfilled');
  assert.equal(r[1].status, 'rejected');
  assert.ok(r[1].reason instanceof FullError);
  assert.deepEqual([r[1].reason.cap, r[1].reason.group, r[1].reason.job], [1, 'TENa', 'JOBa2']);
  assert.equal(r[3].status, 'fulfilled', 'admitted once the cap is gone');
  await c.cap(q, null, 5);
  assert.equal((await c.stats(q)).defaults.cap, 5);
  const g = (await c.groups(q)).groups.find((x) => x.group === 'TENa');
  assert.deepEqual([g.cap, g.cap_from, g.depth, g.delayed], [5, 'queue', 2, 0]);
  await c.cap(q, null, null);
  assert.deepEqual(await c.check(q), []);
});

test('rate: one lease of a held group, shown by groups, removed again', async () => {
  const q = qname();
  for (const g of ['TENa', 'TENb']) {
    await c.enqueueMany(q, [0, 1, 2].map((n) => ({ payload: n, job: `JOB${g}${n}` })), { group: g });
  }
  await c.rate(q, 'TENa', 1, 60000);
  await assert.rejects(c.rate(q, 'TENa', 1), (e) => e instanceof ArgumentError);
  assert.deepEqual((await c.claim(q, { count: 6 })).map((j) => j.id), ['JOBTENa0', 'JOBTENb0', 'JOBTENb1', 'JOBTENb2']);
  const held = Object.fromEntries((await c.groups(q)).groups.map((g) => [g.group, [g.rate, g.throttled]]));
  assert.deepEqual(held, { TENa: [{ max: 1, per_ms: 60000 }, true], TENb: [null, false] });
  await c.rate(q, 'TENa', null);
  assert.deepEqual((await c.claim(q, { count: 6 })).map((j) => j.id), ['JOBTENa1', 'JOBTENa2']);
});

test('peek pages in service order; remove deletes a pending or delayed job; drain the flat set', async () => {
  const q = qname();
  await c.enqueueMany(q, [3, 1, 2].map((n) => ({ payload: n, job: `JOBk${n}` })), { group: 'TENacme' });
  await c.enqueue(q, 'later', { job: 'JOBlater', delayMs: 3600000 });
  const first = await c.peek(q, { group: 'TENacme', count: 2 });
  assert.deepEqual(first.jobs.map((j) => [j.job, j.state]), [['JOBk1', 'pending'], ['JOBk2', 'pending']]);
  assert.equal(typeof first.cursor, 'string');
  const ids = [];
  for await (const j of c.peekAll(q, { group: 'TENacme', count: 1 })) ids.push(j.job);
  assert.deepEqual(ids, ['JOBk1', 'JOBk2', 'JOBk3']);
  assert.deepEqual((await c.peek(q, { state: 'delayed' })).jobs.map((j) => j.job), ['JOBlater']);
  assert.equal(await c.remove(q, 'JOBk2'), 'pending');
  assert.equal(await c.remove(q, 'JOBlater'), 'delayed');
  await assert.rejects(c.remove(q, 'JOBk2'), NoJobError);
  const [j] = await c.claim(q);
  await assert.rejects(c.remove(q, j.id), StateError);
  await c.complete(j);
  await c.enqueueMany(q, [{ payload: 'f1' }, { payload: 'f2' }]);
  assert.equal(await c.drain(q), 2);
  assert.equal(await c.depth(q), 0);
  assert.equal(await c.depth(q, 'TENacme'), 1);
});

test('queues pages the registry with each queue\'s totals', async () => {
  // The file's daemon holds the other tests' queues too: find ours.
  const q = qname();
  await c.enqueue(q, 1, { group: 'TENa' });
  await c.enqueue(q, 2, { group: 'TENb' });
  await c.pause(q, 'TENb');
  await c.enqueue(`${q}x`, 3, { delayMs: 600000 });
  const found = new Map();
  for await (const row of c.allQueues({ count: 1 })) found.set(row.queue, row);
  assert.deepEqual(found.get(q), { queue: q, pending: 2, active: 0, delayed: 0, dead: 0, groups: 2, paused: 1 });
  assert.equal(found.get(`${q}x`).delayed, 1);
  const page = await c.queues({ count: 1000 });
  assert.equal(page.cursor, '0');
  await assert.rejects(c.queues({ cursor: 'x' }), ArgumentError);
});

test('forget refuses a queue with jobs, then forgets it', async () => {
  const q = qname();
  await c.enqueue(q, 1, { job: 'JOBfg', group: 'TENa' });
  await assert.rejects(c.forget(q), StateError);
  await c.remove(q, 'JOBfg');
  await c.forget(q);
  const names = [];
  for await (const row of c.allQueues({ count: 1000 })) names.push(row.queue);
  assert.equal(names.includes(q), false);
});

test('clients shows this connection and the leases it holds', async () => {
  const q = qname();
  await c.enqueue(q, 1, { group: 'TENa' });
  const [j] = await c.claim(q, { leaseMs: 600000 });
  const page = await c.clients({ count: 1000 });
  const me = page.clients.filter((row) => row.self);
  assert.equal(me.length, 1);
  const row = await c.client(me[0].id);
  const held = row.held.filter((h) => h.queue === q);
  assert.deepEqual(held, [{ queue: q, job: j.id, group: 'TENa', deadline_ms: j.leaseUntil }]);
  await assert.rejects(c.client(me[0].id + 100000), NotFoundError);
  await assert.rejects(c.clients({ cursor: 'x' }), ArgumentError);
  await c.complete(j);
});

test('dead list, retry, purge', async () => {
  const q = qname();
  for (const id of ['JOBd1', 'JOBd2']) {
    await c.enqueue(q, id, { job: id, maxAttempts: 1 });
    const [j] = await c.claim(q, { flat: true });
    assert.equal(await c.fail(j, { error: `no ${id}` }), 'dead');
  }
  assert.deepEqual((await c.deadList(q)).map((d) => d.job), ['JOBd1', 'JOBd2']);
  assert.deepEqual((await c.deadList(q, { limit: 1 })).map((d) => d.job), ['JOBd1']);
  assert.equal(await c.deadRetry(q, { job: 'JOBd1' }), 1);
  assert.equal((await c.job(q, 'JOBd1')).state, 'pending');
  assert.equal(await c.deadPurge(q), 1);
  await assert.rejects(c.job(q, 'JOBd2'), NoJobError);
  await assert.rejects(c.deadRetry(q, { job: 'JOBd2' }), NoJobError);
});

test('errors mapped: ENOJOB, ELEASE, EARG, EQUEUE, EKIND, EUNKNOWN, EBRAND', async () => {
  const q = qname();
  const ghost = { queue: q, job: 'JOBghost', lease: '1' };
  await assert.rejects(c.complete(ghost), (e) => e instanceof NoJobError && e.code === 'ENOJOB');
  await assert.rejects(c.claim(q, { count: 0 }), (e) => e instanceof ArgumentError && e.code === 'EARG');
  await assert.rejects(c.depth('bad queue!'), (e) => e instanceof QueueNameError && e.code === 'EQUEUE');
  await assert.rejects(c.job(q, 'nojob'), (e) => e instanceof KindError && e.code === 'EKIND');
  await assert.rejects(c.depth(q, 'lower'), BrandError);
  await assert.rejects(c.request('nosuchop'), (e) => e instanceof UnknownOpError && e.code === 'EUNKNOWN');
  // The client's own: a typo in an option, a job without its lease.
  await assert.rejects(c.enqueue(q, 1, { delay_ms: 5 }), (e) => e instanceof UsageError && e.code === 'EUSAGE');
  await assert.rejects(c.complete({ queue: q, job: 'JOBx' }), UsageError);
  // The connection is still in step after all of these.
  await c.ping();
});

test('pipelining: concurrent calls are all written, replies matched in order', async () => {
  const q = qname();
  const calls = [];
  for (let i = 0; i < 200; i++) {
    calls.push(c.enqueue(q, { i }, { job: `JOBp${String(i).padStart(3, '0')}`, group: 'TENacme' }));
    if (i % 50 === 49) calls.push(c.depth(q, 'TENacme'));
  }
  const r = await Promise.all(calls);
  // Each depth sees exactly the enqueues before it (one ordered session).
  const depths = r.filter((x) => typeof x === 'number');
  assert.deepEqual(depths, [50, 100, 150, 200]);
  const ids = r.filter((x) => typeof x === 'object').map((x) => x.job);
  assert.deepEqual(ids, Array.from({ length: 200 }, (_, i) => `JOBp${String(i).padStart(3, '0')}`));
});

test('pipeline(): enqueue x3 then claim x3, written together, results in order', async () => {
  const q = qname();
  const p = c.pipeline();
  for (let i = 1; i <= 3; i++) p.enqueue(q, i, { job: `JOBq${i}`, group: 'TENacme' });
  for (let i = 1; i <= 3; i++) p.claim(q);
  p.complete({ queue: q, job: 'JOBnone', lease: '1' });
  assert.equal(p.length, 7);
  const r = await p.exec();
  assert.deepEqual(r.slice(0, 3).map((x) => x.value.job), ['JOBq1', 'JOBq2', 'JOBq3']);
  assert.deepEqual(r.slice(3, 6).map((x) => [x.value[0].id, x.value[0].attempt]),
    [['JOBq1', 1], ['JOBq2', 1], ['JOBq3', 1]]);
  assert.equal(r[6].status, 'rejected');
  assert.ok(r[6].reason instanceof NoJobError);
  assert.equal((await admin.stats(q)).active, 3);
});

test('pushes vs replies: stream jobs are events, replies still match', async () => {
  const q = qname();
  const s = await stack.connect();
  const got = [];
  s.on('job', (j) => got.push(j));
  await s.stream(q, 2, { leaseMs: 10000 });
  for (let i = 0; i < 6; i++) await c.enqueue(q, { i }, { group: `TENg${i % 3}` });
  await waitFor(() => got.length === 2, { what: 'two pushes' });
  // Settling while more pushes come: every reply resolves its own call.
  while (got.length < 6) {
    const n = got.length;
    const [st, stats] = await Promise.all([s.complete(got[n - 1]), s.stats(q)]);
    assert.equal(st, 'completed');
    assert.ok(stats.active <= 2);
    const [st2] = await Promise.all([s.complete(got[n - 2]), s.ping()]);
    assert.equal(st2, 'completed');
    await waitFor(() => got.length >= Math.min(n + 2, 6), { what: 'the next pushes' });
  }
  await Promise.all(got.slice(4).map((j) => s.complete(j)));
  assert.deepEqual(got.map((j) => j.payload.i).sort(), [0, 1, 2, 3, 4, 5]);
  const st = await admin.stats(q);
  assert.equal(st.active + st.pending, 0);
  await s.close();
});

test('pushes without a listener wait for nextJob() and jobs()', async () => {
  const q = qname();
  const s = await stack.connect();
  await c.enqueue(q, 'a', { job: 'JOBi1' });
  await c.enqueue(q, 'b', { job: 'JOBi2' });
  await s.stream(q, 5, { flat: true });
  const first = await s.nextJob({ timeout: 20000 });
  assert.equal(first.id, 'JOBi1');
  const seen = [];
  for await (const j of s.jobs()) {
    seen.push(j.id);
    await s.complete(j);
    if (seen.length === 1) break;
  }
  assert.deepEqual(seen, ['JOBi2']);
  await s.complete(first);
  assert.equal(await s.nextJob({ timeout: 1 }), null);
  await s.close();
});

test('a parked claim holds later replies back, and times none of them out', async () => {
  const q = qname();
  const s = await stack.connect({ timeout: 300 });
  const order = [];
  const claim = s.claim(q, { waitMs: 60000 }).then((r) => {
    order.push('claim');
    return r;
  });
  const ping = s.ping().then(() => order.push('ping'));
  // Let the ping sit behind the parked claim past the client's timeout.
  await new Promise((r) => setTimeout(r, 600));
  await c.enqueue(q, 'wake', { group: 'TENacme' });
  const [jobs] = await Promise.all([claim, ping]);
  assert.equal(jobs.length, 1);
  assert.deepEqual(order, ['claim', 'ping']);
  await s.complete(jobs[0]);
  await s.close();
});

test('large and Unicode payloads round-trip exactly; too large is TooBigError with job', async () => {
  const q = qname();
  const big = 'x'.repeat(512 * 1024 - 2); // its JSON text: exactly 512 KiB
  const uni = { text: 'héllo wörld ✓ 日本語', emoji: '😀👍🏽', esc: 'quote " back \\ nl \n tab \t nul-free \u0001', n: [1, -2.5, 1e-7, true, null] };
  await c.enqueue(q, big, { job: 'JOBbig' });
  await c.enqueue(q, uni, { job: 'JOBuni' });
  const got = await c.claim(q, { count: 2, flat: true });
  assert.equal(got[0].payload, big);
  assert.deepEqual(got[1].payload, uni);
  assert.deepEqual((await admin.job(q, 'JOBuni')).payload, uni);
  await assert.rejects(c.enqueue(q, big + 'y', { job: 'JOBbig2' }),
    (e) => e instanceof TooBigError && e.job === 'JOBbig2');
  await Promise.all(got.map((j) => c.complete(j)));
});

test('roles: an op outside the token\'s role is PermissionDeniedError (EPERM)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'emq-node-tokens-'));
  const file = join(dir, 'tokens');
  const hash = createHash('sha256').update('p-secret').digest('hex');
  writeFileSync(file, `mailer producer ${hash}\n`);
  const secured = await startStack({ emqdArgs: ['--tokens-file', file] });
  try {
    const p = await secured.connect({ token: 'p-secret' });
    const q = qname();
    await p.enqueue(q, 1);
    await assert.rejects(p.claim(q), (e) => e instanceof PermissionDeniedError && e.code === 'EPERM');
    assert.equal((await p.stats(q)).pending, 1);
  } finally {
    await secured.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('auth: the right token connects, a wrong one is AuthError', async () => {
  const secured = await startStack({ emqdArgs: ['--token', 's3cret'] });
  try {
    const ok = await secured.connect({ token: 's3cret' });
    await ok.ping();
    await ok.stats(qname());
    await assert.rejects(secured.connect({ token: 'wrong' }), (e) => e instanceof AuthError && e.code === 'EAUTH');
    await assert.rejects(secured.connect({}), AuthError);
  } finally {
    await secured.stop();
  }
});

test('connection errors: nothing listening, calls after close, a daemon that dies', async () => {
  const port = await freePort();
  await assert.rejects(Client.connect({ port, timeout: 5000 }), (e) => e instanceof ConnectionLost && e.code === 'ECONN');
  const s = await stack.connect();
  await s.close();
  assert.equal(s.closed, true);
  await assert.rejects(s.ping(), ConnectionLost);
  await s.close(); // twice is fine
  // Replies owed when the connection breaks reject ConnectionLost.
  const d = await stack.connect();
  const parked = d.claim(qname(), { waitMs: 60000 });
  const closed = d.whenClosed;
  d.destroy();
  await assert.rejects(parked, ConnectionLost);
  assert.equal(await closed, null);
});
