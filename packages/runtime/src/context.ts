import type { Redis } from 'ioredis';
import { Keys, closeQueues, connectRedis, createLogger, createQueues, loadEnv, type Env, type Logger, type Queues } from '@crawlfleet/core';
import { CrawlCache } from '@crawlfleet/crawl';

/** What every stage needs: configuration, one command connection, the queues, the crawl cache. */
export interface FleetContext {
  env: Env;
  log: Logger;
  redis: Redis;
  keys: Keys;
  queues: Queues;
  crawls: CrawlCache;
  close(): Promise<void>;
}

export async function createFleetContext(options: { env?: Env; log?: Logger; name?: string } = {}): Promise<FleetContext> {
  const env = options.env ?? loadEnv();
  const log = options.log ?? createLogger({ level: env.logLevel, name: options.name ?? 'crawlfleet' });
  const redis = await connectRedis(env.redisUrl, log);
  const keys = new Keys(env.queuePrefix);
  const queues = createQueues(redis, keys);
  let closed = false;
  return {
    env,
    log,
    redis,
    keys,
    queues,
    crawls: new CrawlCache(redis, keys),
    async close() {
      if (closed) return;
      closed = true;
      await closeQueues(queues);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
