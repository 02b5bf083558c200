import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DURATION_EXAMPLES, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import { encodeUrlCredentials } from './redact.js';
import { parseRedisUrl } from './redis.js';
import { parseMongoCredentials } from './sink-spec.js';

export interface EnvVariable {
  /** the value when the variable is not set ('' for none) */
  default: string;
  doc: string;
  /** the default as the docs show it, when the value is computed (a pool, a per-stage number) */
  shown?: string;
}

/**
 * Every environment variable the fleet reads, with its default, in one table (Crawlee's ENV_MAP).
 * The README's configuration table is generated from this (envTableMarkdown).
 */
export const ENV_TABLE = {
  REDIS_URL: {
    default: 'redis://127.0.0.1:6379',
    doc: 'queues, frontier, crawl state (`--redis` overrides). `redis+cluster://[user:pw@]h1:p1,h2:p2` selects Redis Cluster (`rediss+cluster://` with TLS); `redis+sentinel://[user:pw@]h1:p1,h2:p2/MASTER` selects Sentinel',
  },
  REDIS_STARTUP_TIMEOUT_MS: {
    default: '60000',
    doc: 'how long `worker` and `dashboard`, started while Redis does not answer yet, keep trying to reach it (backoff 0.5 s doubling to 5 s, a warning `redis not reachable yet, retrying` per attempt) before they exit 1 with `cannot reach Redis at URL within REDIS_STARTUP_TIMEOUT_MS (...)`; `0` fails at once. Short commands (`seed`, `status`, `wait`, `crawl`, ...) always fail at once',
  },
  QUEUE_PREFIX: { default: 'crawlfleet', doc: 'prefix of every key; hash tags make it Redis Cluster ready' },
  LOG_LEVEL: { default: 'info', doc: 'pino level; logs are JSON lines on stderr, credentials redacted' },
  USER_AGENTS: {
    default: '',
    doc: "user agents to rotate, newline-separated, or `@path/to/file`; a spider's `userAgents` win. Each goes with plain Accept headers. Without either, each fetcher draws 24 desktop browsers from header-generator (got-scraping's and Crawlee's), each with the client hints, Accept and Sec-Fetch headers that browser sends",
    shown: 'generated browsers',
  },
  LOCK_DURATION_MS: { default: '30000', doc: "BullMQ job lock; a killed worker's jobs run again after this" },
  HANDLER_DEADLINE_MS: {
    default: '600000',
    doc: "the hard deadline of one run of a parse or write job's handler: past it the handler is told to stop, its slot is freed and the job fails `ERR_HANDLER_DEADLINE` (retried while attempts remain, then dead-lettered). A fetch or render job's deadline comes from its spider's timeouts (`limits.timeoutMs`, `render.timeoutMs`, `render.waitFor.maxWaitMs`) plus 60 s",
  },
  MAX_STALLED_COUNT: {
    default: '',
    doc: 'times a job may lose its worker (killed, crashed) and run again before it is dead-lettered as `ERR_STALLED`: high enough that killed workers never reach it, low enough that a page that crashes its parser every time stops soon',
    shown: '10 fetch and parse, 50 write',
  },
  SHUTDOWN_DRAIN_MS: {
    default: '50000',
    doc: "how long a worker (or `crawl`) given SIGTERM or SIGINT waits for its in-flight jobs to finish or be handed back; past it (Redis down, a store or page that never answers) it logs `drain deadline passed` and exits 1, leaving the jobs still in flight to stall: another worker runs them once their lock lapses (`LOCK_DURATION_MS`). Keep it below the pod's `terminationGracePeriodSeconds`; `0`: no deadline",
  },
  RECONCILE_INTERVAL_MS: { default: '15000', doc: 'how often one worker of the fleet checks for pending jobs that no BullMQ job carries any more (docs/reliability.md)' },
  RECONCILE_GRACE_MS: { default: '30000', doc: 'how long such a job must stay lost before it is rebuilt (its URL fetched again) or dead-lettered' },
  CRAWL_RETENTION: {
    default: '7d',
    doc: "how long a finished crawl (done, failed, cancelled) keeps its state in Redis; then the reconciler's round removes all but a summary (as `crawlfleet gc` does). A duration (`36h`, `1h30m`, `2w`; units `ms`, `s`, `m`, `h`, `d`, `w`), the same on every process of the fleet; `off`: only `crawlfleet gc --finished-before` collects",
  },
  SPIDER_DEPLOY_WAIT_MS: {
    default: '600000',
    doc: "how long a worker whose copy of a crawl's code spider is another version (a deploy under way) keeps its jobs waiting before it dead-letters them `ERR_SPIDER_VERSION`; the wrong copy is never imported",
  },
  FRONTIER_WINDOW: {
    default: '2000',
    doc: "the most fetch jobs of one crawl in BullMQ at once, shared by its partitions (never below the spider's largest concurrency per partition); the crawl's other admitted URLs wait in their hosts' queues (about 51 bytes of Redis a URL, where a job costs about 1 KB)",
  },
  FRONTIER_PARTITIONS: {
    default: '',
    doc: "how many partitions (hash slots, by host) a new crawl's frontier, seen-URL index and in-flight state are spread over; fixed for the crawl's life. A crawl with `maxPages` has 1 (its budget is one counter)",
    shown: '1 on one Redis, 16 on a Redis Cluster',
  },
  // read where code spiders are compiled (spider/module.ts), not by loadEnv
  CRAWLFLEET_SPIDER_CACHE: {
    default: '',
    doc: "where code spiders' compiled bundles are written (one file per version; any writable folder)",
    shown: '`$TMPDIR/crawlfleet-spiders-<uid>`, private to the user',
  },
  PARSE_IN_FETCHER: {
    default: '0',
    doc: '`1`: a fetcher parses the pages it fetches and hands their items straight to the writers, so a page is one job fewer and its body never goes through Redis (docs/scaling.md, "Parsing in the fetchers"); parsers then only serve jobs handed over before, and fetchers need the parsers\' CPU',
  },
  PARSE_HIGH_WATER: { default: '5000', doc: 'fetchers hold back a crawl with more parse jobs than this, and stop taking work while the parse queue holds more than this ready to run' },
  WRITE_HIGH_WATER: {
    default: '5000',
    doc: 'parsers hold back a crawl with more write jobs than this (its store down, say: the other crawls go on), and stop taking work while the write queue holds more than this ready to run',
  },
  MONGO_URL: {
    default: 'mongodb://127.0.0.1:27017/crawlfleet',
    doc: 'item store of the MongoDB writer; when set, `crawl` without `--out` writes there, and the tests use it instead of their own FerretDB',
  },
  MONGO_CREDENTIALS: {
    default: '',
    doc: "a writer's user and password for MongoDB servers other than `MONGO_URL`'s: `mongodb://user:password@host[:port]` URLs, whitespace-separated, or `@path/to/file`; a crawl's `--mongo` sink borrows the credentials of the URL naming the same hosts (see \"Credentials\" below)",
  },
  WRITE_BATCH_SIZE: { default: '500', doc: 'a writer flushes when this many items have gathered...' },
  WRITE_BATCH_MS: { default: '100', doc: '...or when this many milliseconds have passed, whichever comes first' },
  WRITE_ATTEMPTS: {
    default: '10',
    doc: 'attempts of a write job for faults of the write itself (then the dead-letter set); an unavailable item store spends none: its jobs are parked until it answers, however long that takes',
  },
  PROXY_LIST: { default: '', doc: 'proxy URLs, comma- or newline-separated, or `@path/to/file`; `--proxies FILE` wins' },
  PROXY_PROBE_URL: {
    default: '',
    doc: 'an `http://` or `https://` URL a fetcher requests through a banned proxy to see whether it carries requests again (any HTTP answer will do); under the SSRF guard: a name must resolve to public addresses, an IP address written here is taken as it is',
    shown: 'none: a TCP (and TLS) connection to the banned proxy itself',
  },
  ROBOTS_CACHE_SECONDS: { default: '3600', doc: "how long the fleet keeps a host's robots.txt before fetching it again" },
  HOST_RESOLVE: {
    default: '',
    doc: "`name:address` pairs that replace DNS for those names, like curl's `--resolve` (staging, tests); the SSRF guard still applies, through a proxy too (it is asked for the resolved IP) unless the spider sets `proxies.resolveNames`",
  },
  CHROMIUM_PATH: { default: '/usr/bin/chromium', doc: "the Chromium a renderer drives (Debian's `chromium` package; the renderer image has it)" },
  CHROMIUM_SANDBOX: {
    default: 'auto',
    doc: "Chromium's sandbox: `auto` uses it where the platform allows (not as root, and only where user namespaces are allowed; the renderer logs why not), `on` fails rather than go without, `off` never tries",
  },
  RENDER_RETIRE_AFTER_PAGES: { default: '100', doc: "pages a renderer's browser renders before it is retired and a fresh one takes over (bounds the memory a long crawl leaks into Chromium)" },
  METRICS_PORT: { default: '', doc: 'a worker serves `/metrics`, `/healthz` and `/readyz` on this port' },
  METRICS_HOST: { default: '0.0.0.0', doc: 'the address the metrics port binds (`127.0.0.1` keeps it on the machine)' },
  LIVENESS_STALL_MS: { default: '5000', doc: '`/healthz` fails once the event loop has stalled this long (remembered for 10 s)' },
  METRICS_FINISHED_SECONDS: {
    default: '300',
    doc: "how long the dashboard's crawl metrics keep a finished crawl after its end, so that a scrape records its final counters; then only running and paused crawls are exported",
  },
  DASHBOARD_USER: { default: '', doc: 'with DASHBOARD_PASSWORD: HTTP basic auth for every dashboard page; required to bind a non-loopback address' },
  DASHBOARD_PASSWORD: { default: '', doc: 'the dashboard password (see DASHBOARD_USER)' },
  DASHBOARD_ALLOWED_HOSTS: {
    default: '',
    doc: 'more host names the dashboard answers (a tunnel, a reverse proxy), comma-separated; `.example.com` takes the name and every name under it, `*` any `Host`. A change (POST, PUT, DELETE) is also taken from pages of these names',
    shown: 'none: `localhost`, `*.localhost`, IP addresses and the `--host` address (with credentials: any)',
  },
} satisfies Record<string, EnvVariable>;

