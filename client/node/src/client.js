// Client: one connection to emqd, a Promise per request (PROTOCOL.md 2),
// pushed jobs as events or an async iterator (2.3), pipelining for free.
import net from 'node:net';
import tls from 'node:tls';
import { EventEmitter } from 'node:events';
import { isDeepStrictEqual } from 'node:util';
import { performance } from 'node:perf_hooks';
import { ConnectionLost, TimeoutError, UsageError, ProtocolError, errorFromReply } from './errors.js';

const DEFAULT_PORT = 7711;
const DEFAULT_TIMEOUT = 30000;

/** "HOST:PORT", "[V6]:PORT", "PORT", "tls://HOST:PORT", "unix:PATH" or
 * "/PATH" (as libemq's emq_parse_addr), to {host, port[, tls: true]} or
 * {path}. */
export function parseAddr(addr) {
  const bad = () => new UsageError(`bad address "${addr}": expected HOST:PORT, [V6]:PORT, PORT or unix:PATH`);
  if (typeof addr !== 'string' || addr === '') throw bad();
  if (addr.startsWith('tls://')) {
    const rest = addr.slice(6);
    if (!rest.includes(':') || rest.startsWith('unix:') || rest.startsWith('/')) throw bad();
    return { ...parseAddr(rest), tls: true };
  }
  if (addr.startsWith('unix:') || addr.startsWith('/')) {
    const path = addr.startsWith('/') ? addr : addr.slice(5);
    if (!path) throw bad();
    return { path };
  }
  const colon = addr.lastIndexOf(':');
  let host = '127.0.0.1';
  if (colon >= 0) {
    host = addr.slice(0, colon);
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    else if (host.includes(':')) throw bad(); // a bare IPv6 literal needs brackets
    if (!host || /[[\]]/.test(host)) throw bad();
  }
  const digits = addr.slice(colon + 1);
  const port = /^\d{1,5}$/.test(digits) ? Number(digits) : 0;
  if (port < 1 || port > 65535) throw bad();
  return { host, port };
}

/** Throw UsageError for an option the call does not define (a typo such
 * as delay_ms for delayMs must not be ignored silently). */
export function checkOptions(what, opts, allowed) {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object') throw new UsageError(`${what}: options must be an object`);
  for (const k of Object.keys(opts)) {
    if (!allowed.includes(k)) {
      throw new UsageError(`${what}: unknown option "${k}" (known: ${allowed.join(', ')})`);
    }
  }
  return opts;
}

/** A leased job, from a claim reply or a stream push (PROTOCOL.md 6.7). */
export class Job {
  constructor(wire, receivedAt = performance.now()) {
    this.queue = wire.queue;
    this.job = wire.job;
    this.group = wire.group ?? null;
    this.lease = wire.lease;
    this.attempt = wire.attempt;
    this.leaseUntil = wire.lease_until;
    this.payload = wire.payload;
    /** performance.now() when the lease began or was last extended: the
     * client's own clock for the lease (lease_until is the backend's). */
    this.leasedAt = receivedAt;
  }

  /** The job id (the same as `job`). */
  get id() {
    return this.job;
  }

  /** A copy holding another lease token (to present a stale token). */
  withLease(lease) {
    const copy = Object.create(Job.prototype);
    Object.assign(copy, this, { lease });
    return copy;
  }
}

function settleTarget(what, job) {
  const id = job && (job.job ?? job.id);
  if (!job || typeof job.queue !== 'string' || typeof id !== 'string' || typeof job.lease !== 'string') {
    throw new UsageError(`${what}: expected a leased job (an object with queue, job and lease)`);
  }
  return { queue: job.queue, job: id, lease: job.lease };
}

function fields(reply) {
  const { ok, ref, ...rest } = reply;
  return rest;
}

/** One connection to emqd. Make it with `await Client.connect(options)`.
 *
 * Every method writes its request at once and returns a Promise of the
 * reply; calls made without awaiting are pipelined (all written, replies
 * matched in order, PROTOCOL.md 2.2). Pushed jobs (`stream`) come as
 * `'job'` events when there is a listener, else they are buffered for
 * `nextJob()` and `jobs()`.
 *
 * Events: 'job' (Job), 'push' (every raw push object), 'close' (error or
 * null once the connection is closed). */
