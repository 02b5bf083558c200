import { ServiceUnavailableError, connectRedis, errorMessage, redactUrl, type Logger, type RedisClient } from '@crawlfleet/core';

/** The message every start-up attempt logs while Redis does not answer. */
export const REDIS_RETRY_MESSAGE = 'redis not reachable yet, retrying';

/** Pure: the wait after failed attempt `attempt` (from 1): 0.5 s doubling to 5 s, never past the deadline. */
export function startupRetryDelay(attempt: number, remainingMs: number): number {
  return Math.max(0, Math.min(500 * 2 ** Math.min(attempt - 1, 10), 5000, remainingMs));
}

export interface StartupConnectOptions {
  /** REDIS_STARTUP_TIMEOUT_MS: how long to keep trying; 0 tries once */
  timeoutMs: number;
  /** the setting that gave timeoutMs, named in the final error (REDIS_STARTUP_TIMEOUT_MS by default; `wait` gives its --timeout) */
  setting?: string;
  connect?: typeof connectRedis;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * The first connection of a long-running process (a worker, the dashboard), which may start before
 * Redis does (a compose file, a pod beside its Redis): tries again with backoff, a warning per
 * failed attempt, until `timeoutMs` has passed, then fails with ServiceUnavailableError (exit 1)
 * naming the setting. Once connected, the client reconnects for ever (connectRedis).
 */
export async function connectRedisAtStartup(url: string, log: Logger, options: StartupConnectOptions): Promise<RedisClient> {
  const { timeoutMs, connect = connectRedis, now = Date.now, sleep = (ms) => new Promise((r) => setTimeout(r, ms)) } = options;
  if (timeoutMs <= 0) return connect(url, log);
  const deadline = now() + timeoutMs;
  const where = redactUrl(url);
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect(url, log, { connectTimeoutMs: Math.max(1000, Math.min(5000, deadline - now())) });
    } catch (err) {
      if (!(err instanceof ServiceUnavailableError)) throw err;
      const reason = errorMessage(err).replace(/^cannot reach Redis at \S+: /, '');
      const remaining = deadline - now();
      if (remaining <= 0) {
        throw new ServiceUnavailableError('redis', `cannot reach Redis at ${where} within ${options.setting ?? 'REDIS_STARTUP_TIMEOUT_MS'} (${timeoutMs} ms, ${attempt} attempts): ${reason}`, {
          cause: err,
        });
      }
      const retryInMs = startupRetryDelay(attempt, remaining);
      log.warn({ attempt, retryInMs, timeoutMs, redis: where, err: { message: reason } }, REDIS_RETRY_MESSAGE);
      await sleep(retryInMs);
    }
  }
}
