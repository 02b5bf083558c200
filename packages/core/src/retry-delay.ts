/**
 * How long to wait before the next attempt: exponential backoff with full jitter, at least what the
 * server asked for in Retry-After. Pure: `random` is injected for tests.
 */
export interface RetryDelayOptions {
  baseMs?: number;
  maxMs?: number;
  random?: () => number;
}

export function retryDelay(attemptsMade: number, retryAfterMs: number | undefined, options: RetryDelayOptions = {}): number {
  const base = options.baseMs ?? 500;
  const max = options.maxMs ?? 60_000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(max, base * 2 ** Math.max(0, attemptsMade - 1));
  const backoff = Math.round(ceiling / 2 + (random() * ceiling) / 2);
  return Math.max(backoff, retryAfterMs ?? 0);
}

/** Parses a Retry-After header (seconds or an HTTP date) into milliseconds from `now`. */
export function parseRetryAfter(header: string | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}
