// bullmq_bench.js: the BullMQ side of tests/bench/compare. It runs the same
// workloads as emq-bench against BullMQ (Queue.addBulk + Worker) on the same
// Redis and prints one JSON line with the same field names. BullMQ is
// installed by `compare` into a temporary directory (NODE_PATH); nothing of
// it is committed.
//
//   node bullmq_bench.js --port P --mode e2e|fair|latency|phases|flood
//     [--jobs N] [--producers N] [--batch B] [--pipeline P] [--workers M]
//     [--concurrency C] [--payload BYTES] [--fairness H,L,K] [--rate R]
//     [--bulk B] [--settle complete|fail|dead] [--marks 1] [--duration S]
//
// phases: add (--bulk 0: Queue.add, producers x pipeline in flight) or
// addBulk of B, then lease every job by Worker.getNextJob (manual
// processing: one moveToActive call each, --workers loops), then settle
// every held job by moveToCompleted or moveToFailed (fail: attempts 5 and
// a fixed backoff of an hour, so it goes delayed; dead: attempts 1, so it
// goes to the failed set), none fetching the next job. With --marks 1 it
// prints {"mark":PHASE} before each phase and waits for a line on stdin.
// flood: T tenants' K jobs each in one FIFO queue (--fairness T,K,L), then
// a worker, and L lone-tenant jobs added at --rate per second meanwhile:
// their add -> processing times.
'use strict';

const { Queue, Worker } = require('bullmq');

function parseArgs(argv) {
  const o = {
    port: 6379, mode: 'e2e', jobs: 100000, producers: 4, batch: 100, pipeline: 2,
    workers: 4, concurrency: 100, payload: 1024, fairness: '100000,100,10', rate: 500,
    duration: 120, bulk: 0, settle: 'complete', marks: 0,
  };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    if (!(k in o) || i + 1 >= argv.length) throw new Error(`bad option ${argv[i]}`);
    o[k] = typeof o[k] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  return o;
}

const now = () => process.hrtime.bigint();

function pct(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1];
}

function msList(ns) {
  const s = Float64Array.from(ns).sort();
  return [50, 99, 99.9].map((p) => Number((pct(s, p) / 1e6).toFixed(3)));
}

// The payload: the send time (monotonic ns, as in emq-bench) plus padding to
// about the same JSON size.
function makePayload(o, extra) {
  return Object.assign({ t: now().toString(), p: 'x'.repeat(Math.max(1, o.payload - 40)) }, extra);
}

async function e2e(o, connection, name) {
  const q = new Queue(name, { connection });
  await q.waitUntilReady();
  const res = { enqueued: 0, completed: 0, pushed: 0, rtt: [], e2p: [] };
  let tEnqDone = 0n;
  let tLast = 0n;
  let done;
  const allDone = new Promise((r) => { done = r; });
  const onJob = async (job) => {
    const t1 = now();
    res.pushed++;
    res.e2p.push(Number(t1 - BigInt(job.data.t)));
  };
  const t0 = now();
  const workers = [];
  for (let i = 0; i < o.workers; i++) {
    const w = new Worker(name, onJob, {
      connection, concurrency: o.concurrency, removeOnComplete: { count: 0 },
    });
    w.on('completed', () => {
      res.completed++;
      if (res.completed === o.jobs) { tLast = now(); done(); }
    });
    workers.push(w);
  }
  let sent = 0;
  const producer = async () => {
    while (sent < o.jobs) {
      const n = Math.min(o.batch, o.jobs - sent);
      sent += n;
      const jobs = [];
      for (let i = 0; i < n; i++) jobs.push({ name: 'j', data: makePayload(o) });
      const ts = now();
      await q.addBulk(jobs);
      res.rtt.push(Number(now() - ts));
      res.enqueued += n;
    }
  };
  const prods = [];
  for (let i = 0; i < o.producers * o.pipeline; i++) prods.push(producer());
  await Promise.all(prods);
  tEnqDone = now();
  await allDone;
  await Promise.all(workers.map((w) => w.close()));
  await q.obliterate({ force: true });
  await q.close();
  const secs = (a, b) => Number(b - a) / 1e9;
  return {
    enqueue_rate: Math.round(res.enqueued / secs(t0, tEnqDone)),
    e2e_rate: Math.round(res.completed / secs(t0, tLast)),
    claim_rate: Math.round(res.pushed / secs(t0, tLast)),
    enqueued: res.enqueued, completed: res.completed,
    rtt_ms: msList(res.rtt), e2p_ms: msList(res.e2p),
  };
}

