/**
 * The status counters, in the order the status object lists them. `deferred` extends the contract:
 * how many times a job was parked to wait for its host or proxy (a measure of the limiter's churn).
 */
export const COUNTER_NAMES = ['seen', 'fetched', 'parsed', 'items', 'written', 'invalid', 'failed', 'blocked', 'retries', 'skipped', 'deferred'] as const;
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
