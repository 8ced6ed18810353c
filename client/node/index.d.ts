// Type declarations of the echomq package (hand-written; the code is
// src/*.js). PROTOCOL.md section numbers refer to proto/PROTOCOL.md.
import { EventEmitter } from 'node:events';

/** Any JSON value: what a payload may be. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The wire error codes: code -> [number, summary, class name]. */
export declare const CODES: Readonly<Record<WireCode, readonly [number, string, string]>>;

export type WireCode =
  | 'EPROTO' | 'EUNKNOWN' | 'EARG' | 'EKIND' | 'EBRAND' | 'EQUEUE' | 'ETOOBIG' | 'EEMPTY'
  | 'ENOJOB' | 'ESTATE' | 'ELEASE' | 'EAUTH' | 'EUNAVAILABLE' | 'EINTERNAL' | 'ELIMIT' | 'EFULL'
  | 'EPERM' | 'ENOTFOUND';
/** The client's own codes: ECONN (cannot connect, or the connection
 * broke), ETIMEOUT (no reply in time), EUSAGE (the API was misused). */
export type ClientCode = 'ECONN' | 'ETIMEOUT' | 'EUSAGE';

// ---- errors ---------------------------------------------------------------

/** Base of every error the package raises. Branch on `code`. */
export declare class EmqError extends Error {
  constructor(code: string, message?: string, extra?: Record<string, unknown>);
  readonly code: WireCode | ClientCode | string;
  /** The job id, on an enqueue error that passed the argument checks
   * (retry with it: PROTOCOL.md section 3). */
  readonly job?: string;
  /** On an EFULL from a lane at its cap (PROTOCOL.md 6.15): the cap and the group; absent
   * when the backend itself is out of memory. */
  readonly cap?: number;
  readonly group?: string;
}
interface WireErrorClass<C extends WireCode> {
  new (message?: string, extra?: Record<string, unknown>): EmqError & { readonly code: C };
  readonly code: C;
}
export declare const ProtocolError: WireErrorClass<'EPROTO'>;
export declare const UnknownOpError: WireErrorClass<'EUNKNOWN'>;
export declare const ArgumentError: WireErrorClass<'EARG'>;
export declare const KindError: WireErrorClass<'EKIND'>;
export declare const BrandError: WireErrorClass<'EBRAND'>;
export declare const QueueNameError: WireErrorClass<'EQUEUE'>;
export declare const TooBigError: WireErrorClass<'ETOOBIG'>;
export declare const EmptyBatchError: WireErrorClass<'EEMPTY'>;
export declare const NoJobError: WireErrorClass<'ENOJOB'>;
export declare const StateError: WireErrorClass<'ESTATE'>;
export declare const LeaseError: WireErrorClass<'ELEASE'>;
export declare const AuthError: WireErrorClass<'EAUTH'>;
export declare const UnavailableError: WireErrorClass<'EUNAVAILABLE'>;
export declare const InternalError: WireErrorClass<'EINTERNAL'>;
export declare const LimitError: WireErrorClass<'ELIMIT'>;
export declare const FullError: WireErrorClass<'EFULL'>;
/** EPERM: the op, or its queue, is outside the connection's token's role. */
export declare const PermissionDeniedError: WireErrorClass<'EPERM'>;
export declare const NotFoundError: WireErrorClass<'ENOTFOUND'>;
/** code -> class, for every wire code. */
export declare const ERROR_CLASSES: { readonly [C in WireCode]: WireErrorClass<C> };

/** Cannot connect, or the connection broke with replies owed (code ECONN). */
export declare class ConnectionLost extends EmqError {
  constructor(message?: string, cause?: unknown);
  readonly code: 'ECONN';
}
/** No reply within `timeout`; the connection is closed (code ETIMEOUT). */
export declare class TimeoutError extends EmqError {
  constructor(message?: string);
  readonly code: 'ETIMEOUT';
}
/** The API was misused: an unknown option, a job without lease (EUSAGE). */
export declare class UsageError extends EmqError {
  constructor(message: string);
  readonly code: 'EUSAGE';
}
/** The error for a wire error reply or enqueueMany item. */
export declare function errorFromReply(reply: { error: string; message?: string; [k: string]: unknown }): EmqError;

/** Thrown by a Worker handler: fail the job, retry after `afterMs`. */
export declare class Retry extends Error {
  constructor(afterMs: number, message?: string);
  readonly afterMs: number;
}
/** Thrown by a Worker handler: dead-letter the job now. */
export declare class Dead extends Error {
  constructor(message?: string);
}

