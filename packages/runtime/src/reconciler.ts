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
  type CrawlRecord,
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

export interface CrawlReading {
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

/** What the steps of one round share: the fleet, the grace period, the stages short of live jobs, Redis's time. */
interface Round {
  ctx: FleetContext;
  graceMs: number;
  /** stages whose queues hold fewer live jobs than the running and paused crawls have pending */
  short: Set<Stage>;
  now: number;
}

/**
 * One round: take the fleet's lock, read every crawl, find the stages short of live jobs, then reopen
 * each crawl marked done that still has work and reconcile each running one; last, forget the
 * progress of ended crawls and collect the expired ones.
 */
async function reconcileOnce(ctx: FleetContext, owner: string, intervalMs: number, graceMs: number): Promise<void> {
  const { redis, keys } = ctx;
  const lock = keys.reconciler();
  // The lock is left to expire: the fleet runs one round per interval, however many processes tick.
  if ((await redis.set(lock.lock, owner, 'PX', Math.max(intervalMs - 100, 100), 'NX')) !== 'OK') return;
  const crawlIds = await redis.smembers(keys.crawlIndex());
  const crawls = (await Promise.all(crawlIds.map((id) => readCrawl(ctx, id)))).filter((c) => c !== undefined);
  const short = await shortStages(ctx, crawls);
  const round: Round = { ctx, graceMs, short, now: await redisNow(ctx) };
  for (const c of crawls) {
    if (isDoneWithWork(c)) await reopenDoneWithWork(ctx, c);
    else if (c.state === 'running') await reconcileRunning(round, c);
  }
  await forgetEndedProgress(ctx, crawls);
  if (ctx.env.crawlRetentionMs !== undefined) await collectExpiredCrawls(ctx, round.now - ctx.env.crawlRetentionMs);
}

/** Ids that no live job may carry: the stages with more pending (in running and paused crawls) than live jobs. */
async function shortStages(ctx: FleetContext, crawls: CrawlReading[]): Promise<Set<Stage>> {
  const short = new Set<Stage>();
  for (const stage of STAGES) {
    const counts = await Promise.all(stageQueues(ctx.queues, stage).map((queue) => queue.getJobCounts(...LIVE_STATES)));
    const live = counts.flatMap((c) => Object.values(c)).reduce((a, b) => a + b, 0);
    if (pendingOfLiveCrawls(crawls, stage) > live) short.add(stage);
  }
  return short;
}

/**
 * Redis's clock, which every process of the fleet shares: the reconciler's lock moves between
 * machines, and the times it keeps (a crawl's last progress) are read on another one later.
 */
async function redisNow(ctx: FleetContext): Promise<number> {
  const [seconds, micros] = await ctx.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** One running crawl's round: repair what a dead process left, feed the fetch stage, then settle it or check its pending jobs. */
async function reconcileRunning(round: Round, c: CrawlReading): Promise<void> {
  const { ctx } = round;
  await endInterrupted(ctx, c);
  const record = await promoteStrandedJobs(round, c);
  await feedFromFrontier(ctx, c, record);
  if (totalPending(c) === 0) {
    // Nothing pending: a crawl whose last finish raced another partition's may still need its done check.
    if (mayBeDone(c)) await settleCrawl(ctx.redis, ctx.keys, c.layout);
    return;
  }
  const stuck = await noteProgress(round, c);
  if (needsFullCheck(c, stuck, round.short)) await checkPendingJobs(round, c, stuck);
}

/** Ends the seeding runs and replays whose process died, and promotes jobs a pause parked (a resume that died half-way). */
async function endInterrupted(ctx: FleetContext, c: CrawlReading): Promise<void> {
  const { redis, keys } = ctx;
  const crawlId = c.layout.crawlId;
  if (c.seeding > 0) {
    const ended = await endLapsedInjections(redis, keys, c.layout);
    if (ended > 0) ctx.log.warn({ crawlId, ended }, 'reconciler: ended seeding runs or replays whose process died');
  }
  if (c.parked > 0) {
    const promoted = await promoteParked(redis, keys, ctx.queues, c.layout);
    if (promoted > 0) ctx.log.info({ crawlId, promoted }, 'reconciler: promoted jobs parked by a pause of a crawl that runs again');
  }
}

/** Promotes the crawl's stranded jobs; returns its record (undefined when it is gone). */
async function promoteStrandedJobs(round: Round, c: CrawlReading): Promise<CrawlRecord | undefined> {
  const { redis, keys, queues, log } = round.ctx;
  const crawlId = c.layout.crawlId;
  // A job moved for a day by a park that failed half-way (parkForPause): no resume promotes it.
  const record = await loadCrawl(redis, keys, crawlId);
  if (record) {
    const stranded = await promoteStranded(redis, keys, queues, c.layout, strandedDelayBound(record.spider), round.now);
    if (stranded > 0) log.warn({ crawlId, stranded }, 'reconciler: promoted jobs of a running crawl delayed longer than any wait of it lasts (a park for a pause that failed half-way)');
  }
  return record;
}

/**
 * Feeds the fetch stage from partitions whose window has room and whose frontier holds URLs: a host
 * whose turn was too far ahead when the last take ran, or a fetcher that died after a take.
 */
async function feedFromFrontier(ctx: FleetContext, c: CrawlReading, crawl: CrawlRecord | undefined): Promise<void> {
  if (!hasFrontier(c)) return;
  const take = crawl ? crawlTake(ctx.env.frontierWindow, crawl, crawl.spider) : undefined;
  if (crawl && take && hasRoomToFeed(c, take.window)) {
    const taken = await takeFromFrontier(ctx.redis, ctx.keys, ctx.queues, crawl, take);
    if (taken > 0) ctx.log.debug({ crawlId: c.layout.crawlId, taken }, 'reconciler: fed the fetch stage from hosts whose turn came');
  }
}

/** Records the crawl's progress signature when it changed; returns whether the crawl made none for the grace period. */
async function noteProgress(round: Round, c: CrawlReading): Promise<boolean> {
  const { redis, keys } = round.ctx;
  const lock = keys.reconciler();
  const crawlId = c.layout.crawlId;
  const signature = progressSignature(c);
  const previous = await redis.hget(lock.progress, crawlId);
  const { stuck, changed } = progressVerdict(previous, signature, round.now, round.graceMs);
  if (changed) await redis.hset(lock.progress, crawlId, `${signature}|${round.now}`);
  return stuck;
}

/** The full check: reads every pending id of the crawl (packages/crawl/src/reconcile.ts). */
async function checkPendingJobs(round: Round, c: CrawlReading, stuck: boolean): Promise<void> {
  const { ctx, graceMs, now } = round;
  const crawlId = c.layout.crawlId;
  const crawl = await loadCrawl(ctx.redis, ctx.keys, crawlId);
  if (!crawl) return;
  const report = await reconcileCrawl(ctx.redis, ctx.keys, ctx.queues, crawl, { graceMs, log: ctx.log, nowMs: now });
  const acted = report.rebuilt + report.deadLettered;
  ctx.log[acted > 0 ? 'info' : 'debug']({ crawlId, stuck, ...report }, 'reconciler: checked the pending jobs of a crawl');
}

/** Crawls that are gone or ended leave no progress record behind. */
async function forgetEndedProgress(ctx: FleetContext, crawls: CrawlReading[]): Promise<void> {
  const lock = ctx.keys.reconciler();
  const running = new Set(crawls.filter((c) => c.state === 'running').map((c) => c.layout.crawlId));
  const recorded = await ctx.redis.hkeys(lock.progress);
  const stale = recorded.filter((id) => !running.has(id));
  if (stale.length > 0) await ctx.redis.hdel(lock.progress, ...stale);
}

/** Pure: the jobs a stage has pending in the running and paused crawls. */
export function pendingOfLiveCrawls(crawls: Pick<CrawlReading, 'state' | 'pending'>[], stage: Stage): number {
  return crawls.filter((c) => c.state === 'running' || c.state === 'paused').reduce((n, c) => n + c.pending[stage], 0);
}

/** Pure: a frontier partition holds URLs waiting. */
export function hasFrontier(c: Pick<CrawlReading, 'frontier'>): boolean {
  return c.frontier.some((waiting) => waiting > 0);
}

/** Pure: a crawl marked done that still has jobs pending or URLs waiting (see reopenDoneWithWork). */
export function isDoneWithWork(c: Pick<CrawlReading, 'state' | 'pending' | 'frontier'>): boolean {
  return c.state === 'done' && (STAGES.some((s) => c.pending[s] > 0) || hasFrontier(c));
}

/** Pure: a partition with URLs waiting has fewer pending fetch jobs than its window allows. */
export function hasRoomToFeed(c: Pick<CrawlReading, 'frontier' | 'pendingFetch'>, window: number): boolean {
  return c.pendingFetch.some((n, p) => c.frontier[p]! > 0 && n < window);
}

/** Pure: the jobs the crawl has pending, all stages together. */
export function totalPending(c: Pick<CrawlReading, 'pending'>): number {
  return STAGES.reduce((n, s) => n + c.pending[s], 0);
}

/** Pure: with nothing pending, the crawl may be done when no URL waits and no seeding run is open. */
export function mayBeDone(c: Pick<CrawlReading, 'frontier' | 'seeding'>): boolean {
  return !hasFrontier(c) && c.seeding === 0;
}

/** Pure: what tells the crawl's progress: its pending sizes and counters. */
export function progressSignature(c: Pick<CrawlReading, 'pending' | 'counters'>): string {
  return JSON.stringify([c.pending, c.counters]);
}

/**
 * Pure: compares the crawl's progress signature with the one recorded (`signature|since`, or null):
 * `stuck` when it has not changed for `graceMs`, `changed` when it must be recorded anew.
 */
export function progressVerdict(previous: string | null, signature: string, now: number, graceMs: number): { stuck: boolean; changed: boolean } {
  const [prevSignature, sinceText] = previous ? [previous.slice(0, previous.lastIndexOf('|')), previous.slice(previous.lastIndexOf('|') + 1)] : [undefined, undefined];
  const stuck = prevSignature === signature && now - Number(sinceText) >= graceMs;
  return { stuck, changed: prevSignature !== signature };
}

/** Pure: a full check runs for a crawl that made no progress, has pending jobs in a short stage, or has suspects. */
export function needsFullCheck(c: Pick<CrawlReading, 'pending' | 'suspects'>, stuck: boolean, short: Set<Stage>): boolean {
  const suspect = STAGES.some((s) => short.has(s) && c.pending[s] > 0);
  return stuck || suspect || c.suspects !== 0;
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