async function fair(o, connection, name) {
  const [heavy, light, lightJobs] = o.fairness.split(',').map(Number);
  const q = new Queue(name, { connection });
  await q.waitUntilReady();
  const chunk = 1000;
  for (let i = 0; i < heavy; i += chunk) {
    const jobs = [];
    for (let k = i; k < Math.min(heavy, i + chunk); k++) jobs.push({ name: 'h', data: { g: -1 } });
    await q.addBulk(jobs);
  }
  for (let g = 0; g < light; g++) {
    const jobs = [];
    for (let k = 0; k < lightJobs; k++) jobs.push({ name: 'l', data: { g } });
    await q.addBulk(jobs);
  }
  const last = new Array(light).fill(0);
  const seen = new Array(light).fill(0);
  let delivered = 0;
  let lightDone = 0;
  let done;
  const allDone = new Promise((r) => { done = r; });
  const w = new Worker(name, async (job) => {
    delivered++;
    const g = job.data.g;
    if (g >= 0) {
      last[g] = delivered;
      if (++seen[g] === lightJobs && ++lightDone === light) done();
    }
  }, { connection, concurrency: o.concurrency, removeOnComplete: { count: 0 } });
  await allDone;
  await w.close();
  await q.obliterate({ force: true });
  await q.close();
  last.sort((a, b) => a - b);
  return {
    fair_heavy: heavy, fair_light: light, fair_light_jobs: lightJobs, fair_light_done: lightDone,
    fair_last_max: last[light - 1], fair_last_p50: last[Math.floor(light / 2)],
  };
}

async function latency(o, connection, name) {
  const q = new Queue(name, { connection });
  await q.waitUntilReady();
  const e2p = [];
  const rtt = [];
  let completed = 0;
  let done;
  const allDone = new Promise((r) => { done = r; });
  const w = new Worker(name, async (job) => { e2p.push(Number(now() - BigInt(job.data.t))); },
    { connection, concurrency: o.concurrency, removeOnComplete: { count: 0 } });
  w.on('completed', () => { if (++completed === o.jobs) done(); });
  await w.waitUntilReady();
  let sent = 0;
  await new Promise((resolve) => {
    const iv = setInterval(async () => {
      if (sent >= o.jobs) { clearInterval(iv); resolve(); return; }
      sent++;
      const ts = now();
      await q.add('j', makePayload(o));
      rtt.push(Number(now() - ts));
    }, Math.max(1, Math.round(1000 / o.rate)));
  });
  await allDone;
  await w.close();
  await q.obliterate({ force: true });
  await q.close();
  return { completed, rtt_ms: msList(rtt), e2p_ms: msList(e2p) };
}

// --marks: a phase boundary. The caller reads Redis' counters, then sends a
// line to go on.
let stdinLines = null;
async function mark(o, phase) {
  if (!o.marks) return;
  if (!stdinLines) {
    stdinLines = { n: 0, waiter: null };
    require('readline').createInterface({ input: process.stdin }).on('line', () => {
      if (stdinLines.waiter) {
        const w = stdinLines.waiter;
        stdinLines.waiter = null;
        w();
      } else stdinLines.n++;
    });
  }
  process.stdout.write(JSON.stringify({ mark: phase }) + '\n');
  await new Promise((r) => {
    if (stdinLines.n > 0) { stdinLines.n--; r(); } else stdinLines.waiter = r;
  });
}

