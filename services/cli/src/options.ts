import { InvalidArgumentError } from 'commander';
import { loadEnv, type Env } from '@crawlfleet/core';

export function positiveInt(name: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError(`${name} must be a positive integer`);
    return Number(value);
  };
}

/** The environment, with `--redis URL` taking precedence over REDIS_URL. */
export function envWith(overrides: { redis?: string | undefined }): Env {
  return loadEnv(overrides.redis ? { ...process.env, REDIS_URL: overrides.redis } : process.env);
}
