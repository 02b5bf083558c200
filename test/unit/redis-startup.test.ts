// Issue #19 (13): a worker's first Redis connection is tried again, with backoff, for REDIS_STARTUP_TIMEOUT_MS.
import { ConfigError, ServiceUnavailableError, loadEnv, redactUrl, type Logger, type RedisClient } from '@crawlfleet/core';
import { REDIS_RETRY_MESSAGE, connectRedisAtStartup, startupRetryDelay } from '@crawlfleet/runtime';

describe('waiting for Redis at start-up', () => {
  test('backoff: 0.5 s doubling to 5 s, never past the deadline', () => {
    expect([1, 2, 3, 4, 5, 6, 60].map((attempt) => startupRetryDelay(attempt, 60_000))).toEqual([500, 1000, 2000, 4000, 5000, 5000, 5000]);
    expect(startupRetryDelay(4, 1200)).toBe(1200);
    expect(startupRetryDelay(1, 0)).toBe(0);
  });

  test('REDIS_STARTUP_TIMEOUT_MS: 60 s by default, a number of milliseconds', () => {
    expect(loadEnv({}).redisStartupTimeoutMs).toBe(60_000);
    expect(loadEnv({ REDIS_STARTUP_TIMEOUT_MS: '0' }).redisStartupTimeoutMs).toBe(0);
    expect(() => loadEnv({ REDIS_STARTUP_TIMEOUT_MS: '1m' })).toThrow(ConfigError);
  });

  /** A clock that advances only when slept on or connected through, and a Redis that answers from attempt `upAt` (never: Infinity). */
  function fakeWorld(upAt: number, attemptMs = 700) {
    let clock = 0;
    const attempts: Array<{ at: number; connectTimeoutMs: number | undefined }> = [];
    const lines: Array<Record<string, unknown>> = [];
    const log = { warn: (fields: Record<string, unknown>, msg: string) => lines.push({ ...fields, msg }) } as unknown as Logger;
    const connect = async (url: string, _log?: unknown, options?: { connectTimeoutMs?: number }) => {
      attempts.push({ at: clock, connectTimeoutMs: options?.connectTimeoutMs });
      clock += attemptMs;
      if (attempts.length >= upAt) return { url } as unknown as RedisClient;
      throw new ServiceUnavailableError('redis', `cannot reach Redis at ${redactUrl(url)}: connect ECONNREFUSED 127.0.0.1:9`);
    };
    const world = {
      now: () => clock,
      sleep: async (ms: number) => {
        clock += ms;
      },
      connect: connect as never,
    };
    return { world, attempts, lines, log };
  }

  test('a Redis that answers on the fourth attempt: three warnings with the attempt, the wait and the redacted URL, then the client', async () => {
    const { world, attempts, lines, log } = fakeWorld(4);
    const client = await connectRedisAtStartup('redis://u:secret@127.0.0.1:9', log, { timeoutMs: 60_000, ...world });
    expect(client).toEqual({ url: 'redis://u:secret@127.0.0.1:9' });
    expect(attempts.map((a) => a.at)).toEqual([0, 1200, 2900, 5600]);
    const warnings = lines.filter((l) => l.msg === REDIS_RETRY_MESSAGE);
    expect(warnings.map((w) => [w.attempt, w.retryInMs, w.redis, w.timeoutMs])).toEqual([
      [1, 500, 'redis://***:***@127.0.0.1:9', 60_000],
      [2, 1000, 'redis://***:***@127.0.0.1:9', 60_000],
      [3, 2000, 'redis://***:***@127.0.0.1:9', 60_000],
    ]);
    expect(warnings[0]!.err).toEqual({ message: 'connect ECONNREFUSED 127.0.0.1:9' });
    expect(JSON.stringify(lines)).not.toContain('secret');
  });

  test('no Redis within the timeout: ServiceUnavailableError (exit 1) naming the setting, the attempts and the last reason', async () => {
    const { world, attempts, log } = fakeWorld(Number.POSITIVE_INFINITY);
    const err = await connectRedisAtStartup('redis://127.0.0.1:9', log, { timeoutMs: 10_000, ...world }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as Error).message).toBe(`cannot reach Redis at redis://127.0.0.1:9 within REDIS_STARTUP_TIMEOUT_MS (10000 ms, ${attempts.length} attempts): connect ECONNREFUSED 127.0.0.1:9`);
    // the last attempt starts at the deadline at the latest, and each connect timeout is 1 to 5 s
    expect(attempts.at(-1)!.at).toBeLessThanOrEqual(10_000);
    expect(attempts.every((a) => a.connectTimeoutMs! >= 1000 && a.connectTimeoutMs! <= 5000)).toBe(true);
  });

  test('0 tries once and fails as short commands do; an error that is not about reaching Redis is not retried', async () => {
    const { world, attempts, log } = fakeWorld(Number.POSITIVE_INFINITY);
    await expect(connectRedisAtStartup('redis://127.0.0.1:9', log, { timeoutMs: 0, ...world })).rejects.toThrow(/^cannot reach Redis at redis:\/\/127\.0\.0\.1:9: connect ECONNREFUSED/);
    expect(attempts).toHaveLength(1);
    let calls = 0;
    const broken = async () => {
      calls++;
      throw new ConfigError('REDIS_URL: must start with redis://');
    };
    await expect(connectRedisAtStartup('x', log, { timeoutMs: 60_000, ...world, connect: broken as never })).rejects.toBeInstanceOf(ConfigError);
    expect(calls).toBe(1);
  });
});
