import { Counter, Gauge, type Registry } from 'prom-client';
import { Cluster, type Redis } from 'ioredis';
import type { Keys, Queues, RedisClient } from '@crawlfleet/core';
import { COUNTER_METRICS } from './metrics.js';
import { COUNTER_NAMES, frontierBacklog, getStatus, listCrawlIds, readyFrontierHosts, type CrawlStatus } from '@crawlfleet/crawl';

/** A crawl counter's metric: `crawlfleet_crawl_<counter>_total`, the counter in snake case (notModified: not_modified). */
export function crawlCounterMetric(counter: string): string {
  return `crawlfleet_crawl_${counter.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total`;
}

/** What registerQueueGauges reads of the running crawls' frontiers: every URL waiting, and the hosts ready now. */
export interface FrontierReaders {
  backlog: () => Promise<number>;
  readyHosts: () => Promise<number>;
}

export const frontierOf = (redis: RedisClient, keys: Keys): FrontierReaders => ({ backlog: () => frontierBacklog(redis, keys), readyHosts: () => readyFrontierHosts(redis, keys) });

const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed', 'completed'] as const;
/** What autoscaling reads: every job of the queue that is not finished (delayed ones included). */
const BACKLOG_STATES = ['waiting', 'active', 'delayed', 'prioritized'] as const;
/** What can run now or runs, with the delayed jobs that are due (readyCount): not those still waiting for their host's turn, a retry, or a paused crawl's. */
const READY_STATES = ['waiting', 'active', 'prioritized'] as const;

/**
 * Pure: the highest score in a BullMQ delayed set of a job due at `nowMs`. BullMQ scores a delayed job
 * `timestamp * 0x1000 + counter` (getDelayedScore.lua), and promotes those up to this score
 * (promoteDelayedJobs.lua).
 */
export function dueDelayedMaxScore(nowMs: number): number {
  return (Math.floor(nowMs) + 1) * 0x1000 - 1;
}

/**
 * The delayed jobs of `queue` whose time has come at `nowMs`. Only a worker of the queue moves them
 * to its wait list: with no worker running (a stage scaled to 0) they stay delayed for ever, so the
 * ready work must count them, or nothing would start the worker that promotes them.
 */
async function dueDelayedJobs(queue: Queues[keyof Queues], nowMs: number): Promise<number> {
  const backend = queue.getBackend();
  // createQueues builds the queues on ioredis; BullMQ's adapter forwards the commands it does not declare.
  const client = (await backend.client) as unknown as RedisClient;
  return client.zcount(backend.keys.delayed!, 0, dueDelayedMaxScore(nowMs));
}

export interface QueueGaugeOptions {
  /** the clock that decides which delayed jobs are due (Date.now; a test moves it) */
  now?: () => number;
}

/**
 * Per queue and state, read from BullMQ at each scrape; each queue's backlog (everything not
 * finished, the running crawls' frontiers included: BullMQ holds only a window of each crawl's
 * URLs); and each queue's ready work, what autoscaling reads. A backlog of a polite crawl is mostly
 * URLs that must wait their host's turn, and a paused crawl's jobs wait for ever: scaling on it asks
 * for fetchers that would sit idle.
 */