// ---- data -----------------------------------------------------------------

/** A leased job (PROTOCOL.md 6.7), from claim() or a stream push. */
export declare class Job<P = Json> {
  readonly queue: string;
  /** The job id. */
  readonly job: string;
  /** The same as `job`. */
  readonly id: string;
  /** The group, or null for an ungrouped (flat) job. */
  readonly group: string | null;
  /** The fencing token; send it back exactly. */
  readonly lease: string;
  /** Leases so far, this one included. */
  readonly attempt: number;
  /** The lease deadline, ms on the backend clock (advisory). */
  leaseUntil: number;
  readonly payload: P;
  /** performance.now() when the lease began or was last extended. */
  leasedAt: number;
  /** A copy carrying another lease token. */
  withLease(lease: string): Job<P>;
}

/** What complete/fail/release/extend accept: a Job, or its wire fields. */
export interface JobRef {
  queue: string;
  lease: string;
  job?: string;
  id?: string;
}

export type Verdict = 'enqueued' | 'duplicate';
export type JobState = 'pending' | 'active' | 'delayed' | 'dead' | 'completed';

export interface EnqueueOptions {
  /** The job id (JOB...); minted by the daemon when absent. */
  job?: string;
  /** The group id (e.g. TENacme); absent: the job is ungrouped (flat). */
  group?: string;
  delayMs?: number;
  /** 0 = unlimited; default the daemon's --max-attempts. */
  maxAttempts?: number;
}
export interface EnqueueResult {
  job: string;
  verdict: Verdict;
}
export interface EnqueueItem<P = Json> extends EnqueueOptions {
  payload: P;
}
export type EnqueueManyResult =
  | { ok: true; job: string; verdict: Verdict }
  | { ok: false; job?: string; error: EmqError };

export interface ClaimOptions {
  /** 1-1000, default 1. */
  count?: number;
  leaseMs?: number;
  /** Park up to this long when nothing is there. The reply holds back
   * every later reply on this connection (PROTOCOL.md 2.2). */
  waitMs?: number;
  /** true: ungrouped work only; false (default): grouped work only. */
  flat?: boolean;
}
export interface StreamOptions {
  leaseMs?: number;
  flat?: boolean;
}
export interface FailOptions {
  /** Recorded on the row (at most 4096 bytes). */
  error?: string;
  /** Retry after this long (0: at once); default the daemon's backoff. */
  retryMs?: number;
  /** Dead-letter now. */
  dead?: boolean;
}
export interface Stats {
  pending: number;
  active: number;
  delayed: number;
  dead: number;
  ring: number;
  groups: number;
  paused: number;
  flat: number;
  /** The queue-wide defaults (PROTOCOL.md 6.14), null when not set; absent from a daemon without them. */
  defaults?: {
    limit: number | null;
    weight: number | null;
    rate: { max: number; per_ms: number } | null;
    cap?: number | null;
  };
}
export interface GroupInfo {
  group: string;
  depth: number;
  active: number;
  limit: number | null;
  paused: boolean;
  /** Jobs per turn of the ring: 1 unless set (absent from a daemon without weights). */
  weight?: number;
  /** Its rate, null without one (absent from a daemon without rates). */
  rate?: { max: number; per_ms: number } | null;
  /** Off the ring until its rate allows a lease. */
  throttled?: boolean;
  /** Where limit, weight and rate come from: the group's own, the queue default, or neither (null). */
  limit_from?: 'group' | 'queue' | null;
  weight_from?: 'group' | 'queue' | null;
  rate_from?: 'group' | 'queue' | null;
  /** Delayed jobs of the group: with depth, what its cap counts. */
  delayed?: number;
  /** The most pending + delayed jobs its lane admits, null without one (PROTOCOL.md 6.15). */
  cap?: number | null;
  cap_from?: 'group' | 'queue' | null;
}
export interface GroupsPage {
  groups: GroupInfo[];
  /** Pass back for the next page; "0": done. */
  cursor: string;
}
/** One queue of a queues page (PROTOCOL.md 5.28): stats' meanings. */
export interface QueueInfo {
  queue: string;
  pending: number;
  active: number;
  delayed: number;
  dead: number;
  groups: number;
  paused: number;
}
export interface QueuesPage {
  queues: QueueInfo[];
  /** Pass back for the next page; "0": done. */
  cursor: string;
}
/** One connection of the daemon (PROTOCOL.md 5.29). */
export interface ClientInfo {
  id: number;
  addr: string;
  name: string | null;
  age_ms: number;
  idle_ms: number;
  self: boolean;
  authed: boolean;
  streams: { queue: string; group: null; flat: boolean; credit: number; outstanding: number }[];
  parked: number;
  leases: number;
  /** Only from client(id): the leases it holds, never their tokens. */
  held?: { queue: string; job: string; group: string | null; deadline_ms: number }[];
}
export interface ClientsPage {
  clients: ClientInfo[];
  /** Pass back for the next page; "0": done. */
  cursor: string;
}
/** A job's row (PROTOCOL.md 5.21). */
export interface JobRow {
  job: string;
  state?: JobState;
  group?: string | null;
  payload?: Json;
  attempts?: number;
  max_attempts?: number;
  created_ms?: number;
  ready_ms?: number;
  lease_until?: number;
  error?: string;
  finished_ms?: number;
}
export interface PeekOptions {
  /** A group's lane; absent: the flat set (pending) or the whole state. */
  group?: string;
  /** Default 'pending'. */
  state?: 'pending' | 'active' | 'delayed' | 'dead';
  /** The cursor of the previous page. */
  cursor?: string;
  /** 1-1000, default 20. */
  count?: number;
}
export interface PeekPage {
  jobs: JobRow[];
  /** Pass back for the next page; null: no job follows. */
  cursor: string | null;
}
export interface DeadJob {
  job: string;
  group: string | null;
  attempts: number;
  error: string;
  died_ms: number;
}
export interface DeadOptions {
  /** That one job only; absent: the oldest `limit`. */
  job?: string;
  limit?: number;
}

