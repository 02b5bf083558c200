import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DURATION_EXAMPLES, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import { encodeUrlCredentials } from './redact.js';
import { parseRedisUrl } from './redis.js';
import { parseMongoCredentials } from './sink-spec.js';

/**
 * Every environment variable the fleet reads, with its default, in one table (Crawlee's ENV_MAP).
 * The README's configuration table is written from this.
 */
export const ENV_TABLE = {
  REDIS_URL: {
    default: 'redis://127.0.0.1:6379',
    doc: 'queues, frontier, crawl state. `redis+cluster://[user:pw@]h1:p1,h2:p2` selects Redis Cluster (`rediss+cluster://` with TLS); `redis+sentinel://[user:pw@]h1:p1,h2:p2/MASTER` selects Sentinel',
  },
  REDIS_STARTUP_TIMEOUT_MS: {
    default: '60000',
    doc: 'how long a long-running process (`worker`, `dashboard`) started before Redis answers keeps trying to reach it (backoff 0.5 s doubling to 5 s, a log line per attempt) before it exits 1; 0 fails at once, as short commands (`seed`, `status`, `crawl`) always do',
  },
  MONGO_URL: { default: 'mongodb://127.0.0.1:27017/crawlfleet', doc: 'item store used by writers' },
  MONGO_CREDENTIALS: { default: '', doc: "a writer's credentials for other MongoDB servers than MONGO_URL's: URLs with user and password, whitespace-separated, or @path/to/file" },
  QUEUE_PREFIX: { default: 'crawlfleet', doc: 'BullMQ prefix and prefix of every crawlfleet key' },
  LOG_LEVEL: { default: 'info', doc: 'pino level; logs are JSON lines on stderr' },
  USER_AGENTS: { default: '', doc: 'user agents to rotate, newline-separated, or @path/to/file' },
  LOCK_DURATION_MS: { default: '30000', doc: "BullMQ job lock; a killed worker's jobs run again after this" },
  MAX_STALLED_COUNT: {
    default: '',
    doc: 'times a job may lose its worker (killed, crashed) and run again before it is dead-lettered as ERR_STALLED; default 10 for fetch and parse, 50 for write (idempotent, never a poison page)',
  },
  RECONCILE_INTERVAL_MS: { default: '15000', doc: 'how often one worker of the fleet checks for pending jobs that no BullMQ job carries any more' },
  RECONCILE_GRACE_MS: { default: '30000', doc: 'how long a pending job must stay without a live BullMQ job before it is rebuilt or dead-lettered' },
  SPIDER_DEPLOY_WAIT_MS: {
    default: '600000',
    doc: "how long a worker whose copy of a crawl's spider file is another version waits for the deploy (its jobs wait) before it dead-letters them ERR_SPIDER_VERSION",
  },
  CRAWL_RETENTION: {
    default: '7d',
    doc: "how long a finished crawl (done, failed, cancelled) keeps its state in Redis: past it, the reconciler's round (and `crawlfleet gc`) removes all but a small summary. A duration (`7d`, `36h`, `90m`, `1h30m`); `off`: only `crawlfleet gc --finished-before` collects",
  },
  FRONTIER_WINDOW: {
    default: '2000',
    doc: "the most fetch jobs of one crawl in BullMQ at a time; the rest wait in the crawl's compact frontier list (about 250 bytes a URL, where a job costs about 1 KB)",
  },
  FRONTIER_PARTITIONS: {
    default: '',
    doc: "how many partitions (hash slots, by host) a new crawl's frontier, seen-URL index and in-flight state are spread over; fixed for the crawl's life. Default 1 on one Redis, 16 on a Redis Cluster (one crawl then spreads over its masters). A crawl with maxPages has 1: its budget is one counter",
  },
  PARSE_HIGH_WATER: { default: '5000', doc: 'fetchers pause while the parse queue holds more jobs than this' },
  WRITE_HIGH_WATER: { default: '5000', doc: 'parsers pause while the write queue holds more jobs than this' },
  WRITE_BATCH_SIZE: { default: '500', doc: 'a writer flushes when this many items have gathered...' },
  WRITE_BATCH_MS: { default: '100', doc: '...or when this many milliseconds have passed' },
  WRITE_ATTEMPTS: { default: '10', doc: 'attempts of a write job for faults of the write itself; an unavailable item store spends none (its jobs are parked until it answers)' },
  PROXY_LIST: { default: '', doc: 'proxy URLs, comma- or newline-separated, or @path/to/file (`--proxies FILE` wins)' },
  PROXY_PROBE_URL: {
    default: '',
    doc: "the URL a fetcher requests through a banned proxy to see whether it carries requests again (any HTTP answer will do), under the SSRF guard: a name must resolve to public addresses; an IP address written here is taken as it is. None: the probe only opens a connection to the proxy itself (TCP, and TLS for https:// proxies). Never a crawled page's URL",
  },
  ROBOTS_CACHE_SECONDS: { default: '3600', doc: "how long the fleet keeps a host's robots.txt before fetching it again" },
  HOST_RESOLVE: { default: '', doc: 'name:address pairs that replace DNS for those names, like curl --resolve (staging, tests); not applied through proxies' },
  METRICS_PORT: { default: '', doc: 'when set, a worker (and `crawl`) serves /metrics, /healthz and /readyz on this port' },
  METRICS_HOST: { default: '0.0.0.0', doc: 'the address the metrics port binds (0.0.0.0 in containers; 127.0.0.1 keeps it local)' },
  LIVENESS_STALL_MS: { default: '5000', doc: '/healthz fails once the event loop has stalled this long (in the last 10 s)' },
  METRICS_FINISHED_SECONDS: {
    default: '300',
    doc: "how long the dashboard's metrics keep a crawl's series after it finished, so that a scrape records its final counters; then only running and paused crawls are exported",
  },
  DASHBOARD_USER: { default: '', doc: 'with DASHBOARD_PASSWORD: HTTP basic auth for every dashboard page; required to bind a non-loopback address' },
  DASHBOARD_PASSWORD: { default: '', doc: 'the dashboard password (see DASHBOARD_USER)' },
  DASHBOARD_ALLOWED_HOSTS: {
    default: '',
    doc: "host names the dashboard answers besides localhost, IP addresses and its --host address (a tunnel, a reverse proxy), comma-separated; `.example.com` takes the name and every name under it, `*` any. A page of another site whose name is rebound to 127.0.0.1 (DNS rebinding) gets 403. Default: without credentials only those; with them any Host (each page needs the password). A change (POST, PUT, DELETE) is taken only from the dashboard's own pages, these names, or a client that sends no Origin",
  },
} as const;