export function registerQueueGauges(registry: Registry, queues: Partial<Queues>, frontier?: FrontierReaders, options: QueueGaugeOptions = {}): void {
  const list = Object.entries(queues) as [keyof Queues, Queues[keyof Queues]][];
  const now = options.now ?? Date.now;
  // One read of every queue's counts (and its due delayed jobs) serves the three gauges of a scrape.
  const countsOf = sharedWithin(
    1000,
    async () => new Map(await Promise.all(list.map(async ([stage, queue]) => [stage, { jobs: await queue.getJobCounts(...JOB_STATES), due: await dueDelayedJobs(queue, now()) }] as const))),
  );
  new Gauge({
    name: 'crawlfleet_queue_jobs',
    help: 'BullMQ jobs per queue and state (every crawl)',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      const counts = await countsOf();
      for (const [stage] of list) for (const state of JOB_STATES) this.set({ queue: stage, state }, counts.get(stage)!.jobs[state] ?? 0);
    },
  });
  const sumOf = (counts: Record<string, number>, states: readonly string[], plus: number) => states.reduce((n, s) => n + (counts[s] ?? 0), plus);
  new Gauge({
    name: 'crawlfleet_queue_backlog',
    help: "jobs of the queue not finished yet: waiting, active, delayed and prioritized; for fetch, also the URLs waiting in running crawls' frontiers",
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const counts = await countsOf();
      for (const [stage] of list) {
        const waitingInFrontier = stage === 'fetch' && frontier ? await frontier.backlog() : 0;
        this.set({ queue: stage }, sumOf(counts.get(stage)!.jobs, BACKLOG_STATES, waitingInFrontier));
      }
    },
  });
  new Gauge({
    name: 'crawlfleet_queue_ready',
    help: "work the queue's workers can do now, what autoscaling reads: jobs waiting, prioritized or active, and delayed jobs that are due (only a worker promotes them, so a stage scaled to 0 must come back for them); not the delayed jobs still waiting for their host's turn, a retry, or a paused crawl's; for fetch, also the running crawls' hosts whose turn has come",
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const counts = await countsOf();
      for (const [stage] of list) {
        const readyHosts = stage === 'fetch' && frontier ? await frontier.readyHosts() : 0;
        const stageCounts = counts.get(stage)!;
        this.set({ queue: stage }, sumOf(stageCounts.jobs, READY_STATES, readyHosts + stageCounts.due));
      }
    },
  });
}

/** How long a finished crawl stays in the crawl gauges by default (METRICS_FINISHED_SECONDS): a few scrapes record its final counters. */
export const FINISHED_CRAWL_METRICS_MS = 300_000;

/**
 * Pure: whether the crawl gauges export a crawl: while it runs or is paused, and for `finishedMs`
 * after it finished (so that a scrape records its final counters); never once gc collected it. The
 * `crawl` label then holds the live crawls, not the fleet's history.
 */
export function exportsCrawl(meta: { state?: string | null; finishedAt?: string | null; collectedAt?: string | null }, nowMs: number, finishedMs: number): boolean {
  if (meta.collectedAt || !meta.state) return false;
  if (meta.state === 'running' || meta.state === 'paused') return true;
  const finished = Date.parse(meta.finishedAt ?? '');
  return Number.isFinite(finished) && nowMs - finished <= finishedMs;
}

/**
 * The status counters and state of the crawls that run or are paused, or finished within
 * `finishedMs` (exportsCrawl), read from Redis at each scrape (exact, fleet-wide). The two gauges
 * of one scrape share one read.
 */
export function registerCrawlGauges(registry: Registry, redis: RedisClient, keys: Keys, finishedMs = FINISHED_CRAWL_METRICS_MS): void {
  const read = async () => {
    const ids = await listCrawlIds(redis, keys);
    const metas = await Promise.all(ids.map((id) => redis.hmget(keys.crawl(id).meta, 'state', 'finishedAt', 'collectedAt')));
    const now = Date.now();
    const exported = ids.filter((_, i) => {
      const [state, finishedAt, collectedAt] = metas[i]!;
      return exportsCrawl({ state, finishedAt, collectedAt }, now, finishedMs);
    });
    return (await Promise.all(exported.map((id) => getStatus(redis, keys, id)))).filter((s) => s !== undefined && !s.collected) as CrawlStatus[];
  };
  const statuses = sharedWithin(1000, read);
  for (const counter of COUNTER_NAMES) {
    storedTotals(
      registry,
      crawlCounterMetric(counter),
      `a crawl's ${counter} counter, as \`status\` shows it: ${COUNTER_METRICS[counter].help.replace(/ \(.*\)$/, '')} (running and paused crawls, and for METRICS_FINISHED_SECONDS after a crawl finished)`,
      ['crawl', 'spider'],
      async (add) => {
        for (const s of await statuses()) add({ crawl: s.crawlId, spider: s.spider }, s.counters[counter]);
      },
    );
  }
  new Gauge({
    name: 'crawlfleet_crawl_running',
    help: '1 while the crawl runs, 0 while it is paused and for METRICS_FINISHED_SECONDS after it finished (done, failed or cancelled)',
    labelNames: ['crawl', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const s of await statuses()) this.set({ crawl: s.crawlId, state: s.state }, s.state === 'running' ? 1 : 0);
    },
  });
}

