// Test support: a real redis-server and a real emqd on free loopback ports
// ($REDIS_SERVER, $EMQD), and waiting for conditions without sleeping.
import { spawn } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '../src/index.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const PKG_DIR = path.resolve(HERE, '..');
export const SOURCE_ROOT = path.resolve(PKG_DIR, '..', '..');

function findEmqd() {
  if (process.env.EMQD) return process.env.EMQD;
  for (const dir of ['build', 'build-asan']) {
    const p = path.join(SOURCE_ROOT, dir, 'daemon', 'emqd');
    if (fs.existsSync(p)) return p;
  }
  throw new Error('set EMQD to the emqd binary (e.g. build/daemon/emqd)');
}

export const EMQD = findEmqd();
export const REDIS_SERVER = process.env.REDIS_SERVER || 'redis-server';

const children = new Set();
process.on('exit', () => {
  for (const c of children) {
    try {
      process.kill(c.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Poll `fn` until it returns a truthy value (or resolves to one); throw
 * after `timeout` ms with `what`. The deadline is generous on purpose:
 * it bounds a wait for an event, it is not a timing assertion. */
export async function waitFor(fn, { timeout = 20000, interval = 20, what = 'a condition' } = {}) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

/** Resolve with the first `event` the emitter emits for which `pred` holds. */
export function once(emitter, event, pred = () => true, { timeout = 20000 } = {}) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, on);
      reject(new Error(`timed out waiting for event ${event}`));
    }, timeout);
    function on(...args) {
      if (!pred(...args)) return;
      clearTimeout(timer);
      emitter.off(event, on);
      resolve(args);
    }
    emitter.on(event, on);
  });
}

function track(proc, name) {
  children.add(proc);
  let tail = '';
  proc.stderr?.setEncoding('utf8');
  proc.stderr?.on('data', (d) => {
    tail = (tail + d).slice(-16384);
  });
  proc.stdout?.resume();
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => {
    children.delete(proc);
    resolve({ code, sig });
  }));
  return { exited, tail: () => `${name} stderr:\n${tail}` };
}

// A raw command on a fresh TCP connection; resolves with what came back
// until `until` matches it.
function rawAsk(port, text, until) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = '';
    s.setEncoding('utf8');
    s.on('connect', () => s.write(text));
    s.on('data', (d) => {
      got += d;
      if (until.test(got)) {
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error('closed')));
  });
}

// Spawn `bin args` and wait until `ready(proc)` holds (it is polled; it
// throws or returns false while not ready). A child that exits or does not
// become ready is killed; with `retry`, tried again (a port taken
// meanwhile) up to 3 times, else the error carries its stderr.
async function spawnReady(name, bin, argsFor, ready, { retry = true, timeout = 15000 } = {}) {
  for (let tries = 0; ; tries++) {
    const { args, port } = await argsFor();
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const t = track(proc, name);
    let dead = false;
    t.exited.then(() => {
      dead = true;
    });
    try {
      await waitFor(async () => {
        if (dead) throw new Error(`${name} exited`);
        return (await ready(port, proc)) && !dead;
      }, { timeout, what: `${name} to answer`, interval: 25 });
      return { proc, port, t };
    } catch (err) {
      proc.kill('SIGKILL');
      await t.exited;
      if (retry && tries < 3) continue;
      throw new Error(`${err.message}\n${t.tail()}`);
    }
  }
}

export async function startRedis() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emq-node-redis-'));
  const { proc, port, t } = await spawnReady('redis-server', REDIS_SERVER, async () => {
    const port = await freePort();
    return { port, args: ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
      '--save', '', '--appendonly', 'no', '--daemonize', 'no'] };
  }, async (port, proc) => {
    // Ready when the server that answers is this one (its process id).
    const info = await rawAsk(port, 'INFO server\r\n', /process_id:\d+/);
    return info.includes(`process_id:${proc.pid}\r`);
  });
  return {
    port,
    proc,
    async flush() {
      await rawAsk(port, 'FLUSHALL\r\n', /\+OK\r\n/);
    },
    async stop() {
      proc.kill('SIGTERM');
      await t.exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An emqd on `port` (default: a free one) over the Redis on redisPort.
 * `ready`: what a plain ping gets once it is up (a tls-only daemon
 * answers its refusal). */
export async function startEmqd(redisPort, { port, args = [], ready = /"ok":true/ } = {}) {
  const { proc, port: p, t } = await spawnReady('emqd', EMQD, async () => {
    const p = port ?? (await freePort());
    return { port: p, args: ['--redis', `redis://127.0.0.1:${redisPort}`, '--listen', `127.0.0.1:${p}`, ...args] };
  }, async (p) => {
    // emqd listens only once its backend answers (PROTOCOL.md 6.11).
    await rawAsk(p, '{"op":"ping"}\n', ready);
    return true;
  }, { retry: port === undefined });
  return {
    port: p,
    proc,
    pid: proc.pid,
    addr: `127.0.0.1:${p}`,
    exited: t.exited,
    stderr: t.tail,
    /** Kill this emqd (by its pid) and wait until it is gone. */
    async kill(signal = 'SIGKILL') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      await t.exited;
    },
  };
}

/** A redis-server and an emqd over it; `connect()` opens Clients to it. */
export async function startStack({ emqdArgs = [], ready } = {}) {
  const redis = await startRedis();
  const stack = {
    redis,
    emqd: await startEmqd(redis.port, { args: emqdArgs, ready }),
    emqdArgs,
    clients: [],
    get port() {
      return this.emqd.port;
    },
    async connect(opts = {}) {
      const c = await Client.connect({ host: '127.0.0.1', port: this.emqd.port, timeout: 20000, ...opts });
      this.clients.push(c);
      return c;
    },
    /** Kill emqd and start it again on the same port (same Redis). */
    async restartEmqd(signal = 'SIGKILL') {
      await this.emqd.kill(signal);
      this.emqd = await startEmqd(redis.port, { port: this.emqd.port, args: emqdArgs });
    },
    async stop() {
      for (const c of this.clients) c.destroy();
      await this.emqd.kill('SIGTERM');
      await redis.stop();
    },
  };
  return stack;
}

let queueSeq = 0;
/** A queue name unique within the run. */
export function qname(prefix = 'q') {
  return `${prefix}-${process.pid}-${++queueSeq}`;
}
