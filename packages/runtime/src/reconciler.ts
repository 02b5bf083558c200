import { randomUUID } from 'node:crypto';
import { STAGES, errorMessage, stageQueues, type Stage } from '@crawlfleet/core';
import {
  allPartKeys,
  collectFinishedCrawls,
  crawlTake,
  endLapsedInjections,
  layoutOf,
  loadCrawl,
  promoteParked,
  promoteStranded,
  reconcileCrawl,
  reopenWithWork,
  settleCrawl,
  strandedDelayBound,
  takeFromFrontier,
  type CrawlLayout,
} from '@crawlfleet/crawl';
import type { FleetContext } from './context.js';

/**
 * Runs the reconciler (packages/crawl/src/reconcile.ts) in the background of every worker process;
 * a lock lets one process of the fleet run it at a time. A full check reads every pending id, so
 * it runs only for a crawl that may have lost a job:
 * - the pending sets of the running crawls hold more ids than the stage's queue holds live jobs;
 * - or the crawl made no progress (counters and pending sizes unchanged) for the grace period;
 * - or it has suspects to settle.
 * For every running crawl it also ends the seeding runs and replays whose process died (their
 * lease lapsed), promotes jobs still parked from a pause (a resume that died half-way) and jobs
 * delayed longer than any wait of the crawl lasts (a park that failed half-way), and feeds
 * the fetch stage from partitions whose window has room and whose frontier holds URLs: a host whose
 * turn was too far ahead when the last take ran, or a fetcher that died after a take.
 * Last, it collects up to GC_CRAWLS_PER_ROUND crawls that finished longer than CRAWL_RETENTION ago.
 */
