import { Redis, type RedisOptions } from 'ioredis';
import { ServiceUnavailableError } from './errors.js';
import { redactUrl } from './redact.js';
import type { Logger } from './logger.js';

/** Options BullMQ needs on every connection it uses for workers (blocking commands never time out). */
export function bullConnectionOptions(): RedisOptions {
  return { maxRetriesPerRequest: null, enableReadyCheck: true };
}

/**
 * Opens a connection and checks it answers, failing fast with a clear message instead of hanging
 * when Redis is unreachable. After start-up, the connection reconnects for ever (an outage pauses
 * the fleet; it does not kill it).
 */
export async function connectRedis(url: string, log?: Logger, options: { connectTimeoutMs?: number } = {}): Promise<Redis> {
  const timeout = options.connectTimeoutMs ?? 5000;
  let started = false;
  const redis = new Redis(url, {
    ...bullConnectionOptions(),
    lazyConnect: true,
    connectTimeout: timeout,
    retryStrategy: (times) => (started ? Math.min(times * 200, 2000) : times > 3 ? null : 200),
  });
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => {
    lastError = err;
    if (started) log?.warn({ err: { message: err.message } }, 'redis connection error');
  });
  try {
    await Promise.race([redis.connect(), new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer in ${timeout} ms`)), timeout * 2).unref())]);
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    const reason = lastError?.message ?? (err as Error).message;
    throw new ServiceUnavailableError('redis', `cannot reach Redis at ${redactUrl(url)}: ${reason}`, { cause: err });
  }
  started = true;
  return redis;
}