/**
 * Pure: the README's configuration table (`crawlfleet env` prints it; test/unit/env-docs.test.ts keeps
 * the README equal to it). `shown` is the default as a person reads it, where the value is computed.
 */
export function envTableMarkdown(): string {
  const rows = Object.entries(ENV_TABLE as Record<string, EnvVariable>).map(([name, v]) => `| \`${name}\` | ${v.shown ?? (v.default === '' ? 'none' : `\`${v.default}\``)} | ${v.doc} |`);
  return ['| variable | default | meaning |', '| --- | --- | --- |', ...rows].join('\n');
}

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
  HANDLER_DEADLINE_MS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of milliseconds'),
  MAX_STALLED_COUNT: z.string().regex(/^([1-9]\d*)?$/, 'must be a positive number of stalls'),
  SHUTDOWN_DRAIN_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  RECONCILE_INTERVAL_MS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of milliseconds'),
  RECONCILE_GRACE_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  SPIDER_DEPLOY_WAIT_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  CRAWL_RETENTION: z.string().superRefine((text, ctx) => {
    if (text.trim() !== 'off' && parseDuration(text) === undefined) ctx.addIssue({ code: 'custom', message: `must be a duration (${DURATION_EXAMPLES}) or "off"` });
  }),
  FRONTIER_WINDOW: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of jobs'),
  FRONTIER_PARTITIONS: z.string().regex(/^([1-9]\d{0,2})?$/, 'must be a number of partitions from 1 to 999'),
  PARSE_IN_FETCHER: z.enum(['0', '1'], { error: 'must be 0 or 1' }),
  PARSE_HIGH_WATER: z.string().regex(/^\d+$/, 'must be a number of jobs'),
  WRITE_HIGH_WATER: z.string().regex(/^\d+$/, 'must be a number of jobs'),
  WRITE_BATCH_SIZE: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of items'),
  WRITE_BATCH_MS: z.string().regex(/^\d+$/, 'must be a number of milliseconds'),
  WRITE_ATTEMPTS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of attempts'),
  PROXY_LIST: z.string(),
  ROBOTS_CACHE_SECONDS: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of seconds'),
  CHROMIUM_PATH: z.string().min(1),
  CHROMIUM_SANDBOX: z.enum(['auto', 'on', 'off'], { error: 'must be auto, on or off' }),
  RENDER_RETIRE_AFTER_PAGES: z.string().regex(/^[1-9]\d*$/, 'must be a positive number of pages'),
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
  /** HANDLER_DEADLINE_MS: how long one run of a parse or write handler may take */
  handlerDeadlineMs: number;
  /** undefined: each stage's own default (see stage-worker) */
  maxStalledCount: number | undefined;
  /** SHUTDOWN_DRAIN_MS: how long a stopping process waits for its in-flight jobs (0: no limit) */
  shutdownDrainMs: number;
  reconcileIntervalMs: number;
  reconcileGraceMs: number;
  spiderDeployWaitMs: number;
  /** CRAWL_RETENTION: how long a finished crawl keeps its state (ms); undefined: `off`, only `gc` collects */
  crawlRetentionMs: number | undefined;
  /** FRONTIER_WINDOW: the most fetch jobs of one crawl pending at once, shared by its partitions */
  frontierWindow: number;
  /** FRONTIER_PARTITIONS: a new crawl's partitions (frontierPartitions picks the default by REDIS_URL) */
  frontierPartitions: number;
  /** PARSE_IN_FETCHER: fetchers parse the pages they fetch (no parse job) */
  parseInFetcher: boolean;
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
  /** CHROMIUM_PATH: the browser a renderer drives */
  chromiumPath: string;
  /** CHROMIUM_SANDBOX: whether Chromium runs in its sandbox (auto: where the platform allows) */
  chromiumSandbox: 'auto' | 'on' | 'off';
  /** RENDER_RETIRE_AFTER_PAGES: pages a browser renders before it is retired */
  renderRetireAfterPages: number;
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

/** The variables that carry credentials: an example's placeholder in one of them is refused at start. */
const SECRET_VARIABLES = ['REDIS_URL', 'MONGO_URL', 'MONGO_CREDENTIALS', 'PROXY_LIST', 'DASHBOARD_PASSWORD'] as const;

/**
 * Pure: the credential variables still holding the examples' `replace-me` (infra/k8s's
 * secrets.env.example): a fleet started with one would run with a known password, or fail later
 * with a puzzling error.
 */
export function placeholderSecrets(raw: Record<string, string | undefined>): string[] {
  return SECRET_VARIABLES.filter((name) => /replace-me/i.test(raw[name] ?? '')).map((name) => `${name}: still the example's placeholder "replace-me"; set a real value`);
}

