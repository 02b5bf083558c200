import { Keys, SpiderModules, closeQueues, connectRedis, createLogger, createQueues, loadEnv, type Env, type Logger, type Queues, type RedisClient } from '@crawlfleet/core';
import { CrawlCache } from '@crawlfleet/crawl';
import { FleetMetrics } from '@crawlfleet/monitoring';

/** What every stage needs: configuration, one command connection, the queues, the crawl cache. */
export interface FleetContext {
  env: Env;
  log: Logger;
  redis: RedisClient;
  keys: Keys;
  queues: Queues;
  crawls: CrawlCache;
  /** code spiders' modules, loaded from each crawl's recorded path and checked against its hash */
  spiderModules: SpiderModules;
  /** this process's Prometheus metrics (served when METRICS_PORT is set) */
  metrics: FleetMetrics;
  close(): Promise<void>;
}

export async function createFleetContext(options: { env?: Env; log?: Logger; name?: string; metrics?: FleetMetrics } = {}): Promise<FleetContext> {
  const env = options.env ?? loadEnv();
  const log = options.log ?? createLogger({ level: env.logLevel, name: options.name ?? 'crawlfleet' });
  const redis = await connectRedis(env.redisUrl, log);
  const keys = new Keys(env.queuePrefix);
  const queues = createQueues(redis, keys);
  let closed = false;
  let metrics = options.metrics;
  return {
    env,
    log,
    redis,
    keys,
    queues,
    crawls: new CrawlCache(redis, keys),
    spiderModules: new SpiderModules(),
    // Made on first use: short commands (status, seed) never pay for the default collectors.
    get metrics() {
      metrics ??= new FleetMetrics({ process: options.name ?? 'crawlfleet' });
      return metrics;
    },
    async close() {
      if (closed) return;
      closed = true;
      await closeQueues(queues);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
