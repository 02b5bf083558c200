// Durations as people write them in settings and flags (CRAWL_RETENTION, `gc --finished-before`).
// Pure and dependency-free: the CLI's entry point reads them through core/light.

const UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
/** Examples of durations, for messages. */
export const DURATION_EXAMPLES = '7d, 36h, 90m, 1h30m, 45s, 0s';

/**
 * Pure: a duration in milliseconds from `7d`, `36h`, `90m`, `1h30m`, `45s`, `500ms` or `2w` (units
 * ms, s, m, h, d, w, summed; `0` alone is zero); undefined when the text is not one.
 */
export function parseDuration(text: string): number | undefined {
  const value = text.trim().toLowerCase();
  if (value === '0') return 0;
  if (!/^(\d+(\.\d+)?(ms|s|m|h|d|w))+$/.test(value)) return undefined;
  let total = 0;
  for (const [, amount, unit] of value.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g)) total += Number(amount) * UNITS_MS[unit as keyof typeof UNITS_MS];
  return Math.round(total);
}
