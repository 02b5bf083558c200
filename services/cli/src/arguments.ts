import { InvalidArgumentError } from 'commander';
import { DURATION_EXAMPLES, parseDuration } from '@crawlfleet/core/light';

// Argument parsers and choices the CLI's entry point needs before any command runs: commander and core/light only,
// so that loading them loads nothing else.

export function positiveInt(name: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError(`${name} must be a positive integer`);
    return Number(value);
  };
}

export function nonNegativeInt(name: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number (0 or more)`);
    return Number(value);
  };
}

/** Pure: an ISO 8601 date or moment (`2026-12-01`, `2026-12-01T10:00:00Z`) in ms, or undefined. */
export function isoMoment(value: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value.trim())) return undefined;
  const ms = Date.parse(value.trim());
  return Number.isFinite(ms) ? ms : undefined;
}

/** `--finished-before`: a duration before now (`7d`, `36h`) or a moment (ISO 8601); kept as given. */
export function finishedBefore(value: string): string {
  if (parseDuration(value) === undefined && isoMoment(value) === undefined) {
    throw new InvalidArgumentError(`--finished-before must be a duration (${DURATION_EXAMPLES}) or an ISO 8601 date or moment (2026-12-01, 2026-12-01T10:00:00Z)`);
  }
  return value;
}

export const INIT_FORMATS = ['json', 'yaml', 'ts'] as const;
export const CONTROL_ACTIONS = ['pause', 'resume', 'cancel', 'reset'] as const;