export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const raw: Record<string, string> = {};
  for (const [name, spec] of Object.entries(ENV_TABLE)) raw[name] = source[name] ?? spec.default;
  const parsed = envSchema.safeParse(raw);
  const placeholders = placeholderSecrets(raw);
  if (!parsed.success || placeholders.length > 0) {
    const issues = [...(parsed.error?.issues ?? []).map((i) => `${i.path.join('.')}: ${i.message}`), ...placeholders];
    throw new ConfigError(`invalid environment: ${issues.join('; ')}`, { file: 'environment', issues });
  }
  const e = parsed.data!;
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
    handlerDeadlineMs: Number(e.HANDLER_DEADLINE_MS),
    maxStalledCount: e.MAX_STALLED_COUNT === '' ? undefined : Number(e.MAX_STALLED_COUNT),
    shutdownDrainMs: Number(e.SHUTDOWN_DRAIN_MS),
    reconcileIntervalMs: Number(e.RECONCILE_INTERVAL_MS),
    reconcileGraceMs: Number(e.RECONCILE_GRACE_MS),
    spiderDeployWaitMs: Number(e.SPIDER_DEPLOY_WAIT_MS),
    crawlRetentionMs: e.CRAWL_RETENTION.trim() === 'off' ? undefined : parseDuration(e.CRAWL_RETENTION),
    frontierWindow: Number(e.FRONTIER_WINDOW),
    frontierPartitions: e.FRONTIER_PARTITIONS === '' ? defaultPartitions(e.REDIS_URL) : Number(e.FRONTIER_PARTITIONS),
    parseInFetcher: e.PARSE_IN_FETCHER === '1',
    parseHighWater: Number(e.PARSE_HIGH_WATER),
    writeHighWater: Number(e.WRITE_HIGH_WATER),
    writeBatchSize: Number(e.WRITE_BATCH_SIZE),
    writeBatchMs: Number(e.WRITE_BATCH_MS),
    writeAttempts: Number(e.WRITE_ATTEMPTS),
    proxyList: e.PROXY_LIST,
    robotsCacheSeconds: Number(e.ROBOTS_CACHE_SECONDS),
    hostResolve: e.HOST_RESOLVE,
    chromiumPath: e.CHROMIUM_PATH,
    chromiumSandbox: e.CHROMIUM_SANDBOX,
    renderRetireAfterPages: Number(e.RENDER_RETIRE_AFTER_PAGES),
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
