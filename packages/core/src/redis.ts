import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ConfigError, ServiceUnavailableError } from './errors.js';
import { redactUrl, splitUserInfo } from './redact.js';
import type { Logger } from './logger.js';

/** Every connection the fleet makes: one Redis (alone or behind Sentinel), or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

export interface RedisNode {
  host: string;
  port: number;
}

/**
 * Where REDIS_URL points (CONTRACT.md):
 * - `redis://` / `rediss://`: one Redis, the URL as ioredis reads it;
 * - `redis+cluster://[user:pw@]h1:p1,h2:p2`: a Redis Cluster, from any of its nodes (`rediss+` for TLS);
 * - `redis+sentinel://[user:pw@]h1:p1,h2:p2/MASTER`: the primary Sentinel names MASTER; the
 *   credentials are the primary's and its replicas'.
 */
export type RedisTarget = { mode: 'single'; url: string } | { mode: 'cluster' | 'sentinel'; nodes: RedisNode[]; masterName?: string; username?: string; password?: string; tls: boolean; db?: number };

const MULTI_HOST = /^(rediss?)\+(cluster|sentinel):\/\/(.*)$/is;

/** Pure: reads REDIS_URL; a ConfigError names what is wrong with it. */
export function parseRedisUrl(url: string): RedisTarget {
  const match = MULTI_HOST.exec(url.trim());
  if (!match) {
    if (!/^rediss?:\/\//i.test(url.trim())) throw new ConfigError('REDIS_URL: must start with redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://');
    return { mode: 'single', url: url.trim() };
  }
  const [, scheme, kind, rest] = match as unknown as [string, string, 'cluster' | 'sentinel', string];
  const { userInfo, rest: afterAuth } = splitUserInfo(rest);
  const slash = afterAuth.indexOf('/');
  const hostList = slash < 0 ? afterAuth : afterAuth.slice(0, slash);
  const path = slash < 0 ? '' : afterAuth.slice(slash + 1).replace(/[?#].*$/, '');
  const nodes = hostList.split(',').map((entry) => {
    const m = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(entry.trim());
    const port = Number(m?.[2] ?? (kind === 'sentinel' ? 26379 : 6379));
    if (!m || port < 1 || port > 65535) throw new ConfigError(`REDIS_URL: ${JSON.stringify(entry)} is not host:port (${kind} URLs list their nodes as h1:p1,h2:p2)`);
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
  });
  let masterName: string | undefined;
  let db: number | undefined;
  if (kind === 'sentinel') {
    const [name, dbText] = path.split('/');
    if (!name) throw new ConfigError('REDIS_URL: a sentinel URL names its primary after the hosts: redis+sentinel://h1:26379,h2:26379/MASTER_NAME');
    masterName = decodeURIComponent(name);
    if (dbText) db = Number(dbText);
  } else if (path !== '') {
    throw new ConfigError('REDIS_URL: a cluster URL has no path (Redis Cluster has one database)');
  }
  const colon = userInfo?.indexOf(':') ?? -1;
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const username = userInfo === undefined ? undefined : decode(colon < 0 ? userInfo : userInfo.slice(0, colon));
  const password = userInfo === undefined || colon < 0 ? undefined : decode(userInfo.slice(colon + 1));
  return {
    mode: kind,
    nodes,
    tls: scheme.toLowerCase() === 'rediss',
    ...(masterName !== undefined ? { masterName } : {}),
    ...(db !== undefined && Number.isInteger(db) ? { db } : {}),
    ...(username ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
  };
}

/** Options BullMQ needs on every connection it uses for workers (blocking commands never time out). */
export function bullConnectionOptions(): RedisOptions {
  return { maxRetriesPerRequest: null, enableReadyCheck: true };
}

/**
 * How a cluster client rides through a failover: a command that meets a moved slot, a node that is
 * gone or a cluster that says CLUSTERDOWN waits half a second and tries again, up to 60 times (about
 * the 30 s a replica takes at worst to be promoted), and the slot map is re-read within 2 s.
 * Commands go to masters only: a replica may lag behind the master's writes.
 */
const CLUSTER_OPTIONS: ClusterOptions = {
  maxRedirections: 60,
  retryDelayOnFailover: 500,
  retryDelayOnClusterDown: 500,
  retryDelayOnTryAgain: 500,
  slotsRefreshTimeout: 2000,
  scaleReads: 'master',
};

/** A client for `target`, not yet connected; `retry` is the reconnect policy (attempt -> delay, or null to give up). */
export function createRedisClient(target: RedisTarget, options: { connectTimeoutMs: number; retry: (times: number) => number | null }): RedisClient {
  const common: RedisOptions = { ...bullConnectionOptions(), lazyConnect: true, connectTimeout: options.connectTimeoutMs };
  if (target.mode === 'single') return new Redis(target.url, { ...common, retryStrategy: options.retry });
  const auth = {
    ...(target.username ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
    ...(target.tls ? { tls: {} } : {}),
  };
  if (target.mode === 'sentinel') {
    return new Redis({
      ...common,
      ...auth,
      sentinels: target.nodes,
      name: target.masterName!,
      ...(target.db !== undefined ? { db: target.db } : {}),
      ...(target.tls ? { sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
      sentinelRetryStrategy: (times) => options.retry(times) ?? null,
      retryStrategy: options.retry,
    });
  }
  return new Cluster(target.nodes, {
    ...CLUSTER_OPTIONS,
    lazyConnect: true,
    clusterRetryStrategy: options.retry,
    redisOptions: { ...common, ...auth },
  });
}

/**
 * Opens a connection and checks it answers, failing fast with a clear message instead of hanging
 * when Redis is unreachable. After start-up, the connection reconnects for ever (an outage pauses
 * the fleet; it does not kill it).
 */
export async function connectRedis(url: string, log?: Logger, options: { connectTimeoutMs?: number } = {}): Promise<RedisClient> {
  const timeout = options.connectTimeoutMs ?? 5000;
  const target = parseRedisUrl(url);
  let started = false;
  const redis = createRedisClient(target, { connectTimeoutMs: timeout, retry: (times) => (started ? Math.min(times * 200, 2000) : times > 3 ? null : 200) });
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => {
    lastError = err;
    if (started) log?.warn({ err: { message: err.message } }, 'redis connection error');
  });
  // The timer is not unref'd: a cluster client whose ready check meets a failing cluster may leave
  // connect() unsettled with nothing else to keep the process alive (it then exited 13, silently).
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${timeout} ms`)), timeout * 2 + 5000);
      }),
    ]);
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    const reason = lastError?.message ?? (err as Error).message;
    throw new ServiceUnavailableError('redis', `cannot reach Redis at ${redactUrl(url)}: ${reason}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
  started = true;
  return redis;
}
