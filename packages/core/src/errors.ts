/**
 * Error classes named by what the caller should do, each with a stable `code`.
 * Tests and callers branch on `code`, never on the message.
 */
export interface ErrorContext {
  url?: string;
  stage?: string;
  attempt?: number;
  proxy?: string;
  [key: string]: unknown;
}

export class CrawlfleetError extends Error {
  readonly code: string;
  readonly context: ErrorContext;
  constructor(code: string, message: string, context: ErrorContext = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.context = context;
  }
}

/** Bad spider, configuration or usage: refuse at start with exit code 2. */
export class ConfigError extends CrawlfleetError {
  readonly file: string | undefined;
  readonly issues: string[];
  constructor(message: string, options: { file?: string; issues?: string[]; cause?: unknown } = {}) {
    super('ERR_CONFIG', message, { file: options.file }, { cause: options.cause });
    this.file = options.file;
    this.issues = options.issues ?? [];
  }
}

/** Worth another attempt later (network error, 5xx, 429). */
export class RetryableError extends CrawlfleetError {
  /** Milliseconds the server asked us to wait (Retry-After), if any. */
  readonly retryAfterMs: number | undefined;
  constructor(code: string, message: string, context: ErrorContext = {}, options: { cause?: unknown; retryAfterMs?: number } = {}) {
    super(code, message, context, { cause: options.cause });
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** Retrying cannot help (404, invalid job, SSRF refusal): dead-letter at once. */
export class NonRetryableError extends CrawlfleetError {}

/** A service the fleet needs (Redis, MongoDB) cannot be reached: exit 1 with a clear message. */
export class ServiceUnavailableError extends CrawlfleetError {
  constructor(service: string, message: string, options?: { cause?: unknown }) {
    super('ERR_SERVICE_UNAVAILABLE', message, { service }, options);
  }
}

/**
 * The crawl was reset (and maybe registered again) while this work ran: the work belongs to the run
 * before, and stops without changing anything of the crawl's current run.
 */
export class StaleRunError extends CrawlfleetError {
  constructor(crawlId: string, run: string) {
    super('ERR_STALE_RUN', `crawl ${crawlId} was reset since this work began (its run of ${run || 'unknown'} is over)`, { crawlId, run });
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * An error and the causes it wraps, outermost first, at most `depth` of them: got wraps an agent's
 * or a cookie jar's error in a RequestError, whose cause is the one that tells what happened.
 */
export function* causeChain(err: unknown, depth = 5): Generator<{ code?: string; message?: string }> {
  for (let e = err as { cause?: unknown } | undefined, i = 0; e && i < depth; e = e.cause as typeof e, i++) yield e as { code?: string; message?: string };
}
