#!/usr/bin/env node
// driver_node: the conformance suite's driver for the Node.js client
// (client/node). Reads one JSON command per line on stdin, answers one
// JSON result per line on stdout, in order, with worker and stream events
// between them (tests/conformance/README.md, "The driver protocol").
// Thin: each command is one call of the client's public API.
import fs from 'node:fs';
import readline from 'node:readline';
import { Client, Worker, EmqError, errorText } from '../../client/node/src/index.js';

const env = process.env;
const where = { host: env.EMQ_HOST || '127.0.0.1', port: Number(env.EMQ_PORT || 7711) };
// EMQ_TLS_CA (run.py --tls): speak TLS, verifying emqd with that CA.
if (env.EMQ_TLS_CA) where.tls = { ca: fs.readFileSync(env.EMQ_TLS_CA) };
let token = env.EMQ_TOKEN || undefined;

let client = null;
let worker = null;
const kept = new Map(); // job id -> the client's Job (with its lease)

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}
function log(...args) {
  process.stderr.write(`driver_node: ${args.join(' ')}\n`);
}

class DriverError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function failure(err) {
  if (err instanceof EmqError || err instanceof DriverError) {
    return { error: err.code, class: err instanceof DriverError ? 'DriverError' : err.name, message: err.message };
  }
  // A client bug or a bad command (TypeError, ...): the caller misused it.
  return { error: 'EUSAGE', class: err?.name || 'Error', message: String(err?.message ?? err) };
}

function connected() {
  if (!client || client.closed) throw new DriverError('ECONN', 'not connected (send connect first)');
  return client;
}

function keep(job) {
  kept.set(job.job, job);
  return { job: job.job, group: job.group, attempt: job.attempt, payload: job.payload, lease: job.lease };
}

// The kept object of a job; with `lease`, a copy carrying that token.
function target(cmd) {
  const job = kept.get(cmd.job);
  if (!job) {
    if (cmd.lease === undefined) throw new DriverError('EUSAGE', `no leased job ${cmd.job} is kept`);
    return { queue: cmd.queue, job: cmd.job, lease: cmd.lease };
  }
  return cmd.lease === undefined ? job : job.withLease(cmd.lease);
}

// Copy the arguments that are present, renamed to the client's options.
function opts(cmd, names) {
  const o = {};
  for (const [wire, js] of Object.entries(names)) if (cmd[wire] !== undefined) o[js] = cmd[wire];
  return o;
}

function onPush(job) {
  kept.set(job.job, job);
  out({ event: 'pushed', job: job.job, attempt: job.attempt, payload: job.payload, lease: job.lease });
}

// Each op that a pipeline may hold too: [call on a client or pipeline, translate].
const OPS = {
  enqueue: [
    (c, cmd) => c.enqueue(cmd.queue, cmd.payload, opts(cmd, { job: 'job', group: 'group', delay_ms: 'delayMs', max_attempts: 'maxAttempts' })),
    (r) => ({ job: r.job, verdict: r.verdict }),
  ],
  claim: [
    (c, cmd) => c.claim(cmd.queue, opts(cmd, { count: 'count', lease_ms: 'leaseMs', flat: 'flat', wait_ms: 'waitMs' })),
    (jobs) => ({ jobs: jobs.map(keep) }),
  ],
  complete: [(c, cmd) => c.complete(target(cmd)), (state) => ({ state })],
  fail: [
    (c, cmd) => c.fail(target(cmd), opts(cmd, { error: 'error', retry_ms: 'retryMs', dead: 'dead' })),
    (state) => ({ state }),
  ],
};

// Resolved by worker_stop once it has called the worker's stop().
let stopAsked = null;
let stopNow = null;

function behaviour(cmd) {
  const behave = cmd.behave || {};
  const fallback = cmd.default_behave || 'complete';
  return async (job, ctx) => {
    out({ event: 'started', job: job.job, attempt: job.attempt });
    const how = behave[job.job] ?? fallback;
    if (how === 'complete') return;
    if (how === 'raise') throw new Error(`raised by ${job.job}`); // the text check 16 looks for
    if (how === 'until_stop') {
      // Finishes once worker_stop has called stop() (whose first, synchronous
      // step marks the worker stopping): the slot frees while it stops.
      await stopAsked;
      return;
    }
    if (how === 'hang') {
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      return;
    }
    const m = /^sleep:(\d+)$/.exec(how);
    if (!m) throw new Error(`driver_node: unknown behave ${how}`);
    await new Promise((resolve) => setTimeout(resolve, Number(m[1])));
  };
}

