/**
 * The status counters, in the order the status object lists them. These extend the contract:
 * - `deferred`: how many times a job was parked to wait for its host or proxy (the limiter's churn);
 * - `redirected`: URLs whose answer was a redirect to another origin, whose target became a URL of
 *   its own. So every seen URL ends as fetched, failed, skipped or redirected.
 * - `reconciled`: lost jobs the reconciler rebuilt (their URL fetched again);
 * - `replayed`: dead letters sent back by `crawlfleet replay`;
 * - `archived`: fetched URLs whose exchange is in the crawl's WARC files (`--warc`);
 * - `notModified`: a recrawl's URLs answered 304 Not Modified (fetched, not parsed again);
 * - `unchanged`: a recrawl's URLs answered with the body of their last visit (fetched, not parsed again);
 * - `rendered`: pages loaded in a browser by the render stage (counted fetched too);
 * - `renderSkipped`: pages `render: "auto"` judged from their plain HTML and parsed without a browser.
 */
export const COUNTER_NAMES = [
  'seen',
  'fetched',
  'parsed',
  'items',
  'written',
  'invalid',
  'failed',
  'blocked',
  'retries',
  'skipped',
  'deferred',
  'redirected',
  'reconciled',
  'replayed',
  'archived',
  'notModified',
  'unchanged',
  'rendered',
  'renderSkipped',
] as const;
export type CounterName = (typeof COUNTER_NAMES)[number];
export type Counters = Record<CounterName, number>;
export type CounterIncrements = Partial<Record<CounterName | `dead.${string}`, number>>;

export function emptyCounters(): Counters {
  return Object.fromEntries(COUNTER_NAMES.map((n) => [n, 0])) as Counters;
}

export function countersFromHash(hash: Record<string, string>): Counters {
  const out = emptyCounters();
  for (const n of COUNTER_NAMES) out[n] = Number(hash[n] ?? 0);
  return out;
}
