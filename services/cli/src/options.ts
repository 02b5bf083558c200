import { loadEnv, type Env } from '@crawlfleet/core';

export { nonNegativeInt, positiveInt } from './arguments.js';

/** The environment, with `--redis URL` and `--mongo URL` taking precedence over REDIS_URL and MONGO_URL. */
export function envWith(overrides: { redis?: string | undefined; mongo?: string | undefined }): Env {
  return loadEnv({
    ...process.env,
    ...(overrides.redis ? { REDIS_URL: overrides.redis } : {}),
    ...(overrides.mongo ? { MONGO_URL: overrides.mongo } : {}),
  });
}
