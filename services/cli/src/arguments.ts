import { InvalidArgumentError } from 'commander';

// Argument parsers and choices the CLI's entry point needs before any command runs: commander only,
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

export const INIT_FORMATS = ['json', 'yaml', 'ts'] as const;
export const CONTROL_ACTIONS = ['pause', 'resume', 'cancel', 'reset'] as const;
