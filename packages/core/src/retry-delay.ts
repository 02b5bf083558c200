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

/** An HTTP-date (RFC 9110: IMF-fixdate, or the obsolete RFC 850 and asctime forms) starts with a day name. */
const HTTP_DATE = /^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,? /i;

/**
 * Pure: a Retry-After header (delay-seconds or an HTTP-date) as milliseconds from `now`, never more
 * than `maxMs`: a server that asks for 31 years gets `maxMs`. Anything else (garbage, a negative or
 * fractional number, a date in no HTTP form) is ignored: undefined.
 */
export function parseRetryAfter(header: string | undefined, now = Date.now(), maxMs = Number.POSITIVE_INFINITY): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  let ms: number;
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000;
  else if (HTTP_DATE.test(trimmed) && !Number.isNaN(Date.parse(trimmed))) ms = Math.max(0, Date.parse(trimmed) - now);
  else return undefined;
  return Math.min(ms, maxMs);
}