export interface ProxyGaugeRow {
  proxy: string;
  state: 'ok' | 'banned';
  ok: number;
  failed: number;
  blocked: number;
}

/** Per proxy (credentials redacted): requests, failures, blocks and state, fleet-wide from Redis. */
export function registerProxyGauges(registry: Registry, read: () => Promise<ProxyGaugeRow[]>): void {
  const gauge = (name: string, help: string, value: (p: ProxyGaugeRow) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['proxy'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const p of await read()) this.set({ proxy: p.proxy }, value(p));
      },
    });
  const total = (name: string, help: string, value: (p: ProxyGaugeRow) => number) =>
    storedTotals(registry, name, help, ['proxy'], async (add) => {
      for (const p of await read()) add({ proxy: p.proxy }, value(p));
    });
  total('crawlfleet_proxy_requests_total', 'requests through the proxy that got an answer or failed (fleet-wide)', (p) => p.ok + p.failed + p.blocked);
  total('crawlfleet_proxy_failures_total', 'requests the proxy itself failed', (p) => p.failed);
  total('crawlfleet_proxy_blocks_total', 'responses through the proxy classified as blocks', (p) => p.blocked);
  gauge('crawlfleet_proxy_up', '1 when the proxy is in rotation, 0 while banned', (p) => (p.state === 'ok' ? 1 : 0));
}

/**
 * A counter whose totals are kept in Redis, read at each scrape: a counter to Prometheus (the `_total`
 * convention, rate() and increase()), though no process increments it. A reset crawl starts again
 * from 0, which Prometheus reads as a counter reset.
 */
function storedTotals(registry: Registry, name: string, help: string, labelNames: string[], read: (add: (labels: Record<string, string>, value: number) => void) => Promise<void>): void {
  new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    async collect() {
      this.reset();
      await read((labels, value) => this.inc(labels, Math.max(0, value)));
    },
  });
}

/** Pure: used_memory and maxmemory (0: no limit) from the text of INFO memory. */
export function redisMemory(info: string): { used: number; max: number } {
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return { used: field('used_memory'), max: field('maxmemory') };
}

/**
 * Redis's memory against its maxmemory, per node (every master of a cluster), read at each scrape:
 * at maxmemory a noeviction Redis refuses writes and the fleet stops (the alert
 * CrawlfleetRedisMemoryNearMax warns before).
 */
export function registerRedisGauges(registry: Registry, redis: RedisClient): void {
  const read = async () => {
    const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
    return Promise.all(nodes.map(async (node) => ({ node: `${node.options.host ?? ''}:${node.options.port ?? ''}`, ...redisMemory(await node.info('memory')) })));
  };
  const rows = sharedWithin(1000, read);
  const gauge = (name: string, help: string, value: (r: { used: number; max: number }) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['node'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const r of await rows()) this.set({ node: r.node }, value(r));
      },
    });
  gauge('crawlfleet_redis_memory_used_bytes', "Redis's used_memory, per node", (r) => r.used);
  gauge('crawlfleet_redis_memory_max_bytes', "Redis's maxmemory, per node (0: no limit)", (r) => r.max);
}

/** `read`'s answer, shared by the calls within `ms` of the one that made it: the gauges of one scrape read once. */
function sharedWithin<T>(ms: number, read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (!last || Date.now() - last.at > ms) last = { at: Date.now(), value: read() };
    return last.value;
  };
}

/**
 * The fleet's sessions alive (begun, not retired, within their age), read from Redis at each scrape.
 * Every fetcher exports the same fleet-wide figure: take its max, not its sum. Registered once per
 * registry, however many fetch stages a process runs.
 */
export function registerSessionGauge(registry: Registry, alive: () => Promise<number>): void {
  const name = 'crawlfleet_sessions_alive';
  if (registry.getSingleMetric(name)) return;
  new Gauge({
    name,
    help: "the fleet's sessions alive now (the same fleet-wide figure from every fetcher: take the max)",
    registers: [registry],
    async collect() {
      this.set(await alive());
    },
  });
}