export class Client extends EventEmitter {
  /** Open a connection and say hello (protocol 1, token, name). */
  static async connect(options = {}) {
    const client = new Client(options);
    await client._open();
    return client;
  }

  constructor(options = {}) {
    super();
    const o = checkOptions('Client.connect', options, ['host', 'port', 'path', 'addr', 'token', 'name', 'timeout', 'tls']);
    let where;
    if (o.path !== undefined) where = { path: o.path };
    else if (o.host !== undefined || o.port !== undefined) where = { host: o.host ?? '127.0.0.1', port: o.port ?? DEFAULT_PORT };
    else if (o.addr !== undefined || process.env.EMQ_ADDR) where = parseAddr(o.addr ?? process.env.EMQ_ADDR);
    else where = { host: '127.0.0.1', port: DEFAULT_PORT };
    // tls: true (the default CAs) or tls.connect's options (ca, cert, key,
    // servername, ...); a tls:// address means true.
    const tlsOpts = o.tls ?? (where.tls ? true : undefined);
    if (tlsOpts !== undefined && tlsOpts !== false && where.path !== undefined) {
      throw new UsageError('Client.connect: TLS is for TCP: a unix socket is plain');
    }
    delete where.tls;
    this.options = {
      ...where,
      tls: tlsOpts === true ? {} : tlsOpts || undefined,
      token: o.token !== undefined ? o.token : process.env.EMQ_TOKEN || undefined,
      name: o.name,
      timeout: o.timeout ?? DEFAULT_TIMEOUT,
    };
    /** The hello reply: {server, version, protocol}. */
    this.server = null;
    this._sock = null;
    this._ref = 0;
    this._pending = []; // requests awaiting their reply, in send order
    this._headTimer = null;
    this._partial = [];
    this._jobs = []; // pushed jobs nobody listened for
    this._jobWaiters = [];
    this._closed = false;
    this._closing = false;
    this._closeError = null;
    this._closedPromise = new Promise((resolve) => {
      this._resolveClosed = resolve;
    });
  }

  /** "host:port" or the unix path, for messages. */
  get address() {
    const o = this.options;
    if (o.path !== undefined) return `unix:${o.path}`;
    return `${o.tls ? 'tls://' : ''}${o.host}:${o.port}`;
  }

  /** True once the connection is closed (by either side). */
  get closed() {
    return this._closed;
  }

  /** Resolves (with the error, or null) once the connection is closed. */
  get whenClosed() {
    return this._closedPromise;
  }