const COMMANDS = {
  async connect(cmd) {
    if (client) client.destroy();
    client = null;
    const t = 'token' in cmd ? cmd.token : env.EMQ_TOKEN || undefined;
    client = await Client.connect({ ...where, token: t, name: cmd.name });
    client.on('job', onPush);
    token = t; // the worker connects as the last connect did
    return {};
  },
  async close() {
    await connected().close();
    return {};
  },
  async ping() {
    await connected().ping();
    return {};
  },
  async enqueue_many(cmd) {
    const items = cmd.items.map((it) => opts(it, { payload: 'payload', job: 'job', group: 'group', delay_ms: 'delayMs', max_attempts: 'maxAttempts' }));
    const results = await connected().enqueueMany(cmd.queue, items, opts(cmd, { group: 'group' }));
    return {
      results: results.map((r) => (r.ok ? { job: r.job, verdict: r.verdict } : { ...failure(r.error), ...(r.job ? { job: r.job } : {}) })),
    };
  },
  async release(cmd) {
    return { state: await connected().release(target(cmd), opts(cmd, { error: 'error' })) };
  },
  async extend(cmd) {
    return { lease_until: await connected().extend(target(cmd), cmd.lease_ms) };
  },
  async stream(cmd) {
    await connected().stream(cmd.queue, cmd.credit, opts(cmd, { lease_ms: 'leaseMs', flat: 'flat' }));
    return {};
  },
  async pipeline(cmd) {
    const p = connected().pipeline();
    for (const op of cmd.ops) {
      const entry = OPS[op.do];
      if (!entry) throw new DriverError('EUSAGE', `a pipeline holds enqueue, claim, complete and fail, not ${op.do}`);
      entry[0](p, op);
    }
    const settled = await p.exec();
    return {
      results: settled.map((s, i) => (s.status === 'fulfilled'
        ? { ok: true, ...OPS[cmd.ops[i].do][1](s.value) }
        : { ok: false, ...failure(s.reason) })),
    };
  },
  async worker_start(cmd) {
    if (worker) throw new DriverError('EUSAGE', 'a worker is already running');
    const w = new Worker(cmd.queue, behaviour(cmd), {
      ...where, token, concurrency: cmd.concurrency ?? 1, ...opts(cmd, { lease_ms: 'leaseMs', flat: 'flat' }),
      handleSignals: false,
    });
    w.on('completed', (job) => out({ event: 'completed', job: job.job }));
    w.on('failed', (job, err) => out({ event: 'failed', job: job.job, error: errorText(err) }));
    w.on('error', (err) => log('worker:', err.message));
    worker = w;
    stopAsked = new Promise((resolve) => {
      stopNow = resolve;
    });
    try {
      await w.start();
    } catch (err) {
      worker = null;
      throw err;
    }
    return {};
  },
  async worker_stop(cmd) {
    if (!worker) throw new DriverError('EUSAGE', 'no worker is running');
    const w = worker;
    worker = null;
    const stopped = w.stop(opts(cmd, { grace_ms: 'graceMs' }));
    stopNow();
    await stopped;
    return {};
  },
};
for (const [name, [call, translate]] of Object.entries(OPS)) {
  COMMANDS[name] = async (cmd) => translate(await call(connected(), cmd));
}

async function shutDown() {
  if (worker) await worker.stop({ graceMs: 0 }).catch(() => {});
  if (client) await client.close();
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (err) {
      out({ ok: false, error: 'EUSAGE', class: 'SyntaxError', message: `not a JSON command: ${err.message}` });
      continue;
    }
    if (cmd.do === 'quit') {
      await shutDown();
      out({ ok: true });
      process.exit(0);
    }
    const run = COMMANDS[cmd.do];
    if (!run) {
      out({ ok: false, error: 'UNSUPPORTED', class: 'DriverError', message: `unknown command ${cmd.do}` });
      continue;
    }
    try {
      out({ ok: true, ...(await run(cmd)) });
    } catch (err) {
      out({ ok: false, ...failure(err) });
    }
  }
  await shutDown();
  process.exit(0);
}

main().catch((err) => {
  log('fatal:', err?.stack ?? err);
  process.exit(1);
});
