import { Gauge, type Registry } from 'prom-client';
import type { Keys, Queues, Stage, RedisClient } from '@crawlfleet/core';
import { COUNTER_NAMES, frontierBacklog, getStatus, listCrawlIds, type CrawlStatus } from '@crawlfleet/crawl';

/** The fetch backlog's frontier part, for registerQueueGauges. */
export const frontierOf = (redis: RedisClient, keys: Keys) => () => frontierBacklog(redis, keys);

const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed', 'completed'] as const;
/** What autoscaling reads: every job of the queue that is not finished (delayed ones included). */
const BACKLOG_STATES = ['waiting', 'active', 'delayed', 'prioritized'] as const;

/**
 * Per queue and state, read from BullMQ at each scrape; and each queue's backlog, the metric
 * autoscaling uses (a KEDA Redis-list scaler would see the wait list only, not delayed jobs). The
 * fetch backlog adds the URLs waiting in the running crawls' frontiers (`frontier`): BullMQ holds
 * only a window of each crawl's URLs, and fetchers must scale on all of them.
 */
export function registerQueueGauges(registry: Registry, queues: Partial<Queues>, frontier?: () => Promise<number>): void {
  const list = Object.entries(queues) as [Stage, Queues[Stage]][];
  new Gauge({
    name: 'crawlfleet_queue_jobs',
    help: 'BullMQ jobs per queue and state (every crawl)',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      for (const [stage, queue] of list) {
        const counts = await queue.getJobCounts(...JOB_STATES);
        for (const state of JOB_STATES) this.set({ queue: stage, state }, counts[state] ?? 0);
      }
    },
  });
  new Gauge({
    name: 'crawlfleet_queue_backlog',
    help: "jobs of the queue not finished yet: waiting, active, delayed and prioritized; for fetch, also the URLs waiting in running crawls' frontiers",
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      for (const [stage, queue] of list) {
        const counts = await queue.getJobCounts(...BACKLOG_STATES);
        const waitingInFrontier = stage === 'fetch' && frontier ? await frontier() : 0;
        this.set(
          { queue: stage },
          BACKLOG_STATES.reduce((n, s) => n + (counts[s] ?? 0), waitingInFrontier),
        );
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
  let last: { at: number; statuses: Promise<CrawlStatus[]> } | undefined;
  const statuses = () => {
    if (!last || Date.now() - last.at > 1000) last = { at: Date.now(), statuses: read() };
    return last.statuses;
  };
  new Gauge({
    name: 'crawlfleet_crawl_counter',
    help: "a crawl's status counter, as `status` shows it (running and paused crawls, and for METRICS_FINISHED_SECONDS after a crawl finished)",
    labelNames: ['crawl', 'spider', 'counter'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const s of await statuses()) for (const counter of COUNTER_NAMES) this.set({ crawl: s.crawlId, spider: s.spider, counter }, s.counters[counter]);
    },
  });
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
  gauge('crawlfleet_proxy_requests', 'requests through the proxy that got an answer or failed (fleet-wide)', (p) => p.ok + p.failed + p.blocked);
  gauge('crawlfleet_proxy_failures', 'requests the proxy itself failed', (p) => p.failed);
  gauge('crawlfleet_proxy_blocks', 'responses through the proxy classified as blocks', (p) => p.blocked);
  gauge('crawlfleet_proxy_up', '1 when the proxy is in rotation, 0 while banned', (p) => (p.state === 'ok' ? 1 : 0));
}
