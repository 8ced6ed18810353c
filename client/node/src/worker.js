// Worker: streams a queue with credit = concurrency, runs an async handler
// per job, extends leases, settles, reconnects, stops gracefully.
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Client, checkOptions } from './client.js';
import {
  ConnectionLost, TimeoutError, UnavailableError, LeaseError, NoJobError, AuthError, PermissionDeniedError,
  QueueNameError, ArgumentError, UsageError, Retry, Dead,
} from './errors.js';

const ERROR_MAX = 4096; // bytes of an error text the daemon records (5.9)
const BACKOFF_MIN = 100;
const BACKOFF_MAX = 5000;

/** The text of a handler's failure, as `fail` records it. */
export function errorText(err) {
  let text = err instanceof Error ? err.message || err.name : String(err);
  if (Buffer.byteLength(text) > ERROR_MAX) {
    text = Buffer.from(text).subarray(0, ERROR_MAX).toString('utf8').replace(/\uFFFD+$/, '');
  }
  return text;
}

// Errors that reconnecting cannot fix: the worker stops with them.
function fatal(err) {
  return err instanceof AuthError || err instanceof PermissionDeniedError ||
    err instanceof QueueNameError || err instanceof ArgumentError ||
    err instanceof UsageError;
}

// The connection went away or the backend did not answer: try again.
function transient(err) {
  return err instanceof ConnectionLost || err instanceof TimeoutError || err instanceof UnavailableError;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `handler(job, ctx)` for every job of `queue`.
 *
 *   const worker = new Worker('mail', async (job) => send(job.payload), {concurrency: 4});
 *   await worker.run();   // until SIGTERM / SIGINT, an abort, or stop()
 *
 * Resolving completes the job; throwing fails it with the error's message
 * (`throw new Retry(ms)` retries after ms, `throw new Dead(msg)`
 * dead-letters it). Events: 'connected', 'disconnected' (error),
 * 'started' (job), 'completed' (job), 'failed' (job, error, state),
 * 'released' (job), 'lost' (job, error: the lease went elsewhere),
 * 'error' (error; emitted only when listened to), 'stopped'. */
export class Worker extends EventEmitter {
  constructor(queue, handler, options = {}) {
    super();
    const o = checkOptions('Worker', options, [
      'host', 'port', 'path', 'addr', 'token', 'name', 'timeout', 'tls',
      'concurrency', 'flat', 'leaseMs', 'signal', 'graceMs', 'handleSignals',
    ]);
    if (typeof queue !== 'string') throw new UsageError('Worker: queue must be a string');
    if (typeof handler !== 'function') throw new UsageError('Worker: handler must be a function');
    const concurrency = o.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 10000) {
      throw new UsageError('Worker: concurrency must be an integer 1..10000');
    }
    if (![true, false, 'both', undefined].includes(o.flat)) {
      throw new UsageError('Worker: flat must be false (grouped), true (ungrouped) or "both"');
    }
    this.queue = queue;
    this.handler = handler;
    this.concurrency = concurrency;
    this.leaseMs = o.leaseMs ?? 30000;
    this.graceMs = o.graceMs ?? 10000;
    // One stream per kind of work: grouped lanes (flat false) and the flat
    // set (flat true) are served only by streams of their own kind.
    this.kinds = o.flat === 'both' ? [false, true] : [o.flat === true];
    this._connect = {
      host: o.host, port: o.port, path: o.path, addr: o.addr, token: o.token, tls: o.tls,
      name: o.name ?? `node-worker:${queue}`, timeout: o.timeout,
    };
    for (const k of Object.keys(this._connect)) if (this._connect[k] === undefined) delete this._connect[k];
    this._signal = o.signal;
    this._handleSignals = o.handleSignals ?? true;
    this.client = null; // the live connection, or null between connections
    this._running = new Map(); // lease token -> a handler running
    this._stopping = false;
    this._stopped = false;
    this._started = null;
    this._done = null;
    this._wakeConnected = [];
    // Resolved by stop(): the connection loop races it at every wait.
    this._stopRequested = new Promise((resolve) => {
      this._requestStop = resolve;
    });
  }

  /** Jobs whose handlers are running now. */
  get running() {
    return this._running.size;
  }

  /** Start and resolve once connected with the streams open (reject with
   * an error reconnecting cannot fix). The worker then runs until stopped. */
  start() {
    if (this._started) return this._started;
    let opened;
    let failed;
    this._started = new Promise((resolve, reject) => {
      opened = resolve;
      failed = reject;
    });
    this._done = this._loop(opened, failed);
    this._done.catch(() => {});
    this._installStops();
    return this._started;
  }

  /** Start, and resolve once the worker has stopped (SIGTERM, SIGINT, the
   * AbortSignal, or stop()); reject with a fatal error (e.g. AuthError). */
  async run() {
    this.start().catch(() => {});
    await this._done;
  }

  /** Stop taking work, give running handlers `graceMs` to finish, release
   * the rest (attempt returned), and close. Resolves once stopped. A
 * second call with a smaller graceMs (or a second signal) cuts it short. */
  async stop({ graceMs = this.graceMs } = {}) {
    if (!this._started) {
      this._stopped = true;
      return;
    }
    if (this._stopping && graceMs < this._graceMs) this._endGrace?.();
    if (!this._stopping) {
      this._stopping = true;
      this._graceMs = graceMs;
      this._requestStop(null);
      for (const w of this._wakeConnected.splice(0)) w(); // see _live
    }
    await this._done.catch(() => {});
  }

  _installStops() {
    const onSignal = () => {
      if (this._stopping) this._endGrace?.(); // a second signal: no more grace
      this.stop();
    };
    const onAbort = () => this.stop();
    if (this._handleSignals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    if (this._signal) {
      if (this._signal.aborted) queueMicrotask(onAbort);
      else this._signal.addEventListener('abort', onAbort, { once: true });
    }
    this._removeStops = () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      this._signal?.removeEventListener('abort', onAbort);
    };
  }

  _emitError(err) {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  // The connection loop: connect, open the streams, wait for the
  // connection to close or the stop; back off and connect again.
  async _loop(opened, failed) {
    let backoff = BACKOFF_MIN;
    try {
      while (!this._stopping) {
        let client;
        try {
          client = await Client.connect(this._connect);
          if (this._stopping) {
            this.client = client; // no streams: a plain connection for the stop
            break;
          }
          client.on('job', (job) => this._onJob(job, client));
          this.client = client;
          this._credit = null;
          await this._openStreams(client);
        } catch (err) {
          if (client) {
            this.client = null;
            client.destroy();
          }
          if (fatal(err)) throw err;
          this._emitError(err);
          // Jittered exponential backoff: between half and all of it.
          const ms = backoff / 2 + Math.random() * (backoff / 2);
          backoff = Math.min(backoff * 2, BACKOFF_MAX);
          await this._nap(ms);
          continue;
        }
        backoff = BACKOFF_MIN;
        for (const w of this._wakeConnected.splice(0)) w();
        this.emit('connected', client);
        opened();
        const why = await Promise.race([
          client.whenClosed.then((err) => err ?? new ConnectionLost('the server closed the connection')),
          this._stopRequested,
        ]);
        if (why) {
          this.client = null;
          this.emit('disconnected', why);
          this._emitError(why);
        }
      }
      await this._shutDown();
    } catch (err) {
      failed(err);
      await this._shutDown().catch(() => {});
      throw err;
    } finally {
      opened(); // a stop before the first connection also ends start()
      this._stopped = true;
      this._removeStops?.();
      this.emit('stopped');
    }
  }

  async _nap(ms) {
    let t;
    await Promise.race([new Promise((resolve) => {
      t = setTimeout(resolve, ms);
    }), this._stopRequested]);
    clearTimeout(t);
  }

  // Credit per stream: the concurrency, less the handlers still running
  // with jobs of that kind from an earlier connection (their settles go
  // through this connection but free no credit of its streams).
  _creditFor(flat, client) {
    let carried = 0;
    for (const e of this._running.values()) if (e.flat === flat && e.client !== client) carried++;
    return this._stopping ? 0 : Math.max(0, this.concurrency - carried);
  }

  async _openStreams(client) {
    this._credit = new Map();
    for (const flat of this.kinds) {
      const credit = this._creditFor(flat, client);
      await client.stream(this.queue, credit, { leaseMs: this.leaseMs, flat });
      this._credit.set(flat, credit);
    }
  }

  // Raise a stream's credit back as carried-over handlers finish.
  _refreshCredit(flat) {
    const client = this.client;
    if (!client || this._stopping || !this._credit?.has(flat)) return;
    const want = this._creditFor(flat, client);
    if (want <= this._credit.get(flat)) return;
    this._credit.set(flat, want);
    client.stream(this.queue, want, { leaseMs: this.leaseMs, flat }).catch((err) => this._emitError(err));
  }

  _onJob(job, client) {
    if (this._stopping) {
      // Pushed while stopping (before credit 0 took effect): not started,
      // so given back with its attempt returned.
      this._giveBack(job, client, 'worker stopping');
      return;
    }
    const entry = {
      job, client, flat: job.group === null, abort: new AbortController(), timer: null, settled: false,
    };
    this._running.set(job.lease, entry);
    this._scheduleExtend(entry);
    this.emit('started', job);
    const ctx = { signal: entry.abort.signal, worker: this, client };
    Promise.resolve()
      .then(() => this.handler(job, ctx))
      .then(
        () => this._settle(entry, 'complete'),
        (err) => this._settle(entry, 'fail', err),
      )
      .catch((err) => this._emitError(err))
      .finally(() => {
        clearTimeout(entry.timer);
        this._running.delete(job.lease);
        if (this._running.size === 0) this._idle?.();
        this._refreshCredit(entry.flat);
      });
  }

  // Extend the lease once half of it is gone, while the handler runs.
  _scheduleExtend(entry) {
    const due = entry.job.leasedAt + this.leaseMs / 2 - performance.now();
    entry.timer = setTimeout(() => this._extend(entry), Math.max(0, due));
  }

  async _extend(entry) {
    if (entry.settled) return;
    try {
      const client = await this._live();
      if (!client || entry.settled) return;
      await client.extend(entry.job, this.leaseMs);
    } catch (err) {
      if (err instanceof LeaseError || err instanceof NoJobError) {
        this._lost(entry, err);
        return;
      }
      this._emitError(err);
      // Transient: try again soon (before the lease runs out).
      if (!entry.settled) entry.timer = setTimeout(() => this._extend(entry), Math.min(1000, this.leaseMs / 4));
      return;
    }
    if (!entry.settled) this._scheduleExtend(entry);
  }

  _lost(entry, err) {
    if (entry.settled) return;
    entry.settled = true;
    clearTimeout(entry.timer);
    entry.abort.abort(err);
    this.emit('lost', entry.job, err);
  }

  // The live connection; while there is none, wait for one (or the stop).
  async _live() {
    for (;;) {
      const c = this.client;
      if (c && !c.closed) return c;
      if (this._noMoreConnections) return null;
      if (this._stopping) {
        // Stopping while disconnected: no streams any more, but one plain
        // connection to settle and release the jobs in hand, tried again
        // until the stop is over.
        await this._connectForStop();
        if (!this.client) await sleep(250);
        continue;
      }
      await new Promise((resolve) => {
        this._wakeConnected.push(resolve);
      });
    }
  }

  _connectForStop() {
    this._lastTry ??= Client.connect({ ...this._connect, timeout: 5000 })
      .then((c) => {
        if (this._noMoreConnections) c.destroy();
        else this.client = c;
      }, () => {})
      .finally(() => {
        this._lastTry = null;
      });
    return this._lastTry;
  }

  // Send one settle, resent after a broken connection or EUNAVAILABLE:
  // resending is safe (6.1): a settle that took effect is answered
  // "completed" again, or ELEASE, which changes nothing.
  async _send(entry, call) {
    let delay = BACKOFF_MIN;
    for (;;) {
      const client = await this._live();
      if (!client) throw new ConnectionLost('worker stopped before the job could be settled');
      try {
        return await call(client);
      } catch (err) {
        if (!transient(err)) throw err;
        await sleep(delay);
        delay = Math.min(delay * 2, BACKOFF_MAX);
      }
    }
  }

  async _settle(entry, how, err) {
    if (entry.settled) return; // released at the stop, or its lease lost
    entry.settled = true;
    clearTimeout(entry.timer);
    const job = entry.job;
    try {
      if (how === 'complete') {
        await this._send(entry, (c) => c.complete(job));
        this.emit('completed', job);
      } else {
        const o = { error: errorText(err) };
        if (err instanceof Retry) o.retryMs = err.afterMs;
        if (err instanceof Dead) o.dead = true;
        const state = await this._send(entry, (c) => c.fail(job, o));
        this.emit('failed', job, err, state);
      }
    } catch (e) {
      if (e instanceof LeaseError || e instanceof NoJobError) this.emit('lost', job, e);
      else throw e;
    }
  }

  _giveBack(job, client, why) {
    const c = client && !client.closed ? client : this.client;
    if (!c) return Promise.resolve();
    return c.release(job, { error: why }).then(
      () => this.emit('released', job),
      (err) => this._emitError(err),
    );
  }

  // The stop: credit 0 first (so no release frees a credit the daemon
  // refills), then the grace for running handlers, then release the rest.
  async _shutDown() {
    const live = () => (this.client && !this.client.closed ? this.client : null);
    const client = live();
    if (client) {
      await Promise.all(this.kinds.map((flat) =>
        client.stream(this.queue, 0, { leaseMs: this.leaseMs, flat }).catch(() => {})));
    }
    if (this._running.size > 0) {
      const idle = new Promise((resolve) => {
        this._idle = resolve;
      });
      let timer;
      await Promise.race([idle, new Promise((resolve) => {
        this._endGrace = resolve;
        timer = setTimeout(resolve, this._graceMs ?? this.graceMs);
      })]);
      clearTimeout(timer);
    }
    const unfinished = [...this._running.values()].filter((e) => !e.settled);
    if (unfinished.length && !live()) await this._connectForStop();
    await Promise.all(unfinished.map((entry) => {
      entry.settled = true;
      clearTimeout(entry.timer);
      entry.abort.abort(new Error('worker stopped: the job was released'));
      return this._giveBack(entry.job, live(), 'worker stopped');
    }));
    // Settles already sent (a handler that just finished) are answered
    // before quit's reply: the daemon replies in order.
    this._noMoreConnections = true;
    const last = this.client;
    this.client = null;
    for (const w of this._wakeConnected.splice(0)) w();
    if (last) await last.close();
  }
}