export function startReconciler(ctx: FleetContext, options: { intervalMs?: number; graceMs?: number } = {}): () => void {
  const intervalMs = options.intervalMs ?? ctx.env.reconcileIntervalMs;
  const graceMs = options.graceMs ?? ctx.env.reconcileGraceMs;
  const owner = randomUUID();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    reconcileOnce(ctx, owner, intervalMs, graceMs)
      .catch((err: unknown) => ctx.log.debug({ err: errorMessage(err) }, 'reconciler: this round failed (Redis unreachable?)'))
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Live jobs of a stage's queue: every state in which a job will still run. */
const LIVE_STATES = ['active', 'waiting', 'delayed', 'prioritized', 'waiting-children'] as const;

interface CrawlReading {
  layout: CrawlLayout;
  state: string | null;
  pending: Record<Stage, number>;
  suspects: number;
  seeding: number;
  counters: Record<string, string>[];
  parked: number;
  /** per partition: URLs waiting in its host queues, and its pending fetch jobs */
  frontier: number[];
  pendingFetch: number[];
}

/** One crawl's figures: one round trip for the crawl and one per partition, all at once. */
async function readCrawl(ctx: FleetContext, crawlId: string): Promise<CrawlReading | undefined> {
  const { redis, keys } = ctx;
  const k = keys.crawl(crawlId);
  const results = (await redis.pipeline().hmget(k.meta, 'state', 'parts').hlen(k.seeding).exec()) ?? [];
  const [state, parts] = (results[0]?.[1] ?? []) as (string | null)[];
  const seeding = results[1]?.[1];
  const layout = layoutOf(crawlId, { state, parts });
  if (layout === undefined || layout === 'legacy') return undefined;
  const perPart = await Promise.all(
    allPartKeys(keys, layout).map(async (pk) => {
      const pipeline = redis.pipeline();
      for (const stage of STAGES) pipeline.scard(pk.pending[stage]);
      pipeline.hlen(pk.suspects);
      pipeline.hgetall(pk.counters);
      for (const stage of STAGES) pipeline.scard(pk.parked[stage]);
      pipeline.hget(pk.part, 'q');
      return ((await pipeline.exec()) ?? []).map((result) => result[1]);
    }),
  );
  const sum = (i: number) => perPart.reduce((n, r) => n + Number(r[i] ?? 0), 0);
  return {
    layout,
    state: state ?? null,
    pending: Object.fromEntries(STAGES.map((s, j) => [s, sum(j)])) as Record<Stage, number>,
    suspects: sum(3),
    seeding: Number(seeding),
    counters: perPart.map((r) => r[4] as Record<string, string>),
    parked: sum(5) + sum(6) + sum(7),
    frontier: perPart.map((r) => Number(r[8] ?? 0)),
    pendingFetch: perPart.map((r) => Number(r[0] ?? 0)),
  };
}

async function reconcileOnce(ctx: FleetContext, owner: string, intervalMs: number, graceMs: number): Promise<void> {
  const { redis, keys } = ctx;
  const lock = keys.reconciler();
  // The lock is left to expire: the fleet runs one round per interval, however many processes tick.
  if ((await redis.set(lock.lock, owner, 'PX', Math.max(intervalMs - 100, 100), 'NX')) !== 'OK') return;
  const crawlIds = await redis.smembers(keys.crawlIndex());
  const crawls = (await Promise.all(crawlIds.map((id) => readCrawl(ctx, id)))).filter((c) => c !== undefined);
  // Ids that no live job may carry: more pending (in running and paused crawls) than live jobs.
  const short = new Set<Stage>();
  for (const stage of STAGES) {
    const counts = await Promise.all(stageQueues(ctx.queues, stage).map((queue) => queue.getJobCounts(...LIVE_STATES)));
    const live = counts.flatMap((c) => Object.values(c)).reduce((a, b) => a + b, 0);
    const pending = crawls.filter((c) => c.state === 'running' || c.state === 'paused').reduce((n, c) => n + c.pending[stage], 0);
    if (pending > live) short.add(stage);
  }
  // Redis's clock, which every process of the fleet shares: the reconciler's lock moves between
  // machines, and the times it keeps (a crawl's last progress) are read on another one later.
  const [seconds, micros] = await redis.time();
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  for (const c of crawls) {
    if (c.state === 'done' && (STAGES.some((s) => c.pending[s] > 0) || c.frontier.some((waiting) => waiting > 0))) {
      await reopenDoneWithWork(ctx, c);
      continue;
    }
    if (c.state !== 'running') continue;
    const crawlId = c.layout.crawlId;
    if (c.seeding > 0) {
      const ended = await endLapsedInjections(redis, keys, c.layout);
      if (ended > 0) ctx.log.warn({ crawlId, ended }, 'reconciler: ended seeding runs or replays whose process died');
    }
    if (c.parked > 0) {
      const promoted = await promoteParked(redis, keys, ctx.queues, c.layout);
      if (promoted > 0) ctx.log.info({ crawlId, promoted }, 'reconciler: promoted jobs parked by a pause of a crawl that runs again');
    }
    // A job moved for a day by a park that failed half-way (parkForPause): no resume promotes it.
    const record = await loadCrawl(redis, keys, crawlId);
    if (record) {
      const stranded = await promoteStranded(redis, keys, ctx.queues, c.layout, strandedDelayBound(record.spider), now);
      if (stranded > 0) ctx.log.warn({ crawlId, stranded }, 'reconciler: promoted jobs of a running crawl delayed longer than any wait of it lasts (a park for a pause that failed half-way)');
    }
    if (c.frontier.some((waiting) => waiting > 0)) {
      const crawl = record;
      const take = crawl ? crawlTake(ctx.env.frontierWindow, crawl, crawl.spider) : undefined;
      if (crawl && take && c.pendingFetch.some((n, p) => c.frontier[p]! > 0 && n < take.window)) {
        const taken = await takeFromFrontier(redis, keys, ctx.queues, crawl, take);
        if (taken > 0) ctx.log.debug({ crawlId, taken }, 'reconciler: fed the fetch stage from hosts whose turn came');
      }
    }
    const total = STAGES.reduce((n, s) => n + c.pending[s], 0);
    if (total === 0) {
      // Nothing pending: a crawl whose last finish raced another partition's may still need its done check.
      if (!c.frontier.some((waiting) => waiting > 0) && c.seeding === 0) await settleCrawl(redis, keys, c.layout);
      continue;
    }
    const signature = JSON.stringify([c.pending, c.counters]);
    const previous = await redis.hget(lock.progress, crawlId);
    const [prevSignature, sinceText] = previous ? [previous.slice(0, previous.lastIndexOf('|')), previous.slice(previous.lastIndexOf('|') + 1)] : [undefined, undefined];
    const stuck = prevSignature === signature && now - Number(sinceText) >= graceMs;
    if (prevSignature !== signature) await redis.hset(lock.progress, crawlId, `${signature}|${now}`);
    const suspect = STAGES.some((s) => short.has(s) && c.pending[s] > 0);
    if (!stuck && !suspect && c.suspects === 0) continue;
    const crawl = await loadCrawl(redis, keys, crawlId);
    if (!crawl) continue;
    const report = await reconcileCrawl(redis, keys, ctx.queues, crawl, { graceMs, log: ctx.log, nowMs: now });
    const acted = report.rebuilt + report.deadLettered;
    ctx.log[acted > 0 ? 'info' : 'debug']({ crawlId, stuck, ...report }, 'reconciler: checked the pending jobs of a crawl');
  }
  // Crawls that are gone or ended leave no progress record behind.
  const running = new Set(crawls.filter((c) => c.state === 'running').map((c) => c.layout.crawlId));
  const recorded = await redis.hkeys(lock.progress);
  const stale = recorded.filter((id) => !running.has(id));
  if (stale.length > 0) await redis.hdel(lock.progress, ...stale);
  if (ctx.env.crawlRetentionMs !== undefined) await collectExpiredCrawls(ctx, now - ctx.env.crawlRetentionMs);
}

/**
 * A crawl marked done with work pending or waiting lost the finish of a partition's last job to a
 * failover (its done mark, on another master, survived): it runs again, and the next rounds repair
 * it like any running crawl (docs/architecture.md, "Work that arrives after done").
 */
async function reopenDoneWithWork(ctx: FleetContext, c: CrawlReading): Promise<void> {
  const state = await reopenWithWork(ctx.redis, ctx.keys, c.layout, `reopen:${randomUUID()}`);
  ctx.log.warn(
    { crawlId: c.layout.crawlId, pending: c.pending, frontier: c.frontier.reduce((a, b) => a + b, 0), state },
    'reconciler: a crawl marked done still has work (a failover took back its last finish): it runs again until the work is redone',
  );
}

/** Crawls a round collects at most: the round stays short, and the next one takes the rest. */
const GC_CRAWLS_PER_ROUND = 20;

/** Retention without an operator: finished crawls past CRAWL_RETENTION leave Redis but for their summary (crawl's gc.ts). */
async function collectExpiredCrawls(ctx: FleetContext, finishedBefore: number): Promise<void> {
  const report = await collectFinishedCrawls(ctx.redis, ctx.keys, ctx.queues, { finishedBefore: new Date(finishedBefore), limit: GC_CRAWLS_PER_ROUND });
  for (const c of report.collected) {
    ctx.log.info(
      { crawlId: c.crawlId, state: c.state, finishedAt: c.finishedAt, keys: c.keys, jobs: c.jobs },
      'reconciler: collected a crawl finished longer than CRAWL_RETENTION ago (its summary stays)',
    );
  }
}