  async _open() {
    const o = this.options;
    let sock;
    if (o.path !== undefined) sock = net.connect({ path: o.path });
    else if (o.tls) {
      // The certificate must name host (an IP literal: its IP addresses);
      // SNI carries names only.
      const servername = o.tls.servername ?? (net.isIP(o.host) ? undefined : o.host);
      sock = tls.connect({ ...o.tls, host: o.host, port: o.port, servername });
    } else sock = net.connect({ host: o.host, port: o.port });
    this._sock = sock;
    await new Promise((resolve, reject) => {
      const timer = o.timeout > 0
        ? setTimeout(() => {
            sock.destroy();
            reject(new ConnectionLost(`cannot connect to ${this.address}: timed out after ${o.timeout} ms`));
          }, o.timeout)
        : null;
      sock.once(o.tls ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        resolve();
      });
      sock.once('error', (err) => {
        clearTimeout(timer);
        reject(new ConnectionLost(`cannot connect to ${this.address}: ${err.message}`, err));
      });
    }).catch((err) => {
      this._finish(err);
      throw err;
    });
    if (o.path === undefined) sock.setNoDelay(true);
    sock.setKeepAlive(true, 15000);
    sock.setEncoding('utf8');
    sock.on('data', (chunk) => this._onData(chunk));
    sock.on('error', (err) => {
      this._closeError ??= new ConnectionLost(`connection to ${this.address} broke: ${err.message}`, err);
    });
    sock.on('close', () => this._finish(this._closeError));
    try {
      const hello = await this.request('hello', { protocol: 1, token: o.token, name: o.name });
      if (hello.protocol !== 1) {
        throw new ProtocolError(`the server speaks protocol ${hello.protocol}, this client 1`);
      }
      this.server = { server: hello.server, version: hello.version, protocol: hello.protocol };
    } catch (err) {
      this.destroy();
      throw err;
    }
  }

  // ---- the wire --------------------------------------------------------

  /** Send one request and resolve with its reply's fields (`ok` and `ref`
   * removed); reject with the error class of its code. The escape hatch
   * under every method: `request('stats', {queue: 'mail'})`. */
  request(op, args = {}, { waitMs = 0 } = {}) {
    if (this._closed || this._closing || !this._sock) {
      return Promise.reject(new ConnectionLost(this._closing && !this._closed ? 'the client is closing' : 'the client is closed'));
    }
    const ref = ++this._ref;
    let line;
    try {
      line = JSON.stringify({ op, ref, ...args }) + '\n';
    } catch (err) {
      return Promise.reject(new UsageError(`${op}: cannot encode the request as JSON: ${err.message}`));
    }
    return new Promise((resolve, reject) => {
      this._pending.push({ ref, op, resolve, reject, waitMs });
      if (op === 'quit') this._closing = true;
      this._sock.write(line);
      if (this._pending.length === 1) this._armHead();
    });
  }

  // The oldest unanswered request gets `timeout` (plus its own wait_ms)
  // from the moment it is the oldest: a request behind a parked claim is
  // not timed out by that claim's wait.
  _armHead() {
    clearTimeout(this._headTimer);
    this._headTimer = null;
    const head = this._pending[0];
    const t = this.options.timeout;
    if (!head || !(t > 0)) return;
    const ms = t + head.waitMs;
    this._headTimer = setTimeout(() => {
      const err = new TimeoutError(`no reply to ${head.op} from ${this.address} within ${ms} ms`);
      this._pending.shift();
      head.reject(err);
      // Replies can no longer be matched safely: close the connection.
      this._closeError = new ConnectionLost(`connection to ${this.address} closed after a timeout`);
      this.destroy();
    }, ms);
  }

  _onData(chunk) {
    let start = 0;
    let nl;
    while ((nl = chunk.indexOf('\n', start)) !== -1) {
      let line = chunk.slice(start, nl);
      if (this._partial.length) {
        this._partial.push(line);
        line = this._partial.join('');
        this._partial = [];
      }
      start = nl + 1;
      this._onLine(line);
      if (this._closed) return;
    }
    if (start < chunk.length) this._partial.push(chunk.slice(start));
  }

  _onLine(line) {
    if (line === '' || line === '\r') return;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return this._broken(`the server sent a line that is not JSON: ${line.slice(0, 100)}`);
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      return this._broken('the server sent a line that is not an object');
    }
    if ('push' in msg) return this._onPush(msg);
    const head = this._pending[0];
    // Replies come in request order (2.2); the ref, compared as a JSON
    // value (the daemon re-encodes it), proves it. ETOOBIG has no ref.
    if (!head || ('ref' in msg && !isDeepStrictEqual(msg.ref, head.ref))) {
      return this._broken(`a reply that matches no request (ref ${JSON.stringify(msg.ref)})`);
    }
    this._pending.shift();
    this._armHead();
    if (msg.ok === true) head.resolve(fields(msg));
    else head.reject(errorFromReply(msg));
  }

  _broken(why) {
    this._closeError = new ConnectionLost(`${why}; connection closed`);
    this.destroy();
  }

  _onPush(msg) {
    this.emit('push', msg);
    if (msg.push !== 'job') return; // a kind this client does not know
    const job = new Job(msg);
    if (this.listenerCount('job') > 0) {
      this.emit('job', job);
    } else if (this._jobWaiters.length) {
      this._jobWaiters.shift()(job);
    } else {
      this._jobs.push(job);
    }
  }

  _finish(err) {
    if (this._closed) return;
    this._closed = true;
    clearTimeout(this._headTimer);
    const pending = this._pending;
    this._pending = [];
    for (const p of pending) {
      p.reject(err ?? new ConnectionLost(`connection to ${this.address} closed with a reply to ${p.op} owed`));
    }
    for (const w of this._jobWaiters.splice(0)) w(null);
    this._resolveClosed(err ?? null);
    this.emit('close', err ?? null);
  }

  /** The next pushed job (buffered when no 'job' listener is set), or null
   * when `timeout` ms pass, the signal aborts, or the connection closes. */
  nextJob({ timeout, signal } = {}) {
    if (this._jobs.length) return Promise.resolve(this._jobs.shift());
    if (this._closed || signal?.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      let timer = null;
      const done = (job) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(job);
      };
      const onAbort = () => {
        const i = this._jobWaiters.indexOf(done);
        if (i >= 0) this._jobWaiters.splice(i, 1);
        done(null);
      };
      if (timeout !== undefined) timer = setTimeout(onAbort, timeout);
      signal?.addEventListener('abort', onAbort, { once: true });
      this._jobWaiters.push(done);
    });
  }

  /** Pushed jobs as an async iterator; ends when the connection closes or
   * the signal aborts. */
  async *jobs({ signal } = {}) {
    for (;;) {
      const job = await this.nextJob({ signal });
      if (job === null) return;
      yield job;
    }
  }

  /** Say quit, wait for the owed replies and the close. Leases still held
   * go back to their lanes, attempt counted (PROTOCOL.md 6.4). */
  async quit() {
    if (this._closed) return;
    if (this._closing) {
      await this._closedPromise;
      return;
    }
    try {
      await this.request('quit');
    } catch (err) {
      if (!(err instanceof ConnectionLost)) throw err;
    }
    this._sock.end();
    await this._closedPromise;
  }

  /** quit, and never throw; safe to call more than once. */
  async close() {
    try {
      await this.quit();
    } catch {
      this.destroy();
    }
  }

  /** Close the socket at once; unanswered requests reject ConnectionLost. */
  destroy() {
    if (this._sock && !this._sock.destroyed) this._sock.destroy();
    else this._finish(this._closeError);
  }

  /** A Pipeline: queue calls, then `exec()` writes them all at once. */
  pipeline() {
    return new Pipeline(this);
  }

  // ---- ops (PROTOCOL.md section 5) ----------------------------------------

  async ping() {
    await this.request('ping');
  }

  async enqueue(queue, payload, options) {
    const o = checkOptions('enqueue', options, ['job', 'group', 'delayMs', 'maxAttempts']);
    const r = await this.request('enqueue', {
      queue, payload, job: o.job, group: o.group, delay_ms: o.delayMs, max_attempts: o.maxAttempts,
    });
    return { job: r.job, verdict: r.verdict };
  }

  async enqueueMany(queue, items, options) {
    const o = checkOptions('enqueueMany', options, ['group']);
    if (!Array.isArray(items)) throw new UsageError('enqueueMany: items must be an array');
    const jobs = items.map((it) => {
      const i = checkOptions('enqueueMany item', it, ['payload', 'job', 'group', 'delayMs', 'maxAttempts']);
      return { payload: i.payload, job: i.job, group: i.group, delay_ms: i.delayMs, max_attempts: i.maxAttempts };
    });
    const r = await this.request('enqueue_many', { queue, jobs, group: o.group });
    return r.results.map((it) =>
      'error' in it
        ? { ok: false, job: it.job, error: errorFromReply(it) }
        : { ok: true, job: it.job, verdict: it.verdict });
  }

  async claim(queue, options) {
    const o = checkOptions('claim', options, ['count', 'leaseMs', 'waitMs', 'flat']);
    const sentAt = performance.now();
    const r = await this.request('claim', {
      queue, count: o.count, lease_ms: o.leaseMs, wait_ms: o.waitMs, flat: o.flat,
    }, { waitMs: o.waitMs ?? 0 });
    // A job leased after a wait was leased near the reply, not the send.
    const at = o.waitMs ? performance.now() : sentAt;
    return r.jobs.map((j) => new Job(j, at));
  }

  async stream(queue, credit, options) {
    const o = checkOptions('stream', options, ['leaseMs', 'flat']);
    await this.request('stream', { queue, credit, lease_ms: o.leaseMs, flat: o.flat });
  }

  async complete(job) {
    return (await this.request('complete', settleTarget('complete', job))).state;
  }

  async fail(job, options) {
    const o = checkOptions('fail', options, ['error', 'retryMs', 'dead']);
    const r = await this.request('fail', {
      ...settleTarget('fail', job), error: o.error, retry_ms: o.retryMs, dead: o.dead,
    });
    return r.state;
  }

  async release(job, options) {
    const o = checkOptions('release', options, ['error']);
    return (await this.request('release', { ...settleTarget('release', job), error: o.error })).state;
  }

  async extend(job, leaseMs) {
    const sentAt = performance.now();
    const r = await this.request('extend', { ...settleTarget('extend', job), lease_ms: leaseMs });
    if (job instanceof Job) {
      job.leaseUntil = r.lease_until;
      job.leasedAt = sentAt;
    }
    return r.lease_until;
  }

  /** group null or undefined: the queue-wide default (PROTOCOL.md 6.14), as for weight and rate. */
  async limit(queue, group, max) {
    await this.request('limit', { queue, group: group ?? undefined, max: max === undefined ? null : max });
  }

  /** A group's jobs per turn of the ring, 1..1000; null resets it to 1. */
  async weight(queue, group, weight) {
    await this.request('weight', { queue, group: group ?? undefined, weight: weight === undefined ? null : weight });
  }

  /** At most max leases of the group per perMs ms; max null removes the rate. */
  async rate(queue, group, max, perMs) {
    const removal = max === undefined || max === null;
    await this.request('rate', { queue, group: group ?? undefined, max: removal ? null : max, per_ms: removal ? undefined : perMs });
  }

  /** At most maxPending pending + delayed jobs in the group's lane (PROTOCOL.md 6.15): an
   * enqueue into a full lane rejects with FullError carrying cap and group; null removes it. */
  async cap(queue, group, maxPending) {
    await this.request('cap', { queue, group: group ?? undefined, max_pending: maxPending === undefined ? null : maxPending });
  }

  async pause(queue, group) {
    return (await this.request('pause', { queue, group })).changed;
  }

  async resume(queue, group) {
    return (await this.request('resume', { queue, group })).changed;
  }

  async reassign(queue, job, group) {
    return (await this.request('reassign', { queue, job, group })).from;
  }

  /** Without group: the flat (ungrouped) backlog. */
  async drain(queue, group) {
    return (await this.request('drain', { queue, group })).drained;
  }

  async depth(queue, group) {
    return (await this.request('depth', { queue, group })).depth;
  }

  async reap(queue, group) {
    return (await this.request('reap', { queue, group })).reaped;
  }

  async stats(queue) {
    return this.request('stats', { queue });
  }

  async groups(queue, options) {
    const o = checkOptions('groups', options, ['cursor', 'count']);
    const r = await this.request('groups', { queue, cursor: o.cursor, count: o.count });
    return { groups: r.groups, cursor: r.cursor };
  }

  /** Every group of the registry, page after page. */
  async *allGroups(queue, options) {
    const o = checkOptions('allGroups', options, ['count']);
    let cursor = '0';
    do {
      const page = await this.groups(queue, { cursor, count: o.count });
      yield* page.groups;
      cursor = page.cursor;
    } while (cursor !== '0');
  }

  /** One page of the queue registry with each queue's totals (5.28). */
  async queues(options) {
    const o = checkOptions('queues', options, ['cursor', 'count']);
    const r = await this.request('queues', { cursor: o.cursor, count: o.count });
    return { queues: r.queues, cursor: r.cursor };
  }

  /** Every queue of the registry, page after page. */
  async *allQueues(options) {
    const o = checkOptions('allQueues', options, ['count']);
    let cursor = '0';
    do {
      const page = await this.queues({ cursor, count: o.count });
      yield* page.queues;
      cursor = page.cursor;
    } while (cursor !== '0');
  }

  /** Remove a queue that holds no job (5.30); StateError while it has
   * jobs or is in use. */
  async forget(queue) {
    await this.request('forget', { queue });
  }

  /** One page of the daemon's connections, newest first (5.29). */
  async clients(options) {
    const o = checkOptions('clients', options, ['cursor', 'count']);
    const r = await this.request('clients', { cursor: o.cursor, count: o.count });
    return { clients: r.clients, cursor: r.cursor };
  }

  /** One connection by id, with the leases it holds (never a token). */
  async client(id) {
    return (await this.request('clients', { id })).client;
  }

  async job(queue, job) {
    return (await this.request('job', { queue, job })).job;
  }

  /** One page of jobs in service order, each with its row (5.24);
   * `cursor` is null after the last page. */
  async peek(queue, options) {
    const o = checkOptions('peek', options, ['group', 'state', 'cursor', 'count']);
    const r = await this.request('peek', { queue, group: o.group, state: o.state, cursor: o.cursor, count: o.count });
    return { jobs: r.jobs, cursor: r.cursor };
  }

  /** Every job `peek` pages through, page after page. */
  async *peekAll(queue, options) {
    const o = checkOptions('peekAll', options, ['group', 'state', 'count']);
    let cursor;
    do {
      const page = await this.peek(queue, { ...o, cursor });
      yield* page.jobs;
      cursor = page.cursor;
    } while (cursor !== null && cursor !== undefined);
  }

  /** Delete one pending or delayed job; resolves with the state it was in. */
  async remove(queue, job) {
    return (await this.request('remove', { queue, job })).state;
  }

  async deadList(queue, options) {
    const o = checkOptions('deadList', options, ['job', 'limit']);
    return (await this.request('dead', { queue, action: 'list', job: o.job, limit: o.limit })).jobs;
  }

  async deadRetry(queue, options) {
    const o = checkOptions('deadRetry', options, ['job', 'limit']);
    return (await this.request('dead', { queue, action: 'retry', job: o.job, limit: o.limit })).count;
  }

  async deadPurge(queue, options) {
    const o = checkOptions('deadPurge', options, ['job', 'limit']);
    return (await this.request('dead', { queue, action: 'purge', job: o.job, limit: o.limit })).count;
  }

  async check(queue) {
    return (await this.request('check', { queue })).violations;
  }
}