export interface ConnectOptions {
  /** Default 127.0.0.1 (or from $EMQ_ADDR when no host/port/path/addr). */
  host?: string;
  /** Default 7711. */
  port?: number;
  /** A unix socket path instead of TCP. */
  path?: string;
  /** "HOST:PORT", "[V6]:PORT", "PORT", "tls://HOST:PORT" or "unix:PATH";
   * default $EMQ_ADDR. */
  addr?: string;
  /** TLS (emqd's tls-cert): true for the default CAs, or tls.connect's
   * options ({ca, cert, key, servername, ...}). The certificate must name
   * host. A tls:// address means true. */
  tls?: boolean | import('node:tls').ConnectionOptions;
  /** Default $EMQ_TOKEN. */
  token?: string;
  /** Sent in hello (informational). */
  name?: string;
  /** ms to connect, and for each reply once it is the oldest owed (plus
   * a claim's waitMs); then the connection is closed. Default 30000; 0 =
   * none. */
  timeout?: number;
}

// ---- Client ---------------------------------------------------------------

export interface ClientEvents {
  job: [job: Job];
  push: [push: Record<string, Json>];
  close: [error: EmqError | null];
}

/** One connection to emqd. Calls not awaited one by one are pipelined. */
export declare class Client extends EventEmitter {
  /** Connect and say hello (protocol 1). Rejects AuthError on a bad token,
   * ConnectionLost when nothing answers. */
  static connect(options?: ConnectOptions): Promise<Client>;
  private constructor(options?: ConnectOptions);
  readonly options: Required<Pick<ConnectOptions, 'timeout'>> & ConnectOptions;
  /** The hello reply. */
  readonly server: { server: string; version: string; protocol: number } | null;
  readonly address: string;
  readonly closed: boolean;
  /** Resolves with the error (or null) once the connection closed. */
  readonly whenClosed: Promise<EmqError | null>;

  on<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  once<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;
  off<E extends keyof ClientEvents>(event: E, listener: (...args: ClientEvents[E]) => void): this;

  /** Any op, raw: resolves with the reply's fields (ok, ref removed). */
  request(op: string, args?: Record<string, Json | undefined>, options?: { waitMs?: number }): Promise<Record<string, any>>;
  /** The next pushed job not taken by a 'job' listener, or null. */
  nextJob(options?: { timeout?: number; signal?: AbortSignal }): Promise<Job | null>;
  /** Pushed jobs until the connection closes or the signal aborts. */
  jobs(options?: { signal?: AbortSignal }): AsyncGenerator<Job, void, void>;
  pipeline(): Pipeline;
  /** quit: owed replies are read first; leases held are released by the
   * daemon with the attempt counted (PROTOCOL.md 6.4). */
  quit(): Promise<void>;
  /** quit that never throws. */
  close(): Promise<void>;
  /** Close the socket now. */
  destroy(): void;

