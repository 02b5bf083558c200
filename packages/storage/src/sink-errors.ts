/**
 * What a failed write or a failed sink open means for its job:
 * - `unavailable`: the store cannot be reached or cannot take writes right now (refused or closed
 *   connections, server selection timeouts, a primary stepping down, a server shutting down). The
 *   write is right; only time fixes it, so the writer parks the job without spending an attempt,
 *   for as long as the outage lasts.
 * - `data`: the write itself is wrong (a cast or validation failure, a duplicate key, a document the
 *   server refuses). Waiting does not fix it: the job takes its ordinary retries, then the
 *   dead-letter set.
 * - `unknown`: anything else; treated like `data` (retries, then a dead letter), so a fault nobody
 *   foresaw surfaces instead of parking jobs forever.
 */
export type SinkErrorKind = 'unavailable' | 'data' | 'unknown';

/**
 * Server error codes that mean "this server cannot serve now": the driver's retryable codes (the
 * retryable-reads/writes specifications: HostUnreachable, HostNotFound, NetworkTimeout,
 * ShutdownInProgress, PrimarySteppedDown, ExceededTimeLimit, SocketException, NotWritablePrimary,
 * InterruptedAtShutdown, InterruptedDueToReplStateChange, NotPrimaryNoSecondaryOk,
 * NotPrimaryOrSecondary, ReadConcernMajorityNotAvailableYet).
 */