async function phases(o, connection, name) {
  const q = new Queue(name, { connection });
  await q.waitUntilReady();
  const opts = {
    removeOnComplete: true,
    attempts: o.settle === 'fail' ? 5 : 1,
    backoff: { type: 'fixed', delay: 3600000 },
  };
  const workers = [];
  for (let i = 0; i < o.workers; i++) {
    const w = new Worker(name, null, { connection, autorun: false, lockDuration: 600000 });
    await w.waitUntilReady();
    workers.push(w);
  }
  await mark(o, 'enqueue');
  let sent = 0;
  const producer = async () => {
    while (sent < o.jobs) {
      if (o.bulk > 0) {
        const n = Math.min(o.bulk, o.jobs - sent);
        sent += n;
        const jobs = [];
        for (let i = 0; i < n; i++) jobs.push({ name: 'j', data: makePayload(o), opts });
        await q.addBulk(jobs);
      } else {
        sent++;
        await q.add('j', makePayload(o), opts);
      }
    }
  };
  const prods = [];
  for (let i = 0; i < o.producers * o.pipeline; i++) prods.push(producer());
  await Promise.all(prods);
  await mark(o, 'lease');
  const held = [];
  let fetched = 0;
  await Promise.all(workers.map(async (w, i) => {
    const token = `bench-${i}`;
    while (fetched < o.jobs) {
      const job = await w.getNextJob(token, { block: false });
      if (!job) break;
      fetched++;
      held.push([job, token]);
    }
  }));
  if (fetched !== o.jobs) throw new Error(`leased ${fetched} of ${o.jobs}`);
  await mark(o, 'settle');
  let settled = 0;
  const err = new Error('bench');
  await Promise.all(workers.map(async (w, i) => {
    for (let k = i; k < held.length; k += workers.length) {
      const [job, token] = held[k];
      if (o.settle === 'complete') await job.moveToCompleted('ok', token, false);
      else await job.moveToFailed(err, token, false);
      settled++;
    }
  }));
  const counts = await q.getJobCounts('delayed', 'failed', 'completed', 'active');
  await Promise.all(workers.map((w) => w.close()));
  await q.obliterate({ force: true });
  await q.close();
  return { enqueued: sent, pushed: fetched, completed: settled, counts };
}

async function flood(o, connection, name) {
  const [tenants, each, lone] = o.fairness.split(',').map(Number);
  const q = new Queue(name, { connection });
  await q.waitUntilReady();
  const chunk = 1000;
  const total = tenants * each;
  for (let i = 0; i < total; i += chunk) {
    const jobs = [];
    for (let k = i; k < Math.min(total, i + chunk); k++) {
      const p = 'x'.repeat(Math.max(1, o.payload - 40));
      jobs.push({ name: 'h', data: { g: k % tenants, p } });
    }
    await q.addBulk(jobs);
  }
  const wait = [];
  let completed = 0;
  let done;
  const allDone = new Promise((r) => { done = r; });
  const w = new Worker(name, async (job) => {
    if (job.data.lone) wait.push(Number(now() - BigInt(job.data.t)));
  }, { connection, concurrency: o.concurrency, removeOnComplete: { count: 0 } });
  w.on('completed', () => { if (++completed === total + lone) done(); });
  let sent = 0;
  await new Promise((resolve) => {
    const iv = setInterval(async () => {
      if (sent >= lone) { clearInterval(iv); resolve(); return; }
      sent++;
      await q.add('l', makePayload(o, { lone: true }));
    }, Math.max(1, Math.round(1000 / o.rate)));
  });
  await allDone;
  await w.close();
  await q.obliterate({ force: true });
  await q.close();
  return { completed, lone, lone_pushed: wait.length, lone_wait_ms: msList(wait) };
}

async function main() {
  const o = parseArgs(process.argv);
  const connection = { host: '127.0.0.1', port: o.port, maxRetriesPerRequest: null };
  const name = `bench${process.pid}`;
  const timer = setTimeout(() => {
    process.stdout.write(JSON.stringify({ timed_out: true, error: 'timed out' }) + '\n');
    process.exit(1);
  }, o.duration * 1000);
  const modes = { e2e, fair, latency, phases, flood };
  if (!modes[o.mode]) throw new Error(`bad mode ${o.mode}`);
  const r = await modes[o.mode](o, connection, name);
  clearTimeout(timer);
  r.timed_out = false;
  r.error = '';
  process.stdout.write(JSON.stringify(r) + '\n');
  process.exit(0);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.message ? e.message : e) }) + '\n');
  process.exit(1);
});
