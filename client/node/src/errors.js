// Error classes: one per wire code of proto/emq_errors.def (through the
// generated codes.js, never a hand-kept list), plus the client's own.
import { CODES } from './codes.js';

/** Every error this package raises. `code` is the wire code (`ELEASE`, ...)
 * or one of the client's own (`ECONN`, `ETIMEOUT`, `EUSAGE`). */
export class EmqError extends Error {
  constructor(code, message, extra = undefined) {
    super(message || (CODES[code] ? CODES[code][1] : code));
    this.code = code;
    if (extra) {
      // Fields a reply carried besides error/message (e.g. enqueue's job).
      for (const [k, v] of Object.entries(extra)) {
        if (!(k in this)) this[k] = v;
      }
    }
  }

  get name() {
    return this.constructor.name;
  }
}

/** code -> class, for every wire code. */
export const ERROR_CLASSES = {};

function defineClass(name, code) {
  // A named class per code, so `err instanceof LeaseError` and
  // `err.constructor.name === 'LeaseError'` both hold.
  const cls = {
    [name]: class extends EmqError {
      constructor(message, extra) {
        super(code, message, extra);
      }
    },
  }[name];
  Object.defineProperty(cls, 'code', { value: code });
  return cls;
}

for (const [code, [, , className]] of Object.entries(CODES)) {
  ERROR_CLASSES[code] = defineClass(className, code);
}

export const ProtocolError = ERROR_CLASSES.EPROTO;
export const UnknownOpError = ERROR_CLASSES.EUNKNOWN;
export const ArgumentError = ERROR_CLASSES.EARG;
export const KindError = ERROR_CLASSES.EKIND;
export const BrandError = ERROR_CLASSES.EBRAND;
export const QueueNameError = ERROR_CLASSES.EQUEUE;
export const TooBigError = ERROR_CLASSES.ETOOBIG;
export const EmptyBatchError = ERROR_CLASSES.EEMPTY;
export const NoJobError = ERROR_CLASSES.ENOJOB;
export const StateError = ERROR_CLASSES.ESTATE;
export const LeaseError = ERROR_CLASSES.ELEASE;
export const AuthError = ERROR_CLASSES.EAUTH;
export const UnavailableError = ERROR_CLASSES.EUNAVAILABLE;
export const InternalError = ERROR_CLASSES.EINTERNAL;
export const LimitError = ERROR_CLASSES.ELIMIT;
export const FullError = ERROR_CLASSES.EFULL;
export const PermissionDeniedError = ERROR_CLASSES.EPERM;
export const NotFoundError = ERROR_CLASSES.ENOTFOUND;

/** The connection could not be opened, or broke with replies owed. */
export class ConnectionLost extends EmqError {
  constructor(message = 'connection lost', cause = undefined) {
    super('ECONN', message);
    if (cause !== undefined) this.cause = cause;
  }
}

/** No reply within the client's `timeout`. The connection is closed, as
 * its replies can no longer be matched to their requests. */
export class TimeoutError extends EmqError {
  constructor(message = 'timed out') {
    super('ETIMEOUT', message);
  }
}

/** The caller broke the API's rules (a missing job, a closed client). */
export class UsageError extends EmqError {
  constructor(message) {
    super('EUSAGE', message);
  }
}

/** The error for a wire reply or item `{error, message, ...}`. An unknown
 * code (a newer daemon) is a plain EmqError with that code. */
export function errorFromReply(reply) {
  const { error, message, ok, ref, ...extra } = reply;
  const cls = ERROR_CLASSES[error];
  if (cls) return new cls(message, extra);
  return new EmqError(String(error), message, extra);
}

/** Thrown by a Worker handler: fail the job and retry it after `afterMs`
 * (0: at once) instead of the daemon's backoff. */
export class Retry extends Error {
  constructor(afterMs, message = 'retry requested') {
    super(message);
    this.afterMs = afterMs;
  }

  get name() {
    return 'Retry';
  }
}

/** Thrown by a Worker handler: fail the job into the dead-letter set now,
 * whatever attempts it has left. */
export class Dead extends Error {
  constructor(message = 'dead-lettered by the handler') {
    super(message);
  }

  get name() {
    return 'Dead';
  }
}