export type EnvName = keyof typeof ENV_TABLE;

function isHttpUrl(text: string): boolean {
  try {
    return /^https?:$/.test(new URL(text).protocol);
  } catch {
    return false;
  }
}

const envSchema = z.object({
  REDIS_URL: z.string().superRefine((url, ctx) => {
    try {
      parseRedisUrl(url);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^REDIS_URL: /, '') });
    }
  }),
  REDIS_STARTUP_TIMEOUT_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  MONGO_URL: z.string().regex(/^mongodb(\+srv)?:\/\//, 'must start with mongodb:// or mongodb+srv://'),
  MONGO_CREDENTIALS: z.string(),
  QUEUE_PREFIX: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-" only'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  USER_AGENTS: z.string(),
  LOCK_DURATION_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  MAX_STALLED_COUNT: z.string().regex(/^([1-9]\d*)?$/, 'must be a positive number of stalls'),
  RECONCILE_INTERVAL_MS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of milliseconds'),
  RECONCILE_GRACE_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  SPIDER_DEPLOY_WAIT_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  CRAWL_RETENTION: z.string().superRefine((text, ctx) => {
    if (text.trim() !== 'off' && parseDuration(text) === undefined) ctx.addIssue({ code: 'custom', message: `must be a duration (${DURATION_EXAMPLES}) or "off"` });
  }),
  FRONTIER_WINDOW: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of jobs'),
  FRONTIER_PARTITIONS: z.string().regex(/^([1-9]\d{0,2})?$/, 'must be a number of partitions from 1 to 999'),
  PARSE_HIGH_WATER: z.string().regex(/^\d+$/, 'must be a number of jobs'),
  WRITE_HIGH_WATER: z.string().regex(/^\d+$/, 'must be a number of jobs'),
  WRITE_BATCH_SIZE: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of items'),
  WRITE_BATCH_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  WRITE_ATTEMPTS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of attempts'),
  PROXY_LIST: z.string(),
  ROBOTS_CACHE_SECONDS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of seconds'),
  METRICS_PORT: z.string().regex(/^(\d{1,5})?$/, 'must be a port number'),
  METRICS_HOST: z.string().min(1),
  LIVENESS_STALL_MS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of milliseconds'),
  METRICS_FINISHED_SECONDS: z.string().regex(/^\d+$/, 'must be a number of seconds'),
  DASHBOARD_USER: z.string(),
  DASHBOARD_PASSWORD: z.string(),
  DASHBOARD_ALLOWED_HOSTS: z.string(),
  PROXY_PROBE_URL: z.string().superRefine((text, ctx) => {
    if (text.trim() !== '' && !isHttpUrl(text.trim())) ctx.addIssue({ code: 'custom', message: 'must be an http:// or https:// URL' });
  }),
  HOST_RESOLVE: z.string().regex(/^(\s*[A-Za-z0-9.-]+:(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]+)\s*(,|$))*\s*$/, 'must be name:address pairs, comma-separated'),
});

