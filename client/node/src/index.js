// echomq: the Node.js client of emqd (see README.md).
export { Client, Job, Pipeline, PIPELINE_OPS, parseAddr } from './client.js';
export { Worker, errorText } from './worker.js';
export { CODES } from './codes.js';
export {
  EmqError, ERROR_CLASSES, errorFromReply,
  ProtocolError, UnknownOpError, ArgumentError, KindError, BrandError, QueueNameError,
  TooBigError, EmptyBatchError, NoJobError, StateError, LeaseError, AuthError,
  UnavailableError, InternalError, LimitError, FullError, PermissionDeniedError, NotFoundError,
  ConnectionLost, TimeoutError, UsageError, Retry, Dead,
} from './errors.js';