const UNAVAILABLE_CODES = new Set([6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/**
 * Driver and mongoose error names of the same meaning, for errors without a server code: the
 * network (refused, reset, closed, timed out), server selection, a closed or cleared pool or client.
 */
const UNAVAILABLE_NAMES = new Set([
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoServerSelectionError',
  'MongooseServerSelectionError',
  'MongoTopologyClosedError',
  'MongoNotConnectedError',
  'MongoPoolClearedError',
  'MongoPoolClosedError',
  'MongoServerClosedError',
  'MongoWaitQueueTimeoutError',
]);

/** Labels the driver puts on errors of a connection or a server state, never on a bad document. */
const UNAVAILABLE_LABELS = ['ResetPool', 'HandshakeError', 'RetryableWriteError', 'TransientTransactionError'];

/** Node's own errors of a connection that could not be made or was lost. */
const NETWORK_SYSCALL_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** mongoose's own refusals of a document before it reaches the server. */
const DATA_NAMES = new Set(['ValidationError', 'ValidatorError', 'CastError', 'StrictModeError', 'ObjectParameterError', 'DivergentArrayError']);

/** Duplicate key (11000, and 11001 of old servers): the key is taken, waiting changes nothing. */
const DUPLICATE_KEY_CODES = new Set([11000, 11001]);

/**
 * Server error codes that mean "this document is wrong": the write would fail again, so the item is
 * refused and dead-lettered. Any other per-document error (a shutdown, a failover, an interrupted
 * operation) fails the whole flush, which is held and retried: upserts by key make that safe.
 */
const DOCUMENT_FAULT_CODES = new Set([
  2, // BadValue
  9, // FailedToParse
  14, // TypeMismatch
  52, // DollarPrefixedFieldName
  55, // InvalidDBRef
  56, // EmptyFieldName
  57, // DottedFieldName
  66, // ImmutableField
  121, // DocumentValidationFailure
  10334, // BSONObjectTooLarge
  17280, // KeyTooLong
  17419, // document too large
]);

/**
 * The store acknowledged fewer documents than it was asked to write, with no per-document error to
 * say why. Nothing may be counted written on such an answer: the flush is held and retried (the
 * retry reads what is stored and writes the rest, by key, so it doubles nothing). Its kind is
 * `unknown`, not `unavailable`: one that keeps coming back spends the job's attempts and ends in the
 * dead-letter set with this message, instead of parking the job for ever.
 */
export class ShortAcknowledgementError extends Error {
  override readonly name = 'ShortAcknowledgementError';
  /** the code of its dead letter, when it keeps coming back */
  readonly code = 'ERR_SINK_SHORT_ACK';
  constructor(
    readonly operation: string,
    readonly expected: number,
    readonly acknowledged: number,
  ) {
    super(`MongoDB acknowledged ${acknowledged} of ${expected} documents of a ${operation}`);
  }
}

/** Pure: the error for an answer that acknowledged fewer documents than were written, if it did. */
export function shortAcknowledgement(operation: string, expected: number, acknowledged: number | undefined): ShortAcknowledgementError | undefined {
  return acknowledged === undefined || acknowledged >= expected ? undefined : new ShortAcknowledgementError(operation, expected, acknowledged);
}

/** Pure: is this per-document write error the document's own fault? */
export function isDocumentFault(code: number | undefined): boolean {
  return code !== undefined && DOCUMENT_FAULT_CODES.has(code);
}

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  errorLabels?: unknown;
  writeErrors?: unknown;
  writeConcernError?: unknown;
  errorResponse?: unknown;
  cause?: unknown;
  reason?: unknown;
  err?: { code?: unknown };
}

const numericCode = (e: ErrorLike): number | undefined => {
  const code = e.code ?? e.err?.code;
  return typeof code === 'number' ? code : undefined;
};

const labelsOf = (e: ErrorLike): string[] => (Array.isArray(e.errorLabels) ? (e.errorLabels as unknown[]).filter((l): l is string => typeof l === 'string') : []);

/**
 * Pure: what an error from a sink means for its job (see SinkErrorKind). Reads only the error's own
 * fields (name, server code, driver labels, per-document write errors, and its cause chain), never
 * the store's state.
 */
export function classifySinkError(err: unknown, depth = 0): SinkErrorKind {
  if (err === null || typeof err !== 'object' || depth > 5) return 'unknown';
  const e = err as ErrorLike;
  const name = typeof e.name === 'string' ? e.name : '';
  const message = typeof e.message === 'string' ? e.message : '';
  if (DATA_NAMES.has(name) || name === 'ItemsRejectedError' || (e as { code?: unknown }).code === 'ERR_ITEM_REJECTED') return 'data';
  // A bulk write that reports per-document errors: the documents decide, unless every one of them
  // failed for a reason of the server's state (a step-down in the middle of the batch).
  if (Array.isArray(e.writeErrors) && e.writeErrors.length > 0) {
    const codes = (e.writeErrors as ErrorLike[]).map((we) => numericCode(we ?? {}));
    return codes.every((c) => c !== undefined && UNAVAILABLE_CODES.has(c)) ? 'unavailable' : 'data';
  }
  const code = numericCode(e);
  if (code !== undefined && (DUPLICATE_KEY_CODES.has(code) || DOCUMENT_FAULT_CODES.has(code))) return 'data';
  if (code !== undefined && UNAVAILABLE_CODES.has(code)) return 'unavailable';
  if (UNAVAILABLE_NAMES.has(name)) return 'unavailable';
  if (labelsOf(e).some((l) => UNAVAILABLE_LABELS.includes(l))) return 'unavailable';
  if (typeof e.code === 'string' && NETWORK_SYSCALL_CODES.has(e.code)) return 'unavailable';
  // The driver's legacy "not primary" and "node is recovering" messages (no code on old servers).
  if (/not master|not primary|node is recovering/i.test(message)) return 'unavailable';
  // mongoose holds operations while its connection is down, and gives up after bufferTimeoutMS.
  if (name === 'MongooseError' && /buffering timed out/.test(message)) return 'unavailable';
  // A wrapper (mongoose's bulk write errors keep the driver's error in errorResponse; others in cause).
  for (const inner of [e.errorResponse, e.cause, e.writeConcernError]) {
    const kind = classifySinkError(inner, depth + 1);
    if (kind !== 'unknown') return kind;
  }
  return 'unknown';
}

/** Pure: the store is unreachable or cannot take writes now; the write itself is fine. */
export function isSinkUnavailable(err: unknown): boolean {
  return classifySinkError(err) === 'unavailable';
}