export interface Env {
  redisUrl: string;
  /** REDIS_STARTUP_TIMEOUT_MS: how long a worker or the dashboard waits for Redis at start-up; 0 fails at once */
  redisStartupTimeoutMs: number;
  mongoUrl: string;
  /** MONGO_CREDENTIALS: URLs lending a user and password to a crawl's MongoDB sink on their server */
  mongoCredentials: string[];
  queuePrefix: string;
  logLevel: string;
  userAgents: string[];
  lockDurationMs: number;
  /** undefined: each stage's own default (see stage-worker) */
  maxStalledCount: number | undefined;
  reconcileIntervalMs: number;
  reconcileGraceMs: number;
  spiderDeployWaitMs: number;
  /** CRAWL_RETENTION: how long a finished crawl keeps its state (ms); undefined: `off`, only `gc` collects */
  crawlRetentionMs: number | undefined;
  /** FRONTIER_WINDOW: the most fetch jobs of one crawl pending at once, shared by its partitions */
  frontierWindow: number;
  /** FRONTIER_PARTITIONS: a new crawl's partitions (frontierPartitions picks the default by REDIS_URL) */
  frontierPartitions: number;
  parseHighWater: number;
  writeHighWater: number;
  writeBatchSize: number;
  writeBatchMs: number;
  /** WRITE_ATTEMPTS: a write job's attempts (the parser sets them when it enqueues the job) */
  writeAttempts: number;
  /** the raw PROXY_LIST value; @crawlfleet/politeness parses it */
  proxyList: string;
  robotsCacheSeconds: number;
  hostResolve: string;
  /** undefined: no metrics server */
  metricsPort: number | undefined;
  metricsHost: string;
  livenessStallMs: number;
  /** METRICS_FINISHED_SECONDS: how long a finished crawl stays in the dashboard's metrics (ms) */
  metricsFinishedMs: number;
  dashboardUser: string;
  dashboardPassword: string;
  /** DASHBOARD_ALLOWED_HOSTS: names the dashboard answers besides loopback names, IPs and its bind address */
  dashboardAllowedHosts: string[];
  /** PROXY_PROBE_URL: what a probe of a banned proxy requests through it; undefined: a connection to the proxy only */
  proxyProbeUrl: string | undefined;
}