/** The ops a Pipeline can queue: every Client op. */
export const PIPELINE_OPS = Object.freeze([
  'ping', 'enqueue', 'enqueueMany', 'claim', 'stream', 'complete', 'fail', 'release', 'extend',
  'limit', 'weight', 'rate', 'cap', 'pause', 'resume', 'reassign', 'drain', 'depth', 'reap', 'stats', 'groups', 'job',
  'peek', 'remove', 'deadList', 'deadRetry', 'deadPurge', 'check', 'queues', 'forget', 'clients', 'client', 'request',
]);

/** Calls queued on a client and written together by `exec()`, in one
 * write, before any reply can be read; `exec()` resolves with one
 * `Promise.allSettled` entry per call, in order. */
export class Pipeline {
  constructor(client) {
    this._client = client;
    this._calls = [];
  }

  get length() {
    return this._calls.length;
  }

  exec() {
    const c = this._client;
    const calls = this._calls;
    this._calls = [];
    const sock = c._sock;
    const corked = sock && !sock.destroyed;
    if (corked) sock.cork();
    let promises;
    try {
      promises = calls.map(([name, args]) => c[name](...args));
    } finally {
      if (corked) sock.uncork();
    }
    return Promise.allSettled(promises);
  }
}

for (const name of PIPELINE_OPS) {
  Pipeline.prototype[name] = function queued(...args) {
    this._calls.push([name, args]);
    return this;
  };
}
