import { InvalidArgumentError } from 'commander';
import { loadEnv, type Env } from '@crawlfleet/core';

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

/** The environment, with `--redis URL` and `--mongo URL` taking precedence over REDIS_URL and MONGO_URL. */
export function envWith(overrides: { redis?: string | undefined; mongo?: string | undefined }): Env {
  return loadEnv({
    ...process.env,
    ...(overrides.redis ? { REDIS_URL: overrides.redis } : {}),
    ...(overrides.mongo ? { MONGO_URL: overrides.mongo } : {}),
  });
}