/** Partitions of a new crawl when FRONTIER_PARTITIONS is not set: they pay off only on a Redis Cluster. */
export const CLUSTER_PARTITIONS = 16;
function defaultPartitions(redisUrl: string): number {
  return parseRedisUrl(redisUrl).mode === 'cluster' ? CLUSTER_PARTITIONS : 1;
}

/** Reads a list given inline (comma/newline separated) or as `@path/to/file`. */
export function readListValue(value: string, name: string, separators = /[\n,]/): string[] {
  let text = value.trim();
  if (text.startsWith('@')) {
    const file = text.slice(1);
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`${name}: cannot read ${file}: ${(err as Error).message}`, { file, cause: err });
    }
  }
  return text
    .split(separators)
    .map((s) => s.trim())
    .filter((s) => s.length > 0 && !s.startsWith('#'));
}

export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const raw: Record<string, string> = {};
  for (const [name, spec] of Object.entries(ENV_TABLE)) raw[name] = source[name] ?? spec.default;
  const parsed = envSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid environment: ${issues.join('; ')}`, { file: 'environment', issues });
  }
  const e = parsed.data;
  return {
    // A password pasted unencoded (`redis://:p@ss/w@host`) is encoded here, once, for every client.
    redisUrl: encodeUrlCredentials(e.REDIS_URL),
    redisStartupTimeoutMs: Number(e.REDIS_STARTUP_TIMEOUT_MS),
    mongoUrl: encodeUrlCredentials(e.MONGO_URL),
    mongoCredentials: parseMongoCredentials(readListValue(e.MONGO_CREDENTIALS, 'MONGO_CREDENTIALS', /\s+/)),
    queuePrefix: e.QUEUE_PREFIX,
    logLevel: e.LOG_LEVEL,
    userAgents: readListValue(e.USER_AGENTS, 'USER_AGENTS', /\n/),
    lockDurationMs: Number(e.LOCK_DURATION_MS),
    maxStalledCount: e.MAX_STALLED_COUNT === '' ? undefined : Number(e.MAX_STALLED_COUNT),
    reconcileIntervalMs: Number(e.RECONCILE_INTERVAL_MS),
    reconcileGraceMs: Number(e.RECONCILE_GRACE_MS),
    spiderDeployWaitMs: Number(e.SPIDER_DEPLOY_WAIT_MS),
    crawlRetentionMs: e.CRAWL_RETENTION.trim() === 'off' ? undefined : parseDuration(e.CRAWL_RETENTION),
    frontierWindow: Number(e.FRONTIER_WINDOW),
    frontierPartitions: e.FRONTIER_PARTITIONS === '' ? defaultPartitions(e.REDIS_URL) : Number(e.FRONTIER_PARTITIONS),
    parseHighWater: Number(e.PARSE_HIGH_WATER),
    writeHighWater: Number(e.WRITE_HIGH_WATER),
    writeBatchSize: Number(e.WRITE_BATCH_SIZE),
    writeBatchMs: Number(e.WRITE_BATCH_MS),
    writeAttempts: Number(e.WRITE_ATTEMPTS),
    proxyList: e.PROXY_LIST,
    robotsCacheSeconds: Number(e.ROBOTS_CACHE_SECONDS),
    hostResolve: e.HOST_RESOLVE,
    metricsPort: e.METRICS_PORT === '' ? undefined : Number(e.METRICS_PORT),
    metricsHost: e.METRICS_HOST,
    livenessStallMs: Number(e.LIVENESS_STALL_MS),
    metricsFinishedMs: Number(e.METRICS_FINISHED_SECONDS) * 1000,
    dashboardUser: e.DASHBOARD_USER,
    dashboardPassword: e.DASHBOARD_PASSWORD,
    dashboardAllowedHosts: readListValue(e.DASHBOARD_ALLOWED_HOSTS, 'DASHBOARD_ALLOWED_HOSTS', /[\s,]+/),
    proxyProbeUrl: e.PROXY_PROBE_URL.trim() === '' ? undefined : e.PROXY_PROBE_URL.trim(),
  };
}