  ping(): Promise<void>;
  enqueue(queue: string, payload: Json, options?: EnqueueOptions): Promise<EnqueueResult>;
  enqueueMany(queue: string, items: EnqueueItem[], options?: { group?: string }): Promise<EnqueueManyResult[]>;
  claim(queue: string, options?: ClaimOptions): Promise<Job[]>;
  /** Set (or replace) the stream's credit; 0 stops it. */
  stream(queue: string, credit: number, options?: StreamOptions): Promise<void>;
  complete(job: JobRef): Promise<'completed'>;
  fail(job: JobRef, options?: FailOptions): Promise<'delayed' | 'pending' | 'dead'>;
  /** Give the job back; its attempt is returned (PROTOCOL.md 5.10). */
  release(job: JobRef, options?: { error?: string }): Promise<'pending'>;
  /** Resolves with the new lease_until; a Job's leaseUntil/leasedAt move. */
  extend(job: JobRef, leaseMs: number): Promise<number>;
  /** A ceiling; null or 0 removes it. group null: the queue-wide default, as for weight and rate (PROTOCOL.md 6.14). */
  limit(queue: string, group: string | null, max: number | null): Promise<void>;
  /** A group's jobs per turn of the ring, 1..1000; null removes it: the default, else 1 (PROTOCOL.md 5.26). */
  weight(queue: string, group: string | null, weight: number | null): Promise<void>;
  /** At most max leases per perMs ms, on the backend's clock; null removes it (PROTOCOL.md 5.27). */
  rate(queue: string, group: string | null, max: number | null, perMs?: number): Promise<void>;
  /** At most maxPending pending + delayed jobs in the lane; null removes it (PROTOCOL.md 5.32). */
  cap(queue: string, group: string | null, maxPending: number | null): Promise<void>;
  pause(queue: string, group: string): Promise<boolean>;
  resume(queue: string, group: string): Promise<boolean>;
  /** Resolves with the source group (null: the job was ungrouped). */
  reassign(queue: string, job: string, group: string): Promise<string | null>;
  /** Without group: the flat (ungrouped) backlog. */
  drain(queue: string, group?: string): Promise<number>;
  /** Pending jobs of the group, or of the flat set without group. */
  depth(queue: string, group?: string): Promise<number>;
  reap(queue: string, group?: string): Promise<number>;
  stats(queue: string): Promise<Stats>;
  groups(queue: string, options?: { cursor?: string; count?: number }): Promise<GroupsPage>;
  allGroups(queue: string, options?: { count?: number }): AsyncGenerator<GroupInfo, void, void>;
  /** One page of the queue registry with each queue's totals (5.28). */
  queues(options?: { cursor?: string; count?: number }): Promise<QueuesPage>;
  allQueues(options?: { count?: number }): AsyncGenerator<QueueInfo, void, void>;
  /** Remove a queue that holds no job (5.30); StateError while it has jobs or is in use. */
  forget(queue: string): Promise<void>;
  /** One page of the daemon's connections, newest first (5.29). */
  clients(options?: { cursor?: string; count?: number }): Promise<ClientsPage>;
  /** One connection with the leases it holds; NotFoundError if none has that id. */
  client(id: number): Promise<ClientInfo>;
  job(queue: string, job: string): Promise<JobRow>;
  /** One page of jobs in service order, each with its row (5.24). */
  peek(queue: string, options?: PeekOptions): Promise<PeekPage>;
  /** Every job peek pages through. */
  peekAll(queue: string, options?: Omit<PeekOptions, 'cursor'>): AsyncGenerator<JobRow, void, void>;
  /** Delete one pending or delayed job: the state it was in. */
  remove(queue: string, job: string): Promise<'pending' | 'delayed'>;
  deadList(queue: string, options?: DeadOptions): Promise<DeadJob[]>;
  deadRetry(queue: string, options?: DeadOptions): Promise<number>;
  deadPurge(queue: string, options?: DeadOptions): Promise<number>;
  check(queue: string): Promise<string[]>;
}

/** Calls queued, then written together by exec(), before any reply is
 * read; one Promise.allSettled entry per call, in order. */
