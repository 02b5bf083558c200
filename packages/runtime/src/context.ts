import { ConfigError, Keys, SpiderModules, closeQueues, connectRedis, createLogger, createQueues, loadEnv, type Env, type Logger, type Queues, type RedisClient } from '@crawlfleet/core';
import { CrawlCache, unfinishedLegacyCrawls } from '@crawlfleet/crawl';
import { FleetMetrics } from '@crawlfleet/monitoring';
import { connectRedisAtStartup } from './redis-startup.js';

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

export interface FleetContextOptions {
  env?: Env;
  log?: Logger;
  name?: string;
  metrics?: FleetMetrics;
  /**
   * a long-running process (a worker, the dashboard): wait for Redis at start-up, for
   * REDIS_STARTUP_TIMEOUT_MS; short commands fail at once
   */
  waitForRedis?: boolean;
  /** with waitForRedis: how long to wait, and the setting that says so (REDIS_STARTUP_TIMEOUT_MS by default) */
  startup?: { timeoutMs: number; setting: string };
}

export async function createFleetContext(options: FleetContextOptions = {}): Promise<FleetContext> {
  const env = options.env ?? loadEnv();
  const log = options.log ?? createLogger({ level: env.logLevel, name: options.name ?? 'crawlfleet' });
  const startup = options.startup ?? { timeoutMs: env.redisStartupTimeoutMs, setting: 'REDIS_STARTUP_TIMEOUT_MS' };
  const redis = options.waitForRedis ? await connectRedisAtStartup(env.redisUrl, log, startup) : await connectRedis(env.redisUrl, log);
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
    spiderModules: new SpiderModules(5000, env.spiderDeployWaitMs),
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

/**
 * A worker refuses to start while crawls registered by a fleet older than partitions are still
 * running or paused: it would take their jobs and drop them (docs/operations.md, "Upgrading").
 */
export async function refuseBesideLegacyCrawls(ctx: FleetContext): Promise<void> {
  const legacy = await unfinishedLegacyCrawls(ctx.redis, ctx.keys);
  if (legacy.length === 0) return;
  await ctx.close();
  throw new ConfigError(
    `crawls registered by a crawlfleet older than the partitioned frontier are still unfinished: ${legacy.join(', ')}. Finish them with the fleet that started them (crawlfleet wait), or reset them, before starting this version's workers (docs/operations.md, "Upgrading")`,
  );
}