export declare class Pipeline {
  readonly length: number;
  exec(): Promise<PromiseSettledResult<any>[]>;
  ping(): this;
  request(op: string, args?: Record<string, Json | undefined>, options?: { waitMs?: number }): this;
  enqueue(queue: string, payload: Json, options?: EnqueueOptions): this;
  enqueueMany(queue: string, items: EnqueueItem[], options?: { group?: string }): this;
  claim(queue: string, options?: ClaimOptions): this;
  stream(queue: string, credit: number, options?: StreamOptions): this;
  complete(job: JobRef): this;
  fail(job: JobRef, options?: FailOptions): this;
  release(job: JobRef, options?: { error?: string }): this;
  extend(job: JobRef, leaseMs: number): this;
  limit(queue: string, group: string, max: number | null): this;
  weight(queue: string, group: string, weight: number | null): this;
  rate(queue: string, group: string, max: number | null, perMs?: number): this;
  cap(queue: string, group: string | null, maxPending: number | null): this;
  pause(queue: string, group: string): this;
  resume(queue: string, group: string): this;
  reassign(queue: string, job: string, group: string): this;
  drain(queue: string, group?: string): this;
  peek(queue: string, options?: PeekOptions): this;
  remove(queue: string, job: string): this;
  depth(queue: string, group?: string): this;
  reap(queue: string, group?: string): this;
  stats(queue: string): this;
  groups(queue: string, options?: { cursor?: string; count?: number }): this;
  job(queue: string, job: string): this;
  deadList(queue: string, options?: DeadOptions): this;
  deadRetry(queue: string, options?: DeadOptions): this;
  deadPurge(queue: string, options?: DeadOptions): this;
  check(queue: string): this;
}
export declare const PIPELINE_OPS: readonly string[];
export declare function parseAddr(addr: string): { host: string; port: number } | { path: string };

// ---- Worker ---------------------------------------------------------------

export interface HandlerContext {
  /** Aborted when the job was released at the stop (grace over) or its
   * lease went elsewhere: stop working, the result is not used. */
  signal: AbortSignal;
  worker: Worker;
  /** The connection the job came on (settles go through the live one). */
  client: Client;
}
export type Handler<P = Json> = (job: Job<P>, ctx: HandlerContext) => unknown | Promise<unknown>;

export interface WorkerOptions extends ConnectOptions {
  /** Handlers at once, and the stream's credit (default 1). */
  concurrency?: number;
  /** false (default): grouped work; true: ungrouped (flat) work; 'both':
   * a stream of each kind, each with credit `concurrency`. */
  flat?: boolean | 'both';
  /** The lease of each job (default 30000); extended by this much when
   * half of it is gone while the handler runs. */
  leaseMs?: number;
  /** Aborting it stops the worker, as stop(). */
  signal?: AbortSignal;
  /** How long running handlers may finish at a stop (default 10000). */
  graceMs?: number;
  /** Stop on SIGTERM / SIGINT (default true; a second signal ends the
   * grace). */
  handleSignals?: boolean;
}

export interface WorkerEvents {
  connected: [client: Client];
  disconnected: [error: EmqError];
  started: [job: Job];
  completed: [job: Job];
  failed: [job: Job, error: unknown, state: 'delayed' | 'pending' | 'dead'];
  released: [job: Job];
  lost: [job: Job, error: EmqError];
  error: [error: unknown];
  stopped: [];
}

/** Streams `queue` and runs `handler` per job: resolve → complete, throw
 * → fail with the message (Retry / Dead to choose). */
export declare class Worker<P = Json> extends EventEmitter {
  constructor(queue: string, handler: Handler<P>, options?: WorkerOptions);
  readonly queue: string;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly graceMs: number;
  /** The live connection, or null while reconnecting. */
  readonly client: Client | null;
  /** Handlers running now. */
  readonly running: number;
  /** Resolves once connected with the streams open; rejects with an error
   * reconnecting cannot fix (AuthError, QueueNameError, ...). */
  start(): Promise<void>;
  /** start(), then resolve once stopped. */
  run(): Promise<void>;
  /** Credit 0, running handlers get graceMs, the rest is released with
   * its attempt returned, then quit. */
  stop(options?: { graceMs?: number }): Promise<void>;

  on<E extends keyof WorkerEvents>(event: E, listener: (...args: WorkerEvents[E]) => void): this;
  once<E extends keyof WorkerEvents>(event: E, listener: (...args: WorkerEvents[E]) => void): this;
  off<E extends keyof WorkerEvents>(event: E, listener: (...args: WorkerEvents[E]) => void): this;
}
/** The text `fail` records for a handler's error (at most 4096 bytes). */
export declare function errorText(err: unknown): string;
